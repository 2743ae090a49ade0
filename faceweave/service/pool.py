"""The embedded pool of worker threads inside ``serve``: :class:`WorkerPool`.

Each thread has its own prepared :class:`~faceweave.service.models.JobModels`
and claims jobs from the store, running each with
:func:`~faceweave.service.worker.run_job`; queueing a job wakes idle threads.

A job that ends with an error that may be the device's is followed by a
self-test (:mod:`faceweave.service.selftest`) on that thread's models; when it
fails, the job goes back to the queue (counted: the poison-job guard fails it
after ``max_attempts``), the thread stops taking jobs, and the node answers
``/readyz`` (and, once no thread is healthy, ``/healthz``) with 503.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING

from faceweave.errors import DeviceFaultError
from faceweave.service.jobs import RunConfig
from faceweave.service.models import JobModels
from faceweave.service.storage import Storage
from faceweave.service.store import JobStore
from faceweave.service.worker import run_job

if TYPE_CHECKING:
    from faceweave.provenance.audit import AuditLog
    from faceweave.service.metrics import Metrics

log = logging.getLogger("faceweave.service.worker")


class WorkerPool:
    """``len(models)`` worker threads, each with its own prepared :class:`JobModels`,
    claiming jobs from the store until :meth:`stop`."""

    def __init__(
        self,
        *,
        store: JobStore,
        storage: Storage,
        config: RunConfig,
        poll_interval_s: float = 0.5,
        metrics: Metrics | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self.store, self.storage, self.config = store, storage, config
        self.poll_interval_s = poll_interval_s
        self.metrics, self.audit = metrics, audit
        self.node = f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"
        self._stopping = threading.Event()
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._running: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.busy = 0
        #: why each unhealthy worker thread stopped, by index
        self.faults: dict[int, str] = {}

    def start(self, models: list[JobModels]) -> None:
        for index, item in enumerate(models):
            thread = threading.Thread(
                target=self._loop, args=(index, item), name=f"faceweave-worker-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        if self.metrics is not None:
            self.metrics.workers.labels(state="started").set(len(self._threads))

    @property
    def size(self) -> int:
        return len(self._threads)

    @property
    def healthy(self) -> int:
        """Worker threads that have not stopped on a device fault."""
        return len(self._threads) - len(self.faults)

    def _fault_check(self, index: int, models: JobModels):
        """For :func:`run_job`: a self-test after an error that may be the device's
        (:func:`~faceweave.service.selftest.fault_check`); on a fault the thread stops taking jobs."""
        from faceweave.service.selftest import fault_check

        check = fault_check(models, self.config.runtime)

        def stop_on_fault(error: BaseException) -> DeviceFaultError | None:
            fault = check(error)
            if fault is not None:
                log.error("worker %d: %s; it takes no more jobs", index, fault)
                with self._lock:
                    self.faults[index] = str(fault)
                if self.metrics is not None:
                    self.metrics.workers.labels(state="unhealthy").set(len(self.faults))
            return fault

        return stop_on_fault

    def wake(self) -> None:
        """Tell idle workers that a job was queued."""
        with self._wake:
            self._wake.notify_all()

    def cancel(self, job_id: str) -> bool:
        """Stop the job if a worker of this pool runs it."""
        with self._lock:
            event = self._running.get(job_id)
        if event is not None:
            event.set()
        return event is not None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the workers; running jobs go back to the queue."""
        self._stopping.set()
        with self._lock:
            for event in self._running.values():
                event.set()
        self.wake()
        for thread in self._threads:
            thread.join(timeout)

    def _loop(self, index: int, models: JobModels) -> None:
        worker_id = f"{self.node}:{index}"
        check = self._fault_check(index, models)
        while not self._stopping.is_set() and index not in self.faults:
            try:
                job = self.store.claim(worker_id, lease_s=self.config.lease_s)
            except Exception:  # a worker thread must outlive a store failure: logged, tried again
                log.exception("worker %s cannot claim a job", worker_id)
                job = None
            if job is None:
                with self._wake:
                    self._wake.wait(self.poll_interval_s)
                continue
            if self.metrics is not None:
                self.metrics.queue_seconds.observe(max(0.0, time.time() - job.created_at))
            stop = threading.Event()
            with self._lock:
                self._running[job.id] = stop
                self.busy += 1
            try:
                run_job(
                    job,
                    models,
                    self.store,
                    self.storage,
                    worker_id=worker_id,
                    config=self.config,
                    stop=stop,
                    metrics=self.metrics,
                    audit=self.audit,
                    fault_check=check,
                )
            except Exception:  # a worker thread must outlive its job: logged, the job's lease runs out
                log.exception("worker %s crashed on job %s", worker_id, job.id)
            finally:
                with self._lock:
                    self._running.pop(job.id, None)
                    self.busy -= 1
