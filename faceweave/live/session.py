"""One live stream (:class:`LiveSession`): frames in from any
:class:`LiveSource` (a camera or network stream read by
:class:`~faceweave.live.reader.LiveReader`, or frames a transport pushes
into a :class:`~faceweave.live.endpoints.PushSource`), swapped by the video
pipeline's :class:`~faceweave.video.stream.FrameStream` with a
:class:`~faceweave.video.stream.LatestFrameQueue` (the newest frame wins),
out to any number of :class:`~faceweave.live.outputs.LiveOutput`.

The session knows nothing of its transport: the command line reads a
stream and writes files, streams, a virtual camera or a preview; a browser
transport pushes decoded frames in and takes the newest swapped frame out
(:class:`~faceweave.live.endpoints.LatestFrame`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

import numpy as np

from faceweave.errors import InputError
from faceweave.live.audio import AudioTap
from faceweave.live.outputs import LiveOutput, OutgoingFrame
from faceweave.pipeline import ImageInput
from faceweave.provenance.stamp import LazyFrameMarker, Provenance
from faceweave.swappers import SourceFace
from faceweave.threads import frame_parallel_threads
from faceweave.types import Face
from faceweave.video.io import VideoFrame
from faceweave.video.pipeline import VideoSwapper
from faceweave.video.planning import PlannedFace
from faceweave.video.stream import FrameStream, LatestFrameQueue
from faceweave.video.swap_work import SwapWork
from faceweave.video.tracker import FaceTracker

#: audio is taken this far (seconds) ahead of the video frame being written,
#: so the muxers can interleave the two without waiting
AUDIO_LEAD_S = 0.5
#: frames whose arrival time is held for the latency figures (those in flight)
_ARRIVALS_HELD = 256
#: latencies kept for the percentiles (the newest)
_LATENCIES_KEPT = 4096


class LiveSource(Protocol):
    """Frames of a live input (a :class:`~faceweave.video.stream.FrameSource`
    with a nominal rate), which :meth:`stop` ends from any thread."""

    @property
    def rate(self) -> Fraction: ...

    def __iter__(self) -> Iterator[VideoFrame]: ...

    def close(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class LiveOptions:
    """How a live session runs.  ``queue_size``: frames waiting between
    stages (1: the newest frame only); ``workers``: render threads;
    ``provenance``: how frames are marked (``None``: the swapper's run
    provenance, watermark on)."""

    queue_size: int = 1
    workers: int = 2
    detect_every: int = 8
    provenance: Provenance | None = None

    def __post_init__(self) -> None:
        for name in ("queue_size", "workers", "detect_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"live {name} must be a positive integer; got {value!r}")


@dataclass(frozen=True)
class LiveReport:
    """What a live session did.  ``frames_in``: frames the input gave;
    ``frames_out``: frames written to the outputs; ``dropped``: stale frames
    left out so that the newest could go on; latencies are from a frame
    being decoded to it being written (milliseconds, over the newest 4096
    frames); ``end_reason``: why the input ended."""

    frames_in: int
    frames_out: int
    dropped: int
    frames_with_swap: int
    faces_swapped: int
    seconds: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    end_reason: str
    reconnects: int = 0
    audio_dropped: int = 0

    @property
    def fps(self) -> float:
        return self.frames_out / self.seconds if self.seconds > 0 else 0.0

    @property
    def dropped_share(self) -> float:
        return self.dropped / self.frames_in if self.frames_in else 0.0


class _Latency:
    """When frames in flight arrived (by frame time), and the latencies of
    the frames written; thread-safe (the decoder and encoder threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._arrivals: OrderedDict[float, float] = OrderedDict()
        self._latencies: list[float] = []

    def arrived(self, t: float) -> None:
        with self._lock:
            self._arrivals[t] = time.perf_counter()
            while len(self._arrivals) > _ARRIVALS_HELD:
                self._arrivals.popitem(last=False)

    def written(self, t: float) -> None:
        with self._lock:
            began = self._arrivals.pop(t, None)
            if began is not None:
                self._latencies.append((time.perf_counter() - began) * 1000.0)
                del self._latencies[:-_LATENCIES_KEPT]

    def percentiles(self) -> tuple[float | None, float | None]:
        with self._lock:
            if not self._latencies:
                return None, None
            p50, p95 = np.percentile(np.asarray(self._latencies), [50, 95])
            return float(p50), float(p95)


class _LiveWork:
    """A :class:`SwapWork` that also notes when each frame arrived."""

    def __init__(self, inner: SwapWork, latency: _Latency) -> None:
        self.inner, self.latency = inner, latency

    def ahead(self, frame: VideoFrame) -> list[Face] | None:
        self.latency.arrived(frame.time)
        return self.inner.ahead(frame)

    def plan(self, frame: VideoFrame, found: list[Face] | None) -> list[PlannedFace] | None:
        return self.inner.plan(frame, found)

    def render(self, frame: VideoFrame, plan: list[PlannedFace]) -> np.ndarray:
        return self.inner.render(frame, plan)


class _Outputs:
    """The stream's sink: every output, opened at the first frame, each
    frame marked once and written to all of them with the audio up to it."""

    def __init__(
        self,
        outputs: Sequence[LiveOutput],
        rate: Fraction,
        marker: LazyFrameMarker | None,
        audio: AudioTap | None,
        latency: _Latency,
    ) -> None:
        self.outputs, self.rate, self.marker, self.audio, self.latency = list(outputs), rate, marker, audio, latency
        self.opened: list[LiveOutput] = []
        self.frames = 0

    def __enter__(self) -> _Outputs:
        return self

    def write(self, pixels: np.ndarray, time: float | None = None) -> None:
        t = float(time if time is not None else self.frames / float(self.rate))
        if not self.opened:
            for output in self.outputs:
                output.open(pixels.shape[1], pixels.shape[0], self.rate)
                self.opened.append(output)
        frame = OutgoingFrame(pixels, t, self.marker)  # marked once, in the forms the outputs take
        for output in self.outputs:
            output.write(frame)
        if self.audio is not None:
            chunks = self.audio.take(t + AUDIO_LEAD_S)
            for output in self.outputs:
                output.write_audio(chunks)
        self.latency.written(t)
        self.frames += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            for output in self.opened:
                output.abort(exc)
            return
        if self.audio is not None:
            rest = self.audio.take()
            for output in self.opened:
                output.write_audio(rest)
        errors = []
        for output in self.opened:
            try:
                output.close()
            except Exception as error:  # noqa: BLE001 - the others are still closed; the first is raised
                errors.append(error)
        if errors:
            raise errors[0]


class LiveSession:
    """Swap faces in one live stream with a :class:`VideoSwapper`'s models.

    ``sources``: the source photos (prepared once; :meth:`set_sources`
    changes them while the stream runs); ``reference``: the face to replace
    (selection mode ``reference``).  :meth:`run` streams one input into the
    outputs on the calling thread until the input ends or :meth:`stop` is
    called from another thread; the session can then run again."""

    def __init__(
        self,
        video: VideoSwapper,
        sources: Sequence[ImageInput] | Sequence[SourceFace],
        *,
        reference: ImageInput | None = None,
        options: LiveOptions | None = None,
    ) -> None:
        self.video = video
        self.options = options or LiveOptions()
        self._sources = video.prepare_sources(sources)
        self._reference = video._reference(reference)
        self._lock = threading.Lock()
        self._source: LiveSource | None = None
        self._work: SwapWork | None = None
        self._tracker: FaceTracker | None = None
        self._stopped = threading.Event()

    @property
    def sources(self) -> list[SourceFace]:
        return list(self._sources)

    def set_sources(self, sources: Sequence[ImageInput] | Sequence[SourceFace]) -> None:
        """Swap in new source photos from the next frame planned.

        Raises:
            NoFaceError: a photo has no face; the previous sources are kept.
        """
        with self._lock:
            tracker = self._tracker
        # the analyser's models are the running tracker's: prepared under its lock
        with tracker.models_lock if tracker is not None else contextlib.nullcontext():
            prepared = self.video.prepare_sources(sources)
        with self._lock:
            self._sources = prepared
            if self._work is not None:
                self._work.sources = prepared

    def stop(self) -> None:
        """End the run in progress (from any thread): its input ends, the
        frames in flight are written, the outputs are finished."""
        with self._lock:
            self._stopped.set()
            if self._source is not None:
                self._source.stop()

    def run(self, source: LiveSource, outputs: Sequence[LiveOutput], *, audio: AudioTap | None = None) -> LiveReport:
        """Stream ``source`` into ``outputs`` (``audio``: the tap the source
        fills, passed through to the outputs) until the input ends or
        :meth:`stop`; returns the report.  An error in any stage abandons
        the outputs and is raised."""
        swapper = self.video.swapper
        provenance = self.options.provenance or swapper.run_provenance()
        small = self.video._small_faces()
        tracker = FaceTracker(swapper.analyser, detect_every=self.options.detect_every, small_faces=small)
        work = SwapWork(self.video, tracker, self._sources, self._reference, None)
        latency, policy = _Latency(), LatestFrameQueue()
        marker = LazyFrameMarker(provenance) if provenance.watermark else None
        sink = _Outputs(outputs, source.rate, marker, audio, latency)
        stream = FrameStream(
            source,
            lambda: sink,
            _LiveWork(work, latency),
            queue_size=self.options.queue_size,
            workers=self.options.workers,
            policy=policy,
            plan_on_room=True,
        )
        with self._lock:
            self._source, self._work, self._tracker = source, work, tracker
            if self._stopped.is_set():
                source.stop()
        started = time.perf_counter()
        try:
            with frame_parallel_threads():
                stream.run()
        finally:
            tracker.close()
            with self._lock:
                self._source, self._work, self._tracker = None, None, None
                self._stopped.clear()
        return self._report(source, stream, policy, work, sink, latency, audio, time.perf_counter() - started)

    @staticmethod
    def _report(source, stream, policy, work, sink, latency, audio, seconds: float) -> LiveReport:
        dropped = policy.dropped + int(getattr(source, "dropped", 0))
        p50, p95 = latency.percentiles()
        return LiveReport(
            frames_in=stream.frames + dropped,
            frames_out=sink.frames,
            dropped=dropped,
            frames_with_swap=work.frames_with_swap,
            faces_swapped=work.faces_swapped,
            seconds=seconds,
            latency_p50_ms=p50,
            latency_p95_ms=p95,
            end_reason=getattr(source, "end_reason", None) or "ended",
            reconnects=int(getattr(source, "reconnects", 0)),
            audio_dropped=audio.dropped if audio is not None else 0,
        )
