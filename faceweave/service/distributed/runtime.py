"""What one Celery worker process owns: :class:`WorkerRuntime`.

It is built in the worker's main process but opened in each pool process
(``worker_process_init`` for prefork; at worker start for ``solo`` and
``threads``): the database engine, the storage folder, the audit log and
``slots`` prepared :class:`~faceweave.service.models.JobModels` (one per
concurrent task of the process: mediapipe graphs serve one thread at a time),
loaded and warmed up before the process takes its first task.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from faceweave.errors import NotReadyError
from faceweave.service.settings import ServiceSettings

log = logging.getLogger("faceweave.service.distributed")


class WorkerRuntime:
    """Store, storage, models and the publisher of one worker process; :meth:`open`, then :meth:`close`."""

    def __init__(self, settings: ServiceSettings, *, app: Any, node: str, slots: int = 1) -> None:
        self.settings = settings
        self.app = app
        self.node = node
        self.slots = max(1, slots)
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
                    loaded[-1].prepare()
            except BaseException:
                for models in loaded:
                    models.close()
                store.close()
                raise
            self.warmup_ms = (time.perf_counter() - began) * 1000.0
            self.storage, self.segments = storage, segments
            self.config = RunConfig.from_settings(self.settings, storage)
            self.audit = AuditLog(self.settings.audit_path)
            self._all = loaded
            for models in loaded:
                self._models.put(models)
            self.store = store  # last: ``opened`` means everything is there
            log.info(
                "worker process %s ready: %d model slot(s) warmed up in %.0f ms",
                os.getpid(),
                self.slots,
                self.warmup_ms,
            )

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

    def close(self) -> None:
        with self._lock:
            for models in self._all:
                models.close()
            self._all.clear()
            if self.store is not None:
                self.store.close()
                self.store = None
