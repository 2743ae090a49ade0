"""Audio passed through a live session beside the swapped video: decoded
on the decoder thread into an :class:`AudioTap` (bounded: the oldest chunk
goes when it is full), taken on the encoder thread in step with the video
frames written, and encoded by one :class:`AudioTrack` per output (AAC)."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from fractions import Fraction

import av

#: the one format audio is held in between decoding and encoding
RATE = 48_000
LAYOUT = "stereo"
FORMAT = "fltp"
#: a jump in the audio's times larger than this (seconds) is a gap (a reconnect), kept as silence
GAP_S = 0.1


@dataclass(frozen=True)
class AudioChunk:
    """Decoded audio (``FORMAT``, ``LAYOUT``, ``RATE``) that starts at
    ``time``: seconds on the clock of the video frames' times."""

    time: float
    frame: av.AudioFrame

    @property
    def end(self) -> float:
        return self.time + self.frame.samples / RATE


class AudioTap:
    """Audio chunks from the decoder thread to the encoder thread, at most
    ``max_chunks`` held (the oldest is dropped and counted when full)."""

    def __init__(self, max_chunks: int = 1024) -> None:
        self._chunks: deque[AudioChunk] = deque()
        self._max = max(1, max_chunks)
        self._lock = threading.Lock()
        self.dropped = 0

    def put(self, chunk: AudioChunk) -> None:
        with self._lock:
            if len(self._chunks) >= self._max:
                self._chunks.popleft()
                self.dropped += 1
            self._chunks.append(chunk)

    def take(self, until: float | None = None) -> list[AudioChunk]:
        """The chunks that start before ``until`` seconds (all when ``None``), in order."""
        with self._lock:
            taken = []
            while self._chunks and (until is None or self._chunks[0].time < until):
                taken.append(self._chunks.popleft())
            return taken


class AudioResampler:
    """Decoded audio of any format -> :class:`AudioChunk` frames in the tap's one format."""

    def __init__(self) -> None:
        self._resampler = av.AudioResampler(format=FORMAT, layout=LAYOUT, rate=RATE)

    def chunks(self, frame: av.AudioFrame, time: float) -> list[AudioChunk]:
        frame.pts = None
        out, at = [], time
        for converted in self._resampler.resample(frame):
            out.append(AudioChunk(at, converted))
            at += converted.samples / RATE
        return out


class AudioTrack:
    """One output's AAC audio: chunks placed at their time from the output's
    first video frame (``t0``), sample-exact in between, a gap (a reconnect)
    kept as a jump in time; chunks before ``t0`` are left out."""

    def __init__(self, container: av.container.OutputContainer, *, bit_rate: int = 128_000) -> None:
        self.container = container
        self.stream = container.add_stream("aac", rate=RATE, layout=LAYOUT, format=FORMAT)
        self.stream.bit_rate = bit_rate
        self.stream.time_base = Fraction(1, RATE)
        self._resampler = av.AudioResampler(format=FORMAT, layout=LAYOUT, rate=RATE, frame_size=1024)
        self._next: int | None = None

    def write(self, chunks: list[AudioChunk], t0: float) -> None:
        for chunk in chunks:
            start = chunk.time - t0
            if start < 0:
                continue
            at = round(start * RATE)
            if self._next is None or at - self._next > GAP_S * RATE:
                self._next = at  # the first chunk, or after a gap
            chunk.frame.pts = None
            self._emit(self._resampler.resample(chunk.frame))

    def _emit(self, frames: list[av.AudioFrame]) -> None:
        for frame in frames:
            if self._next is None:
                return
            frame.pts, frame.time_base = self._next, Fraction(1, RATE)
            self._next += frame.samples
            self.container.mux(self.stream.encode(frame))

    def finish(self) -> None:
        if self._next is not None:
            self._emit(self._resampler.resample(None))
        self.container.mux(self.stream.encode(None))
