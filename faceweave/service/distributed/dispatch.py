"""The API node's side of distributed mode: :class:`Dispatcher`.

It publishes a ``faceweave.run_job`` task for each queued job and runs the
distributed part of the sweep.  The sweep runs on the API nodes (every
``sweep_interval_s``, and once at start), not in the workers: the API nodes
already sweep the store for expired results, they stay up while workers come
and go (a node whose workers all died cannot sweep for itself), and they are
few.  Several API nodes sweeping at once is safe: every change is a
conditional ``UPDATE`` and a task published twice finds its job taken and
returns.

What the sweep does:

1. segments whose worker died (lease ran out) go back to queued, and queued
   segments (and joins) whose task was last published a lease ago are
   published again;
2. the lease of a job split into segments is renewed while its segments are
   still to be done (its workers are the segments' workers);
3. jobs whose lease ran out are requeued (:meth:`JobStore.requeue_expired`)
   and published again, so a job whose worker died runs on another worker
   even when the broker lost the message;
4. at start, and when the broker's queue is empty, every queued job is
   published again (a message lost between the insert and the publish, or a
   broker restarted without its data).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy import update

from faceweave.service.distributed.celery_app import QUEUE, TASK_JOB, TASK_JOIN, TASK_SEGMENT, make_celery
from faceweave.service.distributed.records import JOIN, SEGMENTED, SegmentStore
from faceweave.service.settings import ServiceSettings
from faceweave.service.store import JobRow, JobStore

log = logging.getLogger("faceweave.service.distributed")


class Dispatcher:
    """Publishes jobs to the broker; call :meth:`close`."""

    def __init__(self, settings: ServiceSettings, store: JobStore) -> None:
        self.settings = settings
        self.store = store
        self.segments = SegmentStore(store)
        self.app = make_celery(settings, name="faceweave-api")
        self._started = False

    def publish(self, job_id: str) -> None:
        """Queue ``faceweave.run_job(job_id)``.  A failure is logged, not raised:
        the job is in the store and the next sweep publishes it again."""
        self._send(TASK_JOB, job_id)

    def _send(self, task: str, *args: Any) -> bool:
        try:
            self.app.send_task(task, args=list(args), queue=QUEUE)
            return True
        except Exception:  # any broker or transport failure: not published, the sweeper retries
            log.warning("cannot publish %s%r to the broker", task, args, exc_info=True)
            return False

    def queue_depth(self) -> int | None:
        """Messages waiting in the broker's queue (``None`` when it cannot tell)."""
        try:
            with self.app.connection_for_read() as conn:
                conn.ensure_connection(max_retries=1)
                return int(conn.default_channel.queue_declare(QUEUE, passive=True).message_count)
        except Exception:  # noqa: BLE001 - any broker or transport failure means "cannot tell"
            return None

    def sweep(self, *, now: float | None = None) -> dict[str, Any]:
        """One distributed sweep (see the module's note); returns what it did."""
        now = time.time() if now is None else now
        lease = self.settings.lease_s
        republished = []
        depth: int | None = -1  # unknown yet: asked of the broker only when needed
        for row in self.segments.stalled(older_than_s=lease, now=now):
            if row.published_at is not None:  # queued a while: most likely just waiting for a free worker
                depth = self.queue_depth() if depth == -1 else depth
                if depth != 0:
                    continue
            task = (
                (TASK_JOIN, row.job_id, row.attempt)
                if row.index == JOIN
                else (TASK_SEGMENT, row.job_id, row.attempt, row.index)
            )
            if self._send(*task):
                self.segments.mark_published(row.job_id, row.attempt, row.index, now=now)
                republished.append(f"{row.job_id}:{row.index}")
        renewed = self._renew_segmented(now)
        requeued, failed = self.store.requeue_expired(max_attempts=self.settings.max_attempts, now=now)
        for job_id in requeued:
            self.publish(job_id)
        queued = []
        if not self._started or (self.queue_depth() if depth == -1 else depth) == 0:
            queued = [j for j in self.store.ids(["queued"]) if j not in requeued]
            for job_id in queued:
                self.publish(job_id)
            self._started = True
        return {
            "segments_republished": republished,
            "segmented_renewed": renewed,
            "requeued": requeued,
            "failed": failed,
            "republished": queued,
        }

    def _renew_segmented(self, now: float) -> list[str]:
        """Renew the lease of every job whose segments are still to be done; drop
        the rows of attempts that are over (the job finished, failed or was requeued)."""
        renewed = []
        for job_id, attempt in self.segments.live_jobs():
            with self.store.engine.begin() as conn:
                changed = conn.execute(
                    update(JobRow)
                    .where(
                        JobRow.id == job_id,
                        JobRow.state == "running",
                        JobRow.worker_id == SEGMENTED,
                        JobRow.attempts == attempt,
                    )
                    .values(lease_expires=now + self.settings.lease_s)
                ).rowcount
            if changed:
                renewed.append(job_id)
                continue
            job = self.store.get(job_id)
            if job is None or job.state != "running" or job.attempts != attempt:
                self.segments.delete(job_id, attempt)  # else: its worker is handing it to the segments now
        return renewed

    def close(self) -> None:
        try:
            self.app.close()
        except Exception:  # closing at shutdown must not fail the shutdown
            log.debug("closing the Celery app failed", exc_info=True)
