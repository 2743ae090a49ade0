"""faceweave benchmark (faceweave/benchmark.py, faceweave/cli/benchmark.py):
clips made at each resolution, a cold and warm runs, the figures, nothing left behind."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from tests.test_cli import faceweave

from faceweave.benchmark import RESOLUTIONS, make_clip, parse_resolutions, run_benchmark
from faceweave.errors import InvalidOptionError, NoFaceError

SOURCE = "single/biden2.jpg"


def _scratch_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("faceweave-benchmark-*"))


def test_resolutions_are_read_in_order_once_and_all_means_every_one():
    assert parse_resolutions("720p, 240p,720p") == ("720p", "240p")
    assert parse_resolutions("all") == tuple(RESOLUTIONS)
    for bad in ("4k", "", "240p,8k"):
        with pytest.raises(InvalidOptionError, match="one or more of 240p"):
            parse_resolutions(bad)


def test_a_clip_is_16_by_9_at_its_height_with_the_frames_asked(tmp_path, faces_dir):
    from faceweave.io import read_image
    from faceweave.video.io import probe_video

    picture = read_image(faces_dir / SOURCE).pixels
    assert make_clip(picture, 360, 7, tmp_path / "c.mp4") == (640, 360)
    info = probe_video(tmp_path / "c.mp4")
    assert (info.width, info.height, info.frame_count) == (640, 360, 7)


def test_each_resolution_is_run_cold_and_warm_and_nothing_is_left(faces_dir):
    before = _scratch_dirs()
    report = run_benchmark([faces_dir / SOURCE], resolutions=("240p", "360p"), frames=6, cycles=2)
    assert [c.resolution for c in report.cases] == ["240p", "360p"]
    for case in report.cases:
        assert case.frames == 6 and case.faces_swapped == 6  # the face is found on every frame
        assert case.height == RESOLUTIONS[case.resolution] and case.width % 2 == 0
        assert case.fps > 0 and case.cold_s > 0 and case.cpu_ms > 0
        assert {"decode", "track", "swap", "blend", "paste", "encode"} <= set(case.stages_ms)
    as_json = json.loads(json.dumps(report.to_dict()))
    assert as_json["swapper"] == "mesh" and as_json["cycles"] == 2 and len(as_json["cases"]) == 2
    assert _scratch_dirs() == before  # clips and outputs removed


def test_bad_frames_cycles_and_a_picture_without_a_face_are_refused(faces_dir, tmp_path):
    from PIL import Image

    with pytest.raises(InvalidOptionError, match="frames must be"):
        run_benchmark([faces_dir / SOURCE], resolutions=("240p",), frames=1)
    with pytest.raises(InvalidOptionError, match="resolutions"):
        run_benchmark([faces_dir / SOURCE], resolutions=("8k",))
    grey = tmp_path / "grey.png"
    Image.new("RGB", (320, 240), (128, 128, 128)).save(grey)
    before = _scratch_dirs()
    with pytest.raises(NoFaceError, match="no face was swapped"):
        run_benchmark([faces_dir / SOURCE], picture=grey, resolutions=("240p",), frames=4, cycles=1)
    assert _scratch_dirs() == before


@pytest.mark.slow
def test_the_command_prints_json_and_a_table(faces_dir, tmp_path):
    args = ["benchmark", "-s", faces_dir / SOURCE, "--resolutions", "240p", "--frames", "4", "--cycles", "1"]
    proc = faceweave(*args, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (case,) = json.loads(proc.stdout)["cases"]
    assert case["resolution"] == "240p" and case["faces_swapped"] == 4 and case["fps"] > 0
    table = faceweave(*args, cwd=tmp_path)
    assert table.returncode == 0 and "240p" in table.stdout and "cold fps" in table.stdout
    assert list(tmp_path.iterdir()) == []  # nothing written where it ran
