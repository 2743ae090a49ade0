"""Background removers (FaceFusion's ``background_remover``): faceweave's
steps beside FaceFusion 3.8.1's, written out here from its
``background_remover/core.py`` (``prepare_temp_frame``, ``forward``,
``normalize_vision_mask``, ``apply_despill_color``, ``apply_fill_color``;
FaceFusion works in BGR), on stand-in models with the real input and output
shapes; then the remover through the options, a photo's alpha, the command
line, a video and a live session."""

from __future__ import annotations

import subprocess
import sys

import cv2
import numpy as np
import onnx
import pytest
from tests.enhancer_fixtures import remover_model

from faceweave.enhancers.background import BackgroundRemover
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.models.catalog import find_spec
from faceweave.options import SwapOptions

# --- FaceFusion 3.8.1's formulation (BGR), written out ----------------------------


def ff_remove(frame_bgr: np.ndarray, model, name: str, family: str, fill, despill) -> tuple[np.ndarray, np.ndarray]:
    spec = find_spec(name)
    size, mean, std = (spec.crop_size, spec.crop_size), spec.mean, spec.std
    x = frame_bgr
    if family == "corridor_key":
        colour = x[:, :, ::-1].astype(np.float32) / 255.0
        bias = colour[:, :, 1] - np.maximum(colour[:, :, 0], colour[:, :, 2])
        coarse = cv2.resize(1.0 - np.clip(bias * 2.0, 0, 1), size)[:, :, np.newaxis]
    x = cv2.resize(x, size)
    x = x[:, :, ::-1] / 255.0
    x = (x - mean) / std
    if family == "corridor_key":
        x = np.concatenate([x, coarse], axis=2)
    x = np.expand_dims(x.transpose(2, 0, 1), axis=0).astype(np.float32)
    outputs = model.session.run(None, {"input": x})
    frame = frame_bgr
    if family == "corridor_key":
        mask, keyed = outputs[0], outputs[1]
        keyed = np.clip(np.squeeze(keyed).transpose(1, 2, 0) * 255, 0, 255).astype(np.uint8)
        frame = cv2.resize(keyed[:, :, ::-1], frame_bgr.shape[:2][::-1])
    else:
        mask = outputs[0]
        if family == "u2net_cloth":
            mask = np.argmax(mask, axis=1)
    mask = np.clip(np.squeeze(mask).clip(0, 1) * 255, 0, 255).astype(np.uint8)
    mask = cv2.resize(mask, frame_bgr.shape[:2][::-1])
    # despill
    frame = frame.astype(np.float32)
    spill = np.zeros_like(frame)
    spill[:, :, 0], spill[:, :, 1], spill[:, :, 2] = despill[2], despill[1], despill[0]
    weight = spill / np.maximum(np.max(despill[:3]), 1)
    limit = np.roll(frame, 1, 2) + np.roll(frame, -1, 2)
    held = np.minimum(frame, limit * 0.5)
    frame = (frame + (held - frame) * (despill[3] / 255.0) * weight).astype(np.uint8)
    # fill
    share = np.expand_dims(mask.astype(np.float32) / 255, axis=2)
    share = (1 - share) * fill[-1] / 255
    painted = np.zeros_like(frame)
    painted[:, :, 0], painted[:, :, 1], painted[:, :, 2] = fill[2], fill[1], fill[0]
    return (frame * (1 - share) + painted * share).astype(np.uint8), mask


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    from skimage.data import astronaut

    return np.ascontiguousarray(astronaut()[::2, ::2])


CASES = [
    ("ben_2", (0, 0, 0, 0), (0, 0, 0, 0)),
    ("modnet", (0, 255, 0, 255), (0, 0, 0, 0)),
    ("rmbg_2.0", (10, 20, 200, 128), (0, 255, 0, 200)),
    ("isnet_general", (255, 255, 255, 255), (30, 200, 60, 255)),
    ("u2net_cloth", (0, 0, 255, 255), (0, 0, 0, 0)),
    ("corridor_key_1024", (0, 0, 0, 0), (0, 255, 0, 255)),
]


@pytest.mark.parametrize("name, fill, despill", CASES, ids=[c[0] for c in CASES])
def test_the_remover_is_facefusion_s_to_the_bit(photo, name, fill, despill):
    from faceweave import names

    family = names.BACKGROUND_REMOVERS[name]
    model = remover_model(family)
    removed = BackgroundRemover(model, name=name, fill=fill, despill=despill).remove(photo)
    pixels, mask = ff_remove(np.ascontiguousarray(photo[..., ::-1]), model, name, family, fill, despill)
    np.testing.assert_array_equal(removed.mask, mask)
    np.testing.assert_array_equal(removed.pixels, pixels[..., ::-1])
    assert removed.mask.min() < removed.mask.max()  # the stand-in keeps part of the picture
    if fill[3] == 0 and despill[3] == 0 and family != "corridor_key":
        assert np.array_equal(removed.pixels, photo)  # nothing asked of the pixels: only the mask


def test_a_remover_refuses_what_it_cannot_run():
    with pytest.raises(InvalidOptionError, match="unknown background remover 'modnett'"):
        BackgroundRemover(remover_model("modnet"), name="modnett")
    with pytest.raises(ModelSignatureError, match=r"expected shape \['N', 4"):
        BackgroundRemover(remover_model("modnet"), name="corridor_key_1024")
    with pytest.raises(InvalidOptionError, match="fill colour is four whole numbers 0-255"):
        BackgroundRemover(remover_model("modnet"), name="modnet", fill=(0, 0, 300, 255))
    with pytest.raises(ValueError, match="unknown background remover 'rmbg'"):
        SwapOptions.model_validate({"enhance": {"background": "rmbg"}})
    with pytest.raises(ValueError, match=r"four whole numbers 0-255 \(red green blue alpha\); got \(0, 0, 0, 256\)"):
        SwapOptions.model_validate({"enhance": {"background_fill": (0, 0, 0, 256)}})


# --- through the pipeline and the command line --------------------------------------


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """A model folder with the modnet stand-in, imported through the CLI's own import path."""
    from faceweave.models import ModelStore, import_model

    folder, files = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("files")
    onnx.save(remover_model("modnet").proto, files / "modnet.onnx")
    import_model(ModelStore(folder), "modnet", files / "modnet.onnx")
    return folder


def test_a_photo_gets_the_foreground_as_its_alpha(models_dir, faces_dir):
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    unmarked = Provenance.new(watermark=False)
    source, target = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    plain = FaceSwapper(SwapOptions(), provenance=unmarked).swap([source], target)
    options = SwapOptions.model_validate(
        {"enhance": {"background": "modnet"}, "runtime": {"models_dir": str(models_dir)}}
    )
    with FaceSwapper(options, provenance=unmarked) as swapper:
        result = swapper.swap([source], target)
        removed = swapper.enhancers.background.remove(plain.image)
    assert plain.alpha is None and result.alpha is not None
    np.testing.assert_array_equal(result.alpha, removed.mask)
    np.testing.assert_array_equal(result.image, plain.image)  # no fill colour: the pixels are the swap's


def _faceweave(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "faceweave.cli", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def test_the_command_line_writes_the_alpha_and_refuses_bad_colours(models_dir, faces_dir, tmp_path):
    from PIL import Image

    source, target = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    out = tmp_path / "out.png"
    base = ["swap", "-s", source, "-t", target, "-o", out, "--no-watermark", "--audit-log", tmp_path / "a.jsonl"]
    done = _faceweave(*base, "--background-remover", "modnet", "--models-dir", models_dir)
    assert done.returncode == 0, done.stderr
    with Image.open(out) as written:
        assert written.mode == "RGBA" and written.getchannel("A").getextrema()[0] < 255
    bad = _faceweave(*base, "--background-remover", "modnet", "--background-remover-fill-color", "0", "0", "0", "300")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "--background-remover-fill-color" in bad.stderr and "0-255" in bad.stderr


@pytest.mark.slow
def test_a_video_and_a_live_session_get_the_fill_colour(models_dir, faces_dir, tmp_path):
    """Videos have no alpha here: the background shows as the fill colour (pure green)."""
    from faceweave.video.io import VideoReader

    source, clip = faces_dir / "single/biden2.jpg", faces_dir / "video/lp_d18_talking_face.mp4"
    common = ["-s", source, "--scale", "0.5", "--no-watermark", "--audit-log", tmp_path / "a.jsonl"]
    green = ["--background-remover", "modnet", "--background-remover-fill-color", "0", "255", "0", "255"]
    green += ["--models-dir", models_dir]
    outputs = [tmp_path / "swap.mp4", tmp_path / "live.mkv"]
    done = _faceweave("swap", "-t", clip, "-o", outputs[0], "--trim", "0-0.5", *common, *green)
    assert done.returncode == 0, done.stderr
    done = _faceweave("live", clip, "-o", outputs[1], "--duration", "1", *common, *green, "--json")
    assert done.returncode == 0, done.stderr
    for path in outputs:
        with VideoReader(path) as reader:
            frames = [frame.pixels.astype(int) for frame in reader]
        assert frames, path
        greenish = np.mean([((f[..., 1] - f[..., 0] > 100) & (f[..., 1] - f[..., 2] > 100)).mean() for f in frames])
        assert greenish > 0.05, (path, greenish)
