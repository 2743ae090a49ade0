"""A Celery worker's HTTP health endpoints, for Kubernetes probes: :class:`HealthServer`.

``faceweave worker`` has no HTTP port of its own, so this small server (a
stdlib ``ThreadingHTTPServer`` on a daemon thread of the worker's main
process) answers:

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
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from faceweave.service.distributed.fleet import WorkerState

log = logging.getLogger("faceweave.service.distributed")

#: the worker's health port unless ``--health-port`` says otherwise (the API's is 8000)
DEFAULT_HEALTH_PORT = 8001
#: the most task processes one worker runs (``--concurrency`` allows 64)
MAX_PROCESSES = 64


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


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        path = self.path.split("?", 1)[0]
        state = self.server.state
        if path == "/healthz":
            if state.healthy:
                self._answer(200, {"status": "ok"})
            else:
                self._answer(503, {"status": "unhealthy", "fault": state.fault})
        elif path == "/readyz":
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
            self._answer(200 if ready else 503, body)
        elif path == "/metrics" and self.server.metrics is not None:
            self._send(200, self.server.metrics(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._answer(404, {"error": {"code": "not_found", "message": "GET /healthz, /readyz or /metrics"}})

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        self._send(status, json.dumps(body).encode("utf-8"), "application/json")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        log.debug("health %s", format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], state: WorkerState, metrics: Callable[[], bytes] | None = None
    ) -> None:
        self.state = state
        self.metrics = metrics
        super().__init__(address, _Handler)


class HealthServer:
    """``/healthz``, ``/readyz`` (and ``/metrics`` when ``metrics`` renders
    them) for one worker on ``host:port``; :meth:`start`, then :meth:`close`.

    ``port=0`` takes a free port (:attr:`port` tells which).
    """

    def __init__(
        self,
        state: WorkerState,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_HEALTH_PORT,
        metrics: Callable[[], bytes] | None = None,
    ):
        self.state = state
        self.metrics = metrics
        self.host = host
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1]) if self._server is not None else self._port

    def start(self) -> None:
        """Listen and answer on a daemon thread.  Raises :class:`OSError` when the port cannot be bound."""
        if self._server is not None:
            return
        self._server = _Server((self.host, self._port), self.state, self.metrics)
        self._thread = threading.Thread(target=self._server.serve_forever, name="worker-health", daemon=True)
        self._thread.start()
        log.info("worker health on http://%s:%d/healthz, /readyz and /metrics", self.host, self.port)

    def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
