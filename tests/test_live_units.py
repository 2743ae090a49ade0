"""The live mode's parts without models: the latest-frame-wins queue in a
frame stream, pushed frames in and the newest frame out, input and output
parsing, the reconnect policy, the audio tap, outputs this machine cannot give."""

from __future__ import annotations

import queue
import threading
import time
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from faceweave.errors import InputError, InvalidOptionError, OutputUnavailableError, UnreadableFileError
from faceweave.live.endpoints import LatestFrame, PushSource
from faceweave.live.inputs import NETWORK_OPTIONS, Reconnect, parse_input, parse_options
from faceweave.live.outputs import OutgoingFrame, OutputSpec, check_outputs, parse_output
from faceweave.video.io import VideoFrame
from faceweave.video.stream import _END, BlockingQueue, FrameStream, LatestFrameQueue


def test_latest_frame_queue_drops_the_oldest_and_counts():
    q: queue.Queue = queue.Queue(maxsize=2)
    policy = LatestFrameQueue()
    for item in range(5):
        assert policy.offer(q, item, lambda: False)
    assert [q.get_nowait(), q.get_nowait()] == [3, 4]
    assert policy.dropped == 3


def test_latest_frame_queue_never_drops_for_the_end_marker():
    q: queue.Queue = queue.Queue(maxsize=1)
    policy = LatestFrameQueue(poll_s=0.01)
    policy.offer(q, "last frame", lambda: False)
    halted = threading.Event()
    threading.Timer(0.1, halted.set).start()
    assert policy.offer(q, _END, halted.is_set) is False  # it waited for room, then the stream halted
    assert q.get_nowait() == "last frame" and policy.dropped == 0


def test_blocking_queue_is_still_the_default():
    stream = FrameStream(iter([]), lambda: None, None)  # type: ignore[arg-type]
    assert isinstance(stream.policy, BlockingQueue)


class _Frames:
    """A source of ``n`` tiny frames, as fast as they are taken."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield VideoFrame(index=i, source_index=i, time=i / 25, pixels=np.full((4, 4, 3), i % 256, np.uint8))

    def close(self) -> None:
        pass


class _SlowWork:
    """Planning that takes a while, as a slow swap would."""

    def __init__(self) -> None:
        self.planned: list[int] = []

    def ahead(self, frame):
        return None

    def plan(self, frame, ahead):
        time.sleep(0.02)
        self.planned.append(frame.index)
        return frame.index

    def render(self, frame, plan):
        return frame.pixels


class _Collect:
    def __init__(self) -> None:
        self.times: list[float] = []

    def write(self, pixels, time=None):
        self.times.append(time)


def test_a_slow_stage_drops_stale_frames_keeps_order_and_the_last():
    sink, work, policy = _Collect(), _SlowWork(), LatestFrameQueue()

    @contextmanager
    def open_sink():
        yield sink

    frames = FrameStream(_Frames(200), open_sink, work, queue_size=1, policy=policy).run()
    assert frames + policy.dropped == 200 and policy.dropped > 0
    assert work.planned == sorted(work.planned) and work.planned[-1] == 199  # the newest always goes on
    assert len(sink.times) == frames and sink.times == sorted(sink.times)


def test_push_source_hands_frames_in_order_and_ends():
    source = PushSource(rate=25, max_frames=2)
    pixels = np.zeros((8, 8, 3), np.uint8)
    for _ in range(5):
        source.push(pixels)  # nobody reads: the oldest go
    source.end()
    got = list(source)
    assert source.dropped == 3 + 1  # three frames, then one more for the end marker
    assert [f.index for f in got] == [4] and got[0].pixels.flags.writeable is False
    with pytest.raises(InputError, match="has ended"):
        source.push(pixels)


@pytest.mark.parametrize(
    ("pixels", "error"),
    [(np.zeros((8, 8), np.uint8), "uint8 \\(H, W, 3\\)"), (np.zeros((8, 8, 3), np.float32), "float32")],
)
def test_push_source_refuses_frames_that_are_not_rgb(pixels, error):
    with pytest.raises(InputError, match=error):
        PushSource().push(pixels)


def test_push_source_times_never_go_back():
    source = PushSource(rate=10, max_frames=8)
    for t in (0.0, 0.5, 0.2):
        source.push(np.zeros((2, 2, 3), np.uint8), t)
    source.end()
    assert [round(f.time, 3) for f in source] == [0.0, 0.5, 0.6]


def test_latest_frame_gives_the_newest_then_none_once_closed():
    latest = LatestFrame()
    assert latest.get(0, timeout=0.01) is None
    for value in range(3):
        latest.write(OutgoingFrame(np.full((2, 2, 3), value, np.uint8), value / 10))
    number, frame = latest.get(0)
    assert number == 3 and int(frame.rgb[0, 0, 0]) == 2 and frame.time == pytest.approx(0.2)
    threading.Timer(0.05, latest.close).start()
    assert latest.get(number) is None and latest.closed


@pytest.mark.parametrize(
    ("text", "kwargs", "expected"),
    [
        ("udp://127.0.0.1:5000", {}, ("network", "udp://127.0.0.1:5000", None)),
        ("rtsp://cam.local/live", {"input_format": "rtsp"}, ("network", "rtsp://cam.local/live", "rtsp")),
        ("SRT://host:9000?mode=listener", {}, ("network", "SRT://host:9000?mode=listener", None)),
        ("https://host/live.m3u8", {}, ("network", "https://host/live.m3u8", None)),
        ("{clip}", {"loop": True}, ("file", "{clip}", None)),
        ("ftp://host/x.mp4", {}, InvalidOptionError("cannot read 'ftp://' streams")),
        ("", {}, InvalidOptionError("give an INPUT")),
        ("/dev/video99", {}, UnreadableFileError("camera /dev/video99 does not exist")),
        ("99", {}, UnreadableFileError("camera /dev/video99 does not exist")),
        ("{missing}", {}, UnreadableFileError("does not exist")),
        ("{folder}", {}, UnreadableFileError("is a folder")),
        ("udp://127.0.0.1:5000", {"loop": True}, InvalidOptionError("--loop is for files")),
    ],
)
def test_parse_input(tmp_path, text, kwargs, expected):
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"not checked here")
    names = {"clip": clip, "missing": tmp_path / "missing.mp4", "folder": tmp_path}
    text = text.format(**names)
    if isinstance(expected, Exception):
        with pytest.raises(type(expected), match=str(expected)):
            parse_input(text, **kwargs)
        return
    spec = parse_input(text, **kwargs)
    assert (spec.kind, spec.url, spec.format) == (expected[0], expected[1].format(**names), expected[2])
    if spec.kind == "network":
        assert dict(spec.options).items() >= dict(NETWORK_OPTIONS).items() and spec.reconnects
    else:
        assert spec.paced and spec.loop and not spec.reconnects


def test_input_options_override_the_network_defaults():
    spec = parse_input("udp://127.0.0.1:5000", options=parse_options(["fflags=", "buffer_size=1M"], flag="-x"))
    assert spec.options["fflags"] == "" and spec.options["buffer_size"] == "1M"
    with pytest.raises(InvalidOptionError, match="use KEY=VALUE"):
        parse_options(["video_size"], flag="--input-option")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("preview", OutputSpec("preview")),
        ("vcam", OutputSpec("vcam")),
        ("vcam:/dev/video9", OutputSpec("vcam", "/dev/video9")),
        ("rtmp://127.0.0.1/live/key", OutputSpec("network", "rtmp://127.0.0.1/live/key", "flv")),
        ("srt://127.0.0.1:9000", OutputSpec("network", "srt://127.0.0.1:9000", "mpegts")),
        ("udp://127.0.0.1:5000?pkt_size=1316", OutputSpec("network", "udp://127.0.0.1:5000?pkt_size=1316", "mpegts")),
        ("out/rec.mkv", OutputSpec("file", "out/rec.mkv", "matroska")),
        ("rec.TS", OutputSpec("file", "rec.TS", "mpegts")),
        ("rec.flv", OutputSpec("file", "rec.flv", "flv")),
        ("rec.avi", InvalidOptionError("give a recording file")),
        ("rec", InvalidOptionError("give a recording file")),
        ("http://host/x", InvalidOptionError("cannot push 'http://' streams")),
    ],
)
def test_parse_output(text, expected):
    if isinstance(expected, Exception):
        with pytest.raises(type(expected), match=str(expected)):
            parse_output(text)
    else:
        assert parse_output(text) == expected


@pytest.mark.parametrize(
    ("outputs", "error", "unavailable"),
    [
        ([], "give at least one --output", False),
        (["a.mkv", "a.mkv"], "given twice", False),
        (["preview"], "needs a display", True),
        (["vcam:/dev/video63"], "(pyvirtualcam|not a v4l2loopback device)", True),
    ],
)
def test_outputs_this_machine_cannot_give_are_refused(outputs, error, unavailable):
    specs = [parse_output(text) for text in outputs]
    with pytest.raises(InvalidOptionError, match=error) as caught:
        check_outputs(specs, environ={})
    assert isinstance(caught.value, OutputUnavailableError) == unavailable


def test_a_preview_is_allowed_with_a_display():
    check_outputs([parse_output("preview")], environ={"DISPLAY": ":0"})


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"attempts": 4, "delay_s": 0.5, "max_delay_s": 3.0}, (0.5, 1.0, 2.0, 3.0)),
        ({"attempts": 0}, ()),
        ({"attempts": -1}, InvalidOptionError("--reconnect")),
        ({"delay_s": 0.0}, InvalidOptionError("--reconnect-delay")),
        ({"timeout_s": float("nan")}, InvalidOptionError("--timeout")),
    ],
)
def test_reconnect_waits_twice_as_long_each_time(kwargs, expected):
    if isinstance(expected, Exception):
        with pytest.raises(type(expected), match=str(expected)):
            Reconnect(**kwargs)
    else:
        assert Reconnect(**kwargs).delays() == expected


def test_audio_tap_is_bounded_and_takes_in_time_order():
    import av

    from faceweave.live.audio import AudioChunk, AudioTap

    tap = AudioTap(max_chunks=3)
    frame = av.AudioFrame.from_ndarray(np.zeros((2, 480), np.float32), format="fltp", layout="stereo")
    frame.sample_rate = 48_000
    for i in range(5):
        tap.put(AudioChunk(i * 0.01, frame))
    assert tap.dropped == 2
    assert [round(c.time, 2) for c in tap.take(until=0.035)] == [0.02, 0.03]
    assert [round(c.time, 2) for c in tap.take()] == [0.04] and tap.take() == []
    assert AudioChunk(1.0, frame).end == pytest.approx(1.01)


def test_live_report_shares(tmp_path: Path):
    from faceweave.live.session import LiveReport

    report = LiveReport(
        frames_in=100, frames_out=80, dropped=20, frames_with_swap=80, faces_swapped=80, seconds=4.0,
        latency_p50_ms=50.0, latency_p95_ms=90.0, end_reason="stopped",
    )  # fmt: skip
    assert report.fps == 20.0 and report.dropped_share == 0.2
    assert Fraction(30) == PushSource().rate


def test_plan_on_room_plans_only_frames_the_encoder_can_take():
    class SlowRender(_SlowWork):
        def __init__(self) -> None:
            super().__init__()
            self.lock, self.in_flight, self.most = threading.Lock(), 0, 0

        def plan(self, frame, ahead):
            with self.lock:
                self.in_flight += 1
                self.most = max(self.most, self.in_flight)
            return frame.index

        def render(self, frame, plan):
            time.sleep(0.01)
            return frame.pixels

    work = SlowRender()

    class Done(_Collect):
        def write(self, pixels, time=None):
            with work.lock:
                work.in_flight -= 1
            super().write(pixels, time)

    @contextmanager
    def open_sink():
        yield Done()

    policy = LatestFrameQueue()
    stream = FrameStream(_Frames(100), open_sink, work, queue_size=1, workers=2, policy=policy, plan_on_room=True)
    assert stream.run() + policy.dropped == 100
    assert work.most <= 2  # one queued for the encoder, one the encoder waits on: none planned to wait


@pytest.mark.parametrize("name", ["rec.mkv", "rec.mp4", "rec.mov", "rec.ts", "rec.flv"])
def test_every_recording_kind_has_the_frames_their_times_and_the_audio(tmp_path, name):
    import av

    from faceweave.live.audio import AudioChunk
    from faceweave.live.muxer import StreamMuxer

    path = tmp_path / "out" / name
    muxer = StreamMuxer(parse_output(str(path)), audio=True, metadata={"comment": "label"})
    muxer.open(63, 47, Fraction(25))  # odd sides are padded for 4:2:0
    tone = av.AudioFrame.from_ndarray(np.zeros((2, 960), np.float32), format="fltp", layout="stereo")
    tone.sample_rate = 48_000
    for i in range(20):
        muxer.write(OutgoingFrame(np.full((47, 63, 3), 10 * i, np.uint8), 1.0 + (i + (i >= 10)) / 25))  # 10 dropped
        muxer.write_audio([AudioChunk(1.0 + i * 0.02, tone)])
    muxer.close()
    assert [p.name for p in path.parent.iterdir()] == [name]  # the temporary file renamed
    with av.open(str(path)) as container:
        assert container.streams.audio, "an AAC track"
        times = [float(f.time) for f in container.decode(video=0)]
    assert len(times) == 20 and times[10] - times[9] == pytest.approx(0.08, abs=0.002)  # the drop kept as time


def test_an_abandoned_recording_leaves_nothing(tmp_path):
    from faceweave.live.muxer import StreamMuxer

    muxer = StreamMuxer(parse_output(str(tmp_path / "rec.mkv")), audio=False)
    muxer.open(64, 64, Fraction(25))
    muxer.write(OutgoingFrame(np.zeros((64, 64, 3), np.uint8), 0.0))
    muxer.abort(RuntimeError("the run failed"))
    assert list(tmp_path.iterdir()) == []


def test_the_preview_shows_new_frames_and_closes_on_q(monkeypatch):
    import cv2

    from faceweave.live.preview import show_preview

    shown, keys = [], iter([-1, -1, ord("q")])
    monkeypatch.setattr(cv2, "namedWindow", lambda *a: None)
    monkeypatch.setattr(cv2, "imshow", lambda title, pixels: shown.append(int(pixels[0, 0, 2])))
    monkeypatch.setattr(cv2, "waitKey", lambda delay: next(keys))
    monkeypatch.setattr(cv2, "getWindowProperty", lambda *a: 1.0)
    monkeypatch.setattr(cv2, "destroyWindow", lambda *a: None)
    latest = LatestFrame()
    latest.write(OutgoingFrame(np.full((4, 4, 3), (7, 0, 0), np.uint8), 0.0))  # RGB: shown as BGR, red last
    assert show_preview(latest, lambda: False) is True and shown == [7]


def test_a_preview_opencv_cannot_open_is_one_clear_error(monkeypatch):
    import cv2

    from faceweave.live.preview import show_preview

    def no_window(*args):
        raise cv2.error("The function is not implemented")

    monkeypatch.setattr(cv2, "namedWindow", no_window)
    with pytest.raises(OutputUnavailableError, match="OpenCV cannot open a window"):
        show_preview(LatestFrame(), lambda: False)
