"""Split a video into frame ranges that workers process on their own.

:func:`scan_frames` reads the video stream's packets (no decoding) into a
:class:`FrameTable`: every frame's timestamp in presentation order and which
frames are keyframes.  :func:`plan_segments` cuts the frames into contiguous
:class:`Segment` ranges, at keyframes when one lies near the even split.
:func:`process_segment` decodes exactly one segment's frames, applies a
per-frame function and encodes them, video only, into a part file that
:func:`faceweave.video.concat.join_segments` concatenates without re-encoding.

A segment is a range of frame *indices*; the reader is given a time window
whose edges lie half a microsecond after the segment's first frame and after
the next segment's first frame, so that no float rounding can move a frame
across an edge, and every segment checks the frames it got against the plan.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

import av
import av.error
import numpy as np

from faceweave.errors import InvalidOptionError, UnreadableFileError
from faceweave.video.io import VideoFrame, VideoReader, VideoWriter, probe_video
from faceweave.video.io.probe import file_url, first_video_stream, open_error
from faceweave.video.io.reader import TIME_EPS

#: the reader's window starts this long after a segment's first frame (well inside TIME_EPS)
_NUDGE = TIME_EPS / 2
#: default least number of frames in a segment
MIN_FRAMES = 24


@dataclass(frozen=True, eq=False)
class FrameTable:
    """Every frame of a video stream, in presentation order.

    Attributes:
        path: the video.
        pts: ``(N,)`` int64 timestamps in ``time_base`` units, increasing.
        keyframes: ``(N,)`` bool, True where a frame can be decoded on its own.
        time_base: the stream's time unit in seconds.
        origin: the timestamp of time 0 (the stream's start, as the reader counts).
        frame_duration: the last frame's duration in ``time_base`` units.
    """

    path: str
    pts: np.ndarray
    keyframes: np.ndarray
    time_base: Fraction
    origin: int
    frame_duration: int

    def __len__(self) -> int:
        return int(self.pts.shape[0])

    def time(self, index: int) -> float:
        """Seconds from time 0 of frame ``index`` (``len(self)``: the end of the last frame),
        computed exactly as :class:`VideoReader` computes :attr:`VideoFrame.time`."""
        if index == len(self):
            return float((int(self.pts[-1]) + self.frame_duration - self.origin) * self.time_base)
        return float((int(self.pts[index]) - self.origin) * self.time_base)


@dataclass(frozen=True)
class Segment:
    """Frames ``start_frame <= i < end_frame`` of a video, shown from
    ``start_time`` (the first frame's time) until ``end_time`` (the next
    segment's first frame, or the end of the last frame), in seconds.
    ``keyframe``: the first frame is a keyframe, so decoding starts there;
    otherwise it starts at the keyframe before and drops the frames ahead."""

    index: int
    start_frame: int
    end_frame: int
    start_time: float
    end_time: float
    keyframe: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.start_frame < self.end_frame or not self.start_time < self.end_time:
            raise InvalidOptionError(
                f"segment {self.index} must hold at least one frame; got frames {self.start_frame}-{self.end_frame},"
                f" times {self.start_time}-{self.end_time}"
            )

    @property
    def frames(self) -> int:
        return self.end_frame - self.start_frame

    @property
    def window(self) -> tuple[float, float]:
        """``(start, end)`` for :class:`VideoReader`: exactly this segment's frames."""
        start = 0.0 if self.start_time <= 0 else self.start_time + _NUDGE
        return start, self.end_time + _NUDGE


@dataclass(frozen=True)
class SegmentPart:
    """A processed segment: ``frames`` frames, video only, in ``path``."""

    segment: Segment
    path: Path
    frames: int


def scan_frames(video: str | os.PathLike[str]) -> FrameTable:
    """Read the packets of ``video``'s video stream (no decoding) into a :class:`FrameTable`.

    Raises: what :func:`probe_video` raises (missing, corrupt, not a video);
    :class:`UnreadableFileError` when the packets cannot be read.
    """
    info = probe_video(video)
    what = f"video '{info.path}'"
    try:
        container = av.open(file_url(info.path), metadata_errors="replace")
    except av.error.FFmpegError as exc:
        raise open_error(Path(info.path), what, exc) from None
    pts: list[int] = []
    keys: list[bool] = []
    duration = 0
    try:
        stream = first_video_stream(container, what, allow_gif=False)
        try:
            for packet in container.demux(stream):
                if packet.pts is None or not packet.size or packet.is_discard:
                    continue
                pts.append(packet.pts)
                keys.append(bool(packet.is_keyframe))
                duration = packet.duration or duration
        except av.error.FFmpegError as exc:
            raise UnreadableFileError(f"{what} is damaged: its packets cannot be read ({exc.strerror})") from None
        time_base = Fraction(stream.time_base)
        origin = stream.start_time
    finally:
        container.close()
    if not pts:
        raise UnreadableFileError(f"{what} has no video packets with timestamps")
    order = np.argsort(np.asarray(pts, np.int64), kind="stable")
    table_pts = np.asarray(pts, np.int64)[order]
    if np.any(np.diff(table_pts) <= 0):
        raise UnreadableFileError(f"{what} has frames with repeated timestamps; it cannot be split into segments")
    if duration <= 0:
        duration = max(1, round(1 / (info.fps * time_base)))
    table_keys = np.asarray(keys, bool)[order]
    table_pts.setflags(write=False)
    table_keys.setflags(write=False)
    return FrameTable(
        path=info.path,
        pts=table_pts,
        keyframes=table_keys,
        time_base=time_base,
        origin=int(table_pts[0]) if origin is None else int(origin),
        frame_duration=int(duration),
    )


def plan_segments(
    video: str | os.PathLike[str] | FrameTable,
    *,
    segments: int | None = None,
    min_frames: int = MIN_FRAMES,
    start: float = 0.0,
    end: float | None = None,
) -> tuple[Segment, ...]:
    """Cut the frames with ``start <= time < end`` into contiguous segments.

    Every frame in the range is in exactly one segment, in order.  Boundaries
    are the even split of the frames, moved to a keyframe when one lies within
    a quarter of a segment's length of it (each worker then decodes from a
    keyframe); otherwise a boundary is an exact frame index.

    Args:
        segments: how many segments; ``None``: as many as hold ``min_frames``
            each.  More than the frames allow is clamped: the plan then has
            ``max(1, frames // min_frames)`` segments (so check ``len()``).
        min_frames: the fewest frames in a segment (the last frames of a short
            video make one segment even when fewer).
        start, end: seconds, as :class:`VideoReader` takes them (``--trim``).

    Raises:
        InvalidOptionError: ``segments`` or ``min_frames`` below 1, or a range
            that holds no frame of the video.
        and what :func:`scan_frames` raises.
    """
    if segments is not None and (isinstance(segments, bool) or not isinstance(segments, int) or segments < 1):
        raise InvalidOptionError(f"segments must be a whole number of at least 1; got {segments!r}")
    if isinstance(min_frames, bool) or not isinstance(min_frames, int) or min_frames < 1:
        raise InvalidOptionError(f"min_frames must be a whole number of at least 1; got {min_frames!r}")
    if not isinstance(start, (int, float)) or start < 0 or (end is not None and end <= start):
        raise InvalidOptionError(f"segment range {start!r}-{end!r} is not a time range")
    table = video if isinstance(video, FrameTable) else scan_frames(video)
    times = np.array([table.time(i) for i in range(len(table))])
    first = int(np.searchsorted(times, start - TIME_EPS, side="left"))
    last = len(table) if end is None else int(np.searchsorted(times, end - TIME_EPS, side="left"))
    if last <= first:
        shown = f"{start:.3f}-" + ("" if end is None else f"{end:.3f}")
        raise InvalidOptionError(
            f"range {shown} s holds no frame of video '{table.path}' (duration {table.time(len(table)):.3f} s)"
        )
    count = last - first
    wanted = max(1, count // min_frames) if segments is None else min(segments, max(1, count // min_frames))
    cuts = _boundaries(table.keyframes[first:last], wanted, min_frames)
    edges = [first + c for c in cuts] + [last]
    return tuple(
        Segment(
            index=k,
            start_frame=a,
            end_frame=b,
            start_time=table.time(a),
            end_time=table.time(b),
            keyframe=bool(table.keyframes[a]),
        )
        for k, (a, b) in enumerate(pairwise(edges))
    )


def _boundaries(keyframes: np.ndarray, segments: int, min_frames: int) -> list[int]:
    """First frame of each of ``segments`` segments of ``len(keyframes)`` frames
    (``segments * min_frames <= len`` unless ``segments`` is 1): the even split,
    each cut moved to the nearest keyframe within a quarter segment when that
    keeps every segment at least ``min_frames`` long."""
    count = len(keyframes)
    keys = np.flatnonzero(keyframes)
    reach = count / segments / 4
    cuts = [0]
    for k in range(1, segments):
        even = round(k * count / segments)
        low = cuts[-1] + min_frames
        high = count - (segments - k) * min_frames
        near = [int(c) for c in keys if low <= c <= high and abs(c - even) <= reach]
        cuts.append(min(near, key=lambda c: (abs(c - even), c)) if near else min(max(even, low), high))
    return cuts


#: a per-frame function: the frame (``index``: its place in the whole video) -> ``(H, W, 3)`` uint8 RGB
FrameFunction = Callable[[VideoFrame], np.ndarray]


def process_segment(
    video: str | os.PathLike[str],
    segment: Segment,
    output: str | os.PathLike[str],
    frame_fn: FrameFunction,
    *,
    codec: str = "h264",
    quality: int = 18,
    preset: str = "veryfast",
    scale: float = 1.0,
) -> SegmentPart:
    """Decode exactly ``segment``'s frames, pass each through ``frame_fn`` and
    encode the results, video only, into ``output`` (a part).

    ``frame_fn`` gets each :class:`VideoFrame` with ``index`` and
    ``source_index`` set to the frame's index in the whole video.  The part
    has the input's frame rate and time base, starts with a keyframe at time
    0, and is H.264/H.265 for ``.mp4``/``.mkv`` parts or VP9 for ``.webm``
    parts; it appears under ``output`` only when complete.

    Raises:
        UnreadableFileError: the frames decoded are not the segment's frames
            (fewer, more, or at other times: a damaged file); nothing is written.
        and what :class:`VideoReader`, :class:`VideoWriter` and ``frame_fn`` raise.
    """
    start, end = segment.window
    with (
        VideoReader(video, start=start, end=end, scale=scale) as reader,
        VideoWriter(output, info=reader.info, codec=codec, quality=quality, preset=preset) as writer,
    ):
        count = 0
        for frame in reader:
            index = segment.start_frame + count
            if count == 0 and abs(frame.time - segment.start_time) > float(reader.info.time_base) / 2:
                raise _mismatch(reader.info.path, segment, f"it starts at {frame.time:.6f} s")
            if count >= segment.frames:
                raise _mismatch(reader.info.path, segment, "it has more frames")
            frame = VideoFrame(index=index, source_index=index, time=frame.time, pixels=frame.pixels)
            writer.write(np.asarray(frame_fn(frame)), frame.time)
            count += 1
        if count != segment.frames:
            where = f" (decoding broke at {reader.broken_at:.3f} s)" if reader.broken_at is not None else ""
            raise _mismatch(reader.info.path, segment, f"only {count} decode{where}")
    return SegmentPart(segment=segment, path=Path(output), frames=count)


def _mismatch(path: str, segment: Segment, detail: str) -> UnreadableFileError:
    return UnreadableFileError(
        f"video '{path}': segment {segment.index} should hold frames {segment.start_frame}-{segment.end_frame - 1}"
        f" ({segment.frames} frames from {segment.start_time:.6f} s) but {detail}; the file is damaged or its"
        " timestamps are inconsistent"
    )
