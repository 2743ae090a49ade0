"""Start a Celery worker for faceweave programmatically: :func:`run_worker`.

The Celery app is made by :func:`make_celery` here, in the worker's entry
point, with the tasks bound to a :class:`WorkerRuntime`; with the ``prefork``
pool the pool processes are forked from this process and inherit the app and
its tasks, so no importable module-level app is needed.

Models load where tasks run: in each pool process at ``worker_process_init``
(prefork), or in this process before it consumes (``solo``, ``threads``: one
set of models per thread).  A process takes no task before its models are
warm.

A small HTTP server on the main process (``health_port``, default 8001, on
the settings' ``host``) answers ``/healthz`` and ``/readyz`` for Kubernetes
probes (:mod:`faceweave.service.distributed.health`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from faceweave.errors import InvalidOptionError
from faceweave.service.distributed.celery_app import QUEUE, make_celery
from faceweave.service.distributed.fleet import WorkerState
from faceweave.service.distributed.health import DEFAULT_HEALTH_PORT, HealthServer
from faceweave.service.distributed.runtime import WorkerRuntime
from faceweave.service.distributed.tasks import register_tasks
from faceweave.service.settings import ServiceSettings

log = logging.getLogger("faceweave.service.distributed")

POOLS = ("prefork", "solo", "threads")


def build_worker(
    settings: ServiceSettings, *, pool: str = "prefork", concurrency: int = 1, node: str | None = None
) -> tuple[Any, WorkerRuntime]:
    """The Celery app with the tasks registered, and the runtime they use."""
    if not settings.broker:
        raise InvalidOptionError("a worker needs a broker: --broker redis://HOST:6379/0 (or FACEWEAVE_BROKER)")
    if pool not in POOLS:
        raise InvalidOptionError(f"pool must be one of {', '.join(POOLS)}; got {pool!r}")
    if concurrency < 1:
        raise InvalidOptionError(f"concurrency must be at least 1; got {concurrency}")
    if pool == "solo":
        concurrency = 1
    app = make_celery(settings, name="faceweave-worker")
    name = node or f"faceweave@{socket.gethostname()}"
    runtime = WorkerRuntime(settings, app=app, node=name, slots=concurrency if pool == "threads" else 1)
    register_tasks(app, runtime)
    return app, runtime


def run_worker(
    settings: ServiceSettings,
    *,
    pool: str = "prefork",
    concurrency: int = 1,
    node: str | None = None,
    loglevel: str = "INFO",
    health_port: int | None = DEFAULT_HEALTH_PORT,
    max_idle_s: float | None = None,
    device_monitor: str = "auto",
) -> int:
    """Run a worker until it is stopped (SIGTERM / Ctrl-C: it finishes its
    running photos and hands back its running video work first), or until it
    has had no work for ``max_idle_s``; returns its exit code.
    ``health_port=None`` (or 0) runs no health server (and no ``/metrics``).

    Raises:
        OSError: the health port cannot be bound.
    """
    from faceweave.service.distributed.telemetry import metrics_folder, remove_metrics_folder

    folder = metrics_folder()  # before prometheus_client is imported: the pool's processes write there
    app, runtime = build_worker(settings, pool=pool, concurrency=concurrency, node=node)
    state = runtime.state = WorkerState(concurrency if pool == "prefork" else 1)
    devices = _device_collector(device_monitor, runtime.node)
    health = _start_health(
        state, host=settings.host, port=health_port, devices=devices, folder=folder, worker=runtime.node
    )
    connections = _connect(runtime, state, pool)
    try:
        worker = app.Worker(
            hostname=runtime.node,
            pool_cls=pool,
            concurrency=concurrency if pool != "solo" else 1,
            loglevel=loglevel,
            queues=[QUEUE],
            without_gossip=True,
            without_mingle=True,
            without_heartbeat=True,
            quiet=True,
            optimization="fair",
        )
        with Supervisor(app, state, runtime.node, max_idle_s=max_idle_s, devices=devices):
            worker.start()
        return int(worker.exitcode or 0)
    finally:
        for celery_signal, handler in connections:
            celery_signal.disconnect(handler)
        if health is not None:
            health.close()
        if devices is not None:
            devices.monitor.close()
        runtime.close()
        app.close()
        remove_metrics_folder(folder)


def _connect(runtime: WorkerRuntime, state: WorkerState, pool: str) -> list[tuple[Any, Any]]:
    """Celery's signals: models loaded (and self-tested) where tasks run,
    marked gone when those processes end, draining when the worker shuts down."""
    from celery import signals

    from faceweave.service.distributed.telemetry import process_gone

    def open_runtime(**_: Any) -> None:
        try:
            runtime.open()
        except Exception:  # noqa: BLE001 - a failing init hangs a prefork pool; the first task tries again
            log.exception("worker process cannot open its store or load its models; retrying at its first task")
        else:
            if runtime.healthy:
                state.readiness.mark_ready()
                state.touch()

    def close_runtime(**_: Any) -> None:
        state.readiness.mark_gone()
        process_gone(os.getpid())
        runtime.close()

    def draining(**_: Any) -> None:
        log.info("worker %s shutting down: no new jobs; running video work is handed back", runtime.node)
        state.start_draining()

    if pool == "prefork":
        connections = [(signals.worker_process_init, open_runtime), (signals.worker_process_shutdown, close_runtime)]
    else:
        connections = [(signals.worker_init, open_runtime), (signals.worker_shutdown, close_runtime)]
    connections.append((signals.worker_shutting_down, draining))
    for celery_signal, handler in connections:
        celery_signal.connect(handler, weak=False)
    return connections


def _device_collector(kind: str, worker: str) -> Any | None:
    """The device monitor's collector for ``/metrics`` (``kind`` "none": no device metrics)."""
    if kind == "none":
        return None
    from faceweave.monitoring import DeviceCollector, open_monitor

    return DeviceCollector(open_monitor(kind), worker=worker)


def _start_health(
    state: WorkerState,
    *,
    host: str,
    port: int | None,
    devices: Any | None = None,
    folder: Path | None = None,
    worker: str = "",
) -> HealthServer | None:
    """The started health server (``/healthz``, ``/readyz``, ``/metrics``), or ``None`` when it is off.

    Raises:
        OSError: the port cannot be bound.
    """
    if not port:
        return None
    from faceweave.service.distributed.telemetry import exposition

    server = HealthServer(
        state, host=host, port=port, metrics=lambda: exposition(state, devices, folder, worker=worker)
    )
    server.start()
    return server


class Supervisor:
    """A thread of the worker's main process, for the ``with`` body (the
    Celery worker's run):

    * every ``device_check_s`` it reads the devices (``devices``: the
      :class:`~faceweave.monitoring.DeviceCollector`): a device in an error
      state, or fewer accelerators than were visible at start (a device gone),
      marks the worker unhealthy;
    * once the worker is unhealthy (that, or a task process's failed
      self-test) it stops consuming from the queue (its task processes bounce
      what they still get);
    * after ``max_idle_s`` without a task it shuts the worker down as SIGTERM
      does (exit code 0).
    """

    def __init__(
        self,
        app: Any,
        state: WorkerState,
        node: str,
        *,
        max_idle_s: float | None = None,
        devices: Any | None = None,
        device_check_s: float = 10.0,
        tick_s: float = 0.5,
    ) -> None:
        self.app, self.state, self.node, self.max_idle_s = app, state, node, max_idle_s
        self.devices, self.device_check_s, self.tick_s = devices, device_check_s, tick_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="faceweave-supervisor", daemon=True)
        self._accelerators: int | None = None  # visible at the first reading
        self.stopped_idle = False

    def __enter__(self) -> Supervisor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        cancelled = False
        next_check = 0.0
        while True:
            if self.devices is not None and time.monotonic() >= next_check:
                self.check_devices()
                next_check = time.monotonic() + self.device_check_s
            if not cancelled and not self.state.healthy:
                cancelled = self._stop_consuming()
            if self._idle_too_long():
                log.info("worker %s had no work for %.0f s: shutting down", self.node, self.max_idle_s)
                self.stopped_idle = True
                self.state.start_draining()
                os.kill(os.getpid(), signal.SIGTERM)  # Celery's warm shutdown, as an orchestrator's stop
                return
            if self._done.wait(self.tick_s):
                return

    def check_devices(self) -> None:
        """Mark the worker unhealthy when a device reports an error state or went away."""
        readings = self.devices.readings() if self.devices is not None else None
        if readings is None:
            return  # a failed reading is counted as a scrape error, not a fault
        accelerators = [r for r in readings if r.vendor != "host"]
        broken = [r for r in accelerators if r.healthy is False]
        if broken:
            names = ", ".join(f"{r.vendor}:{r.device} {r.name}".strip() for r in broken)
            self.state.mark_faulty(f"device in an error state: {names}")
        elif self._accelerators is None:
            self._accelerators = len(accelerators)
        elif len(accelerators) < self._accelerators:
            self.state.mark_faulty(f"device gone: {len(accelerators)} of {self._accelerators} accelerator(s) visible")

    def _idle_too_long(self) -> bool:
        s = self.state
        limit = self.max_idle_s
        return bool(limit) and s.readiness.ready and not s.draining and s.idle_seconds() >= (limit or 0.0)

    def _stop_consuming(self) -> bool:
        log.error("worker %s is unhealthy (%s): it takes no more jobs", self.node, self.state.fault)
        try:
            self.app.control.cancel_consumer(QUEUE, destination=[self.node], reply=False)
        except Exception:  # noqa: BLE001 - the task processes bounce what they get anyway
            log.warning("worker %s: cannot stop consuming", self.node, exc_info=True)
            return False
        return True
