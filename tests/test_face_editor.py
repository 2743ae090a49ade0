"""The face editor (FaceFusion's ``face_editor``, LivePortrait's six
models): FaceFusion 3.8.1's expression edits, head turn, limits and opening
ratios written out here beside faceweave's table of nudges, then the editor
on faces, through the options, the pipeline, the command line, a video and
a live session, on stand-ins with the real names and shapes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from tests.enhancer_fixtures import (
    analysed_astronaut,
    live_portrait_editor_models,
    live_portrait_models,
    stand_in_folder,
)
from tests.test_cli import faceweave as _faceweave

from faceweave import names
from faceweave.enhancers.editor import FaceEditor, nudged, opening_ratio, turned
from faceweave.enhancers.restorer import EXPRESSION_MAX, EXPRESSION_MIN, LivePortrait, Motion
from faceweave.errors import InvalidOptionError
from faceweave.options import FaceEditOptions, SwapOptions

# --- FaceFusion 3.8.1's formulation, written out ------------------------------------


def _i(value: float, span: float) -> float:
    return np.interp(value, [-1, 1], [-span, span])


def ff_expression(e: np.ndarray, k: dict[str, float]) -> np.ndarray:  # noqa: PLR0915 - FaceFusion's edits, in order
    e = e.copy()
    h, v = k.get("eye_gaze_horizontal", 0.0), k.get("eye_gaze_vertical", 0.0)
    if h > 0:
        e[0, 11, 0] += _i(h, 0.015)
        e[0, 15, 0] += _i(h, 0.020)
    else:
        e[0, 11, 0] += _i(h, 0.020)
        e[0, 15, 0] += _i(h, 0.015)
    e[0, 1, 1] += _i(v, 0.0025)
    e[0, 2, 1] -= _i(v, 0.0025)
    e[0, 11, 1] -= _i(v, 0.010)
    e[0, 13, 1] -= _i(v, 0.005)
    e[0, 15, 1] -= _i(v, 0.010)
    e[0, 16, 1] -= _i(v, 0.005)
    g = k.get("mouth_grim", 0.0)
    if g > 0:
        e[0, 17, 2] -= _i(g, 0.005)
        e[0, 19, 2] += _i(g, 0.01)
        e[0, 20, 1] -= _i(g, 0.06)
        e[0, 20, 2] -= _i(g, 0.03)
    else:
        e[0, 19, 1] -= _i(g, 0.05)
        e[0, 19, 2] -= _i(g, 0.02)
        e[0, 20, 2] -= _i(g, 0.03)
    h, v = k.get("mouth_position_horizontal", 0.0), k.get("mouth_position_vertical", 0.0)
    e[0, 19, 0] += _i(h, 0.05)
    e[0, 20, 0] += _i(h, 0.04)
    if v > 0:
        e[0, 19, 1] -= _i(v, 0.04)
        e[0, 20, 1] -= _i(v, 0.02)
    else:
        e[0, 19, 1] -= _i(v, 0.05)
        e[0, 20, 1] -= _i(v, 0.04)
    p = k.get("mouth_pout", 0.0)
    e[0, 19, 1] += -_i(p, 0.022) if p > 0 else _i(p, 0.022)
    e[0, 19, 2] += _i(p, 0.025)
    e[0, 20, 2] -= _i(p, 0.002)
    q = k.get("mouth_purse", 0.0)
    if q > 0:
        e[0, 19, 1] -= _i(q, 0.04)
        e[0, 19, 2] -= _i(q, 0.02)
    else:
        e[0, 14, 1] -= _i(q, 0.02)
        e[0, 17, 2] += _i(q, 0.01)
        e[0, 19, 2] -= _i(q, 0.015)
        e[0, 20, 2] -= _i(q, 0.002)
    s = k.get("mouth_smile", 0.0)
    if s > 0:
        e[0, 20, 1] -= _i(s, 0.015)
        e[0, 14, 1] -= _i(s, 0.025)
        e[0, 17, 1] += _i(s, 0.01)
        e[0, 17, 2] += _i(s, 0.004)
        e[0, 3, 1] -= _i(s, 0.0045)
        e[0, 7, 1] -= _i(s, 0.0045)
    else:
        e[0, 14, 1] -= _i(s, 0.02)
        e[0, 17, 1] += _i(s, 0.003)
        e[0, 19, 1] += _i(s, 0.02)
        e[0, 19, 2] -= _i(s, 0.005)
        e[0, 20, 2] += _i(s, 0.01)
        e[0, 3, 1] += _i(s, 0.0045)
        e[0, 7, 1] += _i(s, 0.0045)
    b = k.get("eyebrow_direction", 0.0)
    if b > 0:
        e[0, 1, 1] += _i(b, 0.015)
        e[0, 2, 1] -= _i(b, 0.020)
    else:
        e[0, 1, 0] -= _i(b, 0.015)
        e[0, 2, 0] += _i(b, 0.020)
        e[0, 1, 1] += _i(b, 0.005)
        e[0, 2, 1] -= _i(b, 0.005)
    return np.clip(e, EXPRESSION_MIN, EXPRESSION_MAX)


def ff_turn(pitch: float, yaw: float, roll: float, k: dict[str, float]) -> np.ndarray:
    turned_to = [
        pitch + float(np.interp(k.get("head_pitch", 0.0), [-1, 1], [20, -20])),
        yaw + float(np.interp(k.get("head_yaw", 0.0), [-1, 1], [60, -60])),
        roll + float(np.interp(k.get("head_roll", 0.0), [-1, 1], [-15, 15])),
    ]
    limited = []
    for angle, moved, limit in zip((pitch, yaw, roll), turned_to, (30.0, 60.0, 20.0), strict=True):
        low, high = (min(angle, -limit), limit) if angle < 0 else (-limit, max(angle, limit))
        limited.append(np.clip(moved, low, high))
    return Rotation.from_euler("xyz", limited, degrees=True).as_matrix().astype(np.float32)


KNOBS = [
    {},
    {"eyebrow_direction": 0.8, "eye_gaze_horizontal": -0.6, "eye_gaze_vertical": 0.5},
    {"eyebrow_direction": -0.7, "eye_gaze_horizontal": 0.9, "eye_gaze_vertical": -1.0},
    {"mouth_grim": 0.6, "mouth_pout": -0.4, "mouth_purse": 0.5, "mouth_smile": 0.8},
    {"mouth_grim": -0.6, "mouth_pout": 0.4, "mouth_purse": -0.5, "mouth_smile": -0.8},
    {"mouth_position_horizontal": 0.5, "mouth_position_vertical": -0.7},
    {"mouth_position_horizontal": -1.0, "mouth_position_vertical": 1.0},
]


@pytest.mark.parametrize("knobs", KNOBS)
def test_the_expression_edits_are_facefusion_s(knobs):
    expression = np.random.default_rng(len(knobs)).normal(0, 0.02, (1, 21, 3)).astype(np.float32)
    edit = FaceEditOptions(model="live_portrait", **knobs)
    np.testing.assert_array_equal(nudged(expression, edit), ff_expression(expression, knobs))


@pytest.mark.parametrize(
    ("angles", "knobs"),
    [
        ((5.0, -10.0, 2.0), {"head_pitch": 0.5, "head_yaw": -0.8, "head_roll": 0.3}),
        ((-35.0, 70.0, -25.0), {"head_pitch": -1.0, "head_yaw": 1.0, "head_roll": -1.0}),
        ((20.0, -50.0, 15.0), {"head_pitch": -1.0, "head_yaw": -1.0, "head_roll": 1.0}),
    ],
)
def test_the_head_turns_within_facefusion_s_limits(angles, knobs):
    zeros = np.zeros((1, 21, 3), np.float32)
    motion = Motion(*angles, np.ones((1, 1), np.float32), np.zeros((1, 3), np.float32), zeros, zeros)
    edit = FaceEditOptions(model="live_portrait", **knobs)
    np.testing.assert_array_equal(turned(motion, edit), ff_turn(*angles, knobs))


def test_the_opening_ratios_are_facefusion_s():
    points = np.random.default_rng(4).uniform(0, 100, (68, 2)).astype(np.float32)
    top, bottom, left, right = points[37], points[40], points[39], points[36]
    expected = float(np.linalg.norm(top - bottom) / (np.linalg.norm(left - right) + 1e-6))
    assert opening_ratio(points, 37, 40, 39, 36) == expected


@pytest.fixture(scope="module")
def astronaut():
    return analysed_astronaut()


@pytest.fixture(scope="module")
def portrait():
    m = live_portrait_editor_models()
    return LivePortrait(
        m["feature_extractor"],
        m["motion_extractor"],
        m["generator"],
        eye=m["eye_retargeter"],
        lip=m["lip_retargeter"],
        stitcher=m["stitcher"],
    )


def test_the_knobs_move_the_face_and_only_its_crop_changes(astronaut, portrait):
    pixels, faces = astronaut
    still = FaceEditor(portrait, FaceEditOptions(model="live_portrait")).apply(pixels, faces)
    for knobs in ({"head_yaw": 0.7}, {"eye_open_ratio": -1.0}, {"lip_open_ratio": 0.7}):
        moved = FaceEditor(portrait, FaceEditOptions(model="live_portrait", **knobs)).apply(pixels, faces)
        assert not np.array_equal(moved, still), knobs
    changed = np.any(still != pixels, axis=2)
    assert changed.sum() > 5000 and not changed[-10:].any()
    assert FaceEditor(portrait, FaceEditOptions()).apply(pixels, []) is pixels


def test_the_editor_refuses_what_it_cannot_run():
    m = live_portrait_models()
    bare = LivePortrait(m["feature_extractor"], m["motion_extractor"], m["generator"])
    with pytest.raises(InvalidOptionError, match="needs LivePortrait's eye and lip retargeters and its stitcher"):
        FaceEditor(bare, FaceEditOptions(model="live_portrait"))
    with pytest.raises(ValueError, match="unknown face editor 'liveportrait'"):
        SwapOptions.model_validate({"enhance": {"edit": {"model": "liveportrait"}}})
    with pytest.raises(ValueError, match="less than or equal to 1"):
        SwapOptions.model_validate({"enhance": {"edit": {"mouth_smile": 1.5}}})


# --- through the pipeline and the command line --------------------------------------


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """A model folder with LivePortrait's six stand-ins, imported as users import them."""
    folder, files = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("files")
    models = {names.LIVE_PORTRAIT[part]: model for part, model in live_portrait_editor_models().items()}
    return stand_in_folder(folder, files, models)


def test_the_pipeline_edits_the_swapped_photo(models_dir, faces_dir):
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    unmarked = Provenance.new(watermark=False)
    source, target = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    plain = FaceSwapper(SwapOptions(), provenance=unmarked).swap([source], target)
    edit = {"model": "live_portrait", "mouth_smile": 0.6, "head_yaw": -0.2}
    options = SwapOptions.model_validate({"enhance": {"edit": edit}, "runtime": {"models_dir": str(models_dir)}})
    with FaceSwapper(options, provenance=unmarked) as swapper:
        edited = swapper.swap([source], target)
        chosen = [plain.faces[s.target_index] for s in plain.swapped]
        expected = swapper.enhancers.editor.apply(plain.image, chosen)
    assert "edit" in edited.timings_ms
    np.testing.assert_array_equal(edited.image, expected)


@pytest.mark.slow
def test_the_command_line_edits_videos_and_live_sessions(models_dir, faces_dir, tmp_path):
    from faceweave.video.io import VideoReader

    source, clip = faces_dir / "single/biden2.jpg", faces_dir / "video/lp_d18_talking_face.mp4"
    common = ["-s", source, "--no-watermark", "--audit-log", tmp_path / "a.jsonl", "--models-dir", models_dir]
    edit = ["--face-editor", "live_portrait", "--face-editor-mouth-smile", "0.5", "--face-editor-head-roll", "-0.3"]
    done = _faceweave("swap", "-t", clip, "-o", tmp_path / "e.mp4", "--trim", "0-0.5", "--scale", "0.5", *common, *edit)
    assert done.returncode == 0, done.stderr
    done = _faceweave("live", clip, "-o", tmp_path / "live.mkv", "--duration", "1", "--scale", "0.5", *common, *edit)
    assert done.returncode == 0, done.stderr
    for path in (tmp_path / "e.mp4", tmp_path / "live.mkv"):
        with VideoReader(path) as reader:
            assert sum(1 for _ in reader) > 5, path
    target = faces_dir / "single/astronaut_eileen_collins.png"
    bad = _faceweave("swap", "-t", target, "-o", tmp_path / "x.png", *common, "--face-editor-head-yaw", "2")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--face-editor-head-yaw" in bad.stderr, bad.stderr
    assert not (tmp_path / "x.png").exists()
