"""Read and write videos as streams of frames, in-process, with PyAV.

No ffmpeg binary and no temporary frame files: PyAV (FFmpeg inside its wheel)
demuxes, decodes, encodes and muxes, one frame at a time, so memory does not
grow with the video's length.  Frames are ``uint8`` RGB ``(H, W, 3)`` with the
container's rotation applied.  Times are seconds from the first video frame.

Inputs are checked at the boundary (missing, empty, images, audio only,
corrupt headers, no decodable frame); a stream that breaks mid-way ends the
reading cleanly and says where (:attr:`VideoReader.broken_at`).  Outputs are
written beside the target under a temporary name and renamed when complete.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Self

import av
import av.error
import cv2
import numpy as np
from PIL import Image as PILImage

from faceweave.errors import (
    ImageTooLargeError,
    InputError,
    InvalidOptionError,
    OutputError,
    UnreadableFileError,
    UnsupportedFormatError,
)
from faceweave.io.atomic import atomic_output
from faceweave.io.images import probe_kind

ACCEPTED_INPUT = "MP4, MOV, M4V, MKV, WEBM, AVI, FLV, MPEG-TS/PS, WMV, OGV or MXF"
#: FFmpeg demuxer names accepted as video containers (a demuxer may have several names)
_VIDEO_DEMUXERS = frozenset(
    {"mov", "mp4", "m4v", "3gp", "matroska", "webm", "avi", "flv", "mpegts", "mpeg", "mpegvideo",
     "asf", "ogg", "mxf", "h264", "hevc", "ivf", "nut", "dv", "yuv4mpegpipe"}
)

#: output extension -> what is written; a folder ("/") or .zip holds PNG frames
OUTPUT_FORMATS = MappingProxyType(
    {
        ".mp4": "MP4: H.264 (H.265 with codec='h265'), AAC audio",
        ".m4v": "MP4: H.264 (H.265 with codec='h265'), AAC audio",
        ".mov": "QuickTime: H.264 (H.265 with codec='h265'), AAC audio",
        ".mkv": "Matroska: H.264 (H.265 with codec='h265'), audio copied or AAC",
        ".webm": "WebM: VP9, Opus audio",
        ".gif": "animated GIF: longest side at most 480 px, at most 15 fps, no audio",
        ".zip": "ZIP of PNG frames frame_000000.png ..., no audio",
        "/": "folder of PNG frames frame_000000.png ... (a path with no extension or ending with '/'), no audio",
    }
)
#: extension -> output kind
_KINDS = MappingProxyType(
    {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "mkv", ".webm": "webm", ".gif": "gif", ".zip": "png_zip"}
)
#: output kind -> FFmpeg muxer
_MUXERS = MappingProxyType({"mp4": "mp4", "mov": "mov", "mkv": "matroska", "webm": "webm", "gif": "gif"})
#: output kind -> audio codecs copied untouched (others are re-encoded to the first codec named in _AUDIO_ENCODERS)
_AUDIO_COPY = MappingProxyType(
    {"mp4": {"aac", "mp3"}, "mov": {"aac", "mp3"}, "mkv": {"aac", "mp3", "opus", "vorbis", "flac"},
     "webm": {"opus", "vorbis"}}
)
_AUDIO_ENCODERS = MappingProxyType({"mp4": "aac", "mov": "aac", "mkv": "aac", "webm": "libopus"})
_AUDIO_BITRATE = MappingProxyType({"aac": 128_000, "libopus": 96_000})
#: output kinds that take ``codec="h265"`` (the others ignore the default "h264")
_H265_KINDS = frozenset({"mp4", "mov", "mkv"})
_X264_PRESETS = (
    "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow", "placebo"
)
#: x264 preset -> libvpx-vp9 (deadline, cpu-used)
_VP9_SPEED = MappingProxyType(
    {"ultrafast": ("realtime", 8), "superfast": ("realtime", 7), "veryfast": ("realtime", 6), "faster": ("good", 5),
     "fast": ("good", 4), "medium": ("good", 3), "slow": ("good", 2), "slower": ("good", 1),
     "veryslow": ("good", 0), "placebo": ("good", 0)}
)
GIF_MAX_FPS = 15
_GIF_TIME_BASE = Fraction(1, 100)
#: seconds of audio decoded (and dropped) before the window, so that it starts clean
_AUDIO_WARM_UP = 0.2
#: a frame this much before a limit still counts as at the limit (float seconds)
_EPS = 1e-6


# ------------------------------------------------------------------ values


@dataclass(frozen=True)
class VideoInfo:
    """What a video holds.

    Attributes:
        path: the file.
        width, height: display size in pixels, after rotation.
        fps: average frame rate, exact (e.g. ``Fraction(30000, 1001)``).
        time_base: the video stream's time unit in seconds.
        frame_count: from the stream, else estimated as ``duration * fps``, else ``None``.
        duration: seconds of video, or ``None`` when unknown.
        rotation: degrees (0, 90, 180, 270) the stored picture is turned
            clockwise for display; frames are delivered already turned.
        codec: FFmpeg's name of the video codec, e.g. ``"h264"``.
        pixel_aspect: sample aspect ratio of the delivered (turned) pixels, 1 if unknown.
        has_audio, audio_codec: the first audio stream, if any.
    """

    path: str
    width: int
    height: int
    fps: Fraction
    time_base: Fraction
    frame_count: int | None
    duration: float | None
    rotation: int
    codec: str
    pixel_aspect: Fraction
    has_audio: bool
    audio_codec: str | None


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


# ------------------------------------------------------------------ trim

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


# ------------------------------------------------------------------ probing


def probe_video(path: str | os.PathLike[str]) -> VideoInfo:
    """Describe a video file; its first frame is decoded to be sure it plays.

    Raises:
        UnreadableFileError: missing, a directory, unreadable, empty, or a
            corrupt or truncated container (e.g. an MP4 cut before its index).
        UnsupportedFormatError: an image, an audio-only file, or not a video container.
        InputError: the video has no decodable frame.
    """
    with _Opened(path, allow_gif=False) as opened:
        return opened.info


def probe_output(path: str | os.PathLike[str]) -> VideoInfo:
    """Describe a written video, GIF included (PNG frame folders and ZIPs are not videos)."""
    with _Opened(path, allow_gif=True) as opened:
        return opened.info


class _Opened(AbstractContextManager):
    """An input container, checked, with its video stream, first frame and :class:`VideoInfo`."""

    def __init__(self, path: str | os.PathLike[str], *, allow_gif: bool) -> None:
        self.label = os.fsdecode(os.fspath(path))
        what = f"video '{self.label}'"
        _check_file(Path(self.label), what, allow_gif=allow_gif)
        try:
            self.container = av.open(_url(self.label), metadata_errors="replace")
        except av.error.FFmpegError as exc:
            raise _open_error(Path(self.label), what, exc) from None
        try:
            self.stream = _video_stream(self.container, what, allow_gif=allow_gif)
            self.origin = self.stream.start_time
            first = _first_frame(self.container, self.stream, what)
            if self.origin is None:
                self.origin = first.pts or 0
            self.quarter_turns = round((first.rotation or 0) / 90) % 4
            self.stream_duration = _stream_duration(self.stream, self.origin)
            self.info = _describe(self, first)
        except BaseException:
            self.container.close()
            raise

    def __exit__(self, *exc_info) -> None:
        self.container.close()


def _check_file(path: Path, what: str, *, allow_gif: bool) -> None:
    if path.is_dir():
        raise UnreadableFileError(f"{what} is a directory; expected a video file ({ACCEPTED_INPUT})")
    if not path.exists():
        raise UnreadableFileError(f"{what} does not exist; check the path")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise UnreadableFileError(f"{what} cannot be read: {exc.strerror}") from None
    if size == 0:
        raise UnreadableFileError(f"{what} is empty (0 bytes); expected a video file ({ACCEPTED_INPUT})")
    if probe_kind(path) == "image" and not (allow_gif and _head(path, 3) == b"GIF"):
        raise UnsupportedFormatError(f"{what} is an image; expected a video file ({ACCEPTED_INPUT})")


def _url(path: str | os.PathLike[str]) -> str:
    """FFmpeg's URL for a local file: a name such as ``a:b.mp4`` is not a protocol."""
    return "file:" + os.path.abspath(os.fspath(path))


def _head(path: Path, size: int) -> bytes:
    with path.open("rb") as fh:
        return fh.read(size)


def _open_error(path: Path, what: str, exc: av.error.FFmpegError) -> InputError:
    reason = exc.strerror or type(exc).__name__
    if isinstance(exc, av.error.PermissionError):
        return UnreadableFileError(f"{what} cannot be read: permission denied")
    if probe_kind(path) == "video":
        return UnreadableFileError(f"{what} is truncated or corrupt ({reason}); expected a complete video file")
    return UnsupportedFormatError(f"{what} is not a video FFmpeg can read ({reason}); accepted: {ACCEPTED_INPUT}")


def _video_stream(container, what: str, *, allow_gif: bool):
    """The first real video stream (cover pictures are skipped)."""
    streams = [s for s in container.streams.video if not s.disposition & av.stream.Disposition.attached_pic]
    if not streams:
        found = " (it holds audio only)" if container.streams.audio else ""
        raise UnsupportedFormatError(f"{what} has no video stream{found}; expected a video file ({ACCEPTED_INPUT})")
    names = set(container.format.name.split(","))
    if not names & (_VIDEO_DEMUXERS | ({"gif"} if allow_gif else set())):
        raise UnsupportedFormatError(
            f"{what} is {container.format.long_name}, not a video container; expected {ACCEPTED_INPUT}"
        )
    return streams[0]


def _first_frame(container, stream, what: str):
    try:
        for frame in container.decode(stream):
            return frame
    except av.error.FFmpegError as exc:
        raise UnreadableFileError(
            f"{what} is corrupt: its first frame cannot be decoded ({exc.strerror or type(exc).__name__})"
        ) from None
    raise InputError(f"{what} has no frames; expected a video with at least one decodable frame")


def _stream_duration(stream, origin: int) -> float | None:
    """Seconds of the video stream by its own header (not the container's), or ``None``."""
    if stream.duration:
        return float(stream.duration * stream.time_base)
    tag = stream.metadata.get("DURATION")  # Matroska's per-track end time, "HH:MM:SS.fffffffff"
    match = re.match(r"^(\d+):(\d+):(\d+(?:\.\d+)?)$", tag or "")
    if match is None:
        return None
    end = int(match[1]) * 3600 + int(match[2]) * 60 + float(match[3])
    return max(0.0, end - float(origin * stream.time_base))


def _describe(opened: _Opened, first) -> VideoInfo:
    stream, container = opened.stream, opened.container
    fps = next((Fraction(r) for r in (stream.average_rate, stream.guessed_rate, stream.base_rate) if r), None)
    if fps is None or fps <= 0:
        raise UnreadableFileError(f"video '{opened.label}' has no frame rate; expected a video with timestamps")
    duration = opened.stream_duration
    if duration is None and container.duration:
        duration = container.duration / av.time_base
    frame_count = stream.frames or (round(duration * fps) if duration else None)
    width, height = first.width, first.height
    sar = stream.sample_aspect_ratio or stream.codec_context.sample_aspect_ratio
    sar = Fraction(sar) if sar else Fraction(1)
    if opened.quarter_turns % 2:
        width, height, sar = height, width, 1 / sar
    audio = container.streams.audio[0] if container.streams.audio else None
    return VideoInfo(
        path=opened.label,
        width=width,
        height=height,
        fps=fps,
        time_base=Fraction(stream.time_base),
        frame_count=frame_count or None,
        duration=duration,
        rotation=(-90 * opened.quarter_turns) % 360,
        codec=stream.codec_context.name,
        pixel_aspect=sar,
        has_audio=audio is not None,
        audio_codec=audio.codec_context.name if audio is not None else None,
    )


# ------------------------------------------------------------------ reading


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

    Decoding is streamed with FFmpeg's frame threads.  When the data breaks
    mid-way (corrupt or truncated file), iteration stops without an error and
    :attr:`broken_at` holds the seconds decoded up to the damage.
    :attr:`frames_read` counts the frames yielded, :attr:`frames_decoded` the
    frames decoded within ``[start, end)``, skipped ones included.  Iterate and
    close a reader in one thread.

    Raises (on construction): what :func:`probe_video` raises;
    :class:`InvalidOptionError` for bad options or a trim outside the video;
    :class:`ImageTooLargeError` above ``max_pixels``.
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
    ) -> None:
        _check_reader_options(start, end, fps, scale, max_pixels)
        with _Opened(path, allow_gif=False) as opened:  # probed, first frame decoded
            self.info: VideoInfo = opened.info
            self._origin, self._turns = opened.origin, opened.quarter_turns
            self._stream_duration = opened.stream_duration
        self._check_limits(start, end, max_pixels)
        self._container, self._stream = self._open_fresh()
        self._start, self._end, self._fps, self._scale = float(start), end, fps, float(scale)
        self._size = _scaled_size(self.info.width, self.info.height, scale)
        self.broken_at: float | None = None
        self.frames_read = 0
        self.frames_decoded = 0
        self._frames: Iterator[VideoFrame] | None = None
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
            raise ImageTooLargeError(
                f"video '{info.path}' is {info.width}x{info.height} = {pixels} pixels per frame, over the limit"
                f" of {max_pixels}; raise the pixel limit (max_pixels, --max-pixels) to accept it"
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

    def _decode(self) -> Iterator[VideoFrame]:
        step = 1 / float(self.info.fps)
        seeking = self._start > 0 and self._seek()
        source_index, last_time, reached = -1, None, self._start
        last_slot, first_kept = -1, None
        try:
            for frame in self._container.decode(self._stream):
                time = self._time_of(frame, last_time, step)
                source_index = round(time / step) if seeking and source_index < 0 else source_index + 1
                last_time, reached = time, time + step
                if self._end is not None and time >= self._end - _EPS:
                    return
                self.frames_decoded += 1
                if time < self._start - _EPS:
                    continue
                if self._fps is not None:
                    first_kept = time if first_kept is None else first_kept
                    slot = math.floor((time - first_kept) * self._fps + _EPS)
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

    def _open_fresh(self):
        """A new container on the (already probed) file, and its video stream."""
        try:
            container = av.open(_url(self.info.path), metadata_errors="replace")
        except av.error.FFmpegError as exc:
            raise _open_error(Path(self.info.path), f"video '{self.info.path}'", exc) from None
        stream = _video_stream(container, f"video '{self.info.path}'", allow_gif=False)
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
        options = {}
        if frame.colorspace == 2 and frame.height >= 720:  # unspecified: HD is BT.709, as players assume
            options["src_colorspace"] = "ITU709"
        if frame.color_range == 2:
            options["src_color_range"] = "JPEG"
        rgb = frame.to_ndarray(format="rgb24", **options)
        width, height = self._size if self._turns % 2 == 0 else self._size[::-1]
        if (rgb.shape[1], rgb.shape[0]) != (width, height):
            rgb = cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA)
        if self._turns:
            rgb = np.rot90(rgb, k=self._turns)
        out = np.ascontiguousarray(rgb)
        out.setflags(write=False)
        return out


def _check_reader_options(start, end, fps, scale, max_pixels) -> None:
    if not _is_number(start) or not math.isfinite(start) or start < 0:
        raise InvalidOptionError(f"--trim start must be 0 or more seconds; got {start!r}")
    if end is not None and (not _is_number(end) or end <= start):
        shown = f"{start:.2f}-{end}"
        raise InvalidOptionError(f"--trim {shown} ends before it starts; END must be after START")
    if fps is not None and (not _is_number(fps) or not 0 < fps < math.inf):
        raise InvalidOptionError(f"--fps must be a positive number of frames per second; got {fps!r}")
    if not _is_number(scale) or not 0 < scale <= 1:
        raise InvalidOptionError(f"--scale must be more than 0 and at most 1; got {scale!r}")
    if max_pixels is not None and not _is_count(max_pixels):
        raise InvalidOptionError(f"max_pixels must be a positive integer; got {max_pixels!r}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float, Fraction)) and not isinstance(value, bool)


def _is_count(value) -> bool:
    """A positive ``int`` (not a ``bool``)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _scaled_size(width: int, height: int, scale: float) -> tuple[int, int]:
    if scale == 1:
        return width, height
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


# ------------------------------------------------------------------ writing


def check_video_output(path: str | os.PathLike[str]) -> str:
    """The output kind for ``path``: ``"mp4"`` (.mp4, .m4v), ``"mov"``, ``"mkv"``,
    ``"webm"``, ``"gif"``, ``"png_zip"`` (.zip) or ``"png_dir"`` (a folder: no
    extension, or ending with '/'); call it before any work.

    Raises:
        InvalidOptionError: any other extension (the message lists the accepted
            ones), a folder path that is an existing file, or a non-empty folder.
    """
    text = os.fsdecode(os.fspath(path))
    target = Path(text)
    if text.endswith(("/", os.sep)) or target.is_dir() or not target.suffix:
        if target.exists() and not target.is_dir():
            raise InvalidOptionError(f"'{text}' is a file; PNG frames need a folder (or give a video extension)")
        if target.is_dir() and any(target.iterdir()):
            raise InvalidOptionError(f"folder '{text}' is not empty; give a new or empty folder for the PNG frames")
        return "png_dir"
    kind = _KINDS.get(target.suffix.lower())
    if kind is None:
        accepted = ", ".join(ext for ext in OUTPUT_FORMATS if ext != "/")
        raise InvalidOptionError(
            f"cannot write a video with extension '{target.suffix}'; accepted: {accepted},"
            " or a folder (no extension, or ending with '/') for PNG frames"
        )
    return kind


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
        size: output ``(width, height)``; frames of another size are resized.
            Default: the first frame's size.
        gif_max_side: GIF frames are shrunk so that their longest side is at most this.

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
        size: tuple[int, int] | None = None,
        gif_max_side: int = 480,
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
            self._time_base = _GIF_TIME_BASE
        elif fps is None and 0 < info.time_base <= 1 / rate:
            self._time_base = info.time_base
        else:
            self._time_base = 1 / self._rate
        self._codec, self._quality, self._preset = codec, quality, preset
        self._size, self._gif_max_side = size, gif_max_side
        self._out_size: tuple[int, int] | None = None  # (width, height), set by the first frame
        self._audio_window = (float(audio_start), audio_end)
        self.frames_written = 0
        self._frames_given = 0
        self._first_time: float | None = None
        self._last_pts = -1
        self._last_slot = -1
        self._closed = False
        audio = _AudioSource.open(audio_from) if audio_from is not None and self.kind in _AUDIO_ENCODERS else None
        try:
            self._sink = _PngSink(self.path, self.kind) if self.kind.startswith("png") else _AvSink(self, audio)
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
            time = (self._first_time or 0.0) + float(self._frames_given / self._input_rate)
        self._frames_given += 1
        if self._first_time is None:
            self._first_time = float(time)
        elapsed = float(time) - self._first_time
        if self._drops:  # at most self._rate: keep a frame when its time reaches the next slot
            slot = math.floor(elapsed * self._rate + _EPS)
            if slot <= self._last_slot:
                return
            self._last_slot = slot
        px = self._prepared(px)
        pts = max(round(elapsed / self._time_base), self._last_pts + 1)
        try:
            self._sink.add(px, pts, self.frames_written)
        except (av.error.FFmpegError, OSError) as exc:
            raise OutputError(f"cannot write video '{self.path}': {_reason(exc)}") from exc
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
        if self.kind in _AUDIO_ENCODERS and (px.shape[0] % 2 or px.shape[1] % 2):
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
                raise OutputError(f"cannot write video '{self.path}': {_reason(exc)}") from exc
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
    if codec == "h265" and kind not in _H265_KINDS:
        raise InvalidOptionError(f"--codec {codec} is for .mp4, .m4v, .mov and .mkv outputs only")
    if isinstance(quality, bool) or not isinstance(quality, int) or not 0 <= quality <= 51:
        raise InvalidOptionError(f"video quality (CRF) must be an integer from 0 (best) to 51; got {quality!r}")
    if preset not in _X264_PRESETS:
        raise InvalidOptionError(f"--preset must be one of {', '.join(_X264_PRESETS)}; got {preset!r}")
    if fps is not None and (not _is_number(fps) or not 0 < fps < math.inf):
        raise InvalidOptionError(f"--fps must be a positive number of frames per second; got {fps!r}")
    if not _is_number(audio_start) or audio_start < 0 or (audio_end is not None and audio_end <= audio_start):
        raise InvalidOptionError(f"audio window {audio_start!r}-{audio_end!r} is not a time range")
    if size is not None and (len(size) != 2 or not all(_is_count(v) for v in size)):
        raise InvalidOptionError(f"size must be (width, height) in pixels; got {size!r}")
    if not _is_count(gif_max_side) or gif_max_side < 16:
        raise InvalidOptionError(f"gif_max_side must be an integer of at least 16; got {gif_max_side!r}")


def _rate(fps: Fraction | float) -> Fraction:
    return fps if isinstance(fps, Fraction) else Fraction(fps).limit_denominator(1001)


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or " ".join(str(exc).split()) or type(exc).__name__


# -------------------------------------------------------------- containers


class _AvSink:
    """Frames -> an FFmpeg container (video, and audio from another file)."""

    def __init__(self, writer: VideoWriter, audio: _AudioSource | None) -> None:
        self.writer = writer
        self.audio_source = audio
        self.audio: _AudioCopy | _AudioEncode | None = None
        self.stream = None
        suffix = ".tmp" + writer.path.suffix.lower()
        try:
            writer.path.parent.mkdir(parents=True, exist_ok=True)
            self._atomic = atomic_output(writer.path, suffix)
            temp = self._atomic.__enter__()
        except OSError as exc:
            raise OutputError(f"cannot write video '{writer.path}': {_reason(exc)}") from exc
        options = {"movflags": "+faststart"} if writer.kind in ("mp4", "mov") else {}
        try:
            self.container = av.open(_url(temp), "w", format=_MUXERS[writer.kind], options=options)
        except av.error.FFmpegError as exc:
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise OutputError(f"cannot write video '{writer.path}': {_reason(exc)}") from exc

    def _open(self, width: int, height: int) -> None:
        w = self.writer
        if w.kind == "gif":
            stream = self.container.add_stream("gif", rate=w._rate)
            stream.pix_fmt = "pal8"
        else:
            name = {"h264": "libx264", "h265": "libx265"}[w._codec] if w.kind != "webm" else "libvpx-vp9"
            options = _encoder_options(name, w._quality, w._preset)
            stream = self.container.add_stream(name, rate=w._rate, options=options)
            stream.pix_fmt = "yuv420p"
            if name == "libx265" and w.kind in ("mp4", "mov"):
                stream.codec_tag = "hvc1"  # plays in QuickTime and browsers
            if w.info.pixel_aspect != 1:
                stream.codec_context.sample_aspect_ratio = w.info.pixel_aspect
            for key, value in _color_tags(height).items():
                setattr(stream.codec_context, key, value)
        stream.width, stream.height = width, height
        stream.time_base = w._time_base
        stream.codec_context.time_base = w._time_base
        self.stream = stream
        if self.audio_source is not None:
            self.audio = self.audio_source.attach(self.container, w)
            self.audio_source = None

    def add(self, pixels: np.ndarray, pts: int, index: int) -> None:
        if self.stream is None:
            self._open(pixels.shape[1], pixels.shape[0])
        if self.writer.kind == "gif":
            frame = _palette_frame(pixels)
        else:
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24").reformat(
                format="yuv420p", dst_colorspace=_sws_colorspace(pixels.shape[0]), dst_color_range="MPEG"
            )
        frame.pts, frame.time_base = pts, self.writer._time_base
        frame.duration = self.writer.frame_duration
        self.container.mux(self.stream.encode(frame))
        if self.audio is not None:
            self.audio.feed(float((pts + frame.duration) * self.writer._time_base))

    def finish(self, end: float) -> None:
        self.container.mux(self.stream.encode(None))
        if self.audio is not None:
            self.audio.finish(end)
            self.audio.close()
            self.audio = None
        self.container.close()
        self._atomic.__exit__(None, None, None)

    def abort(self, exc: BaseException | None) -> None:
        exc = exc if exc is not None else OutputError(f"video '{self.writer.path}' was abandoned")
        for resource in (self.audio, self.audio_source):
            if resource is not None:
                resource.close()
        with suppress(Exception):  # the file is being thrown away
            self.container.close()
        self._atomic.__exit__(type(exc), exc, exc.__traceback__)


def _encoder_options(name: str, quality: int, preset: str) -> dict[str, str]:
    if name == "libvpx-vp9":
        deadline, cpu_used = _VP9_SPEED[preset]
        crf = min(63, round(1.4 * quality))
        return {"crf": str(crf), "b": "0", "deadline": deadline, "cpu-used": str(cpu_used), "row-mt": "1"}
    options = {"crf": str(quality), "preset": preset}
    if name == "libx265":
        options["x265-params"] = "log-level=error"
    return options


def _color_tags(height: int) -> dict[str, int]:
    """BT.709 for HD (720 lines and more), BT.601 (SMPTE 170M) below, as players assume when untagged;
    limited range.  (FFmpeg's AVColorSpace / AVColorPrimaries / AVColorTransferCharacteristic codes.)"""
    code = 1 if height >= 720 else 6
    return {"colorspace": code, "color_primaries": code, "color_trc": code, "color_range": 1}


def _sws_colorspace(height: int) -> str:
    """The matrix that goes with :func:`_color_tags`, by swscale's name."""
    return "ITU709" if height >= 720 else "ITU601"


def _palette_frame(pixels: np.ndarray):
    """RGB -> a pal8 frame with its own 256-colour palette (median cut, no dithering)."""
    image = PILImage.fromarray(np.ascontiguousarray(pixels)).quantize(256, method=PILImage.Quantize.MEDIANCUT)
    palette = np.zeros((256, 4), np.uint8)
    rgb = np.frombuffer(bytes(image.getpalette()[: 256 * 3]), np.uint8).reshape(-1, 3)
    palette[: len(rgb), 1:] = rgb
    palette[: len(rgb), 0] = 255  # ARGB, opaque
    return av.VideoFrame.from_ndarray((np.asarray(image, np.uint8), palette), format="pal8")


class _PngSink:
    """Frames -> PNG files in a folder, or in a ZIP (stored: PNG is compressed already)."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind = path, kind
        self._zip = self._atomic = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "png_zip":
                self._atomic = atomic_output(path, ".tmp.zip")
                self._zip = zipfile.ZipFile(self._atomic.__enter__(), "w", zipfile.ZIP_STORED)
            else:
                self._dir = Path(tempfile.mkdtemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent))
        except OSError as exc:
            raise OutputError(f"cannot write PNG frames to '{path}': {_reason(exc)}") from exc

    def add(self, pixels: np.ndarray, pts: int, index: int) -> None:
        ok, data = cv2.imencode(".png", np.ascontiguousarray(pixels[..., ::-1]), [cv2.IMWRITE_PNG_COMPRESSION, 3])
        if not ok:
            raise OSError(f"PNG encoding failed for frame {index}")
        name = f"frame_{index:06d}.png"
        if self._zip is not None:
            self._zip.writestr(name, data.tobytes())
        else:
            (self._dir / name).write_bytes(data.tobytes())

    def finish(self, end: float) -> None:
        if self._zip is not None:
            self._zip.close()
            self._atomic.__exit__(None, None, None)
        else:
            os.replace(self._dir, self.path)  # an empty folder under the name is replaced

    def abort(self, exc: BaseException | None) -> None:
        if self._zip is not None:
            exc = exc if exc is not None else OutputError(f"'{self.path}' was abandoned")
            with suppress(Exception):  # the file is being thrown away
                self._zip.close()
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
        else:
            shutil.rmtree(self._dir, ignore_errors=True)


# ------------------------------------------------------------------- audio


class _AudioSource:
    """The first audio stream of ``audio_from``, open for reading."""

    def __init__(self, container, stream, origin: float) -> None:
        self.container, self.stream, self.origin = container, stream, origin

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> _AudioSource | None:
        """``None`` when the file has no audio stream."""
        label = os.fsdecode(os.fspath(path))
        what = f"audio source '{label}'"
        _check_file(Path(label), what, allow_gif=False)
        try:
            container = av.open(_url(label), metadata_errors="replace")
        except av.error.FFmpegError as exc:
            raise _open_error(Path(label), what, exc) from None
        if not container.streams.audio:
            container.close()
            return None
        video = [s for s in container.streams.video if not s.disposition & av.stream.Disposition.attached_pic]
        # source times are measured from the first video frame, like VideoFrame.time
        origin = float(video[0].start_time * video[0].time_base) if video and video[0].start_time is not None else 0.0
        return cls(container, container.streams.audio[0], origin)

    def attach(self, out, writer: VideoWriter):
        """Add the audio stream to ``out``: a copy when the container takes the codec, else an encoder."""
        start, end = writer._audio_window
        t0 = writer._first_time if writer._first_time is not None else start
        low = max(start, t0)
        if low > _AUDIO_WARM_UP:  # seek a little before: a decoder starting cold glitches
            ticks = int((low - _AUDIO_WARM_UP + self.origin) / self.stream.time_base)
            try:
                self.container.seek(ticks, stream=self.stream, backward=True)
            except av.error.FFmpegError:
                pass  # read from the start; packets before the window are skipped
        if self.stream.codec_context.name in _AUDIO_COPY[writer.kind]:
            return _AudioCopy(self, out, t0, low, end)
        return _AudioEncode(self, out, _AUDIO_ENCODERS[writer.kind], t0, low, end)

    def close(self) -> None:
        self.container.close()


class _AudioCopy:
    """Audio packets copied untouched, shifted so that source time ``t0`` is 0."""

    def __init__(self, source: _AudioSource, out, t0: float, low: float, end: float | None) -> None:
        self.source, self.out_container = source, out
        self.stream = out.add_stream_from_template(source.stream)
        self.t0, self.low, self.end = t0, low, end
        self.tb = source.stream.time_base
        self.shift = round((t0 + source.origin) / self.tb)
        self.packets = source.container.demux(source.stream)
        self.pending = None
        self.done = False

    def feed(self, until: float) -> None:
        """Copy the packets that start before output time ``until``."""
        while not self.done:
            packet = self.pending if self.pending is not None else self._next()
            if packet is None:
                return
            start = float((packet.pts - self.shift) * self.tb)
            if start >= until - _EPS:
                self.pending = packet
                return
            self.pending = None
            if self.end is not None and start + self.t0 >= self.end - _EPS:
                self.done = True
                return
            if start < -_EPS or start + self.t0 < self.low - _EPS:
                continue  # before the first frame or the window: audio starts at most one packet late
            packet.pts -= self.shift
            packet.dts = packet.pts if packet.dts is None else packet.dts - self.shift
            packet.stream = self.stream
            self.out_container.mux(packet)

    def _next(self):
        try:
            for packet in self.packets:
                if packet.pts is not None and packet.size:
                    return packet
        except av.error.FFmpegError:
            pass  # damaged audio ends the audio
        self.done = True
        return None

    def finish(self, end: float) -> None:
        self.feed(end)

    def close(self) -> None:
        self.source.close()


class _AudioEncode:
    """Audio decoded, cut to the window, resampled and encoded (AAC or Opus)."""

    def __init__(self, source: _AudioSource, out, codec: str, t0: float, low: float, end: float | None) -> None:
        self.source, self.out_container = source, out
        src = source.stream.codec_context
        rates = av.codec.Codec(codec, "w").audio_rates or ()
        rate = src.sample_rate if src.sample_rate in rates else 48_000
        layout = "stereo" if src.channels >= 2 else "mono"
        formats = [f.name for f in av.codec.Codec(codec, "w").audio_formats]
        fmt = next((f for f in ("fltp", "flt") if f in formats), formats[0])
        self.stream = out.add_stream(codec, rate=rate, layout=layout, format=fmt)
        self.stream.bit_rate = _AUDIO_BITRATE[codec]
        self.stream.time_base = Fraction(1, rate)
        self.resampler = av.AudioResampler(
            format=fmt, layout=layout, rate=rate, frame_size=1024 if codec == "aac" else 960
        )
        self.rate, self.t0, self.low, self.end = rate, t0, low, end
        self.frames = source.container.decode(source.stream)
        self.pending = None
        self.next_pts: int | None = None
        self.done = False

    def feed(self, until: float, *, final: bool = False) -> None:
        """Encode the audio that ends before output time ``until`` (all up to it when ``final``)."""
        while not self.done:
            frame = self.pending if self.pending is not None else self._next()
            if frame is None:
                return
            start = float(frame.pts * frame.time_base) - self.source.origin - self.t0
            stop = start + frame.samples / frame.sample_rate
            if (stop if not final else start) > until + _EPS:
                self.pending = frame
                return
            self.pending = None
            hi = until if final else math.inf
            if self.end is not None:
                hi = min(hi, self.end - self.t0)
            if start >= hi - _EPS:
                self.done = True
                return
            self._encode(self._cut(frame, start, max(self.low - self.t0, 0.0), hi), start)

    def _next(self):
        try:
            for frame in self.frames:
                if frame.pts is not None:
                    return frame
        except av.error.FFmpegError:
            pass  # damaged audio ends the audio
        self.done = True
        return None

    @staticmethod
    def _cut(frame, start: float, lo: float, hi: float):
        """The part of ``frame`` (starting at output time ``start``) inside ``[lo, hi)``, or ``None``."""
        rate, n = frame.sample_rate, frame.samples
        first = max(0, math.ceil((lo - start) * rate - _EPS))
        last = n if hi == math.inf else min(n, math.floor((hi - start) * rate + _EPS))
        if first >= last:
            return None
        if (first, last) == (0, n):
            return frame
        array = frame.to_ndarray()
        channels = len(frame.layout.channels)
        part = array[:, first:last] if frame.format.is_planar else array[:, first * channels : last * channels]
        cut = av.AudioFrame.from_ndarray(np.ascontiguousarray(part), format=frame.format.name, layout=frame.layout.name)
        cut.sample_rate = rate
        cut.pts = None
        return cut

    def _encode(self, frame, start: float) -> None:
        if frame is None:
            return
        if self.next_pts is None:
            self.next_pts = max(0, round(max(start, self.low - self.t0) * self.rate))
        frame.pts = None
        self._emit(self.resampler.resample(frame))

    def _emit(self, frames) -> None:
        for out in frames:
            out.pts, out.time_base = self.next_pts, Fraction(1, self.rate)
            self.next_pts += out.samples
            self.out_container.mux(self.stream.encode(out))

    def finish(self, end: float) -> None:
        self.feed(end, final=True)
        if self.next_pts is not None:
            self._emit(self.resampler.resample(None))
        self.out_container.mux(self.stream.encode(None))

    def close(self) -> None:
        self.source.close()
