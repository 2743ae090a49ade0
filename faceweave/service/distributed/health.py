"""A Celery worker's HTTP health endpoints, for Kubernetes probes: :class:`HealthServer`.

``faceweave worker`` has no HTTP port of its own, so this small server (a
:class:`~faceweave.service.distributed.probehttp.ProbeHttpServer`: one
asyncio loop on a daemon thread of the worker's main process, with request
timeouts and a bounded number of connections) answers:

* ``GET /healthz``: 200 while the worker's main process runs, 503 once a
  device fault made it unhealthy (liveness: Kubernetes restarts it);
* ``GET /readyz``: 200 once every process that runs tasks has loaded and
  warmed up its models and passed its self-test, 503 before, after a device
  fault and while shutting down (readiness, startup);
* ``GET /metrics``: the worker's Prometheus metrics (``docs/METRICS.md``).

Models load where tasks run: in the prefork pool's processes, forked from the
main process.  :class:`WorkerReadiness` therefore keeps the ids of the ready
processes in shared memory made before the fork; a process writes its id when
its models are warm and clears it when it shuts down, and the main process
counts the ids of processes that still run.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faceweave.service.distributed.probehttp import ProbeAnswer, ProbeHttpServer

if TYPE_CHECKING:
    from collections.abc import Callable

    from faceweave.service.distributed.fleet import WorkerState

log = logging.getLogger("faceweave.service.distributed")

#: the worker's health port unless ``--health-port`` says otherwise (the API's is 8000)
DEFAULT_HEALTH_PORT = 8001
#: the most task processes one worker runs (``--concurrency`` allows 64)
MAX_PROCESSES = 64
#: the seconds a connection has for its request line and headers, and for taking the answer
REQUEST_TIMEOUT_S = 5.0
#: connections open at once; one more closes the oldest still sending its request
MAX_CONNECTIONS = 256


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return state not in ("Z", "X")


class WorkerReadiness:
    """Which of a worker's ``expected`` task processes have warm models.

    Made in the worker's main process before the pool forks; :meth:`mark_ready`
    and :meth:`mark_gone` are called in the process whose models they concern.
    """

    def __init__(self, expected: int) -> None:
        if not 1 <= expected <= MAX_PROCESSES:
            raise ValueError(f"expected task processes must be 1 to {MAX_PROCESSES}; got {expected}")
        self.expected = expected
        self._pids = multiprocessing.Array("i", MAX_PROCESSES)  # 0: free slot

    def mark_ready(self, pid: int | None = None) -> None:
        pid = os.getpid() if pid is None else pid
        with self._pids.get_lock():
            if pid in self._pids[:]:
                return
            for i, held in enumerate(self._pids[:]):
                if held == 0 or not _running(held):
                    self._pids[i] = pid
                    return
        log.warning("worker readiness: more than %d task processes; process %d not counted", MAX_PROCESSES, pid)

    def mark_gone(self, pid: int | None = None) -> None:
        pid = os.getpid() if pid is None else pid
        with self._pids.get_lock():
            for i, held in enumerate(self._pids[:]):
                if held == pid:
                    self._pids[i] = 0

    @property
    def ready_processes(self) -> int:
        return sum(1 for pid in self._pids[:] if pid and _running(pid))

    @property
    def ready(self) -> bool:
        return self.ready_processes >= self.expected


def probe_answer(state: WorkerState, metrics: Callable[[], bytes] | None, path: str) -> ProbeAnswer:
    """The answer to ``GET path`` for a worker in ``state`` (see the module's docstring)."""
    if path == "/healthz":
        if state.healthy:
            return _json(200, {"status": "ok"})
        return _json(503, {"status": "unhealthy", "fault": state.fault})
    if path == "/readyz":
        readiness = state.readiness
        ready = readiness.ready and state.healthy and not state.draining
        body: dict[str, Any] = {
            "ready": ready,
            "processes_ready": readiness.ready_processes,
            "processes": readiness.expected,
        }
        if not state.healthy:
            body["fault"] = state.fault
        if state.draining:
            body["draining"] = True
        return _json(200 if ready else 503, body)
    if path == "/metrics" and metrics is not None:
        return ProbeAnswer(200, metrics(), "text/plain; version=0.0.4; charset=utf-8")
    return _json(404, {"error": {"code": "not_found", "message": "GET /healthz, /readyz or /metrics"}})


def _json(status: int, body: dict[str, Any]) -> ProbeAnswer:
    return ProbeAnswer(status, json.dumps(body).encode("utf-8"))


class HealthServer:
    """``/healthz``, ``/readyz`` (and ``/metrics`` when ``metrics`` renders
    them) for one worker on ``host:port``; :meth:`start`, then :meth:`close`.
    Served by a :class:`~faceweave.service.distributed.probehttp.ProbeHttpServer`
    (one thread whatever the connections, ``request_timeout_s`` per request,
    at most ``max_connections`` open, no version banner); ``/metrics`` on a
    thread of its own.

    ``port=0`` takes a free port (:attr:`port` tells which).
    """

    def __init__(
        self,
        state: WorkerState,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_HEALTH_PORT,
        metrics: Callable[[], bytes] | None = None,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
    ):
        self.state = state
        self.metrics = metrics
        self.host = host
        self._server = ProbeHttpServer(
            lambda method, path: probe_answer(state, metrics, path),
            host=host,
            port=port,
            slow_paths=frozenset({"/metrics"}),
            request_timeout_s=request_timeout_s,
            max_connections=max_connections,
        )

    @property
    def port(self) -> int:
        return self._server.port

    def start(self) -> None:
        """Listen and answer on a daemon thread.  Raises :class:`OSError` when the port cannot be bound."""
        self._server.start()
        log.info("worker health on http://%s:%d/healthz, /readyz and /metrics", self.host, self.port)

    def close(self) -> None:
        self._server.close()
