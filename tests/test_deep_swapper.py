"""The deep swapper (FaceFusion's ``deep_swapper``: DeepFaceLive's DFM
models, no source photo): FaceFusion 3.8.1's steps written out here beside
faceweave's (its ``prepare_crop_frame``, ``normalize_crop_frame``,
``prepare_crop_mask``, ``conditional_match_frame_color``; FaceFusion works
in BGR), a model file with and without the morph input, then the swapper
through the options, ``--swapper none``, the command line, a video and a
live session, on stand-ins with DeepFaceLive's names and shapes."""

from __future__ import annotations

import cv2
import numpy as np
import onnx
import pytest
from tests.enhancer_fixtures import analysed_astronaut, deep_swapper_model, stand_in_folder
from tests.test_cli import faceweave as _faceweave

from faceweave.enhancers.age import match_colour
from faceweave.enhancers.deep import DeepSwapper, histogram_likeness, matched, model_mask, sharpened
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.models.deepfacelive import DEEP_SWAPPERS, catalog_name, model_side
from faceweave.options import SwapOptions

MODEL = "iperov/elon_musk_224"

# --- FaceFusion 3.8.1's formulation (BGR), written out ----------------------------


def ff_prepare(crop_bgr: np.ndarray) -> np.ndarray:
    crop = cv2.addWeighted(crop_bgr, 1.75, cv2.GaussianBlur(crop_bgr, (0, 0), 2), -0.75, 0)
    return np.expand_dims(crop / 255.0, axis=0).astype(np.float32)


def ff_mask(source: np.ndarray, target: np.ndarray, side: int) -> np.ndarray:
    mask = np.minimum.reduce([source, target]).reshape((side, side)).clip(0, 1)
    mask = cv2.erode(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3)), iterations=2)
    return cv2.GaussianBlur(mask, (0, 0), 6.25)


def ff_likeness(a_bgr: np.ndarray, b_bgr: np.ndarray) -> float:
    ha = cv2.calcHist([cv2.cvtColor(a_bgr, cv2.COLOR_BGR2HSV)], [0, 1], None, [50, 60], [0, 180, 0, 256])
    hb = cv2.calcHist([cv2.cvtColor(b_bgr, cv2.COLOR_BGR2HSV)], [0, 1], None, [50, 60], [0, 180, 0, 256])
    return float(np.interp(cv2.compareHist(ha, hb, cv2.HISTCMP_CORREL), [-1, 1], [0, 1]))


@pytest.fixture(scope="module")
def astronaut():
    return analysed_astronaut()


def test_the_input_mask_and_colour_are_facefusion_s(astronaut):
    pixels, _ = astronaut
    crop = np.ascontiguousarray(pixels[60:284, 150:374])
    ours = np.expand_dims(sharpened(crop)[:, :, ::-1] / 255.0, axis=0).astype(np.float32)
    np.testing.assert_array_equal(ours, ff_prepare(np.ascontiguousarray(crop[:, :, ::-1])))
    rng = np.random.default_rng(2)
    a, b = (rng.uniform(-0.2, 1.2, (224, 224, 1)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(model_mask(a, b, 224), ff_mask(b, a, 224))
    other = np.ascontiguousarray(np.roll(crop, 1, axis=2) // 2 + 40)
    assert histogram_likeness(crop, other) == ff_likeness(crop[:, :, ::-1], other[:, :, ::-1])
    share = ff_likeness(crop[:, :, ::-1], other[:, :, ::-1])
    np.testing.assert_array_equal(
        matched(crop, other), cv2.addWeighted(other, 1 - share, match_colour(crop, other), share, 0)
    )


def test_the_models_are_facefusion_s():
    assert len(DEEP_SWAPPERS) == 157 and MODEL in DEEP_SWAPPERS and "druuzil/henry_cavill_448" in DEEP_SWAPPERS
    assert catalog_name(MODEL) == "dfm_iperov_elon_musk_224" and model_side("druuzil/henry_cavill_448") == 448
    from faceweave.models.catalog import find_spec

    spec = find_spec(catalog_name(MODEL))
    assert spec.kind == "deep_swapper" and spec.file_name == "dfm_iperov_elon_musk_224.dfm"
    assert spec.urls == ("https://huggingface.co/facefusion/deepfacelive-models-iperov/resolve/main/elon_musk_224.dfm",)


@pytest.mark.parametrize("morph_input", [True, False])
def test_a_model_file_with_or_without_the_morph_loads_and_swaps(astronaut, tmp_path, morph_input):
    from faceweave.models import ModelStore, import_model

    model = deep_swapper_model(morph=morph_input)
    onnx.save(model.proto, tmp_path / "m.dfm")
    import_model(ModelStore(tmp_path / "models"), catalog_name(MODEL), tmp_path / "m.dfm")
    pixels, faces = astronaut
    swapper = DeepSwapper(model, name=MODEL, morph=30)
    out = swapper.swap(pixels, faces)
    changed = np.any(out != pixels, axis=2)
    assert changed.sum() > 2000 and not changed[-40:].any()
    assert swapper.swap(pixels, []) is pixels


def test_the_morph_reaches_the_model(astronaut):
    pixels, faces = astronaut
    model = deep_swapper_model()
    low = DeepSwapper(model, name=MODEL, morph=0).swap(pixels, faces)
    high = DeepSwapper(model, name=MODEL, morph=100).swap(pixels, faces)
    assert not np.array_equal(low, high)


def test_the_deep_swapper_refuses_what_it_cannot_run(astronaut):
    from tests.enhancer_fixtures import face_classifier_model

    with pytest.raises(InvalidOptionError, match="unknown deep swapper 'elon'"):
        DeepSwapper(deep_swapper_model(), name="elon")
    with pytest.raises(InvalidOptionError, match="morph must be from 0 to 100"):
        DeepSwapper(deep_swapper_model(), name=MODEL, morph=101)
    with pytest.raises(ModelSignatureError, match="has no input 'in_face:0'"):
        DeepSwapper(face_classifier_model(), name=MODEL)
    with pytest.raises(ValueError, match="did you mean iperov/elon_musk_224"):
        SwapOptions.model_validate({"swapper": "none", "enhance": {"deep_swapper": "iperov/elon_musk"}})


# --- through the pipeline and the command line --------------------------------------


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    folder, files = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("files")
    return stand_in_folder(folder, files, {catalog_name(MODEL): deep_swapper_model()})


def test_a_photo_is_deep_swapped_with_no_source(models_dir, faces_dir):
    from faceweave.io.images import read_image
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    target = faces_dir / "single/astronaut_eileen_collins.png"
    options = SwapOptions.model_validate(
        {"swapper": "none", "enhance": {"deep_swapper": MODEL}, "runtime": {"models_dir": str(models_dir)}}
    )
    with FaceSwapper(options, provenance=Provenance.new(watermark=False)) as swapper:
        result = swapper.swap([], target)
        kept = [result.faces[s.target_index] for s in result.swapped]
        expected = swapper.enhancers.deep.swap(read_image(target).pixels, kept)
    assert "deep" in result.timings_ms
    np.testing.assert_array_equal(result.image, expected)


@pytest.mark.slow
def test_the_command_line_deep_swaps_videos_and_live_sessions(models_dir, faces_dir, tmp_path):
    from faceweave.video.io import VideoReader

    clip = faces_dir / "video/lp_d18_talking_face.mp4"
    common = ["--swapper", "none", "--deep-swapper", MODEL, "--models-dir", models_dir, "--no-watermark"]
    common += ["--audit-log", tmp_path / "a.jsonl", "--scale", "0.5"]
    done = _faceweave("swap", "-t", clip, "-o", tmp_path / "d.mp4", "--trim", "0-0.5", *common)
    assert done.returncode == 0, done.stderr
    done = _faceweave("live", clip, "-o", tmp_path / "live.mkv", "--duration", "1", *common)
    assert done.returncode == 0, done.stderr
    for path in (tmp_path / "d.mp4", tmp_path / "live.mkv"):
        with VideoReader(path) as reader:
            assert sum(1 for _ in reader) > 5, path
    missing = _faceweave("swap", "-t", clip, "-o", tmp_path / "x.mp4", *common[:4], "--models-dir", tmp_path)
    assert missing.returncode == 2 and "dfm_iperov_elon_musk_224 is not present" in missing.stderr, missing.stderr
