"""Segment-parallel video: plan frame ranges, process each on its own, join
them frame-exact with the audio intact (real clips from ../shared/data/faces)."""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise

import av
import numpy as np
import pytest

from faceweave.errors import InvalidOptionError, UnreadableFileError, UnsupportedFormatError
from faceweave.video.concat import join_segments
from faceweave.video.io import VideoReader, VideoWriter, probe_video
from faceweave.video.segments import (
    Segment,
    SegmentPart,
    _boundaries,
    plan_segments,
    process_segment,
    scan_frames,
)

TALK = "video/lp_d18_talking_face.mp4"  # 216 frames, 30 fps, AAC audio, one keyframe
HAMILTON = "video/short_hamilton_clip.mp4"  # 275 frames, 29.97 fps, no audio, keyframes 0 60 120 163 211 271
PEDESTRIANS = "video/fn_pedestrians_1080p.mp4"  # 105 frames, 25 fps, 1080p

BITS, BLOCK = 10, 12  # the frame index as 10 black/white 12x12 blocks in the top-left corner


def stamp(frame) -> np.ndarray:
    """The frame with its index written into the top-left corner."""
    pixels = frame.pixels.copy()
    for bit in range(BITS):
        pixels[:BLOCK, bit * BLOCK : (bit + 1) * BLOCK] = 255 if frame.index >> bit & 1 else 0
    return pixels


def stamped_index(pixels: np.ndarray) -> int:
    """The index :func:`stamp` wrote (read from the blocks' centres, robust to compression)."""
    c = BLOCK // 4
    return sum(
        1 << bit for bit in range(BITS) if pixels[c : BLOCK - c, bit * BLOCK + c : (bit + 1) * BLOCK - c].mean() > 128
    )


def decoded(path) -> tuple[list[np.ndarray], list[float]]:
    with VideoReader(path) as reader:
        frames = list(reader)
    return [f.pixels for f in frames], [f.time for f in frames]


def video_times(path) -> tuple[list[float], Fraction]:
    """Presentation times of every video packet (seconds from the first), and the stream's tick."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        pts = sorted(p.pts for p in container.demux(stream) if p.size)
        tb = Fraction(stream.time_base)
    return [float((p - pts[0]) * tb) for p in pts], tb


def audio_seconds(path) -> tuple[float, float] | None:
    """``(duration, one audio frame)`` in seconds of the first audio stream, by
    counting its decoded samples, or ``None`` when there is no audio."""
    with av.open(str(path)) as container:
        if not container.streams.audio:
            return None
        frames = list(container.decode(audio=0))
    rate = frames[0].sample_rate
    return sum(f.samples for f in frames) / rate, max(f.samples for f in frames) / rate


def split_and_join(video, plan, tmp_path, output, *, fn=stamp, **join):
    parts = [process_segment(video, s, tmp_path / f"part{s.index}.mp4", fn) for s in plan]
    return parts, join_segments(parts, output, **join)


# -- planning -----------------------------------------------------------------
@pytest.mark.parametrize("clip, frames", [(TALK, 216), (HAMILTON, 275), (PEDESTRIANS, 105)])
@pytest.mark.parametrize("count", [1, 2, 3, 4, 5])
def test_plan_covers_every_frame_once_in_order(faces_dir, clip, frames, count):
    table = scan_frames(faces_dir / clip)
    assert len(table) == frames
    plan = plan_segments(table, segments=count)
    assert len(plan) == min(count, frames // 24)  # 105 frames hold at most 4 segments of 24
    covered = [i for s in plan for i in range(s.start_frame, s.end_frame)]
    assert covered == list(range(frames))
    assert [s.index for s in plan] == list(range(len(plan)))
    assert all(s.frames >= 24 for s in plan)
    for before, after in pairwise(plan):
        assert before.end_time == after.start_time
    assert plan[0].start_time == 0.0
    assert plan[-1].end_time == pytest.approx(probe_video(faces_dir / clip).duration, abs=1e-6)


def test_plan_prefers_keyframes_near_the_even_split(faces_dir):
    plan = plan_segments(faces_dir / HAMILTON, segments=2)  # even split 138; keyframe 120 is 18 away
    assert [(s.start_frame, s.end_frame, s.keyframe) for s in plan] == [(0, 120, True), (120, 275, True)]
    plan = plan_segments(faces_dir / HAMILTON, segments=3)  # 92 (none within 23) and 183 -> keyframe 163
    assert [(s.start_frame, s.keyframe) for s in plan] == [(0, True), (92, False), (163, True)]
    assert plan[1].start_time == pytest.approx(92 * 1001 / 30000 * 0.999, rel=2e-3)  # 29.97 fps
    talk = plan_segments(faces_dir / TALK, segments=2)  # keyframe 0 only: an exact frame range
    assert [(s.start_frame, s.keyframe, s.start_time) for s in talk] == [(0, True, 0.0), (108, False, 3.6)]


@pytest.mark.parametrize(
    "keys, segments, min_frames, expected",
    [
        ([0], 4, 1, [0, 25, 50, 75]),  # no keyframes: the even split
        ([0, 40, 70], 2, 1, [0, 40]),  # 40 is 10 from 50, within a quarter segment (12.5)
        ([0, 37, 90], 2, 1, [0, 50]),  # none within 12.5 of 50
        ([0, 48, 52], 2, 1, [0, 48]),  # the nearest; a tie goes to the earlier
        ([0, 27, 45], 3, 30, [0, 33, 67]),  # 27 would leave the first segment under 30 frames
        ([0, 26, 30], 4, 25, [0, 25, 50, 75]),  # 26 would leave the last segments under 25
        ([0, 30, 62, 90], 3, 1, [0, 30, 62]),  # both cuts at keyframes (33 -> 30, 67 -> 62)
    ],
)
def test_boundaries_table(keys, segments, min_frames, expected):
    flags = np.zeros(100, bool)
    flags[keys] = True
    assert _boundaries(flags, segments, min_frames) == expected


def test_plan_of_a_trim_range(faces_dir):
    plan = plan_segments(faces_dir / TALK, segments=2, start=2.0, end=5.0)  # frames 60..149 at 30 fps
    assert [(s.start_frame, s.end_frame) for s in plan] == [(60, 105), (105, 150)]
    assert plan[0].start_time == 2.0 and plan[-1].end_time == 5.0


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"segments": 0}, InvalidOptionError),
        ({"segments": -1}, InvalidOptionError),
        ({"segments": 2.5}, InvalidOptionError),
        ({"min_frames": 0}, InvalidOptionError),
        ({"start": 9.0}, InvalidOptionError),  # after the end of a 7.2 s video
        ({"start": 3.0, "end": 2.0}, InvalidOptionError),
    ],
)
def test_plan_refuses_bad_options(faces_dir, kwargs, expected):
    with pytest.raises(expected):
        plan_segments(faces_dir / TALK, **kwargs)


def test_more_segments_than_frames_are_clamped(faces_dir):
    assert len(plan_segments(faces_dir / PEDESTRIANS, segments=1000, min_frames=1)) == 105
    assert len(plan_segments(faces_dir / PEDESTRIANS, segments=1000)) == 4  # 105 // 24
    assert len(plan_segments(faces_dir / PEDESTRIANS, segments=3, min_frames=200)) == 1


def test_plan_refuses_a_file_that_is_not_a_video(tmp_path):
    bad = tmp_path / "x.mp4"
    bad.write_bytes(b"not a video at all" * 100)
    with pytest.raises(UnsupportedFormatError):
        plan_segments(bad, segments=2)


# -- split, process, join -----------------------------------------------------
def test_split_process_join_is_frame_exact_with_audio(tmp_path, faces_dir):
    video = faces_dir / TALK
    plan = plan_segments(video, segments=3)  # exact frame ranges: 0, 72, 144 (no keyframe there)
    parts, joined = split_and_join(video, plan, tmp_path, tmp_path / "out.mp4", audio_from=video)
    assert [p.frames for p in parts] == [72, 72, 72]
    assert joined.frames == 216 and joined.audio == "copied"
    info, source = probe_video(joined.output), probe_video(video)
    shape = (info.frame_count, info.fps, info.time_base, info.width, info.height)
    assert shape == (216, 30, source.time_base, 480, 480)
    # frame times equal the input's, within one tick
    out_times, tick = video_times(joined.output)
    in_times, _ = video_times(video)
    assert len(out_times) == len(in_times) == 216
    assert max(abs(a - b) for a, b in zip(out_times, in_times, strict=False)) <= float(tick)
    # the audio is the input's, whole
    (out_audio, frame), (in_audio, _) = audio_seconds(joined.output), audio_seconds(video)
    assert abs(out_audio - in_audio) <= frame
    # frame i came from frame i: nothing duplicated or dropped at a boundary
    frames, _ = decoded(joined.output)
    assert [stamped_index(f) for f in frames] == list(range(216))
    # and equals a single-pass encode of the same frames within compression error
    single = tmp_path / "single.mp4"
    with VideoReader(video) as reader, VideoWriter(single, info=reader.info, quality=18) as writer:
        for frame in reader:
            writer.write(stamp(frame), frame.time)
    reference, _ = decoded(single)
    diffs = [np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(frames, reference, strict=False)]
    assert len(reference) == 216 and max(diffs) < 2.0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["out.mp4", "part0.mp4", "part1.mp4", "part2.mp4", "single.mp4"]  # no temporary files left


def test_parts_start_with_a_keyframe_at_time_zero(tmp_path, faces_dir):
    video = faces_dir / TALK
    segment = plan_segments(video, segments=3)[1]
    part = process_segment(video, segment, tmp_path / "p.mkv", lambda f: f.pixels)
    with av.open(str(part.path)) as container:
        stream = container.streams.video[0]
        packets = [p for p in container.demux(stream) if p.size]
        first = packets[0]  # in decode order
        assert first.is_keyframe and first.pts == min(p.pts for p in packets) == 0
        assert len(container.streams.audio) == 0 and len(packets) == 72
    assert probe_video(part.path).fps == 30


def test_the_29_97_clip_without_audio_joins_into_mkv(tmp_path, faces_dir):
    video = faces_dir / HAMILTON
    plan = plan_segments(video, segments=3)  # 0, 92 (exact range), 163 (keyframe)
    _, joined = split_and_join(video, plan, tmp_path, tmp_path / "out.mkv", audio_from=video)
    assert joined.frames == 275 and joined.audio is None
    info = probe_video(joined.output)
    assert info.fps == Fraction(2997, 100) and not info.has_audio and info.frame_count == 275
    out_times, tick = video_times(joined.output)
    in_times, _ = video_times(video)
    assert tick == Fraction(1, 1000)  # Matroska counts milliseconds
    assert max(abs(a - b) for a, b in zip(out_times, in_times, strict=False)) <= 0.0005 + 1e-9
    frames, _ = decoded(joined.output)
    assert [stamped_index(f) for f in frames] == list(range(275))


def test_a_trim_range_joins_with_its_audio(tmp_path, faces_dir):
    video = faces_dir / TALK
    plan = plan_segments(video, segments=2, start=2.0, end=5.0)
    _, joined = split_and_join(video, plan, tmp_path, tmp_path / "out.mp4", audio_from=video, start=2.0, end=5.0)
    assert joined.frames == 90 and joined.duration == pytest.approx(3.0)
    frames, times = decoded(joined.output)
    assert [stamped_index(f) for f in frames] == list(range(60, 150))
    assert times == pytest.approx([i / 30 for i in range(90)], abs=1e-6)
    seconds, frame = audio_seconds(joined.output)
    assert abs(seconds - 3.0) <= frame


def test_identity_processing_keeps_the_pictures(tmp_path, faces_dir):
    video = faces_dir / PEDESTRIANS
    plan = plan_segments(video, segments=2, end=0.6)  # 15 frames of 1080p: one segment (fewer than 24)
    assert [(s.start_frame, s.end_frame) for s in plan] == [(0, 15)]
    plan = plan_segments(video, segments=2, end=0.6, min_frames=5)
    _, joined = split_and_join(video, plan, tmp_path, tmp_path / "out.mp4", fn=lambda f: f.pixels)
    frames, _ = decoded(joined.output)
    with VideoReader(video, end=0.6) as reader:
        originals = [f.pixels for f in reader]
    assert len(frames) == len(originals) == 15
    assert max(np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(frames, originals, strict=False)) < 3.0


# -- join errors --------------------------------------------------------------
@pytest.fixture(scope="module")
def talk_parts(tmp_path_factory, faces_dir):
    folder = tmp_path_factory.mktemp("parts")
    video = faces_dir / TALK
    plan = plan_segments(video, segments=3, end=2.4, min_frames=8)  # 72 frames, 24 a part
    return [process_segment(video, s, folder / f"part{s.index}.mp4", lambda f: f.pixels) for s in plan]


def test_a_missing_part_is_a_clear_error_and_writes_nothing(tmp_path, talk_parts):
    missing = SegmentPart(segment=talk_parts[1].segment, path=tmp_path / "gone.mp4", frames=24)
    with pytest.raises(UnreadableFileError, match="segment part 1 .*frames 24-47.*does not exist"):
        join_segments([talk_parts[0], missing, talk_parts[2]], tmp_path / "out.mp4")
    assert list(tmp_path.iterdir()) == []


def test_a_part_with_other_frames_than_its_segment_is_refused(tmp_path, talk_parts):
    wrong = SegmentPart(segment=Segment(1, 24, 50, 0.8, 50 / 30), path=talk_parts[1].path, frames=26)
    last = SegmentPart(segment=Segment(2, 50, 72, 50 / 30, 2.4), path=talk_parts[2].path, frames=22)
    with pytest.raises(UnreadableFileError, match="holds 24 frames but its segment has 26"):
        join_segments([talk_parts[0], wrong, last], tmp_path / "out.mp4")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "order, output, expected",
    [
        ([], "out.mp4", InvalidOptionError),  # nothing to join
        ([0, 2], "out.mp4", InvalidOptionError),  # a gap
        ([1, 0, 2], "out.mp4", InvalidOptionError),  # out of order
        ([0, 1, 2], "out.gif", InvalidOptionError),  # a join cannot write GIF
        ([0, 1, 2], "out.webm", UnreadableFileError),  # WebM takes VP9 parts, these are H.264
    ],
)
def test_join_refuses(tmp_path, talk_parts, order, output, expected):
    with pytest.raises(expected):
        join_segments([talk_parts[i] for i in order], tmp_path / output)
    assert list(tmp_path.iterdir()) == []


def test_joining_into_an_existing_name_replaces_it_only_when_complete(tmp_path, talk_parts, faces_dir):
    out = tmp_path / "out.mov"
    out.write_bytes(b"old")
    broken = SegmentPart(segment=talk_parts[2].segment, path=tmp_path / "nope.mp4", frames=24)
    with pytest.raises(UnreadableFileError):
        join_segments([*talk_parts[:2], broken], out)
    assert out.read_bytes() == b"old"
    joined = join_segments(talk_parts, out, audio_from=faces_dir / TALK)
    assert joined.frames == 72 and probe_video(out).frame_count == 72 and probe_video(out).has_audio
    assert [p.name for p in tmp_path.iterdir()] == ["out.mov"]


def test_vp9_parts_join_into_webm_with_opus_audio(tmp_path, faces_dir):
    video = faces_dir / TALK
    plan = plan_segments(video, segments=2, end=1.0, min_frames=8)
    parts = [process_segment(video, s, tmp_path / f"p{s.index}.webm", stamp) for s in plan]
    joined = join_segments(parts, tmp_path / "out.webm", audio_from=video, end=1.0)
    info = probe_video(joined.output)
    assert (joined.frames, joined.audio, info.codec, info.audio_codec) == (30, "encoded", "vp9", "opus")
    frames, _ = decoded(joined.output)
    assert [stamped_index(f) for f in frames] == list(range(30))
    seconds, frame = audio_seconds(joined.output)
    assert abs(seconds - 1.0) <= frame


# -- the whole run, with a stand-in swapper (no models) -------------------------
class CopySwapper:
    """Stands in for :class:`VideoSwapper`: stamps each frame with its index in the
    30 fps clip; fails on the segment that starts after ``fail_after`` seconds."""

    def __init__(self, log: list, fail_after: float | None = None) -> None:
        from types import SimpleNamespace

        self.log, self.fail_after = log, fail_after
        self.swapper = SimpleNamespace(close=lambda: log.append(("closed", id(self))), options=None)

    def prepare_sources(self, sources):
        return list(sources)

    def marked(self, options):
        return options

    def swap_video(self, sources, target, output, *, reference=None, options, stop=None, progress=None):
        from faceweave.errors import OutputError
        from faceweave.video.io import VideoFrame
        from faceweave.video.pipeline import VideoSwapReport

        self.log.append(("swap", id(self), options.start, options.audio))
        if self.fail_after is not None and options.start > self.fail_after:
            raise OutputError("disk full")
        with (
            VideoReader(target, start=options.start, end=options.end) as reader,
            VideoWriter(output, info=reader.info) as writer,
        ):
            for f in reader:
                index = round(f.time * 30)
                writer.write(stamp(VideoFrame(index, index, f.time, f.pixels)), f.time)
                if progress is not None:
                    progress(reader.frames_read, None)
        return VideoSwapReport(output, reader.frames_read, 0, 0, 0, 1.0, reader.broken_at)


def test_swap_video_segmented_runs_each_worker_on_its_own_swapper(tmp_path, faces_dir):
    from faceweave.video.pipeline import VideoOptions
    from faceweave.video.segmented import swap_video_segmented

    log: list = []
    main = CopySwapper(log)
    report = swap_video_segmented(
        main,
        ["me.jpg"],
        faces_dir / TALK,
        tmp_path / "out.mkv",
        segments=3,
        workers=2,
        options=VideoOptions(start=1.0, end=4.0),
        make_swapper=lambda: CopySwapper(log),
        min_frames=8,
    )
    assert report.frames == 90 and report.workers == 2 and report.audio == "copied"
    assert [(s.start_frame, s.end_frame) for s in report.segments] == [(30, 60), (60, 90), (90, 120)]
    swaps = [entry for entry in log if entry[0] == "swap"]
    assert len(swaps) == 3 and not any(audio for *_, audio in swaps)  # parts are video only
    assert len({entry[1] for entry in swaps}) <= 2  # two swappers, one per worker
    assert [e for e in log if e[0] == "closed"] and ("closed", id(main)) not in log  # extras closed, not the caller's
    frames, _ = decoded(report.output)
    assert [stamped_index(f) for f in frames] == list(range(30, 120))
    seconds, frame = audio_seconds(report.output)
    assert abs(seconds - 3.0) <= frame
    assert [p.name for p in tmp_path.iterdir()] == ["out.mkv"]  # the parts' folder is gone


def test_a_failing_segment_fails_the_run_and_leaves_nothing(tmp_path, faces_dir):
    from faceweave.errors import OutputError
    from faceweave.video.segmented import swap_video_segmented

    log: list = []
    with pytest.raises(OutputError, match="disk full"):
        swap_video_segmented(
            CopySwapper(log, fail_after=3.0),
            [],
            faces_dir / TALK,
            tmp_path / "out.mp4",
            segments=2,
            workers=2,
            make_swapper=lambda: CopySwapper(log, fail_after=3.0),
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"segments": 0}, InvalidOptionError),
        ({"workers": 0}, InvalidOptionError),
        ({"executor": "fork"}, InvalidOptionError),
        ({"output": "out.gif"}, InvalidOptionError),
        ({"options_fps": 10.0}, InvalidOptionError),
    ],
)
def test_swap_video_segmented_refuses_before_any_work(tmp_path, faces_dir, kwargs, expected):
    from faceweave.video.pipeline import VideoOptions
    from faceweave.video.segmented import swap_video_segmented

    output = tmp_path / kwargs.pop("output", "out.mp4")
    options = VideoOptions(fps=kwargs.pop("options_fps", None))
    with pytest.raises(expected):
        swap_video_segmented(CopySwapper([]), [], faces_dir / TALK, output, options=options, **kwargs)
    assert list(tmp_path.iterdir()) == []


# -- with the real swapper ------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("executor", ["thread", "process"])
def test_real_video_swapper_in_segments(tmp_path, faces_dir, executor):
    from functools import partial

    from faceweave.options import SelectionOptions, SwapOptions
    from faceweave.pipeline import FaceSwapper
    from faceweave.video.pipeline import VideoOptions, VideoSwapper
    from faceweave.video.segmented import swap_video_segmented, video_swapper_from_options

    options = SwapOptions(selection=SelectionOptions(mode="many"))
    with FaceSwapper(options) as swapper:
        report = swap_video_segmented(
            VideoSwapper(swapper),
            [faces_dir / "single/biden2.jpg"],
            faces_dir / TALK,
            tmp_path / "out.mp4",
            segments=2,
            workers=2,
            executor=executor,
            options=VideoOptions(start=1.0, end=2.0),
            min_frames=8,
            make_swapper=partial(video_swapper_from_options, options),
        )
    assert report.frames == 30 and [r.frames for r in report.reports] == [15, 15]
    assert all(r.frames_with_swap == 15 for r in report.reports)  # each segment detects on its first frame
    info = probe_video(report.output)
    assert info.frame_count == 30 and info.has_audio
    swapped, _ = decoded(report.output)
    original, _ = decoded(faces_dir / TALK)
    for k in (0, 14, 15, 29):  # both sides of the boundary
        diff = np.abs(swapped[k].astype(int) - original[30 + k].astype(int))
        h, w = diff.shape[:2]
        assert diff[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4].mean() > 8  # the face changed
        assert diff[: h // 10, : w // 10].mean() < 6  # the corner did not


def test_a_segment_reports_its_frames_while_it_runs(tmp_path, faces_dir):
    """swap_segment's progress hook: the segment's frames written so far, rising
    to all of them, before it returns (what a worker's heartbeat stores)."""
    from faceweave.video.pipeline import VideoOptions
    from faceweave.video.segmented import swap_segment

    segment = plan_segments(faces_dir / TALK, segments=3, min_frames=8)[1]
    seen: list[int] = []
    part, report = swap_segment(
        CopySwapper([]),
        ["me.jpg"],
        faces_dir / TALK,
        segment,
        tmp_path / "part.mkv",
        options=VideoOptions(),
        progress=seen.append,
    )
    assert report.frames == segment.frames and part.frames == segment.frames
    assert len(seen) == segment.frames and seen == sorted(seen) and seen[0] >= 1 and seen[-1] == segment.frames
