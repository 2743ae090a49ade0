"""What one Celery worker process owns: :class:`WorkerRuntime`.

It is built in the worker's main process but opened in each pool process
(``worker_process_init`` for prefork; at worker start for ``solo`` and
``threads``): the database engine, the storage folder, the audit log and
``slots`` prepared :class:`~faceweave.service.models.JobModels` (one per
concurrent task of the process: mediapipe graphs serve one thread at a time),
loaded, warmed up and self-tested (:mod:`faceweave.service.selftest`) before
the process takes its first task; and its :class:`WorkerMetrics`.

It also reports to the worker's shared :class:`WorkerState`: a self-test that
fails (at start, or after a job's error that may be the device's) marks the
worker unhealthy (:meth:`fault_check`); :meth:`task` counts a running task;
:meth:`watch_draining` stops video work when the worker shuts down.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from faceweave.errors import DeviceFaultError, NotReadyError
from faceweave.service.settings import ServiceSettings

if TYPE_CHECKING:
    from faceweave.service.distributed.fleet import WorkerState
    from faceweave.service.distributed.telemetry import WorkerMetrics
    from faceweave.service.models import JobModels

log = logging.getLogger("faceweave.service.distributed")


class WorkerRuntime:
    """Store, storage, models and the publisher of one worker process; :meth:`open`, then :meth:`close`."""

    def __init__(
        self, settings: ServiceSettings, *, app: Any, node: str, slots: int = 1, state: WorkerState | None = None
    ) -> None:
        self.settings = settings
        self.app = app
        self.node = node
        self.slots = max(1, slots)
        self.state = state
        self.metrics: WorkerMetrics | None = None
        self.store: Any = None
        self.segments: Any = None
        self.storage: Any = None
        self.config: Any = None
        self.audit: Any = None
        self.warmup_ms: float = 0.0
        self._models: queue.Queue = queue.Queue()
        self._all: list[Any] = []
        self._lock = threading.Lock()

    @property
    def opened(self) -> bool:
        return self.store is not None

    def open(self) -> None:
        """Connect to the store and load and warm up the models (in the process that runs tasks)."""
        from faceweave.options import SwapOptions
        from faceweave.provenance.audit import AuditLog
        from faceweave.service.distributed.records import open_store
        from faceweave.service.jobs import RunConfig
        from faceweave.service.models import JobModels
        from faceweave.service.storage import open_storage

        with self._lock:
            if self.store is not None:
                return
            storage = open_storage(self.settings)
            store, segments = open_store(self.settings.database_url)
            began = time.perf_counter()
            loaded: list[JobModels] = []
            try:
                for _ in range(self.slots):
                    loaded.append(JobModels())
                    times = loaded[-1].prepare_timed(SwapOptions(runtime=self.settings.runtime))
            except BaseException:
                for models in loaded:
                    models.close()
                store.close()
                raise
            self.warmup_ms = (time.perf_counter() - began) * 1000.0
            self.storage, self.segments = storage, segments
            self.config = RunConfig.from_settings(self.settings, storage)
            self.audit = AuditLog(self.settings.audit_path)
            self.metrics = _worker_metrics()
            self._all = loaded
            for models in loaded:
                self._models.put(models)
            self.store = store  # last: ``opened`` means everything is there
            self._self_test(loaded[0], times)
            log.info(
                "worker process %s ready: %d model slot(s) warmed up in %.0f ms",
                os.getpid(),
                self.slots,
                self.warmup_ms,
            )

    # -- health -----------------------------------------------------------------
    @property
    def healthy(self) -> bool:
        return self.state is None or self.state.healthy

    def _self_test(self, models: JobModels, times: Any) -> None:
        """The first self-test: its seconds are the pipeline's warm-up; a failure marks the worker unhealthy."""
        from faceweave.options import SwapOptions

        try:
            seconds = self.self_test(models, SwapOptions(runtime=self.settings.runtime))
        except DeviceFaultError:
            seconds = None
        if self.metrics is not None:
            warm = dict(times.warmup_s) | ({"pipeline": seconds} if seconds is not None else {})
            self.metrics.models_loaded(times.load_s, warm)

    def self_test(self, models: JobModels, options: Any) -> float:
        """One self-test swap, counted; a failure marks the worker unhealthy and is raised."""
        from faceweave.service.selftest import self_test

        try:
            seconds = self_test(models, options)
        except DeviceFaultError as fault:
            log.error("worker process %s: %s; the worker is now unhealthy", os.getpid(), fault)
            if self.metrics is not None:
                self.metrics.selftests.labels(result="failed").inc()
                self.metrics.device_faults.inc()
            if self.state is not None:
                self.state.mark_faulty(str(fault))
            raise
        if self.metrics is not None:
            self.metrics.selftests.labels(result="passed").inc()
        return seconds

    def fault_check(self, models: JobModels) -> Callable[[BaseException], DeviceFaultError | None]:
        """For :func:`~faceweave.service.worker.run_job`: a counted self-test after
        an error that may be the device's (:func:`~faceweave.service.selftest.fault_check`)."""
        from faceweave.service.selftest import fault_check

        return fault_check(models, self.settings.runtime, test=self.self_test)

    @contextmanager
    def task(self, kind: str, *, queued_s: float | None = None) -> Iterator[dict[str, Any]]:
        """Counts a running task for the ``with`` body; the body puts its
        ``state`` (and ``code``) in the dict it gets, for the metrics."""
        outcome: dict[str, Any] = {"state": "released"}
        started = self.metrics.task_started(kind, queued_s=queued_s) if self.metrics is not None else 0.0
        busy = self.state.task() if self.state is not None else _nothing()
        try:
            with busy:
                yield outcome
        finally:
            if self.metrics is not None:
                self.metrics.task_ended(kind, str(outcome["state"]), started, code=outcome.get("code"))

    @contextmanager
    def watch_draining(self, stop: threading.Event) -> Iterator[None]:
        """Sets ``stop`` when the worker starts shutting down, during the ``with`` body."""
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.2):
                if self.state is not None and self.state.draining:
                    log.info("worker shutting down: handing back the running video work")
                    stop.set()
                    return

        thread = threading.Thread(target=watch, name="faceweave-drain-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def worker_id(self) -> str:
        """This process and thread, as the job store records who holds a job."""
        return f"{self.node}:{os.getpid()}:{threading.get_ident() % 100000}"

    @contextmanager
    def borrow(self) -> Iterator[Any]:
        """One process's :class:`JobModels` for the ``with`` body."""
        if not self.opened:
            self.open()
        try:
            models = self._models.get(timeout=600)
        except queue.Empty:
            raise NotReadyError("no free models in this worker process") from None
        try:
            yield models
        finally:
            self._models.put(models)

    def publish(self, task: str, *args: Any) -> None:
        """Send a follow-up task (a segment, a join) through the broker."""
        from faceweave.service.distributed.celery_app import QUEUE

        self.app.send_task(task, args=list(args), queue=QUEUE)

    def bounce(self, task: str, *args: Any) -> str:
        """An unhealthy worker's answer to a task: send it back through the
        broker (after a pause, so that a healthy worker takes it) unrun."""
        time.sleep(1.0)
        self.publish(task, *args)
        return "bounced"

    def close(self) -> None:
        with self._lock:
            for models in self._all:
                models.close()
            self._all.clear()
            if self.store is not None:
                self.store.close()
                self.store = None


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _worker_metrics() -> WorkerMetrics | None:
    """This process's metric objects (``None`` when prometheus_client cannot be used)."""
    from faceweave.service.distributed.telemetry import WorkerMetrics

    try:
        return WorkerMetrics()
    except (OSError, ValueError):
        log.warning("worker metrics are off in process %s", os.getpid(), exc_info=True)
        return None
