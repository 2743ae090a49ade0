"""Calls of several threads to one model run as one inference: :class:`BatchingModel`.

Live sessions on one node each swap their own frames, one face at a time,
on their own render threads.  On an accelerator a call's fixed cost (the
launch, the copies, the synchronisation) is paid per call, not per face, so
faces from several sessions go through the model together when they arrive
together.  A :class:`BatchingModel` wraps a model whose inputs and outputs
all have a dynamic first dimension: the first caller to find no batch
being gathered gathers one, waiting for the other threads that have called
the model lately (``idle_s``) to send theirs, at most ``window_ms``, then
runs the calls whose feeds fit together (the same shapes beyond the batch
dimension and the same dtypes), up to ``max_rows`` rows, as one inference,
and hands each caller its rows.  A thread calling alone never waits.

Every row of these models is computed on its own (a face swap's batch
items do not see each other), so a caller gets the values its own call
would have given, within the runtime's rounding for another batch size.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from faceweave.errors import ModelError
from faceweave.models.spec import is_dynamic
from faceweave.runtime.backend import InferenceModel, TensorInfo

#: a thread that has not called the model for this long is not waited for
IDLE_S = 1.0


def batchable(model: InferenceModel) -> bool:
    """Whether every input and output of ``model`` has a dynamic first dimension."""
    tensors = (*model.inputs, *model.outputs)
    return bool(model.inputs) and all(len(t.shape) > 0 and is_dynamic(t.shape[0]) for t in tensors)


@dataclass
class _Call:
    """One caller's feeds, and what it gets back."""

    feeds: dict[str, np.ndarray]
    rows: int
    shapes: tuple[tuple[str, tuple[int, ...], str], ...]
    #: in a batch being run (its caller waits for ``done``)
    taken: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    outputs: dict[str, np.ndarray] | None = None
    error: BaseException | None = None

    @classmethod
    def of(cls, feeds: Mapping[str, np.ndarray], inputs: tuple[TensorInfo, ...], label: str) -> _Call:
        arrays = {name: np.asarray(value) for name, value in feeds.items()}
        names = sorted(i.name for i in inputs)
        if sorted(arrays) != names:
            raise ModelError(f"{label}: feeds {sorted(arrays)} do not match the inputs {names}")
        rows = {int(a.shape[0]) if a.ndim else -1 for a in arrays.values()}
        if len(rows) != 1 or min(rows) < 1:
            raise ModelError(f"{label}: every input needs the same number of rows (1 or more) to batch")
        shapes = tuple(sorted((name, a.shape[1:], a.dtype.str) for name, a in arrays.items()))
        return cls(arrays, rows.pop(), shapes)

    def result(self) -> dict[str, np.ndarray]:
        if self.error is not None:
            raise self.error
        assert self.outputs is not None
        return self.outputs


class BatchingModel:
    """``model`` shared by several threads, their calls run together
    (module docstring).  ``window_ms``: how long a gathering call waits for
    the other active callers at most; ``max_rows``: the most rows in one
    inference (a call with more runs on its own); ``idle_s``: a thread that
    has not called for this long is not waited for.  :attr:`runs` and
    :attr:`calls` count the inferences and the calls.  Closing it closes
    ``model``.

    Raises:
        ModelError: ``model`` has an input or output whose first dimension
            is fixed (it cannot take a batch).
    """

    def __init__(self, model: InferenceModel, *, window_ms: float, max_rows: int = 16, idle_s: float = IDLE_S) -> None:
        if not batchable(model):
            raise ModelError(f"{model.label}: a fixed first dimension somewhere; its calls cannot be batched")
        if window_ms < 0 or max_rows < 1 or idle_s <= 0:
            raise ValueError("window_ms must be 0 or more, max_rows at least 1 and idle_s above 0")
        self.model = model
        self.label = model.label
        self.inputs = model.inputs
        self.outputs = model.outputs
        self.providers = model.providers
        self.window_s = window_ms / 1000.0
        self.max_rows = max_rows
        self.idle_s = idle_s
        self.runs = 0
        self.calls = 0
        self._lock = threading.Condition()
        self._pending: list[_Call] = []
        self._gathering = False
        self._inside = 0  # callers in run(): pending, gathering or waiting for their batch
        self._seen: dict[int, float] = {}

    def __repr__(self) -> str:
        return f"BatchingModel({self.model!r}, window_ms={self.window_s * 1000:g}, max_rows={self.max_rows})"

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs of ``feeds`` (every input by name, the same rows in
        each), run with whatever other threads send meanwhile."""
        call = _Call.of(feeds, self.inputs, self.label)
        with self._lock:
            self.calls += 1
            self._inside += 1
            self._seen[threading.get_ident()] = time.monotonic()
            self._pending.append(call)
            self._lock.notify_all()
        try:
            return self._take_part(call)
        finally:
            with self._lock:
                self._inside -= 1

    def _take_part(self, call: _Call) -> dict[str, np.ndarray]:
        """Wait while another caller gathers; then either wait for the batch
        that took ``call``, or gather one and run it."""
        with self._lock:
            while not call.taken and self._gathering:
                self._lock.wait()
            gathers = not call.taken
            self._gathering = self._gathering or gathers
        if not gathers:  # another caller took it into its batch
            call.done.wait()
            return call.result()
        try:
            batch = self._gather(call)
        finally:
            with self._lock:
                self._gathering = False
                self._lock.notify_all()
        self._run(batch)
        return call.result()

    def close(self) -> None:
        self.model.close()

    def _gather(self, own: _Call) -> list[_Call]:
        """The calls to run with ``own``, taken from the pending ones once
        every other active caller has sent one, or the window has passed."""
        deadline = time.monotonic() + self.window_s
        with self._lock:
            while True:
                fitting = [c for c in self._pending if c.shapes == own.shapes]
                now = time.monotonic()
                waiting_for = self._active(now) - self._inside  # a caller inside run() sends no other call
                if waiting_for <= 0 or sum(c.rows for c in fitting) >= self.max_rows or now >= deadline:
                    break
                self._lock.wait(deadline - now)
            batch = [own]
            rows = own.rows
            for c in fitting:
                if c is not own and rows + c.rows <= self.max_rows:
                    batch.append(c)
                    rows += c.rows
            for c in batch:
                c.taken = True
            self._pending = [c for c in self._pending if not c.taken]
            self.runs += 1
        return batch

    def _active(self, now: float) -> int:
        """How many threads called within ``idle_s`` (the others forgotten)."""
        self._seen = {k: t for k, t in self._seen.items() if now - t <= self.idle_s}
        return len(self._seen)

    def _run(self, batch: list[_Call]) -> None:
        """One inference for ``batch``, each call's rows handed back (or the error to each)."""
        try:
            feeds = batch[0].feeds
            if len(batch) > 1:
                feeds = {name: np.concatenate([c.feeds[name] for c in batch]) for name in feeds}
            outputs = self.model.run(feeds)
            total = sum(c.rows for c in batch)
            for name, value in outputs.items():
                if np.asarray(value).shape[:1] != (total,):
                    raise ModelError(f"{self.label}: output {name} has not one row per input row; cannot batch")
            start = 0
            for c in batch:
                c.outputs = {name: np.asarray(v)[start : start + c.rows] for name, v in outputs.items()}
                start += c.rows
        except BaseException as exc:  # noqa: BLE001 - every caller of the batch gets it
            for c in batch:
                c.error = exc
        finally:
            for c in batch:
                c.done.set()
