"""Decode a video frame by frame (:class:`VideoReader`), and parse ``--trim`` ranges."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Generator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Self

import av
import av.error
import cv2
import numpy as np

from faceweave.errors import InvalidOptionError, VideoTooLargeError
from faceweave.video.io.pictures import RgbPictures
from faceweave.video.io.probe import (
    OpenedInput,
    VideoInfo,
    file_url,
    first_video_stream,
    open_error,
)

#: a frame this much before a limit still counts as at the limit (float seconds)
TIME_EPS = 1e-6


@dataclass(frozen=True, eq=False)
class VideoFrame:
    """One decoded frame.

    ``index`` counts the frames yielded (0-based); ``source_index`` is the
    frame's place in the video's stream; ``time`` is seconds from the first
    frame of the video; ``pixels`` is ``(H, W, 3)`` uint8 RGB, read-only.
    """

    index: int
    source_index: int
    time: float
    pixels: np.ndarray


_CLOCK = re.compile(r"^(?:(?:(\d+):)?(\d+):)?(\d+(?:\.\d*)?|\.\d+)$")


def parse_trim(text: str) -> tuple[float, float | None]:
    """``"START-END"`` -> ``(start, end)`` seconds; an empty END means to the end.

    Times are seconds (``5``, ``5.5``) or ``[HH:]MM:SS[.frac]``: ``"5-20"``,
    ``"00:00:05-00:00:20"``, ``"1:02.5-1:10"``, ``"5.5-"``.  An empty START is 0.

    Raises:
        InvalidOptionError: not a time range, or END not after START.
    """
    parts = str(text).strip().split("-")
    usage = (
        f"--trim '{text}' is not a time range; use START-END in seconds or [HH:]MM:SS[.ms],"
        " e.g. 5-20, 00:00:05-00:00:20, 1:02.5-1:10, or 5.5- for the rest of the video"
    )
    if len(parts) != 2 or not (parts[0].strip() or parts[1].strip()):
        raise InvalidOptionError(usage)
    start = _seconds(parts[0], usage) if parts[0].strip() else 0.0
    end = _seconds(parts[1], usage) if parts[1].strip() else None
    if end is not None and end <= start:
        raise InvalidOptionError(f"--trim '{text}' ends before it starts; END must be after START")
    return start, end


def _seconds(text: str, usage: str) -> float:
    match = _CLOCK.match(text.strip())
    if match is None:
        raise InvalidOptionError(usage)
    hours, minutes, seconds = match.groups()
    if (minutes is not None and float(seconds) >= 60) or (hours is not None and int(minutes) >= 60):
        raise InvalidOptionError(usage)
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds)


class VideoReader:
    """Decode a video frame by frame: ``with VideoReader(path) as r: for f in r: ...``.

    Args:
        start, end: seconds; frames with ``start <= time < end`` are yielded.
            The reader seeks to the keyframe before ``start`` and skips up to it.
        fps: keep at most this many frames per second (a frame is kept when its
            time reaches the next slot; frames are never repeated).
        scale: resize factor in ``(0, 1]`` (cv2 INTER_AREA); when not 1 the size
            is rounded to even numbers.
        max_pixels: refuse videos with more pixels per frame than this.
        max_frames, max_seconds: refuse videos with more frames, or longer than
            this: on construction when the container states its length, and
            while decoding when it does not (or understates it): the frame
            that crosses a limit raises instead of being yielded.

    Decoding is streamed with FFmpeg's frame threads.  When the data breaks
    mid-way (corrupt or truncated file), iteration stops without an error and
    :attr:`broken_at` holds the seconds decoded up to the damage.
    :attr:`frames_read` counts the frames yielded, :attr:`frames_decoded` the
    frames decoded within ``[start, end)``, skipped ones included.  Iterate and
    close a reader in one thread.

    Raises (on construction): what :func:`probe_video` raises;
    :class:`InvalidOptionError` for bad options or a trim outside the video;
    :class:`VideoTooLargeError` (an :class:`ImageTooLargeError` and a
    :class:`LimitExceededError`) above ``max_pixels``, ``max_frames`` or
    ``max_seconds``; iteration raises it too, for the last two.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        start: float = 0.0,
        end: float | None = None,
        fps: float | None = None,
        scale: float = 1.0,
        max_pixels: int | None = None,
        max_frames: int | None = None,
        max_seconds: float | None = None,
    ) -> None:
        _check_reader_options(start, end, fps, scale, max_pixels)
        _check_length_limits(max_frames, max_seconds)
        self._max_frames, self._max_seconds = max_frames, max_seconds
        with OpenedInput(path, allow_gif=False) as opened:  # probed, first frame decoded
            self.info: VideoInfo = opened.info
            self._origin, self._turns = opened.origin, opened.quarter_turns
            self._stream_duration = opened.stream_duration
        self._check_limits(start, end, max_pixels)
        self._container, self._stream = self._open_fresh()
        self._start, self._end, self._fps, self._scale = float(start), end, fps, float(scale)
        self._size = _scaled_size(self.info.width, self.info.height, scale)
        self._rgb = RgbPictures()
        self.broken_at: float | None = None
        self.frames_read = 0
        self.frames_decoded = 0
        self._frames: Generator[VideoFrame, None, None] | None = None
        self._closed = False

    @property
    def frame_size(self) -> tuple[int, int]:
        """``(width, height)`` of the frames yielded."""
        return self._size

    @property
    def expected_frames(self) -> int | None:
        """About how many frames this reader yields (for progress), or ``None``."""
        if self.info.duration is None:
            return None
        stop = self.info.duration if self._end is None else min(self._end, self.info.duration)
        rate = float(self.info.fps) if self._fps is None else min(float(self.info.fps), self._fps)
        return max(1, math.ceil((stop - self._start) * rate - 1e-3))

    def _check_limits(self, start: float, end: float | None, max_pixels: int | None) -> None:
        info = self.info
        pixels = info.width * info.height
        if max_pixels is not None and pixels > max_pixels:
            raise VideoTooLargeError(
                f"video '{info.path}' is {info.width}x{info.height} = {pixels} pixels per frame, over the limit"
                f" of {max_pixels}; raise the pixel limit (max_pixels, --max-pixels) to accept it"
            )
        if self._max_seconds is not None and info.duration is not None and info.duration > self._max_seconds:
            raise VideoTooLargeError(
                f"video '{info.path}' is {info.duration:.1f} s long, over the limit of {self._max_seconds:g} s"
            )
        if self._max_frames is not None and info.frame_count is not None and info.frame_count > self._max_frames:
            raise VideoTooLargeError(
                f"video '{info.path}' has {info.frame_count} frames, over the limit of {self._max_frames}"
            )
        if info.duration is not None and start >= info.duration:
            shown = f"{start:.2f}-" + ("" if end is None else f"{end:.2f}")
            raise InvalidOptionError(
                f"--trim {shown} is outside the video '{info.path}' (duration {info.duration:.2f} s)"
            )

    # -- iteration ------------------------------------------------------------
    def __iter__(self) -> Self:
        return self

    def __next__(self) -> VideoFrame:
        if self._closed:
            raise StopIteration
        if self._frames is None:
            self._frames = self._decode()
        return next(self._frames)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Stop decoding and release the file; iteration then ends."""
        if self._closed:
            return
        self._closed = True
        if self._frames is not None:
            self._frames.close()
        self._container.close()

    def _decode(self) -> Generator[VideoFrame, None, None]:
        step = 1 / float(self.info.fps)
        seeking = self._start > 0 and self._seek()
        source_index, last_time, reached = -1, None, self._start
        last_slot, first_kept = -1, None
        try:
            for frame in self._container.decode(self._stream):
                time = self._time_of(frame, last_time, step)
                source_index = round(time / step) if seeking and source_index < 0 else source_index + 1
                last_time, reached = time, time + step
                if self._end is not None and time >= self._end - TIME_EPS:
                    return
                self.frames_decoded += 1
                self._check_decoded(time)
                if time < self._start - TIME_EPS:
                    continue
                if self._fps is not None:
                    first_kept = time if first_kept is None else first_kept
                    slot = math.floor((time - first_kept) * self._fps + TIME_EPS)
                    if slot <= last_slot:
                        continue
                    last_slot = slot
                pixels = self._pixels(frame)
                index, self.frames_read = self.frames_read, self.frames_read + 1
                yield VideoFrame(index=index, source_index=source_index, time=time, pixels=pixels)
        except av.error.FFmpegError:
            self.broken_at = reached
            return
        expected = self._stream_duration
        if expected is not None and self._end is not None:
            expected = min(expected, self._end)
        if expected is not None and expected - reached > max(2 * step, 0.25):
            self.broken_at = reached  # the data ended before the stream's own duration: truncated

    def _check_decoded(self, time: float) -> None:
        """Raise when the frames decoded so far cross a length limit (for
        containers that do not state their length, or understate it)."""
        path = self.info.path
        if self._max_frames is not None and self.frames_decoded > self._max_frames:
            raise VideoTooLargeError(f"video '{path}' has more than {self._max_frames} frames, the limit")
        if self._max_seconds is not None and time > self._max_seconds + TIME_EPS:
            raise VideoTooLargeError(f"video '{path}' is longer than {self._max_seconds:g} s, the limit")

    def _open_fresh(self):
        """A new container on the (already probed) file, and its video stream."""
        try:
            container = av.open(file_url(self.info.path), metadata_errors="replace")
        except av.error.FFmpegError as exc:
            raise open_error(Path(self.info.path), f"video '{self.info.path}'", exc) from None
        stream = first_video_stream(container, f"video '{self.info.path}'", allow_gif=False)
        stream.thread_type = "AUTO"
        return container, stream

    def _seek(self) -> bool:
        """Seek to the keyframe at or before ``start``; ``False`` when the container cannot seek."""
        target = self._origin + int(self._start / self._stream.time_base)
        try:
            self._container.seek(target, stream=self._stream, backward=True)
        except av.error.FFmpegError:
            self._container.close()
            self._container, self._stream = self._open_fresh()
            return False
        return True

    def _time_of(self, frame, last_time: float | None, step: float) -> float:
        pts = frame.pts if frame.pts is not None else frame.dts
        if pts is None:
            return 0.0 if last_time is None else last_time + step
        return float((pts - self._origin) * self._stream.time_base)

    def _pixels(self, frame) -> np.ndarray:
        """The frame as RGB, resized and turned for display, read-only."""
        rgb = self._rgb(frame)
        width, height = self._size if self._turns % 2 == 0 else self._size[::-1]
        if (rgb.shape[1], rgb.shape[0]) != (width, height):
            rgb = cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA)
        if self._turns:
            rgb = np.rot90(rgb, k=self._turns)
        out = np.ascontiguousarray(rgb)
        out.setflags(write=False)
        return out


def _check_reader_options(start, end, fps, scale, max_pixels) -> None:
    if not is_number(start) or not math.isfinite(start) or start < 0:
        raise InvalidOptionError(f"--trim start must be 0 or more seconds; got {start!r}")
    if end is not None and (not is_number(end) or end <= start):
        shown = f"{start:.2f}-{end}"
        raise InvalidOptionError(f"--trim {shown} ends before it starts; END must be after START")
    if fps is not None and (not is_number(fps) or not 0 < fps < math.inf):
        raise InvalidOptionError(f"--fps must be a positive number of frames per second; got {fps!r}")
    if not is_number(scale) or not 0 < scale <= 1:
        raise InvalidOptionError(f"--scale must be more than 0 and at most 1; got {scale!r}")
    if max_pixels is not None and not is_count(max_pixels):
        raise InvalidOptionError(f"max_pixels must be a positive integer; got {max_pixels!r}")


def _check_length_limits(max_frames, max_seconds) -> None:
    if max_frames is not None and not is_count(max_frames):
        raise InvalidOptionError(f"max_frames must be a positive integer; got {max_frames!r}")
    if max_seconds is not None and (not is_number(max_seconds) or not 0 < max_seconds < math.inf):
        raise InvalidOptionError(f"max_seconds must be a positive number of seconds; got {max_seconds!r}")


def is_number(value) -> bool:
    return isinstance(value, (int, float, Fraction)) and not isinstance(value, bool)


def is_count(value) -> bool:
    """A positive ``int`` (not a ``bool``)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _scaled_size(width: int, height: int, scale: float) -> tuple[int, int]:
    if scale == 1:
        return width, height
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)
