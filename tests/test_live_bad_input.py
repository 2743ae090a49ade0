"""Misuse of ``faceweave live``: each row must exit with its code and ONE
``error:`` line naming what was wrong (no traceback, no native log noise),
and leave nothing in the output folder.  Placeholders: ``{F}`` the real
photos and clips, ``{B}`` the bad files, ``{O}`` the empty output folder,
``{PORT}`` a UDP port nobody sends to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.live_fixtures import free_udp_port
from tests.test_cli import TIMEOUT_S, assert_clean_error
from tests.video_fixtures import black_video

pytestmark = pytest.mark.slow

S = "{F}/single/biden2.jpg"
V = "{F}/video/lp_d18_talking_face.mp4"


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> Path:
    """A clip whose video codec has no decoder, and a photo with no face."""
    from faceweave.io import write_image

    folder = tmp_path_factory.mktemp("bad")
    good = black_video(folder / "good.mkv", 64, 64, 5, fmt="matroska")
    (folder / "unknown_codec.mkv").write_bytes(good.read_bytes().replace(b"V_MPEG4/ISO/AVC", b"V_MPEG4/ISO/XYZ"))
    write_image(folder / "no_face.png", np.full((256, 256, 3), 128, np.uint8))
    return folder


# (case id, arguments, exit code, fragments the one-line message must hold)
CASES = [
    ("camera-missing", ["/dev/video77", "-s", S, "-o", "{O}/out.mkv"], 2, ["camera /dev/video77 does not exist"]),
    ("camera-index-missing", ["77", "-s", S, "-o", "{O}/out.mkv"], 2, ["camera /dev/video77 does not exist"]),
    ("unknown-flag", [V, "-s", S, "-o", "{O}/out.mkv", "--frobnicate"], 2, ["no such option", "--frobnicate"]),
    ("unknown-codec", ["{B}/unknown_codec.mkv", "-s", S, "-o", "{O}/out.mkv"], 2, ["video codec is not supported"]),
    ("unknown-scheme", ["ftp://127.0.0.1/x.mp4", "-s", S, "-o", "{O}/out.mkv"], 2, ["cannot read 'ftp://'", "rtsp"]),
    ("missing-file", ["{O}/missing.mp4", "-s", S, "-o", "{O}/out.mkv"], 2, ["does not exist"]),
    (
        "loop-on-a-stream",
        ["udp://127.0.0.1:{PORT}", "--loop", "-s", S, "-o", "{O}/out.mkv"],
        2,
        ["--loop is for files"],
    ),
    ("no-output", [V, "-s", S], 2, ["give at least one --output"]),
    ("output-twice", [V, "-s", S, "-o", "{O}/a.mkv", "-o", "{O}/a.mkv"], 2, ["given twice"]),
    ("output-extension", [V, "-s", S, "-o", "{O}/out.avi"], 2, ["give a recording file", ".mkv"]),
    ("output-scheme", [V, "-s", S, "-o", "http://127.0.0.1:9/x"], 2, ["cannot push 'http://'", "rtmp://"]),
    ("preview-no-display", [V, "-s", S, "-o", "preview"], 2, ["needs a display", "DISPLAY"]),
    ("vcam-unavailable", [V, "-s", S, "-o", "vcam"], 2, ["vcam"]),
    ("no-source", [V, "-o", "{O}/out.mkv"], 2, ["give a source photo"]),
    ("source-is-a-video", [V, "-s", V, "-o", "{O}/out.mkv"], 2, ["is a video; give a photo"]),
    ("source-without-a-face", [V, "-s", "{B}/no_face.png", "-o", "{O}/out.mkv"], 2, ["no face"]),
    ("input-option-syntax", [V, "-s", S, "-o", "{O}/out.mkv", "--input-option", "fast"], 2, ["use KEY=VALUE"]),
    ("reconnect-negative", [V, "-s", S, "-o", "{O}/out.mkv", "--reconnect", "-1"], 2, ["--reconnect"]),
    ("bad-selection", [V, "-s", S, "-o", "{O}/out.mkv", "--faces", "some"], 2, ["--faces"]),
    (
        "stream-sends-nothing",
        ["udp://127.0.0.1:{PORT}", "-s", S, "-o", "{O}/out.mkv", "--timeout", "0.5"],
        2,
        ["nothing received within 0.5 s"],
    ),
]


@pytest.mark.parametrize(("case", "args", "code", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_live_misuse_is_one_clear_line(tmp_path, faces_dir, bad, case, args, code, fragments):
    names = {"F": faces_dir, "B": bad, "O": tmp_path, "PORT": free_udp_port()}
    argv = [a.format(**names) for a in args]
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = subprocess.run(
        [sys.executable, "-m", "faceweave.cli", "live", *argv],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
    )
    assert_clean_error(proc, code, *fragments)
    assert list(tmp_path.iterdir()) == [], f"{case} left files behind"
