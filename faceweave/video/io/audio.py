"""Audio from another file into the output: packets copied untouched, or decoded, cut and re-encoded."""

from __future__ import annotations

import contextlib
import math
import os
from fractions import Fraction
from pathlib import Path

import av
import av.error
import numpy as np

from faceweave.video.io.formats import AUDIO_BITRATE, AUDIO_COPY, AUDIO_ENCODERS
from faceweave.video.io.probe import check_input_file, file_url, open_error
from faceweave.video.io.reader import TIME_EPS

#: seconds of audio decoded (and dropped) before the window, so that it starts clean
_AUDIO_WARM_UP = 0.2


class AudioSource:
    """The first audio stream of ``audio_from``, open for reading."""

    def __init__(self, container, stream, origin: float) -> None:
        self.container, self.stream, self.origin = container, stream, origin

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> AudioSource | None:
        """``None`` when the file has no audio stream."""
        label = os.fsdecode(os.fspath(path))
        what = f"audio source '{label}'"
        check_input_file(Path(label), what, allow_gif=False)
        try:
            container = av.open(file_url(label), metadata_errors="replace")
        except av.error.FFmpegError as exc:
            raise open_error(Path(label), what, exc) from None
        if not container.streams.audio:
            container.close()
            return None
        video = [s for s in container.streams.video if not s.disposition & av.stream.Disposition.attached_pic]
        # source times are measured from the first video frame, like VideoFrame.time
        first = video[0] if video else None
        origin = 0.0
        if first is not None and first.start_time is not None and first.time_base is not None:
            origin = float(first.start_time * first.time_base)
        return cls(container, container.streams.audio[0], origin)

    def attach(
        self, out, *, kind: str, window: tuple[float, float | None], first_time: float | None
    ) -> AudioCopy | AudioEncode:
        """Add the audio stream to ``out`` (an output of ``kind``, see :data:`MUXERS`): a copy when the
        container takes the codec, else an encoder.  ``window``: the source's ``(start, end)`` seconds;
        ``first_time``: the time of the first video frame written, when known."""
        start, end = window
        t0 = first_time if first_time is not None else start
        low = max(start, t0)
        if low > _AUDIO_WARM_UP:  # seek a little before: a decoder starting cold glitches
            ticks = int((low - _AUDIO_WARM_UP + self.origin) / self.stream.time_base)
            with contextlib.suppress(av.error.FFmpegError):  # else from the start; earlier packets are skipped
                self.container.seek(ticks, stream=self.stream, backward=True)
        if self.stream.codec_context.name in AUDIO_COPY[kind]:
            return AudioCopy(self, out, t0, low, end)
        return AudioEncode(self, out, AUDIO_ENCODERS[kind], t0, low, end)

    def close(self) -> None:
        self.container.close()


class AudioCopy:
    """Audio packets copied untouched, shifted so that source time ``t0`` is 0."""

    def __init__(self, source: AudioSource, out, t0: float, low: float, end: float | None) -> None:
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
            if start >= until - TIME_EPS:
                self.pending = packet
                return
            self.pending = None
            if self.end is not None and start + self.t0 >= self.end - TIME_EPS:
                self.done = True
                return
            if start < -TIME_EPS or start + self.t0 < self.low - TIME_EPS:
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


class AudioEncode:
    """Audio decoded, cut to the window, resampled and encoded (AAC or Opus)."""

    def __init__(self, source: AudioSource, out, codec: str, t0: float, low: float, end: float | None) -> None:
        self.source, self.out_container = source, out
        src = source.stream.codec_context
        rates = av.codec.Codec(codec, "w").audio_rates or ()
        rate = src.sample_rate if src.sample_rate in rates else 48_000
        layout = "stereo" if src.channels >= 2 else "mono"
        formats = [f.name for f in av.codec.Codec(codec, "w").audio_formats or ()]
        fmt = next((f for f in ("fltp", "flt") if f in formats), formats[0])
        self.stream = out.add_stream(codec, rate=rate, layout=layout, format=fmt)
        self.stream.bit_rate = AUDIO_BITRATE[codec]
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
            if (stop if not final else start) > until + TIME_EPS:
                self.pending = frame
                return
            self.pending = None
            hi = until if final else math.inf
            if self.end is not None:
                hi = min(hi, self.end - self.t0)
            if start >= hi - TIME_EPS:
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
        first = max(0, math.ceil((lo - start) * rate - TIME_EPS))
        last = n if hi == math.inf else min(n, math.floor((hi - start) * rate + TIME_EPS))
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
