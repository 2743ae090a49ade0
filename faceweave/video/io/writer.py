"""Encode frames into a video, GIF or PNG frames as they come (:class:`VideoWriter`)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Self

import av
import av.error
import cv2
import numpy as np

from faceweave.errors import InputError, InvalidOptionError, OutputError
from faceweave.video.io.audio import AudioSource
from faceweave.video.io.formats import (
    AUDIO_ENCODERS,
    GIF_MAX_FPS,
    GIF_TIME_BASE,
    H265_KINDS,
    X264_PRESETS,
    check_video_output,
)
from faceweave.video.io.probe import VideoInfo
from faceweave.video.io.reader import TIME_EPS, is_count, is_number
from faceweave.video.io.sinks import AvSink, FrameMarker, LumaMarker, PngSink, error_reason

__all__ = ["FrameMarker", "LumaMarker", "VideoWriter"]


class VideoWriter:
    """Encode frames into a video (or PNG frames) as they come.

    ``with VideoWriter(path, info=reader.info) as w: w.write(pixels, time)``

    Args:
        info: the input video; its frame rate, time base and pixel aspect are kept.
        fps: the output frame rate when frames were dropped (default: ``info.fps``);
            frames that come faster are dropped as :class:`VideoReader` drops them.
        codec: ``"h264"`` or ``"h265"`` (MP4, MOV, MKV); WebM is always VP9.
        quality: CRF 0 (best) .. 51; VP9's CRF is ``round(1.4 * quality)`` (max 63).
        preset: an x264 preset name; VP9 maps it to a deadline and cpu-used.
        audio_from: a file whose first audio stream goes into the output, copied
            when the container takes its codec, else re-encoded (AAC; Opus for WebM).
            GIF and PNG outputs have no audio.
        audio_start, audio_end: source seconds of audio to take.  Audio at source
            time ``t`` plays at ``t - t0``: ``t0`` is the time of the first frame
            written when times are given to :meth:`write`, else ``audio_start``.
        audio_at_start: ``audio_start`` plays at the output's start, whatever
            the frames' times (a dub laid over a trimmed video).
        size: output ``(width, height)``; frames of another size are resized.
            Default: the first frame's size.
        gif_max_side: GIF frames are shrunk so that their longest side is at most this.
        frame_marker: an object whose ``mark(pixels) -> pixels`` is applied to
            every frame as it will be encoded (after resizing and padding), e.g.
            an invisible watermark (:func:`faceweave.provenance.stamp.writer_stamp`);
            a :class:`LumaMarker` marks the Y plane of H.264/H.265/VP9 frames instead.
        metadata: container tags (``{key: text}``) for MP4/MOV (custom keys kept
            with ``movflags=use_metadata_tags``), MKV and WebM; GIF and PNG outputs
            have no container tags and ignore them.

    Frame times given to :meth:`write` become the timestamps (so a variable
    frame rate is kept); without them frames are ``1 / fps`` apart.  GIFs keep
    every n-th frame for at most 15 fps.  H.264/H.265/VP9 use yuv420p, which
    needs an even size: an odd width or height is padded by one pixel,
    repeating the last column or row.  Colours are tagged BT.709 from 720
    lines up, else BT.601.  WebM does not keep a non-square pixel aspect.  The
    output appears under ``path`` only once :meth:`close` (the end of the
    ``with`` block) completes; on an error, KeyboardInterrupt included, the
    temporary file is removed and ``path`` is left as it was.

    Raises (on construction): :class:`InvalidOptionError` for the path or an
    option; :class:`UnreadableFileError` when ``audio_from`` cannot be read;
    :class:`OutputError` when the output cannot be created.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        info: VideoInfo,
        fps: Fraction | float | None = None,
        codec: str = "h264",
        quality: int = 23,
        preset: str = "veryfast",
        audio_from: str | os.PathLike[str] | None = None,
        audio_start: float = 0.0,
        audio_end: float | None = None,
        audio_at_start: bool = False,
        size: tuple[int, int] | None = None,
        gif_max_side: int = 480,
        frame_marker: FrameMarker | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.kind = check_video_output(path)
        self.path = Path(path)
        _check_writer_options(self.kind, fps, codec, quality, preset, audio_start, audio_end, size, gif_max_side)
        self.info = info
        rate = info.fps if fps is None else _rate(fps)
        self._input_rate = rate  # of the frames given, when write() gets no times
        self._drops = fps is not None  # frames that come faster than the rate are dropped
        if self.kind == "gif" and rate > GIF_MAX_FPS:  # every n-th frame, for even GIF delays
            rate, self._drops = rate / math.ceil(rate / GIF_MAX_FPS), True
        self._rate = rate
        if self.kind == "gif":
            self._time_base = GIF_TIME_BASE
        elif fps is None and 0 < info.time_base <= 1 / rate:
            self._time_base = info.time_base
        else:
            self._time_base = 1 / self._rate
        self._codec, self._quality, self._preset = codec, quality, preset
        self._size, self._gif_max_side = size, gif_max_side
        self._marker = frame_marker
        self.metadata = {str(k): str(v) for k, v in (metadata or {}).items()}
        self._out_size: tuple[int, int] | None = None  # (width, height), set by the first frame
        self.audio_window = (float(audio_start), audio_end)
        self.audio_at_start = audio_at_start
        self.frames_written = 0
        self._frames_given = 0
        self.first_time: float | None = None
        self._last_pts = -1
        self._last_slot = -1
        self._closed = False
        audio = AudioSource.open(audio_from) if audio_from is not None and self.kind in AUDIO_ENCODERS else None
        try:
            self._sink = PngSink(self.path, self.kind) if self.kind.startswith("png") else AvSink(self, audio)
        except BaseException:
            if audio is not None:
                audio.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort(exc)

    def write(self, pixels: np.ndarray, time: float | None = None) -> None:
        """Add one ``(H, W, 3)`` uint8 RGB frame shown at ``time`` seconds (source
        time, e.g. :attr:`VideoFrame.time`; default: one frame after the last)."""
        if self._closed:
            raise OutputError(f"video '{self.path}' is already closed; no more frames can be written")
        px = np.asarray(pixels)
        if px.dtype != np.uint8 or px.ndim != 3 or px.shape[2] != 3 or min(px.shape[:2]) < 1:
            raise InputError(f"video frames must be uint8 (H, W, 3) RGB; got {px.dtype} {px.shape}")
        if time is None:
            time = (self.first_time or 0.0) + float(self._frames_given / self._input_rate)
        self._frames_given += 1
        if self.first_time is None:
            self.first_time = float(time)
        elapsed = float(time) - self.first_time
        if self._drops:  # at most self._rate: keep a frame when its time reaches the next slot
            slot = math.floor(elapsed * self._rate + TIME_EPS)
            if slot <= self._last_slot:
                return
            self._last_slot = slot
        px = self._prepared(px)
        pts = max(round(elapsed / self._time_base), self._last_pts + 1)
        try:
            self._sink.add(px, pts, self.frames_written, self._marker)
        except (av.error.FFmpegError, OSError) as exc:
            raise OutputError(f"cannot write video '{self.path}': {error_reason(exc)}") from exc
        self._last_pts = pts
        self.frames_written += 1

    def _prepared(self, px: np.ndarray) -> np.ndarray:
        """Resize to the output size, and pad to even sizes for yuv420p."""
        if self._out_size is None:
            width, height = self._size or (px.shape[1], px.shape[0])
            if self.kind == "gif" and max(width, height) > self._gif_max_side:
                factor = self._gif_max_side / max(width, height)
                width, height = max(1, round(width * factor)), max(1, round(height * factor))
            self._out_size = (width, height)
        if (px.shape[1], px.shape[0]) != self._out_size:
            shrink = px.shape[1] * px.shape[0] > self._out_size[0] * self._out_size[1]
            px = cv2.resize(px, self._out_size, interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
        if self.kind in AUDIO_ENCODERS and (px.shape[0] % 2 or px.shape[1] % 2):
            px = np.pad(px, ((0, px.shape[0] % 2), (0, px.shape[1] % 2), (0, 0)), mode="edge")
        return px

    @property
    def frame_duration(self) -> int:
        """One frame in time-base units."""
        return max(1, round(1 / (self._rate * self._time_base)))

    def close(self) -> None:
        """Finish the file and move it under its name.

        Raises:
            OutputError: no frame was written, or the file could not be finished
                (the temporary file is removed in both cases).
        """
        if self._closed:
            return
        self._closed = True
        if self.frames_written == 0:
            error = OutputError(f"no frames were written to '{self.path}'; nothing to save")
            self._sink.abort(error)
            raise error
        end = float((self._last_pts + self.frame_duration) * self._time_base)
        try:
            self._sink.finish(end)
        except BaseException as exc:
            self._sink.abort(exc)
            if isinstance(exc, (av.error.FFmpegError, OSError)):
                raise OutputError(f"cannot write video '{self.path}': {error_reason(exc)}") from exc
            raise

    def abort(self, exc: BaseException | None = None) -> None:
        """Abandon the output: the temporary file is removed, ``path`` is untouched."""
        if self._closed:
            return
        self._closed = True
        self._sink.abort(exc)


def _check_writer_options(kind, fps, codec, quality, preset, audio_start, audio_end, size, gif_max_side) -> None:
    if codec not in ("h264", "h265"):
        raise InvalidOptionError(f"--codec must be h264 or h265; got {codec!r}")
    if codec == "h265" and kind not in H265_KINDS:
        raise InvalidOptionError(f"--codec {codec} is for .mp4, .m4v, .mov and .mkv outputs only")
    if isinstance(quality, bool) or not isinstance(quality, int) or not 0 <= quality <= 51:
        raise InvalidOptionError(f"video quality (CRF) must be an integer from 0 (best) to 51; got {quality!r}")
    if preset not in X264_PRESETS:
        raise InvalidOptionError(f"--preset must be one of {', '.join(X264_PRESETS)}; got {preset!r}")
    if fps is not None and (not is_number(fps) or not 0 < fps < math.inf):
        raise InvalidOptionError(f"--fps must be a positive number of frames per second; got {fps!r}")
    if not is_number(audio_start) or audio_start < 0 or (audio_end is not None and audio_end <= audio_start):
        raise InvalidOptionError(f"audio window {audio_start!r}-{audio_end!r} is not a time range")
    if size is not None and (len(size) != 2 or not all(is_count(v) for v in size)):
        raise InvalidOptionError(f"size must be (width, height) in pixels; got {size!r}")
    if not is_count(gif_max_side) or gif_max_side < 16:
        raise InvalidOptionError(f"gif_max_side must be an integer of at least 16; got {gif_max_side!r}")


def _rate(fps: Fraction | float) -> Fraction:
    return fps if isinstance(fps, Fraction) else Fraction(fps).limit_denominator(1001)
