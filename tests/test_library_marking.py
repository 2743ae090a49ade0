"""What the Python library makes is marked, as what the CLI writes is: the
invisible watermark in the pixels of every ``FaceSwapper.swap`` result and
every frame of ``VideoSwapper.swap_video``, and the "AI-generated" label in
the files written (``SwapResult.save``, the video's container tags).  Turning
the watermark off is explicit and leaves the label, like ``--no-watermark``;
the CLI marks once, through the library."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from faceweave.cli.verify import describe
from faceweave.io import write_image
from faceweave.pipeline import FaceSwapper
from faceweave.provenance.stamp import Provenance
from faceweave.provenance.verify import verify_file
from faceweave.provenance.watermark import Watermarker

pytestmark = pytest.mark.slow

TALK = "video/lp_d18_talking_face.mp4"
SOURCE = "single/biden2.jpg"
TIMEOUT_S = 300

#: the CLI in a subprocess, counting every watermark embedded into a photo
COUNTING_CLI = """
import sys
from faceweave.provenance.watermark import Watermarker

embedded = []
real = Watermarker.embed

def counting(self, pixels, payload):
    embedded.append(payload.run_id)
    return real(self, pixels, payload)

Watermarker.embed = counting
from faceweave.cli import build_app
from faceweave.cli.console import run_app

code = run_app(build_app(), sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write(" ".join(f"{run:06x}" for run in embedded))
sys.exit(code)
"""


@pytest.fixture(scope="module")
def swapper():
    with FaceSwapper() as model:
        yield model


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "faceweave.cli", *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT_S
    )


def test_the_readme_python_example_writes_a_marked_and_labelled_photo(tmp_path, swapper, astronaut):
    result = swapper.swap([astronaut], astronaut)
    written = result.save(tmp_path / "out.png")
    proc = cli("verify", "--json", written)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["marked"] and found["label"]["ai_generated"] and found["label"]["tool"] == "faceweave"
    assert found["watermark"]["found"] and found["watermark"]["payload"]["tool_id"] == "0xFACE"
    # the label, the watermark and the result name the same run
    assert found["label"]["run_id"] == found["watermark"]["payload"]["run_id"] == result.provenance.run_hex
    # and each swap is a run of its own
    assert swapper.swap([astronaut], astronaut).provenance.run_id != result.provenance.run_id


def test_the_pixels_carry_the_watermark_however_they_are_written(tmp_path, swapper, astronaut):
    result = swapper.swap([astronaut], astronaut)
    reading = Watermarker().detect(result.image)
    assert reading.found and reading.payload.run_id == result.provenance.run_id
    found = verify_file(write_image(tmp_path / "plain_write.png", result.image))  # no label asked for
    assert found.watermark.found and found.label is None and found.marked


def test_the_watermark_opt_out_keeps_the_label_as_no_watermark_does(tmp_path, swapper, astronaut, caplog):
    with (
        FaceSwapper(analyser=swapper.analyser, provenance=Provenance.new(watermark=False)) as plain,
        caplog.at_level(logging.INFO, logger="faceweave"),
    ):
        result = plain.swap([astronaut], astronaut)
    assert result.provenance.watermark is False and "watermark is off" in caplog.text
    assert not Watermarker().detect(result.image).found
    found = verify_file(result.save(tmp_path / "plain.jpg"))
    # what `faceweave swap --no-watermark` writes: marked by its label only
    assert found.marked and found.label is not None and found.label.ai_generated
    assert found.label.run_id == result.provenance.run_hex and not found.watermark.found
    assert describe(found)[2].startswith("watermark: not found")


def test_a_provenance_given_per_call_marks_that_result(swapper, astronaut):
    mark = Provenance.new()
    result = swapper.swap([astronaut], astronaut, provenance=mark)
    assert result.provenance is mark
    reading = Watermarker().detect(result.image)
    assert reading.found and reading.payload.run_id == mark.run_id


@pytest.mark.parametrize("extra, watermarked", [([], True), (["--no-watermark"], False)])
def test_the_cli_marks_a_photo_exactly_once(tmp_path, astronaut, extra, watermarked):
    photo = write_image(tmp_path / "astronaut.png", astronaut)
    out, counted = tmp_path / "out.png", tmp_path / "embedded.txt"
    proc = subprocess.run(
        [sys.executable, "-c", COUNTING_CLI, counted, "swap", "-s", photo, "-t", photo, "-o", out, "--json", *extra],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    assert counted.read_text().split() == ([run_id] if watermarked else [])
    found = verify_file(out)
    assert found.label is not None and found.label.run_id == run_id
    assert found.watermark.found is watermarked
    if watermarked:
        assert f"{int(found.watermark.payload.run_id):06x}" == run_id


def test_a_library_batch_marks_its_outputs_by_default(tmp_path, swapper, astronaut):
    from faceweave.batch import BatchItem, run_batch

    target = write_image(tmp_path / "target.png", astronaut)
    (outcome,) = run_batch(swapper, [astronaut], [BatchItem(index=0, target=target, output=tmp_path / "out.png")])
    assert outcome.ok, outcome.message
    found = verify_file(tmp_path / "out.png")
    assert found.watermark.found and found.label is not None
    assert found.label.run_id == f"{int(found.watermark.payload.run_id):06x}"


# -- video -----------------------------------------------------------------


@pytest.fixture(scope="module")
def clip(tmp_path_factory, faces_dir) -> Path:
    """The first 24 frames of the talking-head clip, unmarked."""
    from faceweave.video.io import VideoReader, VideoWriter

    path = tmp_path_factory.mktemp("clip") / "talk.mp4"
    with (
        VideoReader(faces_dir / TALK, end=24 / 30) as reader,
        VideoWriter(path, info=reader.info, quality=10) as writer,
    ):
        for frame in reader:
            writer.write(frame.pixels, frame.time)
    assert not verify_file(path).marked
    return path


def _all_frames_agree(found) -> bool:
    mark = found.watermark
    return mark.found and mark.frames_agreeing == mark.frames_checked > 1


def test_a_video_with_the_default_options_is_marked_and_labelled(tmp_path, faces_dir, swapper, clip):
    from faceweave.video.pipeline import VideoSwapper

    video = VideoSwapper(swapper)
    out = tmp_path / "out.mp4"
    report = video.swap_video([faces_dir / SOURCE], clip, out)
    assert report.frames_with_swap > 0
    found = verify_file(out)
    assert found.label is not None and found.label.ai_generated and _all_frames_agree(found)
    assert found.label.run_id == f"{int(found.watermark.payload.run_id):06x}"
    preview = tmp_path / "preview.png"
    video.preview([faces_dir / SOURCE], clip, preview)
    shot = verify_file(preview)
    assert (
        shot.watermark.found and shot.label is not None and shot.label.run_id != found.label.run_id
    )  # a run of its own


def test_a_video_without_the_watermark_keeps_its_label(tmp_path, faces_dir, swapper, clip):
    from faceweave.video.pipeline import VideoOptions, VideoSwapper

    out = tmp_path / "out.mp4"
    options = VideoOptions(provenance=Provenance.new(watermark=False))
    VideoSwapper(swapper).swap_video([faces_dir / SOURCE], clip, out, options=options)
    found = verify_file(out)
    assert found.label is not None and found.label.run_id == options.provenance.run_hex and not found.watermark.found


def test_every_segment_of_a_segmented_video_carries_the_same_mark(tmp_path, faces_dir, swapper, clip):
    from faceweave.video.pipeline import VideoSwapper
    from faceweave.video.segmented import swap_video_segmented

    out = tmp_path / "out.mkv"
    report = swap_video_segmented(
        VideoSwapper(swapper),
        [faces_dir / SOURCE],
        clip,
        out,
        segments=2,
        workers=1,
        min_frames=8,
    )
    assert len(report.segments) == 2
    found = verify_file(out, frames=12)
    assert _all_frames_agree(found)
