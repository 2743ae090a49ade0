"""Frames as a stream (:class:`FrameStream`): a decoder thread, planning in
the calling thread, a pool of render threads and an encoder thread, joined by
bounded queues so that memory does not grow with the length of the video.

The stream is generic over where frames come from (a :class:`FrameSource`:
a :class:`~faceweave.video.io.VideoReader`, or a camera or a network
stream: :mod:`faceweave.live`), where they go (a :class:`FrameSink`, opened on the encoder
thread: a :class:`~faceweave.video.io.VideoWriter`), what is done to them
(a :class:`FrameWork`), and how a decoded frame is handed on
(a :class:`QueuePolicy`).

Errors: an error in any thread halts every thread promptly and is raised
from :meth:`FrameStream.run` once they have wound down; the caller's
``stop`` event is only read, never set, and a set stop is raised as
KeyboardInterrupt.  The sink is left by an exception (``_Stop``, or the
error) whenever the run does not complete, so it abandons its output."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, closing
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, cast, runtime_checkable

import numpy as np

from faceweave.errors import InvalidOptionError
from faceweave.timing import timed
from faceweave.video.io import VideoFrame

#: what the decoder thread finds for a frame ahead of planning (``FrameWork.ahead``)
A = TypeVar("A")
#: a frame's plan (``FrameWork.plan``)
P = TypeVar("P")

#: the last item of a queue: the stage before it is done
_END = object()


class FrameSource(Protocol):
    """Frames in order, read on the decoder thread, closed there when done."""

    def __iter__(self) -> Iterator[VideoFrame]: ...

    def close(self) -> None: ...


class FrameSink(Protocol):
    """Where the stream's frames go, in order: ``(H, W, 3)`` uint8 RGB pixels
    shown at ``time`` seconds.  Used as a context manager on the encoder
    thread; leaving it by an exception abandons the output."""

    def write(self, pixels: np.ndarray, time: float | None = None) -> None: ...


class FrameWork(Protocol[A, P]):
    """What the stream does to each frame, stage by stage."""

    def ahead(self, frame: VideoFrame) -> A:
        """On the decoder thread: work that depends on the frame alone
        (the scheduled face detections), handed to :meth:`plan`."""
        ...

    def plan(self, frame: VideoFrame, ahead: A) -> P | None:
        """On the calling thread, in frame order (it may hold state): the
        frame's plan, or ``None`` to pass the frame through untouched."""
        ...

    def render(self, frame: VideoFrame, plan: P) -> np.ndarray:
        """On a render thread: the frame's new pixels (frames are
        independent here, so several are rendered at once)."""
        ...


@runtime_checkable
class BatchedWork(FrameWork[A, P], Protocol[A, P]):
    """A :class:`FrameWork` that can also render several frames in one call
    (a neural swapper's faces of several frames in one inference)."""

    def render_batch(self, frames: Sequence[tuple[VideoFrame, P]]) -> list[np.ndarray]:
        """On a render thread: the new pixels of each ``(frame, plan)``, in order."""
        ...


@dataclass(frozen=True, eq=False)
class _InBatch:
    """Frame ``index`` of a batch rendered by ``future``: what the encoder waits for."""

    future: Future[list[np.ndarray]]
    index: int

    def result(self) -> np.ndarray:
        return self.future.result()[self.index]


class QueuePolicy(Protocol):
    """How the decoder thread hands a frame to planning.

    :class:`BlockingQueue` (files): wait while the queue is full, so that
    every frame is swapped.  :class:`LatestFrameQueue` (live sources): the
    newest frame wins, stale ones are dropped and counted (never the end
    marker)."""

    def offer(self, q: queue.Queue, item: object, halted: Callable[[], bool]) -> bool:
        """Put ``item`` on ``q``; ``False`` when the stream halted first."""
        ...


@dataclass(frozen=True)
class BlockingQueue:
    """Wait for room in the queue, looking every ``poll_s`` seconds whether
    the stream halted."""

    poll_s: float = 0.1

    def offer(self, q: queue.Queue, item: object, halted: Callable[[], bool]) -> bool:
        while not halted():
            try:
                q.put(item, timeout=self.poll_s)
                return True
            except queue.Full:
                continue
        return False


class LatestFrameQueue:
    """Newest frame wins (live sources): when the queue is full, the oldest
    waiting frame is dropped to make room, so a frame never waits behind a
    slow stage for longer than the queue holds.  :attr:`dropped` counts the
    frames dropped (only the decoder thread offers, so only it counts).
    The end marker is never dropped and drops nothing: it waits for room.

    Planning never sees a dropped frame; the tracker follows its faces from
    their last place on the next frame it gets, and detects on its own when
    a scheduled detection was dropped with its frame."""

    def __init__(self, poll_s: float = 0.1) -> None:
        self.poll_s = poll_s
        self.dropped = 0

    def offer(self, q: queue.Queue, item: object, halted: Callable[[], bool]) -> bool:
        if item is _END:
            return BlockingQueue(self.poll_s).offer(q, item, halted)
        while not halted():
            try:
                q.put_nowait(item)
                return True
            except queue.Full:
                pass
            try:
                q.get_nowait()  # the oldest waiting frame is stale now
                self.dropped += 1
            except queue.Empty:
                pass  # planning took it meanwhile: room now
        return False


class _Stop(Exception):
    """Raised inside the encoder to abandon the output."""


class FrameStream(Generic[A, P]):
    """Decode -> plan -> render -> encode, once (:meth:`run`).

    ``open_sink`` is called on the encoder thread.  ``queue_size``: frames
    held between decoding and planning, and between planning and encoding;
    ``workers``: render threads.  ``policy`` hands decoded frames on (frames
    to the encoder always wait for room: they are written in order);
    ``plan_on_room`` (live sources): take the next frame to plan only once
    the encoder's queue has room, so that it is the newest, not one that
    waits after planning.  ``batch``: planned frames rendered together
    (:class:`BatchedWork`), at most ``queue_size``; a frame passed through
    untouched, and the end, render the frames waiting for a batch as they
    are."""

    def __init__(
        self,
        source: FrameSource,
        open_sink: Callable[[], AbstractContextManager[FrameSink]],
        work: FrameWork[A, P],
        *,
        queue_size: int = 8,
        workers: int = 2,
        stop: threading.Event | None = None,
        policy: QueuePolicy = BlockingQueue(),
        plan_on_room: bool = False,
        batch: int = 1,
    ) -> None:
        if not 1 <= batch <= max(1, queue_size):
            raise InvalidOptionError(f"a batch of frames must be from 1 to the queue size {queue_size}; got {batch}")
        if batch > 1 and not isinstance(work, BatchedWork):
            raise InvalidOptionError(f"a batch of {batch} frames needs work that renders batches (render_batch)")
        self.batch = batch
        self.source, self.open_sink, self.work = source, open_sink, work
        self.workers = max(1, workers)
        self.policy = policy
        self.plan_on_room = plan_on_room
        self._blocking = BlockingQueue()
        self._stop = stop or threading.Event()  # the caller's: a stop it asked for, only read
        self._halt = threading.Event()  # ours: set by an error in any thread (or the caller's stop)
        self._errors: list[BaseException] = []
        self._frames_in: queue.Queue = queue.Queue(maxsize=queue_size)
        self._frames_out: queue.Queue = queue.Queue(maxsize=queue_size)
        #: frames planned (and handed to the encoder)
        self.frames = 0
        self._decode_timings: dict[str, float] = {}  # only the decoder thread adds to it
        self._encode_timings: dict[str, float] = {}  # only the encoder thread adds to it

    def timings_ms(self) -> dict[str, float]:
        """Milliseconds spent decoding (the source's own time, not the work
        done ahead) and writing frames into the sink, over the run: wall
        time, and the thread's CPU time (:mod:`faceweave.timing`)."""
        return {**self._decode_timings, **self._encode_timings}

    def halted(self) -> bool:
        return self._halt.is_set() or self._stop.is_set()

    def _fail(self, exc: BaseException) -> None:
        self._errors.append(exc)
        self._halt.set()

    def _take(self, q: queue.Queue) -> object:
        """The next item of ``q``, or the end marker once the stream halted
        while waiting."""
        while True:
            try:
                return q.get(timeout=self._blocking.poll_s)
            except queue.Empty:
                if self.halted():
                    return _END

    # -- threads --------------------------------------------------------------
    def _decode(self) -> None:
        """Decode, and do each frame's work ahead of planning."""
        try:
            with closing(self.source):
                frames = iter(self.source)
                while True:
                    with timed(self._decode_timings, "decode"):
                        frame = next(frames, None)
                    if frame is None:
                        break
                    if not self.policy.offer(self._frames_in, (frame, self.work.ahead(frame)), self.halted):
                        return
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            self._fail(exc)
        finally:
            self.policy.offer(self._frames_in, _END, self.halted)

    def _encode(self) -> None:
        """Write the frames in order, waiting for each one's render."""
        try:
            with self.open_sink() as sink:
                while True:
                    item = self._take(self._frames_out)
                    if item is _END:
                        if self.halted():
                            raise _Stop()
                        break
                    pixels, when = cast("tuple[np.ndarray | Future[np.ndarray] | _InBatch, float]", item)
                    if isinstance(pixels, (Future, _InBatch)):
                        try:
                            pixels = pixels.result()
                        except CancelledError:
                            raise _Stop() from None
                    with timed(self._encode_timings, "encode"):
                        sink.write(pixels, when)
        except _Stop:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            self._fail(exc)

    def _plan_all(self, pool: ThreadPoolExecutor, progress: Callable[[int], None] | None) -> None:
        """Plan the decoded frames in order and hand them, or their renders, to the encoder."""
        waiting: list[tuple[VideoFrame, P]] = []  # planned frames waiting for a batch
        while True:
            if self.plan_on_room and not self._room_toward_encoder():
                return
            item = self._take(self._frames_in)
            if item is _END:
                if not self.halted():
                    self._render_batch(pool, waiting)
                return
            frame, ahead = cast("tuple[VideoFrame, A]", item)
            plan = self.work.plan(frame, ahead)
            self.frames += 1
            if plan is not None and self.batch > 1:
                waiting.append((frame, plan))
                if len(waiting) == self.batch and not self._render_batch(pool, waiting):
                    return
            elif not self._render_batch(pool, waiting) or not self._hand_on(pool, frame, plan):
                return
            if progress is not None:
                progress(self.frames)

    def _hand_on(self, pool: ThreadPoolExecutor, frame: VideoFrame, plan: P | None) -> bool:
        """One frame to the encoder: untouched, or its render; ``False`` once halted."""
        pixels = frame.pixels if plan is None else pool.submit(self.work.render, frame, plan)
        return self._blocking.offer(self._frames_out, (pixels, frame.time), self.halted)

    def _render_batch(self, pool: ThreadPoolExecutor, waiting: list[tuple[VideoFrame, P]]) -> bool:
        """The frames ``waiting`` for a batch rendered together and handed
        to the encoder in order (``waiting`` is emptied); ``False`` once halted."""
        if not waiting:
            return True
        work = cast("BatchedWork[A, P]", self.work)
        future = pool.submit(work.render_batch, list(waiting))
        frames, waiting[:] = list(waiting), []
        return all(
            self._blocking.offer(self._frames_out, (_InBatch(future, n), frame.time), self.halted)
            for n, (frame, _) in enumerate(frames)
        )

    def _room_toward_encoder(self) -> bool:
        """Wait until the encoder's queue has room; ``False`` once halted."""
        while self._frames_out.full():
            if self.halted():
                return False
            time.sleep(0.002)
        return True

    # -- the run --------------------------------------------------------------
    def run(self, progress: Callable[[int], None] | None = None) -> int:
        """Stream every frame of the source into the sink; returns the number
        of frames.  ``progress(frames)`` is called after each frame planned."""
        decoder = threading.Thread(target=self._decode, name="faceweave-decode", daemon=True)
        encoder = threading.Thread(target=self._encode, name="faceweave-encode", daemon=True)
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="faceweave-render")
        decoder.start()
        encoder.start()
        try:
            self._plan_all(pool, progress)
        except BaseException:
            self._halt.set()
            raise
        finally:
            if not self.halted():
                self._blocking.offer(self._frames_out, _END, self.halted)
            else:
                pool.shutdown(wait=False, cancel_futures=True)
            decoder.join()
            encoder.join()
            pool.shutdown(wait=True)
        if self._errors:
            raise self._errors[0]
        if self._stop.is_set():
            raise KeyboardInterrupt("video swap stopped")
        return self.frames
