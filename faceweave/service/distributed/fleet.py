"""What a worker's processes share about its condition: :class:`WorkerState`.

Made in the worker's main process before the prefork pool forks, in shared
memory, so that a task process can say "my device failed its self-test" or
"a task started" and the main process (its health server, its supervisor
thread, its ``/metrics``) sees it:

* ``readiness``: which task processes have warm models (:class:`WorkerReadiness`);
* ``healthy`` and ``fault``: cleared (with the reason) by a device fault; the
  health endpoints then answer 503 and the worker stops taking jobs;
* ``draining``: set when the worker shuts down (SIGTERM, ``--max-idle``):
  running video work is handed back instead of finished;
* ``busy`` and the time the last task ended: the busy gauge and the idle
  release.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from faceweave.service.distributed.health import WorkerReadiness

_FAULT_CHARS = 400


class WorkerState:
    """Shared between a worker's main process and its task processes."""

    def __init__(self, processes: int) -> None:
        self.readiness = WorkerReadiness(processes)
        self._healthy = multiprocessing.Value("b", 1)
        self._fault: Any = multiprocessing.Array("c", _FAULT_CHARS)
        self._draining = multiprocessing.Value("b", 0)
        self._busy = multiprocessing.Value("i", 0)
        self._last_active = multiprocessing.Value("d", time.time())

    # -- health ---------------------------------------------------------------
    @property
    def healthy(self) -> bool:
        return bool(self._healthy.value)

    @property
    def fault(self) -> str:
        """Why the worker is unhealthy ("" while healthy)."""
        return self._fault.value.decode("utf-8", "replace")

    def mark_faulty(self, reason: str) -> None:
        """A device fault: unhealthy from now on (until the worker restarts)."""
        with self._healthy.get_lock():
            if self._healthy.value:
                self._fault.value = reason.encode("utf-8", "replace")[: _FAULT_CHARS - 1]
                self._healthy.value = 0

    # -- shutting down ----------------------------------------------------------
    @property
    def draining(self) -> bool:
        return bool(self._draining.value)

    def start_draining(self) -> None:
        self._draining.value = 1

    # -- work -----------------------------------------------------------------
    @property
    def busy(self) -> int:
        return int(self._busy.value)

    @contextmanager
    def task(self) -> Iterator[None]:
        """Counts one running task for the ``with`` body."""
        with self._busy.get_lock():
            self._busy.value += 1
        try:
            yield
        finally:
            with self._busy.get_lock():
                self._busy.value -= 1
                self._last_active.value = time.time()

    def touch(self) -> None:
        """Work just happened (or the worker just became ready): the idle time starts now."""
        self._last_active.value = time.time()

    def idle_seconds(self, now: float | None = None) -> float:
        """Seconds since the last task ended; 0 while one runs."""
        if self.busy:
            return 0.0
        now = time.time() if now is None else now
        return max(0.0, now - float(self._last_active.value))
