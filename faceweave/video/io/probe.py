"""Probe a video: check the input file at the boundary and describe it as a :class:`VideoInfo`.

The helpers here (:class:`OpenedInput`, :func:`check_input_file`, :func:`file_url`,
:func:`open_error`, :func:`first_video_stream`) are shared with the reader and
with the audio source.
"""

from __future__ import annotations

import os
import re
from contextlib import AbstractContextManager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import av.error

from faceweave.errors import InputError, UnreadableFileError, UnsupportedFormatError
from faceweave.io.images import probe_kind

ACCEPTED_INPUT = "MP4, MOV, M4V, MKV, WEBM, AVI, FLV, MPEG-TS/PS, WMV, OGV or MXF"
#: FFmpeg demuxer names accepted as video containers (a demuxer may have several names)
_VIDEO_DEMUXERS = frozenset(
    {
        "mov",
        "mp4",
        "m4v",
        "3gp",
        "matroska",
        "webm",
        "avi",
        "flv",
        "mpegts",
        "mpeg",
        "mpegvideo",
        "asf",
        "ogg",
        "mxf",
        "h264",
        "hevc",
        "ivf",
        "nut",
        "dv",
        "yuv4mpegpipe",
    }
)


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


def probe_video(path: str | os.PathLike[str]) -> VideoInfo:
    """Describe a video file; its first frame is decoded to be sure it plays.

    Raises:
        UnreadableFileError: missing, a directory, unreadable, empty, or a
            corrupt or truncated container (e.g. an MP4 cut before its index).
        UnsupportedFormatError: an image, an audio-only file, or not a video container.
        InputError: the video has no decodable frame.
    """
    with OpenedInput(path, allow_gif=False) as opened:
        return opened.info


def probe_output(path: str | os.PathLike[str]) -> VideoInfo:
    """Describe a written video, GIF included (PNG frame folders and ZIPs are not videos)."""
    with OpenedInput(path, allow_gif=True) as opened:
        return opened.info


@dataclass(frozen=True)
class VideoLength:
    """What the video stream's packets say when the header states no length:
    ``frames`` counted and ``seconds`` spanned, up to where counting stopped
    (``complete``: the end of the file was reached)."""

    frames: int
    seconds: float
    complete: bool


def measure_length(
    path: str | os.PathLike[str], *, max_frames: int | None = None, max_seconds: float | None = None
) -> VideoLength:
    """Count the video stream's packets without decoding them, stopping as
    soon as ``max_frames`` or ``max_seconds`` is crossed, for videos whose
    container does not state its length (a live Matroska file, a raw stream).

    Raises: what :func:`probe_video` raises."""
    with OpenedInput(path, allow_gif=False) as opened:  # checked; counting starts afresh
        index, origin = opened.stream.index, opened.origin or 0
    try:
        container = av.open(file_url(opened.label), metadata_errors="replace")
    except av.error.FFmpegError as exc:
        raise open_error(Path(opened.label), f"video '{opened.label}'", exc) from None
    frames, seconds = 0, 0.0
    with container:
        stream = container.streams[index]
        try:
            for packet in container.demux(stream):
                if packet.size == 0:  # the demuxer's flush packet
                    continue
                frames += 1
                if packet.pts is not None:
                    seconds = max(seconds, float((packet.pts - origin) * stream.time_base))
                if (max_frames is not None and frames > max_frames) or (
                    max_seconds is not None and seconds > max_seconds
                ):
                    return VideoLength(frames=frames, seconds=seconds, complete=False)
        except av.error.FFmpegError:
            pass  # damaged from here: what was counted stands
    return VideoLength(frames=frames, seconds=seconds, complete=True)


class OpenedInput(AbstractContextManager):
    """An input container, checked, with its video stream, first frame and :class:`VideoInfo`."""

    def __init__(self, path: str | os.PathLike[str], *, allow_gif: bool) -> None:
        self.label = os.fsdecode(os.fspath(path))
        what = f"video '{self.label}'"
        check_input_file(Path(self.label), what, allow_gif=allow_gif)
        try:
            self.container = av.open(file_url(self.label), metadata_errors="replace")
        except av.error.FFmpegError as exc:
            raise open_error(Path(self.label), what, exc) from None
        try:
            self.stream = first_video_stream(self.container, what, allow_gif=allow_gif)
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


def check_input_file(path: Path, what: str, *, allow_gif: bool) -> None:
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


def file_url(path: str | os.PathLike[str]) -> str:
    """FFmpeg's URL for a local file: a name such as ``a:b.mp4`` is not a protocol."""
    return "file:" + os.path.abspath(os.fspath(path))


def _head(path: Path, size: int) -> bytes:
    with path.open("rb") as fh:
        return fh.read(size)


def open_error(path: Path, what: str, exc: av.error.FFmpegError) -> InputError:
    reason = exc.strerror or type(exc).__name__
    if isinstance(exc, av.error.PermissionError):
        return UnreadableFileError(f"{what} cannot be read: permission denied")
    if probe_kind(path) == "video":
        return UnreadableFileError(f"{what} is truncated or corrupt ({reason}); expected a complete video file")
    return UnsupportedFormatError(f"{what} is not a video FFmpeg can read ({reason}); accepted: {ACCEPTED_INPUT}")


def first_video_stream(container, what: str, *, allow_gif: bool):
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


def _describe(opened: OpenedInput, first) -> VideoInfo:
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
