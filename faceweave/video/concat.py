"""Join processed segments into one video without re-encoding them.

The parts' video packets are copied (remuxed) one part after the other, each
part's timestamps shifted by its segment's start, so the output's frame ``i``
is shown at the input's frame ``i`` time (from the first joined frame), in the
output container's ticks.  The audio of the original input is added in one
piece for the whole range, copied when the container takes its codec, else
re-encoded, by the same code as :class:`VideoWriter`.  The output appears
under its name only when complete.

Outputs: MP4 (``.mp4``, ``.m4v``), MOV and MKV from H.264/H.265 parts; WebM
from VP9 (or VP8, AV1) parts.  GIF and PNG-frame outputs are refused (their
frames need a final encode: write the parts' frames with :class:`VideoWriter`
instead).  Matroska and WebM count time in milliseconds, so their frame times
are the input's rounded to the nearest millisecond.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

import av
import av.error

from faceweave.errors import InvalidOptionError, OutputError, UnreadableFileError
from faceweave.io.atomic import atomic_output
from faceweave.video.io.audio import AudioCopy, AudioSource
from faceweave.video.io.formats import MUXERS, check_video_output
from faceweave.video.io.probe import file_url
from faceweave.video.io.sinks import error_reason, muxer_options
from faceweave.video.segments import SegmentPart

#: output kind -> video codecs of parts it takes, by FFmpeg's name
_JOIN_CODECS = {
    "mp4": {"h264", "hevc"},
    "mov": {"h264", "hevc"},
    "mkv": {"h264", "hevc", "vp9", "vp8", "av1"},
    "webm": {"vp9", "vp8", "av1"},
}
JOIN_OUTPUTS = ".mp4, .m4v, .mov, .mkv (H.264/H.265 parts) or .webm (VP9 parts)"


@dataclass(frozen=True)
class JoinedVideo:
    """What :func:`join_segments` wrote: ``frames`` frames lasting
    ``duration`` seconds; ``audio`` is ``"copied"``, ``"encoded"`` or ``None``."""

    output: Path
    frames: int
    duration: float
    audio: str | None


def join_kind(output: str | os.PathLike[str]) -> str:
    """The output kind for a join (``"mp4"``, ``"mov"``, ``"mkv"``, ``"webm"``); call it before any work.

    Raises:
        InvalidOptionError: any other output (the message lists the accepted ones).
    """
    kind = check_video_output(output)
    if kind not in _JOIN_CODECS:
        raise InvalidOptionError(f"cannot join video segments into '{output}'; accepted: {JOIN_OUTPUTS}")
    return kind


def part_suffix(kind: str) -> str:
    """The extension to write parts with for an output of ``kind``: VP9 WebM for WebM, else H.264 MP4."""
    return ".webm" if kind == "webm" else ".mp4"


def join_segments(
    parts: Sequence[SegmentPart],
    output: str | os.PathLike[str],
    *,
    audio_from: str | os.PathLike[str] | None = None,
    start: float | None = None,
    end: float | None = None,
    metadata: Mapping[str, str] | None = None,
) -> JoinedVideo:
    """Concatenate ``parts`` (consecutive segments of one video) into ``output``.

    Args:
        audio_from: the original input; its first audio stream, from source
            time ``start`` to ``end``, plays from the first joined frame
            (source time ``parts[0].segment.start_time``) and is cut at the end
            of the video.  ``None`` or a file without audio: no audio.
        start, end: the audio range in source seconds (the ``--trim``);
            default: from the first frame to the end of the video.
        metadata: container tags added to those of the first part.

    Raises:
        InvalidOptionError: no parts, parts that are not consecutive, or an
            output kind a join cannot write.
        UnreadableFileError: a part is missing or unreadable, or holds other
            frames than its segment (count, codec, size, first keyframe).
        OutputError: the output cannot be written.  In every error case
        nothing is left under ``output``.
    """
    kind = join_kind(output)
    _check_parts(parts)
    output = Path(output)
    with ExitStack() as stack:
        inputs = [stack.enter_context(_open_part(part)) for part in parts]
        first = inputs[0].streams.video[0]
        for part, container in zip(parts, inputs, strict=False):
            _check_stream(part, container.streams.video[0], first, kind)
        audio_source = AudioSource.open(audio_from) if audio_from is not None else None
        if audio_source is not None:
            stack.callback(audio_source.close)  # closing twice is harmless
        tags = {**dict(inputs[0].metadata), **{str(k): str(v) for k, v in (metadata or {}).items()}}
        tags = {k: v for k, v in tags.items() if k.lower() not in _MUXER_TAGS}
        out = _open_output(stack, output, kind, tags)
        audio = None
        try:
            out.metadata.update(tags)
            stream = _stream_like(out, first)
            t0 = parts[0].segment.start_time
            if audio_source is not None:
                window = (parts[0].segment.start_time if start is None else float(start), end)
                audio = audio_source.attach(out, kind=kind, window=window, first_time=t0)
            frames, stop = _copy_video(parts, inputs, out, stream, audio, t0)
            if audio is not None:
                audio.finish(stop)
            out.close()
        except BaseException as exc:
            with suppress(Exception):  # the file is being thrown away
                out.close()
            if isinstance(exc, (av.error.FFmpegError, OSError)):
                raise OutputError(f"cannot write video '{output}': {error_reason(exc)}") from exc
            raise
        label = None if audio is None else ("copied" if isinstance(audio, AudioCopy) else "encoded")
    return JoinedVideo(output=output, frames=frames, duration=stop, audio=label)


def _open_output(stack: ExitStack, output: Path, kind: str, tags: Mapping[str, str]):
    """The muxer, on a temporary file beside ``output`` that becomes
    ``output`` only when ``stack`` closes without an error."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        atomic = stack.enter_context(atomic_output(output, ".tmp" + output.suffix.lower()))
    except OSError as exc:
        raise OutputError(f"cannot write video '{output}': {error_reason(exc)}") from exc
    try:
        return av.open(file_url(atomic), "w", format=MUXERS[kind], options=muxer_options(kind, bool(tags)))
    except av.error.FFmpegError as exc:
        raise OutputError(f"cannot write video '{output}': {error_reason(exc)}") from exc


def _stream_like(out, first):
    """A video stream in ``out`` copying the packets of ``first`` (its time base and frame rate)."""
    stream = out.add_stream_from_template(first)
    stream.time_base = first.time_base
    rate = first.average_rate or first.guessed_rate
    if rate:  # Matroska writes the frame duration from it (the template's may be the tick rate)
        stream.codec_context.framerate = rate
    return stream


#: container tags that the muxer writes itself (copying them would be stale)
_MUXER_TAGS = frozenset({"major_brand", "minor_version", "compatible_brands", "encoder", "creation_time", "duration"})


def _check_parts(parts: Sequence[SegmentPart]) -> None:
    if not parts:
        raise InvalidOptionError("no segment parts to join; give at least one")
    for before, after in pairwise(parts):
        if after.segment.start_frame != before.segment.end_frame:
            raise InvalidOptionError(
                f"segment parts are not consecutive: part {before.segment.index} ends before frame"
                f" {before.segment.end_frame} but part {after.segment.index} starts at frame"
                f" {after.segment.start_frame}"
            )
    for part in parts:
        path = Path(part.path)
        if not path.is_file():
            raise UnreadableFileError(
                f"segment part {part.segment.index} (frames {part.segment.start_frame}-{part.segment.end_frame - 1})"
                f" '{path}' does not exist or is not a file; process that segment again before joining"
            )


class _open_part:
    """A part's container, opened for reading and closed on exit."""

    def __init__(self, part: SegmentPart) -> None:
        self.part = part

    def __enter__(self):
        what = f"segment part {self.part.segment.index} '{self.part.path}'"
        try:
            self.container = av.open(file_url(self.part.path), metadata_errors="replace")
        except av.error.FFmpegError as exc:
            raise UnreadableFileError(f"{what} cannot be read ({error_reason(exc)}); process it again") from None
        if len(self.container.streams.video) != 1:
            self.container.close()
            found = len(self.container.streams.video)
            raise UnreadableFileError(f"{what} must hold one video stream; it holds {found}")
        return self.container

    def __exit__(self, *exc_info) -> None:
        self.container.close()


def _check_stream(part: SegmentPart, stream, first, kind: str) -> None:
    what = f"segment part {part.segment.index} '{part.path}'"
    ctx, ref = stream.codec_context, first.codec_context
    if ctx.name not in _JOIN_CODECS[kind]:
        raise UnreadableFileError(
            f"{what} is {ctx.name}; a .{kind} output takes {', '.join(sorted(_JOIN_CODECS[kind]))} parts"
        )
    same = (ctx.name, ctx.width, ctx.height, Fraction(stream.time_base), bytes(ctx.extradata or b"")) == (
        ref.name,
        ref.width,
        ref.height,
        Fraction(first.time_base),
        bytes(ref.extradata or b""),
    )
    if not same:
        raise UnreadableFileError(
            f"{what} was encoded unlike the first part ({ctx.name} {ctx.width}x{ctx.height},"
            f" time base {stream.time_base});"
            " all parts must come from one encoder setting to be joined without re-encoding"
        )


def _copy_video(parts, inputs, out, stream, audio, t0: float) -> tuple[int, float]:
    """Mux every part's packets, shifted to its segment's time; returns
    ``(frames, end)``, ``end`` the seconds at the end of the last frame."""
    tb = Fraction(stream.time_base)
    frames, last_dts, stop = 0, None, 0.0
    for part, container in zip(parts, inputs, strict=False):
        source = container.streams.video[0]
        shift = round(Fraction(part.segment.start_time - t0) / tb)
        origin, count = None, 0
        what = f"segment part {part.segment.index} '{part.path}'"
        try:
            for packet in container.demux(source):
                if packet.pts is None or not packet.size:
                    continue
                if origin is None:
                    if not packet.is_keyframe:
                        raise UnreadableFileError(f"{what} does not start with a keyframe; it cannot be joined")
                    origin = source.start_time if source.start_time is not None else packet.pts
                pts = packet.pts - origin + shift
                dts = pts if packet.dts is None else packet.dts - origin + shift
                if last_dts is not None and dts <= last_dts:
                    dts = last_dts + 1  # a part whose decoder delay differs: keep decode order strictly rising
                if dts > pts:
                    raise OutputError(f"{what} overlaps the part before it in time; the parts cannot be joined")
                duration = packet.duration or 0
                packet.pts, packet.dts, packet.stream = pts, dts, stream
                packet.time_base = tb
                out.mux(packet)
                last_dts, count = dts, count + 1
                stop = max(stop, float((pts + duration) * tb))
                if audio is not None:
                    audio.feed(stop)
        except av.error.FFmpegError as exc:
            raise UnreadableFileError(f"{what} is damaged ({error_reason(exc)}); process it again") from None
        if count != part.segment.frames:
            raise UnreadableFileError(
                f"{what} holds {count} frames but its segment has {part.segment.frames}"
                f" (frames {part.segment.start_frame}-{part.segment.end_frame - 1}); process it again"
            )
        frames += count
    return frames, stop
