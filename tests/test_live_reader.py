"""Reading live inputs (no models): a file at its own rate and looped, a
UDP stream served on loopback that drops (reconnected, or lost after the
attempts), a camera that does not exist, a codec without a decoder."""

from __future__ import annotations

import itertools
import time
from fractions import Fraction
from pathlib import Path

import pytest
from tests.live_fixtures import StreamPusher, free_udp_port, gradient_frames
from tests.video_fixtures import black_video

from faceweave.errors import UnreadableFileError, UnsupportedFormatError, VideoTooLargeError
from faceweave.live.audio import AudioTap
from faceweave.live.inputs import LiveInput, Reconnect, parse_input
from faceweave.live.reader import LiveReader


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """One second of black 64x64 frames at 25 fps."""
    return black_video(tmp_path_factory.mktemp("live") / "clip.mp4", 64, 64, 25)


def test_a_file_plays_at_its_own_rate(clip):
    began = time.monotonic()
    with LiveReader(parse_input(str(clip))) as reader:
        frames = list(reader)
    assert len(frames) == 25 and reader.end_reason == f"file {clip}: end of input"
    assert time.monotonic() - began >= 0.9  # held back to the clip's times (a floor, not a speed)
    assert [f.index for f in frames] == list(range(25))
    assert frames[-1].time == pytest.approx(24 / 25)


def test_a_looped_file_goes_on_with_one_clock_until_the_duration(clip):
    with LiveReader(parse_input(str(clip), loop=True), duration_s=2.5) as reader:
        times = [f.time for f in reader]
    assert len(times) == 63 and reader.end_reason == "--duration 2.5 s reached"
    steps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(steps) == pytest.approx(0.04) and max(steps) == pytest.approx(0.04)


def test_scale_and_pixel_limit(clip):
    with LiveReader(parse_input(str(clip)), scale=0.5, duration_s=0.1) as reader:
        assert (reader.info.width, reader.info.height) == (32, 32)
        assert next(iter(reader)).pixels.shape == (32, 32, 3)
    with pytest.raises(VideoTooLargeError, match="over the limit of 1000"):
        LiveReader(parse_input(str(clip)), max_pixels=1000)


def test_a_camera_that_does_not_exist():
    with pytest.raises(UnreadableFileError, match="camera /dev/video77 does not exist"):
        LiveReader(LiveInput("camera", "/dev/video77", "v4l2"))


def test_a_codec_without_a_decoder(tmp_path):
    good = black_video(tmp_path / "good.mkv", 64, 64, 5, fmt="matroska")
    bad = tmp_path / "bad.mkv"
    bad.write_bytes(good.read_bytes().replace(b"V_MPEG4/ISO/AVC", b"V_MPEG4/ISO/XYZ"))
    with pytest.raises(UnsupportedFormatError, match="video codec is not supported"):
        LiveReader(parse_input(str(bad)))


def test_a_stream_that_sends_nothing_is_one_error():
    url = f"udp://127.0.0.1:{free_udp_port()}"
    with pytest.raises(UnreadableFileError, match="nothing received within 0.5 s"):
        LiveReader(parse_input(url), reconnect=Reconnect(timeout_s=0.5))


def _open_while_pushing(url: str, pusher: StreamPusher, **kwargs) -> LiveReader:
    pusher.start()
    return LiveReader(parse_input(url), **kwargs)


def test_a_stream_that_stops_is_lost_after_the_reconnect_attempts():
    url = f"udp://127.0.0.1:{free_udp_port()}"
    pusher = StreamPusher(url, gradient_frames(25), Fraction(25), schedule=[(2.0, 0.0)])
    tap = AudioTap()
    reconnect = Reconnect(attempts=2, delay_s=0.1, timeout_s=1.0)
    with _open_while_pushing(url, pusher, reconnect=reconnect, audio=tap) as reader:
        assert reader.info.has_audio and (reader.info.width, reader.info.height) == (160, 120)
        frames = list(reader)
    pusher.join()
    assert pusher.error is None
    assert len(frames) >= 5 and reader.reconnects == 0
    assert reader.lost is not None and str(reader.lost) == reader.end_reason
    assert "lost (no data for 1 s); 2 reconnect attempts failed" in reader.end_reason
    assert tap.take(), "the stream's audio went into the tap"


def test_a_stream_that_pauses_is_reconnected_and_its_clock_goes_on():
    url = f"udp://127.0.0.1:{free_udp_port()}"
    pusher = StreamPusher(url, gradient_frames(25), Fraction(25), schedule=[(1.5, 1.5), (1.5, 0.0)])
    reconnect = Reconnect(attempts=4, delay_s=0.1, timeout_s=1.0)
    with _open_while_pushing(url, pusher, reconnect=reconnect) as reader:
        times = [f.time for f in reader]
    pusher.join()
    assert reader.reconnects >= 1 and reader.lost is not None  # back once, then gone for good
    assert times == sorted(times) and len(set(times)) == len(times)
    assert len(times) >= 10


def test_frames_that_were_waiting_are_dropped_unconverted(clip):
    # the clip read as a live stream: every frame is there at once, as after a stall (the
    # reader's clock moves a millisecond a frame: however long this machine takes to decode)
    spec = LiveInput("network", str(clip))
    ticks = itertools.count()
    with LiveReader(spec, reconnect=Reconnect(attempts=0), clock=lambda: next(ticks) * 0.001) as reader:
        frames = list(reader)
    assert [f.index for f in frames] == [0, 1] and reader.dropped == 23  # two at once is jitter, not a backlog
    assert "reconnecting is off" in (reader.end_reason or "")
