"""Frames in and out of a live session for transports that hand over
decoded frames (a browser's WebRTC track, a test): :class:`PushSource`
takes pushed frames (the newest wins), :class:`LatestFrame` holds the
newest swapped frame for a reader (a preview window, an outgoing track).
Also the virtual camera (:class:`VirtualCamera`)."""

from __future__ import annotations

import importlib
import queue
import threading
import time as clock
from collections.abc import Iterator
from fractions import Fraction

import numpy as np

from faceweave.errors import InputError, OutputUnavailableError
from faceweave.live.audio import AudioChunk
from faceweave.live.outputs import OutgoingFrame, OutputSpec
from faceweave.video.io import VideoFrame

_END = object()


class PushSource:
    """A :class:`~faceweave.video.stream.FrameSource` fed by :meth:`push`
    from another thread; at most ``max_frames`` wait (the oldest is dropped,
    and counted, when a push finds it full).  :meth:`end` (or :meth:`stop`)
    ends the frames; a frame pushed after it is refused."""

    def __init__(self, rate: Fraction | int = 30, *, max_frames: int = 2) -> None:
        self.rate = Fraction(rate)
        self._frames: queue.Queue = queue.Queue(maxsize=max(1, max_frames))
        self._ended = threading.Event()
        self._lock = threading.Lock()  # pushes from several threads keep times in order
        self._first: float | None = None
        self._last: float | None = None
        self._index = 0
        self.dropped = 0

    def push(self, pixels: np.ndarray, time: float | None = None) -> None:
        """Hand in one ``(H, W, 3)`` uint8 RGB frame shown at ``time``
        seconds (default: seconds since the first push).

        Raises:
            InputError: not an RGB frame, or the source has ended.
        """
        px = np.asarray(pixels)
        if px.dtype != np.uint8 or px.ndim != 3 or px.shape[2] != 3:
            raise InputError(f"live frames must be uint8 (H, W, 3) RGB; got {px.dtype} {px.shape}")
        with self._lock:
            if self._ended.is_set():
                raise InputError("the live session has ended; no more frames are taken")
            now = clock.monotonic()
            self._first = now if self._first is None else self._first
            t = now - self._first if time is None else float(time)
            if self._last is not None and t <= self._last:
                t = self._last + 1 / float(self.rate)
            self._last = t
            frame = VideoFrame(index=self._index, source_index=self._index, time=t, pixels=_read_only(px))
            self._index += 1
            self._put(frame)

    def _put(self, item: object) -> None:
        while True:
            try:
                self._frames.put_nowait(item)
                return
            except queue.Full:
                try:
                    self._frames.get_nowait()
                    self.dropped += 1
                except queue.Empty:
                    pass

    def end(self) -> None:
        with self._lock:
            if not self._ended.is_set():
                self._ended.set()
                self._put(_END)

    stop = end

    def __iter__(self) -> Iterator[VideoFrame]:
        while True:
            item = self._frames.get()
            if item is _END:
                return
            yield item

    def close(self) -> None:
        self.end()


def _read_only(pixels: np.ndarray) -> np.ndarray:
    out = np.array(pixels, copy=True, order="C")
    out.setflags(write=False)
    return out


class LatestFrame:
    """A :class:`~faceweave.live.outputs.LiveOutput` that keeps only the
    newest frame, for a reader on another thread (:meth:`get`)."""

    def __init__(self, spec: OutputSpec | None = None) -> None:
        self.spec = spec or OutputSpec("preview")
        self._changed = threading.Condition()
        self._frame: tuple[int, OutgoingFrame] | None = None
        self._closed = False

    def open(self, width: int, height: int, rate: Fraction) -> None:
        return None

    def write(self, frame: OutgoingFrame) -> None:
        self.prepare(frame)
        with self._changed:
            number = 1 if self._frame is None else self._frame[0] + 1
            self._frame = (number, frame)
            self._changed.notify_all()

    def prepare(self, frame: OutgoingFrame) -> None:
        """Make the form of ``frame`` that the reader takes while still on
        the encoder thread (here: RGB, marked)."""
        frame.rgb  # noqa: B018 - made here, read by the reader

    def write_audio(self, chunks: list[AudioChunk]) -> None:
        return None

    def get(self, after: int = 0, timeout: float | None = None) -> tuple[int, OutgoingFrame] | None:
        """``(number, frame)`` of the newest frame once its number is above
        ``after`` (frames count from 1); ``None`` on timeout or once closed
        with nothing newer."""

        def newer() -> bool:
            return self._frame is not None and self._frame[0] > after

        with self._changed:
            self._changed.wait_for(lambda: self._closed or newer(), timeout)
            return self._frame if newer() else None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def abort(self, exc: BaseException | None) -> None:
        self.close()


class VirtualCamera:
    """A :class:`~faceweave.live.outputs.LiveOutput` into a virtual camera
    (pyvirtualcam: v4l2loopback on Linux, OBS's camera elsewhere), which
    conferencing and streaming programs then read as a webcam."""

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self._camera = None

    def open(self, width: int, height: int, rate: Fraction) -> None:
        try:
            pyvirtualcam = importlib.import_module("pyvirtualcam")
        except ImportError:
            raise OutputUnavailableError("--output vcam needs pyvirtualcam: pip install 'faceweave[live]'") from None
        try:
            self._camera = pyvirtualcam.Camera(
                width, height, float(rate), device=self.spec.target or None, fmt=pyvirtualcam.PixelFormat.RGB
            )
        except (RuntimeError, ValueError) as exc:
            raise OutputUnavailableError(f"--output {self.spec.label}: {exc}") from None

    def write(self, frame: OutgoingFrame) -> None:
        if self._camera is not None:
            self._camera.send(np.ascontiguousarray(frame.rgb))

    def write_audio(self, chunks: list[AudioChunk]) -> None:
        return None  # a camera has no sound

    def close(self) -> None:
        if self._camera is not None:
            self._camera.close()
            self._camera = None

    def abort(self, exc: BaseException | None) -> None:
        self.close()
