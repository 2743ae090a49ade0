"""The expression restorer (FaceFusion's ``expression_restorer``,
LivePortrait's feature extractor, motion extractor and generator):
FaceFusion 3.8.1's steps written out here beside faceweave's (its
``restrict_expression_areas``, the factor's mapping, ``limit_expression``,
the key points moved by pose, scale and translation, ``prepare_crop_frame``
and ``normalize_crop_frame``; LivePortrait takes RGB, so FaceFusion's BGR
flips cancel), then the restorer on faces, through the options, the
pipeline (which hands it the frame before the swap), the command line, a
video and a live session, on stand-ins with the real names and shapes."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from skimage import data
from tests.enhancer_fixtures import face_classifier_model, live_portrait_models, stand_in_folder
from tests.test_cli import faceweave as _faceweave

from faceweave import names
from faceweave.enhancers.restorer import (
    EXPRESSION_MAX,
    EXPRESSION_MIN,
    ExpressionRestorer,
    LivePortrait,
    Motion,
    portrait_input,
    restored_expression,
)
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.options import SwapOptions

# --- FaceFusion 3.8.1's formulation, written out ------------------------------------


def ff_restrict(temp: np.ndarray, target: np.ndarray, areas: list[str]) -> np.ndarray:
    target = target.copy()
    if "upper-face" not in areas:
        target[:, [1, 2, 6, 10, 11, 12, 13, 15, 16]] = temp[:, [1, 2, 6, 10, 11, 12, 13, 15, 16]]
    if "lower-face" not in areas:
        target[:, [3, 7, 14, 17, 18, 19, 20]] = temp[:, [3, 7, 14, 17, 18, 19, 20]]
    target[:, [0, 4, 5, 8, 9]] = temp[:, [0, 4, 5, 8, 9]]
    return target


def ff_expression(temp: np.ndarray, target: np.ndarray, factor: int, areas: list[str]) -> np.ndarray:
    mix = float(np.interp(float(factor), [0, 100], [0, 1.2]))
    target = ff_restrict(temp, target, areas)
    return np.clip(target * mix + temp * (1 - mix), EXPRESSION_MIN, EXPRESSION_MAX)


def ff_prepare(crop_bgr: np.ndarray) -> np.ndarray:
    small = cv2.resize(crop_bgr, (256, 256), interpolation=cv2.INTER_AREA)[:, :, ::-1] / 255.0
    return np.expand_dims(small.transpose(2, 0, 1), axis=0).astype(np.float32)


@pytest.fixture(scope="module")
def astronaut():
    from faceweave.analysis import FaceAnalyser

    pixels = np.ascontiguousarray(data.astronaut())
    swapped = pixels.copy()
    swapped[150:220, 200:300] = swapped[150:220, 200:300] // 2 + 90  # a stand-in for a new face
    return pixels, swapped, FaceAnalyser().analyse(pixels)


@pytest.fixture(scope="module")
def portrait():
    models = live_portrait_models()
    return LivePortrait(models["feature_extractor"], models["motion_extractor"], models["generator"])


@pytest.mark.parametrize("factor", [0, 50, 80, 100])
@pytest.mark.parametrize("areas", [["upper-face", "lower-face"], ["upper-face"], ["lower-face"]])
def test_the_expression_moved_to_is_facefusion_s(factor, areas):
    rng = np.random.default_rng(factor)
    temp, target = (rng.normal(0, 0.04, (1, 21, 3)).astype(np.float32) for _ in range(2))
    mix = float(np.interp(float(factor), [0, 100], [0, 1.2]))
    np.testing.assert_array_equal(
        restored_expression(temp, target, mix, areas), ff_expression(temp, target, factor, areas)
    )


def test_the_key_points_and_the_crop_are_facefusion_s(astronaut):
    pixels, _, _ = astronaut
    rng = np.random.default_rng(3)
    scale, translation = np.array([[1.3]], np.float32), np.array([[0.02, -0.01, 0.0]], np.float32)
    expression, points = (rng.normal(0, 0.1, (1, 21, 3)).astype(np.float32) for _ in range(2))
    motion = Motion(12.0, -20.0, 5.0, scale, translation, expression, points)
    rotation = Rotation.from_euler("xyz", [12.0, -20.0, 5.0], degrees=True).as_matrix().astype(np.float32)
    np.testing.assert_array_equal(motion.moved(expression), scale * (points @ rotation.T + expression) + translation)
    crop = np.ascontiguousarray(pixels[:512, :512])
    np.testing.assert_array_equal(portrait_input(crop), ff_prepare(crop[:, :, ::-1]))


def test_the_restorer_brings_the_original_expression_back(astronaut, portrait):
    """The generator moves the swapped face from its own key points to the
    mixed ones: with the original's expression the output changes with the
    factor and the areas; only the face's crop changes."""
    pixels, swapped, faces = astronaut
    outs = {
        (factor, areas): ExpressionRestorer(portrait, factor=factor, areas=areas).restore(swapped, pixels, faces)
        for factor, areas in (
            (0, names.EXPRESSION_RESTORER_AREAS),
            (100, names.EXPRESSION_RESTORER_AREAS),
            (100, ("upper-face",)),
        )
    }
    first, *rest = outs.values()
    assert all(not np.array_equal(first, other) for other in rest)
    changed = np.any(first != swapped, axis=2)
    assert changed.sum() > 5000 and not changed[-30:].any() and not changed[:, :60].any()
    restorer = ExpressionRestorer(portrait)
    assert restorer.restore(swapped, pixels, []) is swapped
    same = restorer.restore(pixels, pixels, faces)  # nothing to bring back: only the generator's own change
    assert same.shape == pixels.shape


def test_the_restorer_refuses_what_it_cannot_run(portrait):
    models = live_portrait_models()
    with pytest.raises(ModelSignatureError, match="live_portrait_motion_extractor: expected 7 outputs"):
        LivePortrait(models["feature_extractor"], face_classifier_model(), models["generator"])
    with pytest.raises(ModelSignatureError, match="live_portrait_generator: the model has no input 'feature_volume'"):
        LivePortrait(models["feature_extractor"], models["motion_extractor"], models["motion_extractor"])
    with pytest.raises(InvalidOptionError, match="factor must be from 0 to 100"):
        ExpressionRestorer(portrait, factor=101)
    with pytest.raises(InvalidOptionError, match="unknown expression restorer area 'eyes'"):
        ExpressionRestorer(portrait, areas=("eyes",))
    with pytest.raises(ValueError, match="unknown expression restorer 'liveportrait'; one of live_portrait"):
        SwapOptions.model_validate({"enhance": {"expression_restorer": "liveportrait"}})
    with pytest.raises(ValueError, match="unknown expression restorer area 'mouth'"):
        SwapOptions.model_validate({"enhance": {"expression_restorer_areas": ["mouth"]}})


# --- through the pipeline and the command line --------------------------------------


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """A model folder with LivePortrait's stand-ins, imported as users import them."""
    folder, files = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("files")
    models = {names.LIVE_PORTRAIT[part]: model for part, model in live_portrait_models().items()}
    return stand_in_folder(folder, files, models)


def test_the_pipeline_restores_from_the_photo_before_the_swap(models_dir, faces_dir):
    from faceweave.io.images import read_image
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    unmarked = Provenance.new(watermark=False)
    source, target = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    plain = FaceSwapper(SwapOptions(), provenance=unmarked).swap([source], target)
    options = SwapOptions.model_validate(
        {
            "enhance": {"expression_restorer": "live_portrait", "expression_restorer_factor": 90},
            "runtime": {"models_dir": str(models_dir)},
        }
    )
    with FaceSwapper(options, provenance=unmarked) as swapper:
        restored = swapper.swap([source], target)
        chosen = [plain.faces[s.target_index] for s in plain.swapped]
        before = read_image(target).pixels
        expected = swapper.enhancers.restorer.restore(plain.image, before, chosen)
    assert "restore" in restored.timings_ms
    np.testing.assert_array_equal(restored.image, expected)


@pytest.mark.slow
def test_the_command_line_restores_videos_and_live_sessions(models_dir, faces_dir, tmp_path):
    from faceweave.video.io import VideoReader

    source, clip = faces_dir / "single/biden2.jpg", faces_dir / "video/lp_d18_talking_face.mp4"
    common = ["-s", source, "--no-watermark", "--audit-log", tmp_path / "a.jsonl", "--models-dir", models_dir]
    restore = ["--expression-restorer", "live_portrait", "--expression-restorer-areas", "lower-face"]
    done = _faceweave(
        "swap", "-t", clip, "-o", tmp_path / "r.mp4", "--trim", "0-0.5", "--scale", "0.5", *common, *restore
    )
    assert done.returncode == 0, done.stderr
    done = _faceweave("live", clip, "-o", tmp_path / "live.mkv", "--duration", "1", "--scale", "0.5", *common, *restore)
    assert done.returncode == 0, done.stderr
    for path in (tmp_path / "r.mp4", tmp_path / "live.mkv"):
        with VideoReader(path) as reader:
            assert sum(1 for _ in reader) > 5, path
    target = faces_dir / "single/astronaut_eileen_collins.png"
    bad = _faceweave("swap", "-t", target, "-o", tmp_path / "x.png", *common, "--expression-restorer-factor", "101")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--expression-restorer-factor" in bad.stderr
    assert not (tmp_path / "x.png").exists()
