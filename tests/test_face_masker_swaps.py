"""FaceFusion's occluder and face parser in a whole swap, in both
compositing modes, and FaceFusion's quality knobs (box-mask blur and
padding, swapper weight) through the options, the CLI and the service.
Stand-ins with the real signatures whose masks are known by construction
(see masker_fixtures); the target is a real photo."""

from __future__ import annotations

import inspect

import cv2
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from tests.masker_fixtures import occluder_model, parser_model
from tests.neural_fixtures import _model, _value, arcface_model

from faceweave.compositing.facefusion import paste_face, paste_mask, smooth_occlusion
from faceweave.errors import InvalidOptionError, ModelNotFoundError
from faceweave.maskers.processing import occluder_output, parser_output
from faceweave.options import SwapOptions
from faceweave.pipeline import FaceSwapper
from faceweave.provenance.stamp import Provenance
from faceweave.swappers.neural.base import NeuralSwapper, box_mask

pytestmark = pytest.mark.slow

UNMARKED = Provenance.new(watermark=False)
EMAP = np.random.default_rng(3).normal(0, 0.05, (512, 512)).astype(np.float32)
ARC_W = np.random.default_rng(4).normal(0, 1, (3, 512)).astype(np.float32)
TARGET = "single/astronaut_eileen_collins.png"
SOURCE = "single/biden2.jpg"
#: the occluder's known mask on its 256 px input: the face hidden on the template's left third
HIDDEN = np.ones((256, 256), np.float32)
HIDDEN[:, :85] = 0.0
#: the parser's known classes (64 x 64, upsampled x8): skin on the lower half, the rest background
LABELS = np.zeros((64, 64), np.int64)
LABELS[32:, :] = 1


def mirrored_swapper(size: int = 128, *, source_gain: float = 0.0) -> onnx.ModelProto:
    """An inswapper_128 stand-in whose face is its target crop mirrored
    across the diagonal (a face unlike the target's, which no colour
    transfer undoes) plus ``source_gain`` times the mean of the source row."""
    inits = [
        numpy_helper.from_array(np.array(source_gain, np.float32), "source_gain"),
        numpy_helper.from_array(np.array([-1, 1, 1, 1], np.int64), "row_shape"),
        numpy_helper.from_array(EMAP, "emap"),
    ]
    nodes = [
        helper.make_node("Transpose", ["target"], ["mirrored"], perm=[0, 1, 3, 2]),
        helper.make_node("ReduceMean", ["source"], ["source_mean"], axes=[1], keepdims=0),
        helper.make_node("Reshape", ["source_mean", "row_shape"], ["source_rows"]),
        helper.make_node("Mul", ["source_rows", "source_gain"], ["source_term"]),
        helper.make_node("Add", ["mirrored", "source_term"], ["output"]),
    ]
    inputs = [_value("target", ["N", 3, size, size]), _value("source", ["N", 512])]
    return _model(nodes, inputs, [_value("output", ["N", 3, size, size])], inits)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """inswapper_128 (mirroring), its ArcFace, xseg_1 (hides the left third)
    and bisenet_resnet_34 (skin on the lower half), imported as a user would."""
    from faceweave.models import ModelStore, import_model

    folder = tmp_path_factory.mktemp("models")
    files = tmp_path_factory.mktemp("files")
    made = {
        "inswapper_128": mirrored_swapper(source_gain=3.0),
        "arcface_w600k_r50": arcface_model(ARC_W, input_name="input"),
        "xseg_1": occluder_model(HIDDEN),
        "bisenet_resnet_34": parser_model(LABELS),
    }
    store = ModelStore(folder)
    for name, model in made.items():
        onnx.save(model, files / f"{name}.onnx")
        import_model(store, name, files / f"{name}.onnx")
    return folder


def options(models_dir, masks=None, **fields) -> SwapOptions:
    data = {"swapper": "inswapper_128", "runtime": {"models_dir": str(models_dir)}, **fields}
    return SwapOptions.model_validate({**data, "masks": masks or {}})


def swap(faces_dir, opts):
    """The result's pixels, the target's, and the swapper's own template swap of the face."""
    with FaceSwapper(opts, provenance=UNMARKED) as swapper:
        result = swapper.swap([faces_dir / SOURCE], faces_dir / TARGET)
        target = swapper.read(faces_dir / TARGET, role="target").pixels
        face = result.faces[result.swapped[0].target_index]
        source = swapper.load_sources([faces_dir / SOURCE])[0]
        found = swapper.swapper.swap_frame(source, target, [face.kps5])[0]
    return result.image, target, found


def on_frame(mask: np.ndarray, matrix: np.ndarray, shape) -> np.ndarray:
    """A template mask taken to the frame (0 outside the template)."""
    inv = cv2.invertAffineTransform(np.asarray(matrix, np.float64))
    return cv2.warpAffine(np.ascontiguousarray(mask, np.float32), inv, (shape[1], shape[0]))


def expected_facefusion(target, found, others):
    out = target.copy()
    paste_face(target, found.face, paste_mask(found.mask, others), found.matrix, out=out)
    return out


def test_a_known_occluder_mask_is_the_frame_s_mask_in_facefusion_mode(models_dir, faces_dir):
    pixels, target, found = swap(faces_dir, options(models_dir, {"face_occluder": "xseg_1"}, compositing="facefusion"))
    hidden = smooth_occlusion(occluder_output(HIDDEN.reshape(1, 256, 256, 1), found.target.shape[0]))
    np.testing.assert_array_equal(pixels, expected_facefusion(target, found, [hidden]))
    plain, _, _ = swap(faces_dir, options(models_dir, compositing="facefusion"))
    np.testing.assert_array_equal(plain, expected_facefusion(target, found, []))
    shown = on_frame(np.minimum(hidden, found.mask), found.matrix, target.shape)
    face = on_frame(found.mask, found.matrix, target.shape) > 0.99
    kept = face & (on_frame(np.ones_like(hidden), found.matrix, target.shape) > 0.99) & (shown == 0.0)
    assert kept.sum() > 500 and np.array_equal(pixels[kept], target[kept])  # hidden: the target's own
    assert np.abs(plain[kept].astype(int) - target[kept]).mean() > 5  # without the occluder: swapped there


def test_a_known_parser_mask_is_the_frame_s_mask_in_facefusion_mode(models_dir, faces_dir):
    opts = options(
        models_dir, {"face_parser": "bisenet_resnet_34", "face_parser_regions": ["skin"]}, compositing="facefusion"
    )
    pixels, target, found = swap(faces_dir, opts)
    logits = np.eye(19, dtype=np.float32)[LABELS.repeat(8, 0).repeat(8, 1)].transpose(2, 0, 1)[None] * 10
    region = smooth_occlusion(parser_output(logits, ("skin",), found.face.shape[0]))
    np.testing.assert_array_equal(pixels, expected_facefusion(target, found, [None, region]))
    nose_only = options(
        models_dir, {"face_parser": "bisenet_resnet_34", "face_parser_regions": ["nose"]}, compositing="facefusion"
    )
    nothing, _, _ = swap(faces_dir, nose_only)  # no pixel is nose: the face is not pasted at all
    np.testing.assert_array_equal(nothing, target)


def test_a_known_occluder_mask_keeps_the_target_in_faceweave_mode(models_dir, faces_dir):
    pixels, target, found = swap(faces_dir, options(models_dir, {"face_occluder": "xseg_1"}, compositing="faceweave"))
    plain, _, _ = swap(faces_dir, options(models_dir, compositing="faceweave"))
    hidden = smooth_occlusion(occluder_output(HIDDEN.reshape(1, 256, 256, 1), found.target.shape[0]))
    inside = on_frame(np.ones_like(hidden), found.matrix, target.shape) > 0.99
    covered = on_frame(hidden, found.matrix, target.shape)
    # faceweave feathers its masks at half resolution: 8 px in from the hidden part's edge
    hidden_core = cv2.erode((covered == 0.0).astype(np.uint8), np.ones((17, 17), np.uint8)) > 0
    kept = inside & hidden_core & (np.abs(plain.astype(int) - target).max(axis=2) > 8)
    shown = inside & (covered == 1.0) & (np.abs(plain.astype(int) - target).max(axis=2) > 8)
    assert kept.sum() > 300 and shown.sum() > 300
    assert np.abs(pixels[kept].astype(int) - target[kept]).max() <= 1  # hidden: the target's own
    assert np.abs(pixels[shown].astype(int) - target[shown]).mean() > 5  # shown: still swapped


def test_a_missing_mask_model_says_which_file_and_how_to_get_it(models_dir):
    with pytest.raises(
        ModelNotFoundError, match="bisenet_resnet_18 is not present.*faceweave models download bisenet_resnet_18"
    ):
        FaceSwapper(options(models_dir, {"face_parser": "bisenet_resnet_18"}), provenance=UNMARKED)


# -- the knobs ------------------------------------------------------------------


def test_the_knobs_default_to_what_the_swapper_did_before():
    """The defaults of the options are the swapper's own defaults, so a run
    without the new flags gives the output it gave before them."""
    params = inspect.signature(NeuralSwapper.__init__).parameters
    defaults = SwapOptions()
    assert params["mask_blur"].default == defaults.masks.face_mask_blur == 0.3
    assert tuple(params["mask_padding"].default) == defaults.masks.face_mask_padding == (0, 0, 0, 0)
    assert params["weight"].default == defaults.swapper_weight == 0.5


@pytest.mark.parametrize(
    "masks, blur, padding",
    [({"face_mask_blur": 0.6}, 0.6, (0, 0, 0, 0)), ({"face_mask_padding": [25, 0, 10, 5]}, 0.3, (25, 0, 10, 5))],
)
def test_box_mask_blur_and_padding_change_the_output(models_dir, faces_dir, masks, blur, padding):
    pixels, target, found = swap(faces_dir, options(models_dir, masks, compositing="facefusion"))
    side = found.target.shape[0]
    np.testing.assert_array_equal(found.mask, box_mask(side, blur=blur, padding=padding))
    np.testing.assert_array_equal(pixels, expected_facefusion(target, found, []))
    plain, _, default = swap(faces_dir, options(models_dir, compositing="facefusion"))
    np.testing.assert_array_equal(default.mask, box_mask(side))
    assert np.abs(pixels.astype(int) - plain).max() > 10


def test_the_swapper_weight_changes_the_output(models_dir, faces_dir):
    with FaceSwapper(options(models_dir, swapper_weight=0.1), provenance=UNMARKED) as swapper:
        assert swapper.swapper.weight == 0.1
    mixed, _, _ = swap(faces_dir, options(models_dir, compositing="facefusion", swapper_weight=0.1))
    plain, _, _ = swap(faces_dir, options(models_dir, compositing="facefusion"))
    assert np.abs(mixed.astype(int) - plain).max() > 0


def test_the_swapper_weight_is_refused_for_swappers_that_take_a_source_image(tmp_path):
    """Refused with the options, before any model file is looked for (none is there)."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="blendswap_256 takes the source face as an image"):
        SwapOptions(swapper="blendswap_256", swapper_weight=0.2, runtime={"models_dir": str(tmp_path)})
    from faceweave.service.jobspec import JobOptions

    with pytest.raises(InvalidOptionError, match="uniface_256 takes the source face as an image"):
        JobOptions(swapper="uniface_256", face_swapper_weight=0.2).check(kind="image")


# -- CLI and service ------------------------------------------------------------


def test_the_cli_carries_the_models_and_knobs(models_dir, faces_dir, tmp_path):
    from tests.test_cli import assert_clean_error, faceweave

    src, tgt, out = faces_dir / SOURCE, faces_dir / TARGET, tmp_path / "out.png"
    neural = ["-s", src, "-t", tgt, "-o", out, "--swapper", "inswapper_128", "--models-dir", models_dir]
    proc = faceweave("swap", *neural, "--face-occluder", "xseg")
    assert_clean_error(proc, 2, "--face-occluder", "many, xseg_1, xseg_2, xseg_3")
    proc = faceweave("swap", *neural, "--face-parser", "bisenet_resnet_34", "--face-parser-regions", "hair")
    assert_clean_error(proc, 2, "--face-parser-regions", "'hair'", "skin, left-eyebrow")
    proc = faceweave("swap", *neural, "--face-mask-padding", "0", "101", "0", "0")
    assert_clean_error(proc, 2, "--face-mask-padding", "[0, 100]")
    proc = faceweave("swap", *neural, "--face-swapper-weight", "2")
    assert_clean_error(proc, 2, "--face-swapper-weight")
    proc = faceweave("swap", "-s", src, "-t", tgt, "-o", out, "--face-occluder", "xseg_1")
    assert_clean_error(proc, 2, "for the neural swappers")
    proc = faceweave("swap", *neural, "--face-parser", "bisenet_resnet_18")
    missing = "face parser bisenet_resnet_18: model bisenet_resnet_18 is not present"
    assert_clean_error(proc, 2, missing, "faceweave models download bisenet_resnet_18")
    assert not out.exists()
    proc = faceweave(
        "swap", *neural, "--compositing", "facefusion", "--face-occluder", "xseg_1", "--face-parser",
        "bisenet_resnet_34", "--face-parser-regions", "skin,mouth", "--face-parser-regions", "nose",
        "--face-mask-blur", "0.4", "--face-mask-padding", "5", "0", "0", "0", "--face-swapper-weight", "0.4",
        "--face-swapper-pixel-boost", "256",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()


def test_the_service_job_spec_carries_the_models_and_knobs():
    from faceweave.service.jobspec import JobOptions, options_from_form

    job = options_from_form(
        {
            "swapper": ["inswapper_128"],
            "face_occluder": ["xseg_3"],
            "face_parser": ["bisenet_resnet_18"],
            "face_parser_regions": ["skin,nose", "mouth"],
            "face_mask_blur": ["0.5"],
            "face_mask_padding": ["10,0,5,0"],
            "face_swapper_weight": ["0.7"],
        }
    )
    job.check(kind="image")
    made = job.swap_options(kind="image", has_reference=False, max_pixels=10**7, video_working_size=192)
    masks = made.masks
    assert (masks.face_occluder, masks.face_parser, masks.face_parser_regions) == (
        "xseg_3",
        "bisenet_resnet_18",
        ("skin", "nose", "mouth"),
    )
    assert (masks.face_mask_blur, masks.face_mask_padding, made.swapper_weight) == (0.5, (10, 0, 5, 0), 0.7)
    with pytest.raises(InvalidOptionError, match="unknown face occluder 'xseg'"):
        JobOptions(swapper="inswapper_128", face_occluder="xseg").check(kind="image")
    with pytest.raises(InvalidOptionError, match="for the neural swappers"):
        JobOptions(face_parser="bisenet_resnet_18").check(kind="image")
    assert JobOptions().swap_options(kind="image", has_reference=False, max_pixels=10**7, video_working_size=192) == (
        SwapOptions(max_pixels=10**7)
    )


def test_a_missing_parser_stops_before_the_occluder_loads(models_dir):
    from faceweave.maskers import FaceMaskModels
    from faceweave.sessions import ModelSessions

    opts = options(models_dir, {"face_occluder": "xseg_1", "face_parser": "bisenet_resnet_18"})
    sessions = ModelSessions(opts.runtime)
    try:
        with pytest.raises(ModelNotFoundError, match="bisenet_resnet_18"):
            FaceMaskModels.load(opts.masks, sessions)
        assert sessions.loads() == []  # nothing half loaded
    finally:
        sessions.close()


def test_live_and_evaluate_take_the_flags(tmp_path):
    from tests.test_cli import assert_clean_error, faceweave
    from typer.testing import CliRunner

    from faceweave.cli import build_app

    for command in ("live", "evaluate"):
        shown = CliRunner().invoke(build_app(), [command, "--help"], env={"COLUMNS": "200"}).output
        flags = ("--face-occluder", "--face-parser-regions", "--face-mask-padding", "--face-swapper-weight")
        flags += ("--face-mask-areas", "--face-detector-angles", "--face-detector-margin")
        for flag in flags:
            assert flag in shown, (command, flag)
    proc = faceweave(
        "evaluate", tmp_path, "--out", tmp_path / "out", "--swapper", "inswapper_128", "--face-parser", "bisenet"
    )
    assert_clean_error(proc, 2, "--face-parser", "bisenet_resnet_18, bisenet_resnet_34")


def test_many_occluders_need_all_three_files(models_dir):
    with pytest.raises(ModelNotFoundError, match="xseg_2 is not present"):
        FaceSwapper(options(models_dir, {"face_occluder": "many"}), provenance=UNMARKED)


def test_parser_regions_repeat_or_list():
    from tests.cli_args import parse_args

    from faceweave.cli.swap import SwapArgs
    from faceweave.option_fields import split_words
    from faceweave.options import CLI_WORDS

    assert split_words(["skin,nose", "mouth", "upper-lip lower-lip"]) == (
        "skin",
        "nose",
        "mouth",
        "upper-lip",
        "lower-lip",
    )
    assert split_words([]) == () and split_words([0, "90,180"]) == (0, "90", "180")
    argv = ["-t", "t.png", "-o", "o.png", "--swapper", "inswapper_128", "--face-parser", "bisenet_resnet_18"]
    args = parse_args(
        SwapArgs, [*argv, "--face-parser-regions", "skin,nose", "--face-parser-regions", "mouth"], kinds=("photo",)
    )
    made = args.options.swap_options(kind="photo", has_reference=False, words=CLI_WORDS)
    assert made.masks.face_parser_regions == ("skin", "nose", "mouth")
