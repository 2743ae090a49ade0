"""What one API node owns: :class:`Service` (store, storage, models, worker
pool, auth, limits, metrics, audit log), created by the app's lifespan
handler (:func:`~faceweave.service.app.create_app`) and closed when it stops.
Models load on a background thread so that ``/healthz`` answers at once and
``/readyz`` says 503 until they are warm.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from faceweave.errors import NotReadyError, StorageUnavailableError
from faceweave.service import errors
from faceweave.service.auth import Authenticator, RateLimiter
from faceweave.service.jobs import RunConfig
from faceweave.service.lockout import FailureLimiter
from faceweave.service.metrics import Metrics
from faceweave.service.models import JobModels, SlotPool
from faceweave.service.pool import WorkerPool
from faceweave.service.settings import ServiceSettings
from faceweave.service.storage import open_storage
from faceweave.service.store import JobStore
from faceweave.service.webrtc.hub import LiveHub

if TYPE_CHECKING:
    from faceweave.monitoring import DeviceCollector

log = logging.getLogger("faceweave.service")
#: abandoned uploads and scratch files older than this are deleted by the sweeper
STALE_UPLOAD_S = 3600.0


class Service:
    """Everything one running app owns; :meth:`start` it, then :meth:`close` it."""

    def __init__(self, settings: ServiceSettings, *, metrics: Metrics | None = None) -> None:
        from faceweave.provenance.audit import AuditLog

        settings.check_bind()
        self.settings = settings
        self.storage = open_storage(settings)
        self.store = JobStore(settings.database_url)
        self.auth = Authenticator(settings.auth)
        self.limiter = RateLimiter(settings.limits)
        self.auth_failures = FailureLimiter(
            max_failures=settings.limits.auth_failures, window_s=settings.limits.auth_failure_window_s
        )
        self.metrics = metrics or Metrics()
        self.audit = AuditLog(settings.audit_path)
        self.config = RunConfig.from_settings(settings, self.storage)
        self.slots = SlotPool()
        #: the live (WebRTC) sessions of this node, capped by ``live.sessions``
        self.live = LiveHub(settings, self.metrics, self.config, audit=self.audit)
        self.pool = WorkerPool(
            store=self.store,
            storage=self.storage,
            config=self.config,
            poll_interval_s=settings.poll_interval_s,
            metrics=self.metrics,
            audit=self.audit,
        )
        #: distributed mode: jobs go to the Celery broker and this node runs none
        self.dispatcher = None
        if settings.distributed:
            from faceweave.service.distributed.dispatch import Dispatcher

            self.dispatcher = Dispatcher(settings, self.store)
        self.ready = threading.Event()
        self.load_error: str | None = None
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        #: the device monitor's series on /metrics, where this node runs jobs
        self.devices = _device_collector(settings, self.metrics)

    @property
    def hide(self) -> tuple[str, ...]:
        return (str(self.storage.root), *errors.model_folders(self.settings.runtime))

    def start(self) -> None:
        """Load the models on a background thread, then start the workers and the sweeper."""
        self.sweep()
        for target, name in ((self._load, "faceweave-load"), (self._sweeper, "faceweave-sweeper")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def check_ready(self) -> None:
        if not self.ready.is_set():
            detail = f": {self.load_error}" if self.load_error else "; models are loading"
            raise NotReadyError(f"the service is not ready{detail}")
        if self.pool.faults:
            first = next(iter(self.pool.faults.values()))
            raise NotReadyError(
                f"{len(self.pool.faults)} of {self.pool.size} worker(s) stopped on a device fault: {first}"
            )

    def check_storage(self) -> None:
        """Raises :class:`~faceweave.errors.StorageUnavailableError` while the job
        storage does not answer (for S3 a short probe, its verdict cached briefly).
        Blocks: call it on a worker thread."""
        self.storage.check()

    def check_alive(self) -> None:
        """``/healthz``: fails once every embedded worker stopped on a device fault (restart the node)."""
        if self.pool.size and not self.pool.healthy:
            first = next(iter(self.pool.faults.values()))
            raise NotReadyError(f"every worker stopped on a device fault: {first}")

    def _load(self) -> None:
        try:
            for _ in range(self.settings.sync_slots):
                if self._closing.is_set():
                    return
                models = JobModels()
                models.prepare()
                self.slots.add(models)
            workers = []
            for _ in range(0 if self.dispatcher is not None else self.settings.workers):
                if self._closing.is_set():
                    return
                models = JobModels()
                models.prepare()
                workers.append(models)
            self.pool.start(workers)
            self.ready.set()
            log.info("ready: %d worker(s), %d sync slot(s)", self.pool.size, self.settings.sync_slots)
        except Exception as exc:  # the API stays up and /readyz says why the models did not load
            self.load_error = errors.clean_message(f"{type(exc).__name__}: {exc}", self.hide)
            log.exception("cannot load the models")

    def job_queued(self, job_id: str) -> None:
        """Tell the workers that ``job_id`` was queued (the pool, or the broker in distributed mode)."""
        if self.dispatcher is not None:
            self.dispatcher.publish(job_id)
        else:
            self.pool.wake()

    def _sweeper(self) -> None:
        while not self._closing.wait(self.settings.sweep_interval_s):
            try:
                self.sweep()
            except StorageUnavailableError:
                log.warning("sweep skipped: the job storage does not answer")
            except Exception:  # the sweeper thread must outlive a failed sweep: logged
                log.exception("sweep failed")

    def sweep(self, *, now: float | None = None) -> dict[str, Any]:
        """Requeue jobs of dead workers, delete expired jobs with their files,
        stale uploads, and job files that no job row owns.  Returns what it did."""
        now = time.time() if now is None else now
        distributed: dict[str, Any] = {}
        if self.dispatcher is not None:  # requeues jobs of dead workers and publishes them again
            distributed = self.dispatcher.sweep(now=now)
            requeued, failed = distributed.pop("requeued"), distributed.pop("failed")
        else:
            requeued, failed = self.store.requeue_expired(max_attempts=self.settings.max_attempts, now=now)
        deleted = []
        for job in self.store.expired(now=now):
            self.storage.remove_job(job.id)
            if self.store.delete(job.id):
                deleted.append(job.id)
        stale = self.storage.sweep(older_than_s=STALE_UPLOAD_S, now=now)
        orphans = self.sweep_orphans(now=now)
        if requeued:
            self.pool.wake()
        return {
            "requeued": requeued,
            "failed": failed,
            "deleted": deleted,
            "stale_uploads": stale,
            "orphans": orphans,
            **distributed,
        }

    def sweep_orphans(self, *, now: float) -> list[str]:
        """Delete the files of job ids without a row, untouched for ``orphan_grace_s``
        (inputs stored by a process killed before it created the job's row)."""
        idle = list(self.storage.job_ids(idle_s=self.settings.orphan_grace_s, now=now))
        orphans = sorted(set(idle) - self.store.known(idle))
        for job_id in orphans:
            self.storage.remove_job(job_id)
        if orphans:
            log.info("removed the files of %d job id(s) without a job row", len(orphans))
        return orphans

    def close(self) -> None:
        self._closing.set()
        self.pool.stop()
        for thread in self._threads:
            thread.join(timeout=30)
        self.slots.close()
        self.live.close()
        if self.dispatcher is not None:
            self.dispatcher.close()
        self.store.close()
        self.storage.close()
        if self.devices is not None:
            self.metrics.registry.unregister(self.devices)
            self.devices.monitor.close()


def _device_collector(settings: ServiceSettings, metrics: Metrics) -> DeviceCollector | None:
    """The device monitor's collector, registered on ``metrics``, when this
    node runs jobs itself (embedded workers, not distributed mode: there the
    ``faceweave worker`` nodes export their own devices) and
    ``settings.device_monitor`` is not ``"none"``."""
    if settings.device_monitor == "none" or settings.workers == 0 or settings.distributed:
        return None
    from faceweave.monitoring import DeviceCollector, open_monitor

    collector = DeviceCollector(open_monitor(settings.device_monitor), worker=socket.gethostname())
    metrics.registry.register(collector)
    return collector
