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
import socket
from typing import Any

from faceweave.errors import InvalidOptionError
from faceweave.service.distributed.celery_app import QUEUE, make_celery
from faceweave.service.distributed.health import DEFAULT_HEALTH_PORT, HealthServer, WorkerReadiness
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
) -> int:
    """Run a worker until it is stopped (SIGTERM / Ctrl-C: it finishes its
    running tasks first); returns its exit code.  ``health_port=None`` (or 0)
    runs no health server; a port that cannot be bound is logged and the
    worker runs without one."""
    from celery import signals

    app, runtime = build_worker(settings, pool=pool, concurrency=concurrency, node=node)
    name = runtime.node
    readiness = WorkerReadiness(concurrency if pool == "prefork" else 1)
    health = _start_health(readiness, host=settings.host, port=health_port)

    def open_runtime(**_: Any) -> None:
        try:
            runtime.open()
        except Exception:  # noqa: BLE001 - a failing init hangs a prefork pool; the first task tries again
            log.exception("worker process cannot open its store or load its models; retrying at its first task")
        else:
            readiness.mark_ready()

    def close_runtime(**_: Any) -> None:
        readiness.mark_gone()
        runtime.close()

    if pool == "prefork":
        connections = [(signals.worker_process_init, open_runtime), (signals.worker_process_shutdown, close_runtime)]
    else:
        connections = [(signals.worker_init, open_runtime), (signals.worker_shutdown, close_runtime)]
    for signal, handler in connections:
        signal.connect(handler, weak=False)
    try:
        worker = app.Worker(
            hostname=name,
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
        worker.start()
        return int(worker.exitcode or 0)
    finally:
        for signal, handler in connections:
            signal.disconnect(handler)
        if health is not None:
            health.close()
        runtime.close()
        app.close()


def _start_health(readiness: WorkerReadiness, *, host: str, port: int | None) -> HealthServer | None:
    """The started health server, or ``None`` when it is off or its port is taken (logged)."""
    if not port:
        return None
    server = HealthServer(readiness, host=host, port=port)
    try:
        server.start()
    except OSError as exc:
        log.warning("worker health server not started on %s:%d: %s", host, port, exc.strerror or exc)
        return None
    return server
