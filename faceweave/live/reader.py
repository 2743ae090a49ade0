"""Decode a live input frame by frame (:class:`LiveReader`), a
:class:`~faceweave.video.stream.FrameSource` for a live session: a camera
or a network stream as fast as it comes, a file at its own rate (looped
when asked), audio decoded beside it into an :class:`AudioTap`, and a
network stream that drops reopened with exponential backoff."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from fractions import Fraction
from typing import Self

import av
import av.error
import cv2
import numpy as np

from faceweave.errors import (
    FaceweaveError,
    InvalidOptionError,
    StreamLostError,
    UnreadableFileError,
    UnsupportedFormatError,
    VideoTooLargeError,
)
from faceweave.live.audio import AudioResampler, AudioTap
from faceweave.live.inputs import LiveInput, Reconnect
from faceweave.video.io import VideoFrame
from faceweave.video.io.pictures import RgbPictures
from faceweave.video.io.sinks import error_reason

#: the frame rate assumed when an input states none
DEFAULT_RATE = Fraction(30)
#: a live input's frame decoded within this share of a frame's time after
#: the one before was waiting already: it and those before it are stale
CATCH_UP = 0.25
#: what :meth:`LiveReader._frame` returns for a frame left out
_SKIPPED = object()


@dataclass(frozen=True)
class LiveInfo:
    """What an opened input holds: frames of ``width`` x ``height`` (as
    yielded, after scaling) at about ``rate`` per second; whether it has audio."""

    width: int
    height: int
    rate: Fraction
    has_audio: bool
    codec: str


class _Connection:
    """One opening of the input: its container, streams and time origin."""

    def __init__(self, spec: LiveInput, timeout_s: float) -> None:
        self.container = _open(spec, timeout_s)
        try:
            self.video = _video_stream(self.container, spec.url)
        except BaseException:
            self.container.close()
            raise
        self.video.thread_type = "SLICE"  # frame threads would hold frames back
        audio = self.container.streams.audio
        self.audio = audio[0] if audio and audio[0].codec_context is not None else None
        #: the source time of this connection's first video frame
        self.origin: float | None = None

    def close(self) -> None:
        self.container.close()


def _open(spec: LiveInput, timeout_s: float) -> av.container.InputContainer:
    what = {"camera": "camera", "network": "stream", "file": "input"}[spec.kind]
    try:
        return av.open(
            spec.url,
            format=spec.format,
            options=dict(spec.options),
            timeout=(timeout_s, timeout_s),
            metadata_errors="replace",
        )
    except av.error.FileNotFoundError:
        raise UnreadableFileError(f"{what} {spec.url} does not exist") from None
    except av.error.ExitError:
        raise UnreadableFileError(f"{what} {spec.url}: nothing received within {timeout_s:g} s") from None
    except av.error.FFmpegError as exc:
        raise UnreadableFileError(f"cannot open {what} {spec.url}: {error_reason(exc)}") from None


def _video_stream(container: av.container.InputContainer, url: str) -> av.VideoStream:
    if not container.streams.video:
        raise UnsupportedFormatError(f"input {url} has no video stream")
    stream = container.streams.video[0]
    if stream.codec_context is None:
        raise UnsupportedFormatError(f"input {url}: its video codec is not supported (no decoder for it)")
    return stream


class LiveReader:
    """Frames of a live input, in order, with times in seconds from the first
    frame that never go back (a reconnect or a loop continues the clock).

    Opening happens here, so that a camera that does not exist, a stream that
    sends nothing or a codec without a decoder is an error before any work.
    ``scale``: resize factor in ``(0, 1]``; ``max_pixels``: refuse larger
    frames; ``duration_s``: end after this many seconds of input;
    ``audio``: where decoded audio goes (``None``: left out).  Iterate and
    close on one thread; :meth:`stop` may be called from any thread (a read
    that is waiting for data ends within ``reconnect.timeout_s``).

    After the end: :attr:`end_reason` says why; :attr:`lost` holds the
    :class:`StreamLostError` when a network input dropped and did not come
    back; :attr:`reconnects` counts the reopenings that worked;
    :attr:`dropped` the frames of a camera or stream left out, unconverted,
    because newer ones were already waiting (the reader had fallen behind)."""

    def __init__(
        self,
        spec: LiveInput,
        *,
        reconnect: Reconnect | None = None,
        scale: float = 1.0,
        max_pixels: int | None = None,
        duration_s: float | None = None,
        audio: AudioTap | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < scale <= 1:
            raise InvalidOptionError(f"--scale must be more than 0 and at most 1; got {scale!r}")
        if duration_s is not None and not duration_s > 0:
            raise InvalidOptionError(f"--duration must be a positive number of seconds; got {duration_s!r}")
        self.spec, self.reconnect = spec, reconnect or Reconnect()
        self._scale, self._duration, self._clock = scale, duration_s, clock
        self._tap = audio
        self._rgb = RgbPictures()
        self._conn = _Connection(spec, self.reconnect.timeout_s)
        self.info = self._info(max_pixels)
        self._stopping = threading.Event()
        self._frames: Generator[VideoFrame, None, None] | None = None
        self._closed = False
        self.frames_read = 0
        self.reconnects = 0
        self.end_reason: str | None = None
        self.lost: StreamLostError | None = None
        # the clock across connections: seconds per frame, where this
        # connection's times start, the last time yielded, the wall clock at time 0
        self._step = 1.0 / float(self.info.rate)
        self._offset = 0.0
        self._last: float | None = None
        self._wall0: float | None = None
        #: when the last frame of a live input was decoded (wall clock)
        self._arrived: float | None = None
        self._run_of_quick = 0
        #: frames of a live input left out because newer ones were waiting
        self.dropped = 0

    def _info(self, max_pixels: int | None) -> LiveInfo:
        ctx = self._conn.video.codec_context
        width, height = ctx.width, ctx.height
        if max_pixels is not None and width * height > max_pixels:
            self._conn.close()
            raise VideoTooLargeError(
                f"input {self.spec.url} is {width}x{height} = {width * height} pixels per frame, over the limit"
                f" of {max_pixels}; raise it with --max-pixels"
            )
        if self._scale != 1:
            width, height = max(2, round(width * self._scale / 2) * 2), max(2, round(height * self._scale / 2) * 2)
        stream = self._conn.video
        rate = stream.average_rate or stream.guessed_rate or DEFAULT_RATE
        return LiveInfo(width, height, Fraction(rate), self._conn.audio is not None, ctx.name)

    @property
    def rate(self) -> Fraction:
        return self.info.rate

    def stop(self) -> None:
        """End the input after the frame being read (any thread)."""
        self._stopping.set()

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> VideoFrame:
        if self._frames is None:
            self._frames = self._run()
        return next(self._frames)

    def close(self) -> None:
        """Release the input (again: nothing)."""
        if self._closed:
            return
        self._closed = True
        if self._frames is not None:
            self._frames.close()
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- the frames -------------------------------------------------------------
    def _run(self) -> Generator[VideoFrame, None, None]:
        """Every connection's frames, one clock across them, until the input
        ends, is stopped, or is lost."""
        while True:
            reason = yield from self._decode()
            if self._stopping.is_set() or self.end_reason is not None:
                self.end_reason = self.end_reason or "stopped"
                return
            self._offset = (self._last or 0.0) + self._step
            if self.spec.kind == "file" and self.spec.loop and self.frames_read:
                self._conn.close()
                self._conn = _Connection(self.spec, self.reconnect.timeout_s)
                continue
            if not self.spec.reconnects:
                self.end_reason = f"{self.spec.kind} {self.spec.url}: {reason}"
                return
            if not self._reconnect(reason):
                return

    def _decode(self) -> Generator[VideoFrame, None, str]:
        """One connection's frames; returns why it ended."""
        conn = self._conn
        audio = conn.audio if self._tap is not None else None
        resampler = AudioResampler() if audio is not None else None
        streams = [conn.video] if audio is None else [conn.video, audio]
        try:
            for packet in conn.container.demux(*streams):
                if self._stopping.is_set():
                    return "stopped"
                if packet.stream.index != conn.video.index:
                    for sound in packet.decode():
                        if isinstance(sound, av.AudioFrame):
                            self._audio(conn, sound, resampler)
                    continue
                for picture in packet.decode():
                    if not isinstance(picture, av.VideoFrame):
                        continue
                    frame = self._frame(conn, picture)
                    if frame is None:
                        return "ended"
                    if isinstance(frame, VideoFrame):
                        yield frame
        except av.error.ExitError:
            return f"no data for {self.reconnect.timeout_s:g} s"
        except av.error.FFmpegError as exc:
            return error_reason(exc)
        return "end of input"

    def _frame(self, conn: _Connection, picture: av.VideoFrame) -> VideoFrame | object | None:
        """The next frame (held back to its time for a paced input),
        ``_SKIPPED`` for a stale frame of a live input, or ``None`` once
        ``duration_s`` is reached."""
        source = picture.time
        if source is None or conn.origin is None:
            conn.origin = source if source is not None else 0.0
        t = self._offset + ((source if source is not None else conn.origin) - conn.origin)
        if self._last is not None and t <= self._last:
            t = self._last + self._step  # no time, or one that goes back: one frame on
        if self._duration is not None and t >= self._duration:
            self.end_reason = f"--duration {self._duration:g} s reached"
            return None
        if self.spec.paced:
            now = self._clock()
            self._wall0 = now - t if self._wall0 is None else self._wall0
            wait = self._wall0 + t - now
            if wait > 0 and self._stopping.wait(wait):
                return None
        elif self._behind():
            self._last = t
            self.dropped += 1
            return _SKIPPED
        self._last = t
        index, self.frames_read = self.frames_read, self.frames_read + 1
        return VideoFrame(index=index, source_index=index, time=t, pixels=self._pixels(picture))

    def _behind(self) -> bool:
        """Whether the input had frames waiting: this frame is the third or
        later of a run that each came right after the one before (within a
        quarter of a frame's time; two at once is only jitter).  Such frames
        are dropped before the cost of converting them."""
        now = self._clock()
        previous, self._arrived = self._arrived, now
        quick = previous is not None and now - previous < CATCH_UP * self._step
        self._run_of_quick = self._run_of_quick + 1 if quick else 0
        return self._run_of_quick >= 2

    def _audio(self, conn: _Connection, sound: av.AudioFrame, resampler: AudioResampler | None) -> None:
        """Decoded audio into the tap, on the video frames' clock (audio
        before the first video frame of a connection is left out)."""
        if self._tap is None or resampler is None or conn.origin is None or sound.time is None:
            return
        for chunk in resampler.chunks(sound, self._offset + sound.time - conn.origin):
            self._tap.put(chunk)

    def _pixels(self, picture: av.VideoFrame) -> np.ndarray:
        """RGB ``(H, W, 3)`` uint8 of the reader's frame size, read-only."""
        rgb = self._rgb(picture)
        size = (self.info.width, self.info.height)
        if (rgb.shape[1], rgb.shape[0]) != size:
            rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
        out = np.ascontiguousarray(rgb)
        out.setflags(write=False)
        return out

    def _reconnect(self, reason: str) -> bool:
        """Reopen a network input that dropped, waiting longer before each
        attempt; ``False`` (with :attr:`lost` set) when none worked."""
        self._conn.close()
        last = reason
        for delay in self.reconnect.delays():
            if self._stopping.wait(delay):
                self.end_reason = "stopped"
                return False
            try:
                self._conn = _Connection(self.spec, self.reconnect.timeout_s)
            except FaceweaveError as exc:
                last = str(exc).split(f"{self.spec.url}: ", 1)[-1]  # the reason, without the URL again
                continue
            self.reconnects += 1
            return True
        n = self.reconnect.attempts
        tried = f"{n} reconnect attempt{'s' if n != 1 else ''} failed" if n else "reconnecting is off (--reconnect 0)"
        self.end_reason = f"input {self.spec.url} lost ({reason}); {tried}"
        if n and last != reason:
            self.end_reason += f" (the last: {last})"
        self.lost = StreamLostError(self.end_reason)
        return False
