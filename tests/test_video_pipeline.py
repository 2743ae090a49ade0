"""The video swap end to end on the real clips (short trims)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from faceweave.errors import FaceweaveError, InvalidOptionError
from faceweave.options import SelectionOptions, SwapOptions
from faceweave.pipeline import FaceSwapper

pytestmark = pytest.mark.slow

TALK = "video/lp_d18_talking_face.mp4"
SOURCE = "single/biden2.jpg"


@pytest.fixture(scope="module")
def video_swapper():
    from faceweave.video.pipeline import VideoSwapper

    with FaceSwapper(SwapOptions(selection=SelectionOptions(mode="many"))) as swapper:
        yield VideoSwapper(swapper)


def frames_of(path):
    from faceweave.video.io import VideoReader

    with VideoReader(path) as reader:
        return [f.pixels for f in reader], reader.info


def test_swap_a_trimmed_clip_with_audio(tmp_path, faces_dir, video_swapper):
    from faceweave.video.io import probe_video
    from faceweave.video.pipeline import VideoOptions

    out = tmp_path / "out.mp4"
    report = video_swapper.swap_video(
        [faces_dir / SOURCE], faces_dir / TALK, out, options=VideoOptions(start=1.0, end=2.0)
    )
    assert out.is_file() and report.output == out
    info = probe_video(out)
    assert info.has_audio
    assert abs(report.frames - 30) <= 1 and abs((info.frame_count or 0) - report.frames) <= 1
    assert report.frames_with_swap >= report.frames - 1  # the face is in every frame
    original, _ = frames_of(faces_dir / TALK)
    swapped, _ = frames_of(out)
    # the face region changed, the corners did not (beyond compression)
    diff = np.abs(swapped[5].astype(int) - original[30 + 5].astype(int))
    h, w = diff.shape[:2]
    assert diff[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4].mean() > 8
    assert diff[: h // 10, : w // 10].mean() < 6
    assert [p.name for p in tmp_path.iterdir()] == ["out.mp4"]


def test_preview_writes_one_swapped_frame(tmp_path, faces_dir, video_swapper):
    from faceweave.io import read_image

    out = tmp_path / "preview.png"
    index = video_swapper.preview([faces_dir / SOURCE], faces_dir / TALK, out)
    assert index == 0 and read_image(out).pixels.shape == (480, 480, 3)


def test_stop_leaves_nothing_behind(tmp_path, faces_dir, video_swapper):
    out = tmp_path / "out.mp4"
    stop = threading.Event()

    def progress(done, total):
        if done >= 5:
            stop.set()

    with pytest.raises(KeyboardInterrupt):
        video_swapper.swap_video([faces_dir / SOURCE], faces_dir / TALK, out, progress=progress, stop=stop)
    assert list(tmp_path.iterdir()) == []


def test_frames_without_faces_pass_through(tmp_path, faces_dir, video_swapper):
    from faceweave.io import read_image
    from faceweave.provenance.stamp import Provenance
    from faceweave.video.io import VideoWriter, probe_video
    from faceweave.video.pipeline import VideoOptions

    dogs = read_image(faces_dir / "hard/neg_dogs.jpg").pixels[:480, :480]
    clip = tmp_path / "dogs.mp4"
    with VideoWriter(clip, info=probe_video(faces_dir / TALK), quality=10) as writer:
        for _ in range(8):
            writer.write(np.ascontiguousarray(dogs))
    out = tmp_path / "out.mp4"
    # the watermark off: the frames as the swap leaves them (it marks them otherwise)
    unmarked = VideoOptions(provenance=Provenance.new(watermark=False))
    report = video_swapper.swap_video([faces_dir / SOURCE], clip, out, options=unmarked)
    assert report.frames == 8 and report.frames_with_swap == 0
    a, _ = frames_of(clip)
    b, _ = frames_of(out)
    assert len(a) == len(b) and np.abs(a[3].astype(int) - b[3].astype(int)).mean() < 3


def test_trim_outside_the_video_is_refused(tmp_path, faces_dir, video_swapper):
    from faceweave.video.pipeline import VideoOptions

    with pytest.raises(InvalidOptionError):
        video_swapper.swap_video(
            [faces_dir / SOURCE], faces_dir / TALK, tmp_path / "out.mp4", options=VideoOptions(start=60.0, end=70.0)
        )
    assert list(tmp_path.iterdir()) == []


def test_truncated_video_is_processed_as_far_as_it_decodes(tmp_path, faces_dir, video_swapper):
    data = (faces_dir / TALK).read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    out = tmp_path / "out.mp4"
    try:
        report = video_swapper.swap_video([faces_dir / SOURCE], cut, out)
    except FaceweaveError:
        assert not out.exists()  # refused with a clear error: fine too
        return
    assert out.is_file() and 0 < report.frames < 216


def test_prepared_sources_are_reused(faces_dir, video_swapper):
    prepared = video_swapper.prepare_sources([faces_dir / SOURCE])
    assert video_swapper.prepare_sources(prepared) == prepared


def test_render_threads_give_the_same_frames_as_one(tmp_path, faces_dir, video_swapper):
    """Frames rendered on several threads come out in order and equal to a
    single-thread run (PNG frames: no encoder in the comparison), marked
    alike when the run is the same."""
    from faceweave.provenance.stamp import Provenance
    from faceweave.video.pipeline import VideoOptions

    outs, run = [], Provenance.new()
    for workers in (1, 3):
        out = tmp_path / f"frames_{workers}"
        options = VideoOptions(start=1.0, end=1.4, workers=workers, audio=False, provenance=run)
        video_swapper.swap_video([faces_dir / SOURCE], faces_dir / TALK, out, options=options)
        outs.append(sorted(out.iterdir()))
    assert len(outs[0]) == len(outs[1]) >= 10
    for a, b in zip(*outs, strict=False):
        assert a.name == b.name and a.read_bytes() == b.read_bytes()


def test_a_render_error_stops_the_run_and_leaves_nothing(tmp_path, faces_dir, video_swapper, monkeypatch):
    from faceweave.video.pipeline import VideoOptions

    calls = {"n": 0}
    real = video_swapper.render

    def failing(pixels, plan, timings, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise FaceweaveError("render broke")
        return real(pixels, plan, timings, **kwargs)

    monkeypatch.setattr(video_swapper, "render", failing)
    out = tmp_path / "out.mp4"
    with pytest.raises(FaceweaveError, match="render broke"):
        video_swapper.swap_video([faces_dir / SOURCE], faces_dir / TALK, out, options=VideoOptions(start=1.0, end=2.0))
    assert list(tmp_path.iterdir()) == []


def test_colour_mapping_is_held_over_a_shot_and_restarts_for_a_new_track(faces_dir, video_swapper):
    """The target skin colour follows a sudden change of the picture only
    part of the way on the next frame (moving average), the source colour is
    measured once, and a new track (as after a scene cut) starts afresh."""
    from faceweave.io import read_image
    from faceweave.video.io import VideoFrame
    from faceweave.video.tracker import FaceTracker

    pixels = read_image(faces_dir / "single/biden2.jpg").pixels
    darker = (pixels * 0.7).astype(np.uint8)
    sources = video_swapper.prepare_sources([faces_dir / SOURCE])
    tracker = FaceTracker(video_swapper.swapper.analyser, detect_every=100)

    def plan(px, index, t):
        frame = VideoFrame(index=index, source_index=index, time=t, pixels=px)
        return video_swapper.plan_frame(frame, tracker, sources, None, {})

    first = plan(pixels, 0, 0.0)[0].colour
    soon = plan(darker, 1, 0.04)[0].colour  # within COLOUR_INTERVAL: the held colour, not measured again
    assert soon.target is first.target
    second = plan(darker, 2, 0.12)[0].colour
    lit, dark = first.target.mean[0], second.target.mean[0]
    tracker.reset()  # as at a scene cut: the tracks, and their held colours, start again
    alone = plan(darker, 3, 0.16)[0].colour.target.mean[0]
    assert alone < dark < lit  # moved towards the darker picture, but only part of the way
    assert (lit - dark) < 0.3 * (lit - alone)
    assert second.source is first.source  # measured once per source
