"""A live session's recording or network push (:class:`StreamMuxer`):
H.264 (x264 tuned for zero latency) and AAC through one of PyAV's muxers.
A recording is written under a temporary name and renamed once complete."""

from __future__ import annotations

from contextlib import AbstractContextManager, suppress
from fractions import Fraction
from pathlib import Path

import av
import av.error

from faceweave.errors import OutputError
from faceweave.io.atomic import atomic_output
from faceweave.live.audio import AudioChunk, AudioTrack
from faceweave.live.outputs import OutgoingFrame, OutputSpec
from faceweave.video.io.formats import is_hd
from faceweave.video.io.sinks import error_reason

#: video timestamps in milliseconds (the times come from the input's clock)
TIME_BASE = Fraction(1, 1000)


def muxer_options(muxer: str, *, network: bool) -> dict[str, str]:
    """Muxer options for a live output: a network push sends each packet
    at once; MPEG-TS states each frame's length; MP4/MOV moov first; FLV without the seek to rewrite its header
    (a network push cannot seek); every muxer holds packets back at most
    one second to interleave audio and video."""
    options = {"max_interleave_delta": "1000000"}
    if network:
        options["flush_packets"] = "1"  # each packet goes on the wire at once, not when a buffer fills
    if muxer in ("mp4", "mov"):
        options["movflags"] = "+faststart"
    if muxer == "flv":
        options["flvflags"] = "no_duration_filesize"
    if muxer == "mpegts":
        # a frame's length in its PES header: the reader's demuxer hands the
        # frame on when it is complete, not when the next one begins
        options["omit_video_pes_length"] = "0"
    return options


def encoder_options(rate: Fraction, *, crf: int, preset: str) -> dict[str, str]:
    """x264 for live: no frame held back (``zerolatency``), a keyframe every two seconds."""
    return {"preset": preset, "tune": "zerolatency", "crf": str(crf), "g": str(max(1, round(2 * float(rate))))}


class StreamMuxer:
    """A :class:`~faceweave.live.outputs.LiveOutput` into a file or a URL.

    ``audio``: add an AAC track fed by :meth:`write_audio`; ``metadata``:
    container tags (the AI-generated label); ``timeout_s``: how long
    opening or writing a network output may wait."""

    def __init__(
        self,
        spec: OutputSpec,
        *,
        audio: bool,
        crf: int = 23,
        preset: str = "veryfast",
        metadata: dict[str, str] | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self.spec = spec
        self._audio, self._crf, self._preset = audio, crf, preset
        self._metadata, self._timeout = dict(metadata or {}), timeout_s
        self._atomic: AbstractContextManager[Path] | None = None
        self._container: av.container.OutputContainer | None = None
        self._video: av.VideoStream | None = None
        self._track: AudioTrack | None = None
        self._t0: float | None = None
        self._last_pts = -1
        self.frames_written = 0

    def open(self, width: int, height: int, rate: Fraction) -> None:
        target = self.spec.target
        if self.spec.kind == "file":
            path = Path(target)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._atomic = atomic_output(path, ".tmp" + path.suffix.lower())
                target = str(self._atomic.__enter__())
            except OSError as exc:
                raise OutputError(f"cannot write {self.spec.target}: {error_reason(exc)}") from exc
        try:
            self._container = av.open(
                target,
                "w",
                format=self.spec.muxer,
                options=muxer_options(self.spec.muxer or "", network=self.spec.kind == "network"),
                timeout=(self._timeout, self._timeout),
            )
            self._container.metadata.update(self._metadata)
            self._video = self._add_video(self._container, width + width % 2, height + height % 2, rate)
            self._track = AudioTrack(self._container) if self._audio else None
        except av.error.FFmpegError as exc:
            self.abort(exc)
            raise OutputError(f"cannot open output {self.spec.target}: {error_reason(exc)}") from exc

    def _add_video(self, container: av.container.OutputContainer, width: int, height: int, rate: Fraction):
        options = encoder_options(rate, crf=self._crf, preset=self._preset)
        stream = container.add_stream("libx264", rate=rate, options=options)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = stream.codec_context.time_base = TIME_BASE
        code = 1 if is_hd(height) else 6  # BT.709 for HD, else BT.601, as the video writer tags
        ctx = stream.codec_context
        ctx.colorspace, ctx.color_primaries, ctx.color_trc, ctx.color_range = code, code, code, 1
        return stream

    def write(self, frame: OutgoingFrame) -> None:
        if self._container is None or self._video is None:
            raise OutputError(f"output {self.spec.target} is not open")
        time = frame.time
        self._t0 = time if self._t0 is None else self._t0
        pts = max(round((time - self._t0) / TIME_BASE), self._last_pts + 1)
        # the planes in the matrix the stream is tagged with (its height is even)
        picture = av.VideoFrame.from_ndarray(frame.i420(bt709=is_hd(self._video.height)), format="yuv420p")
        picture.pts, picture.time_base = pts, TIME_BASE
        try:
            self._container.mux(self._video.encode(picture))
        except (av.error.FFmpegError, OSError) as exc:
            raise OutputError(f"cannot write output {self.spec.target}: {error_reason(exc)}") from exc
        self._last_pts = pts
        self.frames_written += 1

    def write_audio(self, chunks: list[AudioChunk]) -> None:
        if self._track is None or self._t0 is None or not chunks:
            return
        try:
            self._track.write(chunks, self._t0)
        except (av.error.FFmpegError, OSError) as exc:
            raise OutputError(f"cannot write output {self.spec.target}: {error_reason(exc)}") from exc

    def close(self) -> None:
        """Flush the encoders and finish the output (a recording is renamed into place)."""
        if self._container is None or self._video is None:
            return
        if self.frames_written == 0:
            error = OutputError(f"no frames were written to {self.spec.target}")
            self.abort(error)
            raise error
        try:
            self._container.mux(self._video.encode(None))
            if self._track is not None:
                self._track.finish()
            self._container.close()
        except (av.error.FFmpegError, OSError) as exc:
            self.abort(exc)
            raise OutputError(f"cannot finish output {self.spec.target}: {error_reason(exc)}") from exc
        self._container = None
        if self._atomic is not None:
            self._atomic.__exit__(None, None, None)
            self._atomic = None

    def abort(self, exc: BaseException | None) -> None:
        """Abandon the output: a recording's temporary file is removed."""
        if self._container is not None:
            with suppress(Exception):  # the output is being thrown away
                self._container.close()
            self._container = None
        if self._atomic is not None:
            exc = exc if exc is not None else OutputError(f"output {self.spec.target} was abandoned")
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
            self._atomic = None
