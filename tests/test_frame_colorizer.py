"""Frame colorizers (FaceFusion's ``frame_colorizer``: DDColor, DeOldify):
faceweave's pre- and post-processing beside FaceFusion 3.8.1's, written out
here from its ``frame_colorizer/core.py`` (``prepare_temp_frame``,
``merge_color_frame``, ``blend_color_frame``; FaceFusion works in BGR), on
stand-in models with the real input and output names and shapes; then the
colorizer through the options, the pipeline and the command line."""

from __future__ import annotations

import subprocess
import sys

import cv2
import numpy as np
import onnx
import pytest
from tests.enhancer_fixtures import colorizer_model

from faceweave.enhancers.colorizer import FrameColorizer, colorized, colorizer_input
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.options import SwapOptions

# --- FaceFusion 3.8.1's formulation (BGR), written out ----------------------------


def ff_prepare(frame_bgr: np.ndarray, family: str, size: int) -> np.ndarray:
    grey = cv2.cvtColor(cv2.cvtColor(frame_bgr, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2RGB)
    if family == "ddcolor":
        light = cv2.cvtColor((grey / 255.0).astype(np.float32), cv2.COLOR_RGB2LAB)[:, :, :1]
        grey = cv2.cvtColor(np.concatenate((light, 0 * light, 0 * light), axis=-1), cv2.COLOR_LAB2RGB)
    grey = cv2.resize(grey, (size, size))
    return np.expand_dims(grey.transpose((2, 0, 1)), axis=0).astype(np.float32)


def ff_merge_float(frame_bgr: np.ndarray, output: np.ndarray) -> np.ndarray:
    """ddcolor's merge before its cast to 8 bits: BGR in [0, 1]."""
    colour = cv2.resize(output.transpose(1, 2, 0), (frame_bgr.shape[1], frame_bgr.shape[0]))
    light = cv2.cvtColor((frame_bgr / 255.0).astype(np.float32), cv2.COLOR_BGR2LAB)[:, :, :1]
    return cv2.cvtColor(np.concatenate((light, colour), axis=-1), cv2.COLOR_LAB2BGR)


def ff_merge(frame_bgr: np.ndarray, output: np.ndarray, family: str) -> np.ndarray:
    if family == "ddcolor":
        return (ff_merge_float(frame_bgr, output) * 255.0).round().astype(np.uint8)
    colour = cv2.resize(output.transpose(1, 2, 0), (frame_bgr.shape[1], frame_bgr.shape[0]))
    blue, _, _ = cv2.split(frame_bgr)
    colour = cv2.cvtColor(cv2.cvtColor(colour, cv2.COLOR_BGR2RGB).astype(np.uint8), cv2.COLOR_BGR2LAB)
    _, a, b = cv2.split(colour)
    return cv2.cvtColor(cv2.merge((blue, a, b)), cv2.COLOR_LAB2BGR)


def ff_blend(frame_bgr: np.ndarray, colour: np.ndarray, blend_percent: int) -> np.ndarray:
    factor = 1 - blend_percent / 100
    return cv2.addWeighted(frame_bgr, 1 - (1 - factor), colour, 1 - factor, 0)


# --- side by side ---------------------------------------------------------------


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    from skimage.data import astronaut

    return np.ascontiguousarray(astronaut()[::2, ::2])  # 256x256 RGB, a face among colours


@pytest.mark.parametrize("family", ["ddcolor", "deoldify"])
@pytest.mark.parametrize("size", [192, 256])
def test_the_model_input_is_facefusion_s(photo, family, size):
    ours = colorizer_input(photo, family, size)
    assert ours.shape == (1, 3, size, size) and ours.dtype == np.float32
    np.testing.assert_array_equal(ours, ff_prepare(photo[..., ::-1], family, size))


def test_deoldify_s_colour_is_facefusion_s_to_the_bit(photo):
    model = colorizer_model("deoldify")
    output = model.run({"input": colorizer_input(photo, "deoldify", 256)})["output"][0]
    assert output.min() >= 0.0 and output.max() <= 255.0  # inside the range: no wrapping in FaceFusion's cast
    ours = colorized(photo, output, "deoldify")
    np.testing.assert_array_equal(ours, ff_merge(np.ascontiguousarray(photo[..., ::-1]), output, "deoldify")[..., ::-1])


def test_ddcolor_s_colour_is_facefusion_s_where_it_is_in_gamut(photo):
    model = colorizer_model("ddcolor")
    output = model.run({"input": colorizer_input(photo, "ddcolor", 256)})["output"][0]
    bgr = np.ascontiguousarray(photo[..., ::-1])
    ours = colorized(photo, output, "ddcolor")
    theirs = ff_merge(bgr, output, "ddcolor")[..., ::-1]
    scaled = (ff_merge_float(bgr, output) * 255.0).round()[..., ::-1]
    inside = ((scaled >= 0) & (scaled <= 255)).all(axis=-1)
    assert inside.mean() > 0.9
    np.testing.assert_array_equal(ours[inside], theirs[inside])
    # out of gamut FaceFusion's cast wraps round (a bright pixel turns dark); here it is clipped
    np.testing.assert_array_equal(ours[~inside], np.clip(scaled, 0, 255).astype(np.uint8)[~inside])


@pytest.mark.parametrize("family, name", [("ddcolor", "ddcolor_artistic"), ("deoldify", "deoldify_stable")])
def test_a_colorizer_blends_as_facefusion_does(photo, family, name):
    colorizer = FrameColorizer(colorizer_model(family), name=name, size=192)
    got = colorizer.colorize(photo, blend=0.6)
    output = colorizer.model.run({"input": colorizer_input(photo, family, 192)})["output"][0]
    bgr = np.ascontiguousarray(photo[..., ::-1])
    colour = np.ascontiguousarray(colorized(photo, output, family)[..., ::-1])
    np.testing.assert_array_equal(got, ff_blend(bgr, colour, 60)[..., ::-1])
    assert np.array_equal(colorizer.colorize(photo, blend=0.0), photo)
    grey = cv2.cvtColor(cv2.cvtColor(photo, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
    coloured = colorizer.colorize(grey)
    assert np.ptp(coloured.astype(int), axis=-1).mean() > 3  # a grey picture comes out in colour


def test_a_colorizer_refuses_what_it_cannot_run(photo):
    with pytest.raises(InvalidOptionError, match="unknown frame colorizer 'ddcolour'.*ddcolor, ddcolor_artistic"):
        FrameColorizer(colorizer_model("ddcolor"), name="ddcolour")
    with pytest.raises(InvalidOptionError, match=r"takes \[256, 256\] frames; frame colorizer size 384"):
        FrameColorizer(colorizer_model("ddcolor", side=256), name="ddcolor", size=384)
    wrong = FrameColorizer(colorizer_model("deoldify"), name="ddcolor")  # three channels out, not a and b
    with pytest.raises(ModelSignatureError, match=r"output expected shape \[1, 2, 256, 256\]"):
        wrong.colorize(photo)


def test_the_options_name_the_colorizers_and_sizes():
    assert SwapOptions.model_validate({"enhance": {"colorizer": "deoldify", "colorizer_size": 384}})
    with pytest.raises(ValueError, match="unknown frame colorizer 'ddcolour'"):
        SwapOptions.model_validate({"enhance": {"colorizer": "ddcolour"}})
    with pytest.raises(ValueError, match="frame colorizer size 300; one of 192, 256, 384, 512"):
        SwapOptions.model_validate({"enhance": {"colorizer_size": 300}})


# --- through the pipeline and the command line --------------------------------------


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """A model folder with the ddcolor stand-in, imported through the CLI's own import path."""
    from faceweave.models import ModelStore, import_model

    folder, files = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("files")
    onnx.save(colorizer_model("ddcolor").proto, files / "ddcolor.onnx")
    import_model(ModelStore(folder), "ddcolor", files / "ddcolor.onnx")
    return folder


def test_the_pipeline_colours_the_swapped_photo(models_dir, faces_dir):
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    unmarked = Provenance.new(watermark=False)
    source, target = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    plain = FaceSwapper(SwapOptions(), provenance=unmarked).swap([source], target)
    options = SwapOptions.model_validate(
        {"enhance": {"colorizer": "ddcolor", "colorizer_blend": 1.0}, "runtime": {"models_dir": str(models_dir)}}
    )
    with FaceSwapper(options, provenance=unmarked) as swapper:
        coloured = swapper.swap([source], target)
        model = swapper.enhancers.colorizer.model
        output = model.run({"input": colorizer_input(plain.image, "ddcolor", 256)})["output"][0]
    assert "enhance" in coloured.timings_ms
    np.testing.assert_array_equal(coloured.image, colorized(plain.image, output, "ddcolor"))


def _faceweave(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "faceweave.cli", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def test_the_command_line_takes_a_colorizer_and_refuses_a_bad_one(models_dir, faces_dir, tmp_path):
    source, target = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    out = tmp_path / "out.png"
    base = ["swap", "-s", source, "-t", target, "-o", out, "--no-watermark", "--audit-log", tmp_path / "a.jsonl"]
    done = _faceweave(
        *base, "--frame-colorizer", "ddcolor", "--frame-colorizer-blend", "0.5", "--models-dir", models_dir
    )
    assert done.returncode == 0, done.stderr
    assert out.is_file()
    bad = _faceweave(*base, "--frame-colorizer", "ddcolor", "--frame-colorizer-size", "300")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "--frame-colorizer-size" in bad.stderr and "192, 256, 384, 512" in bad.stderr
    missing = _faceweave(*base, "--frame-colorizer", "deoldify", "--models-dir", tmp_path)
    assert missing.returncode == 2 and "deoldify" in missing.stderr and missing.stderr.count("\n") == 1, missing.stderr


def _mean_a(path) -> float:
    """The mean CIELAB a* of a video's frames."""
    from faceweave.video.io import VideoReader

    with VideoReader(path) as reader:
        frames = [frame.pixels for frame in reader]
    assert frames, path
    return float(np.mean([cv2.cvtColor(f, cv2.COLOR_RGB2LAB)[..., 1].mean() for f in frames]))


@pytest.mark.slow
def test_a_video_and_a_live_session_are_colorized(models_dir, faces_dir, tmp_path):
    """The stand-in's a* is 40 x the grey - 10 (a reddish cast on the grey
    talking head's backdrop): the video and the live recording take it."""
    source, clip = faces_dir / "single/biden2.jpg", faces_dir / "video/lp_d18_talking_face.mp4"
    common = ["-s", source, "--scale", "0.5", "--no-watermark", "--audit-log", tmp_path / "a.jsonl"]
    colour = ["--frame-colorizer", "ddcolor", "--models-dir", models_dir]
    plain, coloured = tmp_path / "plain.mp4", tmp_path / "coloured.mp4"
    for out, extra in ((plain, []), (coloured, colour)):
        done = _faceweave("swap", "-t", clip, "-o", out, "--trim", "0-0.5", *common, *extra)
        assert done.returncode == 0, done.stderr
    assert _mean_a(coloured) - _mean_a(plain) > 3.0
    recording = tmp_path / "live.mkv"
    done = _faceweave("live", clip, "-o", recording, "--duration", "1", *common, *colour, "--json")
    assert done.returncode == 0, done.stderr
    assert _mean_a(recording) - _mean_a(plain) > 3.0
