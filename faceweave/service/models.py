"""Models loaded once per worker, and the slots that synchronous swaps borrow.

A :class:`JobModels` owns one prepared :class:`~faceweave.analysis.FaceAnalyser`
(the detector, mesh and embedding models) for the default analysis options,
an :class:`AnalyserCache` of analysers for the jobs that choose another face
detector or landmarker, and builds the light
:class:`~faceweave.pipeline.FaceSwapper` a job's options need on top of the
analyser for its options, keeping the last one for the next job with the
same options.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from faceweave.errors import NotReadyError
from faceweave.options import AnalysisOptions, RuntimeOptions, SwapOptions

if TYPE_CHECKING:
    from faceweave.analysis import FaceAnalyser
    from faceweave.pipeline import FaceSwapper
    from faceweave.sessions import ModelSessions

#: analysers for other analysis options than the default kept per worker
ANALYSERS = 2


@dataclass(frozen=True)
class ModelTimes:
    """Seconds each model took to load and to warm up (by model name)."""

    load_s: dict[str, float] = field(default_factory=dict)
    warmup_s: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Analyser:
    analyser: FaceAnalyser
    sessions: ModelSessions | None

    def close(self) -> None:
        self.analyser.close()
        if self.sessions is not None:
            self.sessions.close()


class AnalyserCache:
    """Analysers per (analysis options, runtime) -- a job's face detector
    and landmarker, loaded from the worker's models folder on its provider --
    the ``capacity`` used last kept open, the one used longest ago closed
    when another is needed.  Not for use by two threads at once."""

    def __init__(self, capacity: int = ANALYSERS) -> None:
        if capacity < 1:
            raise ValueError("an analyser cache keeps at least one analyser")
        self.capacity = capacity
        self._entries: OrderedDict[tuple[AnalysisOptions, RuntimeOptions], _Analyser] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, analysis: AnalysisOptions, runtime: RuntimeOptions) -> FaceAnalyser:
        """The analyser for ``analysis`` (made and kept on first use).

        Raises:
            ChosenModelMissingError: a model it chooses has no file (nothing
                is loaded, nothing already kept is closed).
        """
        key = (analysis, runtime)
        entry = self._entries.get(key)
        if entry is None:
            entry = _open_analyser(analysis, runtime)
            self._entries[key] = entry
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)[1].close()
        self._entries.move_to_end(key)
        return entry.analyser

    def close(self) -> None:
        while self._entries:
            self._entries.popitem(last=False)[1].close()


def _open_analyser(analysis: AnalysisOptions, runtime: RuntimeOptions) -> _Analyser:
    from faceweave.analysis import FaceAnalyser
    from faceweave.sessions import ModelSessions

    sessions = ModelSessions(runtime) if analysis.onnx_models() else None
    try:
        return _Analyser(FaceAnalyser(analysis, sessions=sessions), sessions)
    except BaseException:
        if sessions is not None:
            sessions.close()
        raise


class JobModels:
    """One worker's models.  Not for use by two threads at once; call :meth:`close`.

    ``sessions``: where the swappers built here load their neural models
    from, shared with other :class:`JobModels` (a node's live sessions: one
    loaded copy of each model, their calls batched), used for the options
    whose runtime is its runtime; its owner closes it.  Without it each
    swapper loads its own."""

    def __init__(self, *, analysers: int = ANALYSERS, sessions: ModelSessions | None = None) -> None:
        from faceweave.analysis import FaceAnalyser

        self.sessions = sessions
        self.analyser = FaceAnalyser(SwapOptions().analysis)
        #: the analysers of jobs that choose other analysis options (detector, landmarker, scores)
        self.analysers = AnalyserCache(analysers)
        self._swapper: FaceSwapper | None = None
        self._options: SwapOptions | None = None

    def prepare(self) -> float:
        """Load and warm up the models; returns the milliseconds it took."""
        return self.swapper(SwapOptions()).prepare()

    def prepare_timed(self, options: SwapOptions | None = None) -> ModelTimes:
        """:meth:`prepare`, timed per model: the analysis models (detector,
        mesh, embedder), the swapper, the occluders and every neural model
        the swapper opened (their own load and warm-up records)."""
        swapper = self.swapper(options or SwapOptions())
        times = ModelTimes()

        def timed(into: dict[str, float], name: str, work) -> None:
            began = time.perf_counter()
            work()
            into[name] = into.get(name, 0.0) + time.perf_counter() - began

        timed(times.load_s, "analysis", lambda: self.analyser.prepare(embeddings=True))
        timed(times.warmup_s, "analysis", lambda: self.analyser.analyse(np.zeros((64, 64, 3), np.uint8)))
        timed(times.load_s, f"swapper:{swapper.options.swapper}", swapper.swapper.prepare)
        timed(times.load_s, "occluders", swapper.occluders.prepare)
        for record in swapper.sessions.loads():
            times.load_s[str(record["model"])] = float(record["load_ms"]) / 1000.0
            times.warmup_s[str(record["model"])] = float(record["warmup_ms"]) / 1000.0
        return times

    @property
    def options(self) -> SwapOptions | None:
        """The options of the swapper built last (the running job's)."""
        return self._options

    def swapper(self, options: SwapOptions) -> FaceSwapper:
        """A :class:`FaceSwapper` with ``options`` on the analyser for their
        analysis options (the shared default one, or one of :attr:`analysers`)."""
        from faceweave.pipeline import FaceSwapper

        if self._swapper is None or self._options != options:
            if self._swapper is not None:
                self._swapper.close()  # leaves the shared analysers open
                self._swapper = self._options = None
            analyser = self.analyser_for(options)
            shared = self.sessions if self.sessions is not None and self.sessions.runtime == options.runtime else None
            # no prepared sources kept between jobs: they are other people's photos
            self._swapper = FaceSwapper(options, analyser=analyser, source_cache=0, sessions=shared)
            self._options = options
        return self._swapper

    def analyser_for(self, options: SwapOptions) -> FaceAnalyser:
        """The analyser of ``options.analysis`` (models from ``options.runtime``)."""
        return self.analyser_of(options.analysis, options.runtime)

    def analyser_of(self, analysis: AnalysisOptions, runtime: RuntimeOptions) -> FaceAnalyser:
        """The analyser of ``analysis``: the default one, prepared at start,
        or one kept in :attr:`analysers` (models from ``runtime``)."""
        if analysis == self.analyser.options:
            return self.analyser
        return self.analysers.get(analysis, runtime)

    def close(self) -> None:
        if self._swapper is not None:
            self._swapper.close()
            self._swapper = None
        self.analysers.close()
        self.analyser.close()


class SlotPool:
    """A fixed set of :class:`JobModels` lent one at a time to synchronous swaps."""

    def __init__(self) -> None:
        self._free: queue.Queue[JobModels] = queue.Queue()
        self._all: list[JobModels] = []
        self._lock = threading.Lock()

    def add(self, models: JobModels) -> None:
        with self._lock:
            self._all.append(models)
        self._free.put(models)

    @property
    def size(self) -> int:
        return len(self._all)

    @contextmanager
    def borrow(self, timeout: float) -> Iterator[JobModels]:
        """A free slot for the ``with`` body.

        Raises:
            NotReadyError: no slot exists, or none came free within ``timeout`` seconds.
        """
        if not self._all:
            raise NotReadyError("synchronous swaps are not available on this node (no models loaded)", retry_after=60.0)
        try:
            models = self._free.get(timeout=timeout)
        except queue.Empty:
            raise NotReadyError(
                "all swap slots are busy; try again, or submit a job to POST /v1/jobs", retry_after=2.0
            ) from None
        try:
            yield models
        finally:
            self._free.put(models)

    def close(self) -> None:
        with self._lock:
            for models in self._all:
                models.close()
            self._all.clear()
