"""What distributed workers record beside the ``jobs`` table.

* :func:`claim_job` takes one named job (the Celery task's) with the same kind
  of conditional ``UPDATE`` as :meth:`JobStore.claim`: a queued job, or a
  running one whose lease ran out (its worker died and the sweeper has not
  requeued it yet).  Two tasks for one job can never both get it.
* :func:`hand_to_segments` gives a claimed video job to its segments: the
  job's ``worker_id`` becomes :data:`SEGMENTED`, so the segment tasks (on any
  worker) renew its lease and record its outcome under that name and the
  job's attempt number.
* :class:`SegmentStore` keeps a ``job_segments`` table: one row per segment
  of an attempt, and a join row (index :data:`JOIN`), each claimed with its
  own lease like a job.  The last segment to finish flips the join row from
  ``waiting`` to ``queued``, once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import JSON, Float, Integer, String, and_, delete, func, insert, or_, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from faceweave.errors import InvalidOptionError
from faceweave.service.store import JobRecord, JobRow, JobStore

#: the worker_id a job has while its segments run
SEGMENTED = "segmented"
#: the index of the join row
JOIN = -1


class _Base(DeclarativeBase):
    pass


class SegmentRow(_Base):
    __tablename__ = "job_segments"

    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    index: Mapped[int] = mapped_column(Integer, primary_key=True)
    state: Mapped[str] = mapped_column(String(16), index=True)  # waiting (join), queued, running, done
    plan: Mapped[dict] = mapped_column(JSON)
    part_path: Mapped[str | None] = mapped_column(String(500), nullable=True)
    worker_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    tries: Mapped[int] = mapped_column(Integer, default=0)
    lease_expires: Mapped[float | None] = mapped_column(Float, nullable=True)
    published_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    frames_done: Mapped[int] = mapped_column(Integer, default=0)
    report: Mapped[dict | None] = mapped_column(JSON, nullable=True)


@dataclass(frozen=True)
class SegmentRecord:
    """One row of ``job_segments`` (a snapshot).  ``plan`` holds the
    segment's frame range and times (the join row: the job's run id and how
    many segments there are)."""

    job_id: str
    attempt: int
    index: int
    state: str
    plan: dict[str, Any]
    part_path: str | None = None
    worker_id: str | None = None
    tries: int = 0
    lease_expires: float | None = None
    published_at: float | None = None
    frames_done: int = 0
    report: dict[str, Any] | None = None


def open_store(url: str, *, tries: int = 5) -> tuple[JobStore, SegmentStore]:
    """The job store and the segments table at ``url``, created when missing.
    Nodes starting together on a new PostgreSQL database race to create the
    tables (one of two concurrent ``CREATE TABLE`` fails on the catalog's
    unique index); the loser tries again, and then finds them."""
    for attempt in range(tries):
        store = None
        try:
            store = JobStore(url)
            return store, SegmentStore(store)
        except (InvalidOptionError, DBAPIError):
            if store is not None:
                store.close()
            if attempt == tries - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def claim_job(
    store: JobStore, job_id: str, worker_id: str, *, lease_s: float, max_attempts: int, now: float | None = None
) -> JobRecord | None:
    """Take job ``job_id`` for ``worker_id``: ``None`` unless it was queued, or
    running on a lease that ran out with attempts left.  Counts an attempt."""
    now = time.time() if now is None else now
    free = or_(
        JobRow.state == "queued",
        and_(JobRow.state == "running", JobRow.lease_expires < now, JobRow.attempts < max_attempts),
    )
    with store.engine.begin() as conn:
        done = conn.execute(
            update(JobRow)
            .where(JobRow.id == job_id, free)
            .values(
                state="running",
                worker_id=worker_id,
                attempts=JobRow.attempts + 1,
                started_at=func.coalesce(JobRow.started_at, now),
                lease_expires=now + lease_s,
                heartbeat_at=now,
                progress=0.0,
                frames_done=0,
            )
        ).rowcount
    return store.get(job_id) if done == 1 else None


def hand_to_segments(
    store: JobStore, job: JobRecord, *, worker_id: str, lease_s: float, frames_total: int, now: float | None = None
) -> bool:
    """Give the job ``worker_id`` holds to its segments (see the module's note)."""
    now = time.time() if now is None else now
    with store.engine.begin() as conn:
        return (
            conn.execute(
                update(JobRow)
                .where(
                    JobRow.id == job.id,
                    JobRow.state == "running",
                    JobRow.worker_id == worker_id,
                    JobRow.attempts == job.attempts,
                )
                .values(worker_id=SEGMENTED, lease_expires=now + lease_s, heartbeat_at=now, frames_total=frames_total)
            ).rowcount
            == 1
        )


class SegmentStore:
    """The ``job_segments`` table in the job store's database (created when missing)."""

    def __init__(self, store: JobStore, *, tries: int = 5) -> None:
        self.engine = store.engine
        for attempt in range(tries):  # nodes starting together race to create the table: see open_store
            try:
                _Base.metadata.create_all(self.engine)
                return
            except DBAPIError:
                if attempt == tries - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))

    def create(
        self, job_id: str, attempt: int, plans: list[dict[str, Any]], parts: list[str], join: dict[str, Any]
    ) -> None:
        """Rows for an attempt's segments (queued) and its join (waiting)."""
        rows = [
            dict(
                job_id=job_id,
                attempt=attempt,
                index=i,
                state="queued",
                plan=plan,
                part_path=part,
                tries=0,
                frames_done=0,
            )
            for i, (plan, part) in enumerate(zip(plans, parts, strict=False))
        ]
        rows.append(
            dict(
                job_id=job_id,
                attempt=attempt,
                index=JOIN,
                state="waiting",
                plan=join,
                part_path=None,
                tries=0,
                frames_done=0,
            )
        )
        with self.engine.begin() as conn:
            conn.execute(insert(SegmentRow), rows)

    def get(self, job_id: str, attempt: int, index: int) -> SegmentRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(SegmentRow).where(*_key(job_id, attempt, index))).mappings().first()
        return None if row is None else SegmentRecord(**dict(row))

    def rows(self, job_id: str, attempt: int) -> list[SegmentRecord]:
        """The attempt's segments in order, the join row last."""
        with self.engine.connect() as conn:
            found = (
                conn.execute(select(SegmentRow).where(SegmentRow.job_id == job_id, SegmentRow.attempt == attempt))
                .mappings()
                .all()
            )
        records = [SegmentRecord(**dict(r)) for r in found]
        return sorted(records, key=lambda r: (r.index == JOIN, r.index))

    def claim(
        self, job_id: str, attempt: int, index: int, worker_id: str, *, lease_s: float, now: float | None = None
    ) -> SegmentRecord | None:
        """Take a queued row, or a running one whose lease ran out; ``None`` otherwise."""
        now = time.time() if now is None else now
        free = or_(SegmentRow.state == "queued", and_(SegmentRow.state == "running", SegmentRow.lease_expires < now))
        with self.engine.begin() as conn:
            done = conn.execute(
                update(SegmentRow)
                .where(*_key(job_id, attempt, index), free)
                .values(
                    state="running",
                    worker_id=worker_id,
                    tries=SegmentRow.tries + 1,
                    lease_expires=now + lease_s,
                    frames_done=0,
                )
            ).rowcount
        return self.get(job_id, attempt, index) if done == 1 else None

    def heartbeat(
        self,
        job_id: str,
        attempt: int,
        index: int,
        worker_id: str,
        *,
        lease_s: float,
        frames_done: int,
        now: float | None = None,
    ) -> bool:
        now = time.time() if now is None else now
        with self.engine.begin() as conn:
            return (
                conn.execute(
                    update(SegmentRow)
                    .where(*_held(job_id, attempt, index, worker_id))
                    .values(lease_expires=now + lease_s, frames_done=frames_done)
                ).rowcount
                == 1
            )

    def finish(self, job_id: str, attempt: int, index: int, worker_id: str, *, report: dict[str, Any]) -> bool:
        """Mark the held row done; ``False`` when it is no longer this worker's."""
        frames = int(report.get("frames", 0))
        with self.engine.begin() as conn:
            return (
                conn.execute(
                    update(SegmentRow)
                    .where(*_held(job_id, attempt, index, worker_id))
                    .values(state="done", lease_expires=None, report=report, frames_done=frames)
                ).rowcount
                == 1
            )

    def release(self, job_id: str, attempt: int, index: int, worker_id: str, *, counted: bool = False) -> bool:
        """Put a held row back in the queue: this worker is stopping (the try
        not counted) or its device failed (``counted``: a segment that faults
        every worker ends failed after ``max_attempts`` tries)."""
        tries = SegmentRow.tries if counted else SegmentRow.tries - 1
        with self.engine.begin() as conn:
            return (
                conn.execute(
                    update(SegmentRow)
                    .where(*_held(job_id, attempt, index, worker_id))
                    .values(state="queued", worker_id=None, lease_expires=None, frames_done=0, tries=tries)
                ).rowcount
                == 1
            )

    def open_join(self, job_id: str, attempt: int) -> bool:
        """``True`` for exactly one caller, once every segment is done: the join row is then queued."""
        with self.engine.begin() as conn:
            pending = conn.execute(
                select(func.count())
                .select_from(SegmentRow)
                .where(
                    SegmentRow.job_id == job_id,
                    SegmentRow.attempt == attempt,
                    SegmentRow.index != JOIN,
                    SegmentRow.state != "done",
                )
            ).scalar_one()
            if pending:
                return False
            return (
                conn.execute(
                    update(SegmentRow)
                    .where(*_key(job_id, attempt, JOIN), SegmentRow.state == "waiting")
                    .values(state="queued")
                ).rowcount
                == 1
            )

    def frames_done(self, job_id: str, attempt: int) -> int:
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.coalesce(func.sum(SegmentRow.frames_done), 0)).where(
                        SegmentRow.job_id == job_id, SegmentRow.attempt == attempt, SegmentRow.index != JOIN
                    )
                ).scalar_one()
            )

    def mark_published(self, job_id: str, attempt: int, index: int, *, now: float | None = None) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(SegmentRow)
                .where(*_key(job_id, attempt, index))
                .values(published_at=time.time() if now is None else now)
            )

    def stalled(self, *, older_than_s: float, now: float | None = None) -> list[SegmentRecord]:
        """Rows whose task may be lost: running on a lease that ran out (set
        back to queued here), or queued and last published ``older_than_s`` ago."""
        now = time.time() if now is None else now
        with self.engine.begin() as conn:
            conn.execute(
                update(SegmentRow)
                .where(SegmentRow.state == "running", SegmentRow.lease_expires < now)
                .values(state="queued", worker_id=None, lease_expires=None, published_at=None, frames_done=0)
            )
            found = (
                conn.execute(
                    select(SegmentRow).where(
                        SegmentRow.state == "queued",
                        or_(SegmentRow.published_at.is_(None), SegmentRow.published_at < now - older_than_s),
                    )
                )
                .mappings()
                .all()
            )
        return [SegmentRecord(**dict(r)) for r in found]

    def live_jobs(self) -> list[tuple[str, int]]:
        """``(job id, attempt)`` of every attempt with unfinished rows."""
        with self.engine.connect() as conn:
            return [
                (str(job_id), int(attempt))
                for job_id, attempt in conn.execute(
                    select(SegmentRow.job_id, SegmentRow.attempt).where(SegmentRow.state != "done").distinct()
                ).all()
            ]

    def delete(self, job_id: str, attempt: int | None = None) -> None:
        query = delete(SegmentRow).where(SegmentRow.job_id == job_id)
        if attempt is not None:
            query = query.where(SegmentRow.attempt == attempt)
        with self.engine.begin() as conn:
            conn.execute(query)


def _key(job_id: str, attempt: int, index: int) -> tuple:
    return SegmentRow.job_id == job_id, SegmentRow.attempt == attempt, SegmentRow.index == index


def _held(job_id: str, attempt: int, index: int, worker_id: str) -> tuple:
    return (*_key(job_id, attempt, index), SegmentRow.state == "running", SegmentRow.worker_id == worker_id)
