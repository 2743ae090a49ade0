"""A fault in any thread of the video pipeline ends the swap promptly with
that error: nothing left behind, the caller's stop event untouched (a worker
reads a set stop as "cancelled" and would hand the job back to the queue)."""

from __future__ import annotations

import threading

import pytest

from faceweave.errors import TooSmallToMarkError, VideoTooLargeError
from faceweave.options import SwapOptions
from faceweave.pipeline import FaceSwapper

pytestmark = pytest.mark.slow

TALK = "video/lp_d18_talking_face.mp4"
SOURCE = "single/biden2.jpg"
#: a bound so that a hang fails the test instead of holding CI (not a timing assertion)
HANG_S = 120.0


class Injected(RuntimeError):
    """The fault the tests inject."""


@pytest.fixture(scope="module")
def video_swapper():
    from faceweave.video.pipeline import VideoSwapper

    with FaceSwapper(SwapOptions()) as swapper:
        yield VideoSwapper(swapper)


def _fail_on_call(n: int):
    """A replacement that raises :class:`Injected` from its ``n``-th call on."""
    calls = {"n": 0}
    lock = threading.Lock()

    def fault(*args, **kwargs):
        with lock:
            calls["n"] += 1
            reached = calls["n"] >= n
        if reached:
            raise Injected("injected fault")
        return None

    return fault, calls


def _wrap_failing(original, n: int):
    """``original`` that raises :class:`Injected` from its ``n``-th call on."""
    fault, calls = _fail_on_call(n)

    def wrapped(*args, **kwargs):
        fault()
        return original(*args, **kwargs)

    return wrapped, calls


def _run(video_swapper, faces_dir, out, **kwargs):
    """Swap one second of the talking head on another thread; returns the
    error it raised and the caller's stop event, failing if it hangs."""
    from faceweave.video.pipeline import VideoOptions

    stop = threading.Event()
    result: dict = {}

    def work():
        try:
            result["report"] = video_swapper.swap_video(
                [faces_dir / SOURCE],
                faces_dir / TALK,
                out,
                options=kwargs.pop("options", VideoOptions(end=1.0)),
                stop=stop,
                **kwargs,
            )
        except BaseException as exc:  # noqa: BLE001 - inspected by the test
            result["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(HANG_S)
    assert not thread.is_alive(), "the video swap hung after a fault"
    return result.get("error"), stop


def _targets():
    from faceweave.video.io.audio import AudioCopy, AudioEncode
    from faceweave.video.io.reader import VideoReader
    from faceweave.video.io.writer import VideoWriter
    from faceweave.video.pipeline import VideoSwapper
    from faceweave.video.tracker import FaceTracker

    return {
        # thread: (class, method, failing call)
        "decoder": (VideoReader, "_pixels", 4),
        "detector": (FaceTracker, "detect_ahead", 2),
        "tracking": (FaceTracker, "update", 5),
        "render": (VideoSwapper, "render", 3),
        "encoder": (VideoWriter, "write", 6),
        "audio-copy": (AudioCopy, "feed", 3),
        "audio-encode": (AudioEncode, "feed", 3),
    }


@pytest.mark.parametrize("thread", ["decoder", "detector", "tracking", "render", "encoder", "audio"])
def test_a_fault_in_any_thread_ends_the_swap_with_that_error(thread, tmp_path, faces_dir, video_swapper, monkeypatch):
    names = ["audio-copy", "audio-encode"] if thread == "audio" else [thread]
    calls = []
    for name in names:
        cls, method, n = _targets()[name]
        wrapped, count = _wrap_failing(getattr(cls, method), n)
        monkeypatch.setattr(cls, method, wrapped)
        calls.append(count)
    out = tmp_path / "out.mp4"
    error, stop = _run(video_swapper, faces_dir, out)
    assert sum(c["n"] for c in calls) > 0, f"the {thread} fault was never reached"
    assert isinstance(error, Injected), f"expected the injected fault, got {error!r}"
    assert not stop.is_set(), "the caller's stop event was set: a worker would requeue the job"
    assert list(tmp_path.iterdir()) == []


def test_the_pipeline_still_swaps_after_a_fault(tmp_path, faces_dir, video_swapper, monkeypatch):
    from faceweave.video.pipeline import VideoSwapper

    with monkeypatch.context() as patch:
        wrapped, _ = _wrap_failing(VideoSwapper.render, 1)
        patch.setattr(VideoSwapper, "render", wrapped)
        error, _ = _run(video_swapper, faces_dir, tmp_path / "bad.mp4")
        assert isinstance(error, Injected)
    error, _ = _run(video_swapper, faces_dir, tmp_path / "good.mp4")
    assert error is None and (tmp_path / "good.mp4").is_file()


def _video(path, width: int, height: int, frames: int, *, fmt: str | None = None, options: dict | None = None):
    from video_fixtures import black_video

    return black_video(path, width, height, frames, fmt=fmt, options=options)


def test_frames_too_small_to_mark_are_refused_before_any_work(tmp_path, faces_dir, video_swapper):
    from faceweave.provenance.stamp import Provenance
    from faceweave.video.pipeline import VideoOptions

    tiny = _video(tmp_path / "tiny.mp4", 32, 32, 10)
    out = tmp_path / "out.mp4"
    with pytest.raises(TooSmallToMarkError, match="32x32"):
        video_swapper.swap_video(
            [faces_dir / SOURCE], tiny, out, options=VideoOptions(provenance=Provenance.new(watermark=True))
        )
    assert not out.exists()


@pytest.mark.parametrize("live", [False, True], ids=["header", "live-mkv"])
def test_length_limits_hold_while_decoding(tmp_path, faces_dir, video_swapper, live):
    """A live Matroska file states no length: the frame limit is found while decoding."""
    from faceweave.video.io import probe_video
    from faceweave.video.pipeline import VideoOptions

    name = "long.mkv" if live else "long.mp4"
    path = _video(
        tmp_path / name, 64, 64, 60, fmt="matroska" if live else None, options={"live": "1"} if live else None
    )
    assert (probe_video(path).duration is None) == live
    out = tmp_path / "out.mp4"
    with pytest.raises(VideoTooLargeError, match="40") as caught:
        video_swapper.swap_video([faces_dir / SOURCE], path, out, options=VideoOptions(max_frames=40))
    assert caught.value.code == "video_too_large"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_the_swappers_pixel_limit_applies_to_videos(tmp_path, faces_dir, video_swapper):
    from faceweave.video.pipeline import VideoSwapper

    clip = _video(tmp_path / "clip.mp4", 128, 96, 3)
    prepared = video_swapper.prepare_sources([faces_dir / SOURCE])  # the photo is over the small limit
    with FaceSwapper(SwapOptions(max_pixels=128 * 95)) as swapper:
        with pytest.raises(VideoTooLargeError, match="128x96 = 12288 pixels"):
            VideoSwapper(swapper).swap_video(prepared, clip, tmp_path / "out.mp4")
        with pytest.raises(VideoTooLargeError):
            VideoSwapper(swapper).preview(prepared, clip, tmp_path / "preview.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4"]


@pytest.mark.parametrize("live", [False, True], ids=["mp4", "live-mkv"])
@pytest.mark.parametrize(
    ("limits", "complete"), [({}, True), ({"max_frames": 20}, False), ({"max_seconds": 0.5}, False)]
)
def test_measure_length_counts_packets_and_stops_at_a_limit(tmp_path, live, limits, complete):
    from faceweave.video.io.probe import measure_length

    path = _video(
        tmp_path / ("v.mkv" if live else "v.mp4"),
        64,
        64,
        50,
        fmt="matroska" if live else None,
        options={"live": "1"} if live else None,
    )
    length = measure_length(path, **limits)
    assert length.complete == complete
    if complete:
        assert length.frames == 50 and length.seconds == pytest.approx(49 / 25, abs=0.05)
    elif "max_frames" in limits:
        assert length.frames == 21
    else:
        assert 0.5 < length.seconds <= 0.5 + 0.4  # packets come in decoding order: B-frames' times jump ahead


def test_discard_attempts_keeps_inputs_and_the_current_attempt(tmp_path):
    from faceweave.service.storage import LocalStorage as Storage

    storage = Storage(tmp_path)
    job = "0" * 32
    folder = storage.job_dir(job)
    folder.mkdir(parents=True)
    names = [
        "target",
        "source-0",
        "result-1.mp4",
        ".result-1.mp4.ab12.tmp.mp4",
        "preview-1.png",
        ".preview-2.png.cd34.tmp",
        "result-2.mp4",
        "preview-2.png",
        "result-10.png",
    ]
    for name in names:
        (folder / name).write_bytes(b"x")
    (folder / "parts-1").mkdir()
    (folder / "parts-1" / "part_00000.mp4").write_bytes(b"x")
    assert storage.discard_attempts(job, before=2) == 4
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["target", "source-0", ".preview-2.png.cd34.tmp", "result-2.mp4", "preview-2.png", "result-10.png"]
    )
