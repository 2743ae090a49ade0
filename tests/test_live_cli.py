"""``faceweave live`` as a subprocess on streams served on loopback: a
talking-face clip pushed in real time over UDP (MPEG-TS with audio) goes
through the live swap into a recording and a UDP push, both read back (the
face moved toward the source, the frame rate and audio kept); a stream
that stops ends with its reason after the reconnect attempts."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path

import av
import av.error
import numpy as np
import pytest
from tests.live_fixtures import StreamPusher, clip_frames, free_udp_port
from tests.test_cli import NOISE, TIMEOUT_S

pytestmark = pytest.mark.slow

TALK = "video/lp_d18_talking_face.mp4"
SOURCE = "single/biden2.jpg"


def live(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "faceweave.cli", "live", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def talk(faces_dir) -> tuple[list[np.ndarray], Fraction]:
    """Three seconds of the talking face (pushed looped)."""
    return clip_frames(faces_dir / TALK, 3.0)


class StreamCatcher(threading.Thread):
    """Reads a pushed MPEG-TS stream on a UDP port until it goes quiet."""

    def __init__(self, url: str) -> None:
        super().__init__(name="test-catcher", daemon=True)
        self.url, self.frames, self.audio_frames = url, 0, 0
        self.opened = threading.Event()

    def run(self) -> None:
        try:
            with av.open(self.url, format="mpegts", timeout=(TIMEOUT_S, 3.0)) as container:
                self.opened.set()
                for packet in container.demux():
                    for frame in packet.decode():
                        self.frames += isinstance(frame, av.VideoFrame)
                        self.audio_frames += isinstance(frame, av.AudioFrame)
        except av.error.FFmpegError:
            pass  # quiet for 3 s: the push ended


def read_back(path: Path) -> tuple[list[np.ndarray], list[float], Fraction, int]:
    """Frames, their times, the declared rate and the audio frames of a recording."""
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        rate = Fraction(video.average_rate or 0)
        frames, times = [], []
        for frame in container.decode(video):
            frames.append(frame.to_ndarray(format="rgb24"))
            times.append(float(frame.time or 0.0))
    with av.open(str(path)) as container:
        audio = sum(1 for _ in container.decode(audio=0)) if container.streams.audio else 0
    return frames, times, rate, audio


def largest_face_embedding(analyser, pixels: np.ndarray) -> np.ndarray:
    faces = analyser.analyse(np.ascontiguousarray(pixels))
    assert faces, "a face in the frame"
    return analyser.embed(pixels, max(faces, key=lambda f: f.bbox.area)).embedding


def test_a_udp_stream_goes_through_live_into_a_recording_and_a_push(tmp_path, faces_dir, talk):
    frames, rate = talk
    url_in, url_out = f"udp://127.0.0.1:{free_udp_port()}", f"udp://127.0.0.1:{free_udp_port()}"
    recording = tmp_path / "live.mkv"
    pusher = StreamPusher(url_in, frames, rate, schedule=[(TIMEOUT_S, 0.0)])
    catcher = StreamCatcher(url_out)
    catcher.start()
    pusher.start()
    try:
        proc = live(url_in, "-s", faces_dir / SOURCE, "-o", recording, "-o", url_out, "--duration", "4", "--json")
    finally:
        pusher.stop()
    catcher.join()
    assert proc.returncode == 0, proc.stderr
    assert not any(noise in proc.stderr for noise in NOISE), proc.stderr
    report = json.loads(proc.stdout)
    assert report["end_reason"] == "--duration 4 s reached"
    assert report["frames_out"] + report["dropped"] == report["frames_in"] and report["frames_out"] >= 10
    out, times, out_rate, audio = read_back(recording)
    assert len(out) == report["frames_out"] and out_rate == rate  # the input's rate kept
    steps = np.diff(times) * float(rate)  # frames kept land on the input's frame times
    assert np.all(np.abs(steps - np.round(steps)) < 0.1) and np.all(np.round(steps) >= 1)
    assert times[-1] - times[0] <= 4.0 and audio > 0, "the input's audio is in the recording"
    assert catcher.frames >= 5 and catcher.audio_frames > 0, "the pushed stream was read back"
    _assert_identity_moved(faces_dir, frames, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live.mkv"]


def _assert_identity_moved(faces_dir: Path, original: list[np.ndarray], swapped: list[np.ndarray]) -> None:
    from faceweave.analysis import FaceAnalyser, embedding_distance
    from faceweave.io import read_image

    with FaceAnalyser() as analyser:
        source = largest_face_embedding(analyser, read_image(faces_dir / SOURCE).pixels)
        before = largest_face_embedding(analyser, original[0])
        middle = swapped[len(swapped) // 2]
        after = largest_face_embedding(analyser, middle)
    assert embedding_distance(after, source) < embedding_distance(before, source)


def test_a_stream_that_stops_ends_with_the_reason_and_keeps_the_recording(tmp_path, faces_dir, talk):
    frames, rate = talk
    url = f"udp://127.0.0.1:{free_udp_port()}"
    recording = tmp_path / "live.ts"
    pusher = StreamPusher(url, frames, rate, schedule=[(8.0, 0.0)])
    pusher.start()
    args = ["-s", faces_dir / SOURCE, "-o", recording, "--reconnect", "2", "--reconnect-delay", "0.1"]
    proc = live(url, *args, "--timeout", "3")
    pusher.join()
    assert proc.returncode == 1, proc.stderr
    assert not any(noise in proc.stderr for noise in NOISE), proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: input {url} lost (no data for 3 s); 2 reconnect attempts failed"), proc.stderr
    assert "frames" in proc.stdout and "lost" in proc.stdout
    out, _, _, audio = read_back(recording)
    assert len(out) >= 5 and audio > 0


def test_ctrl_c_ends_the_session_cleanly_and_keeps_the_recording(tmp_path, faces_dir):
    import signal
    import time

    recording = tmp_path / "live.mp4"
    cmd = [
        sys.executable,
        "-m",
        "faceweave.cli",
        "live",
        str(faces_dir / TALK),
        "--loop",
        "-s",
        str(faces_dir / SOURCE),
    ]
    # a shell starts background jobs with SIGINT ignored, and a child keeps
    # that: give the session the default Ctrl-C whatever the test runs under
    proc = subprocess.Popen(
        [*cmd, "-o", str(recording)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        banner = proc.stderr.readline() if proc.stderr is not None else ""
        assert banner.startswith("live: "), banner
        time.sleep(1.5)  # some frames through
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "; stopped" in out and err.strip() == "", (out, err)
    frames, _, _, audio = read_back(recording)
    assert len(frames) >= 3 and audio > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live.mp4"]
