"""The job store: one ``jobs`` table behind SQLAlchemy 2 (SQLite or PostgreSQL).

Every state change is one conditional ``UPDATE`` whose affected-row count
says whether it happened, so two workers (threads, processes or nodes) can
never both claim a job or both finish it:

* :meth:`JobStore.claim` moves the oldest queued job to ``running`` for one
  worker, with a lease that :meth:`JobStore.heartbeat` renews;
* :meth:`JobStore.finish` succeeds only for the worker and attempt that hold
  the job, so a worker that was presumed dead cannot overwrite the outcome;
* :meth:`JobStore.requeue_expired` puts running jobs whose lease ran out back
  in the queue (or fails them after ``max_attempts``).

Times are seconds since the epoch (floats); file paths are relative to the
storage folder.  (Over 350 lines on purpose: every conditional update of the
one table is here, side by side, so the rules of who may change a job read
in one place.)
"""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sqlalchemy import (
    JSON,
    Float,
    Integer,
    String,
    Text,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from faceweave.errors import InvalidOptionError, JobStateError
from faceweave.service.jobdata import ACTIVE, STATES, TERMINAL, JobInputs, JobResult, JobState, parse_result


class _Base(DeclarativeBase):
    pass


class JobRow(_Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(200), index=True)
    kind: Mapped[str] = mapped_column(String(8))
    state: Mapped[str] = mapped_column(String(16), index=True)
    options: Mapped[dict] = mapped_column(JSON)
    inputs: Mapped[dict] = mapped_column(JSON)
    output_path: Mapped[str | None] = mapped_column(String(500), nullable=True)
    preview_path: Mapped[str | None] = mapped_column(String(500), nullable=True)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    frames_done: Mapped[int] = mapped_column(Integer, default=0)
    frames_total: Mapped[int | None] = mapped_column(Integer, nullable=True)
    eta_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    error_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    result: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[float] = mapped_column(Float, index=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_expires: Mapped[float | None] = mapped_column(Float, nullable=True, index=True)
    heartbeat_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True, index=True)


@dataclass(frozen=True)
class JobRecord:
    """One job as read from the store (a snapshot; the row may change after).
    ``options`` are :class:`~faceweave.service.jobspec.JobOptions` as stored
    (only the ones given); ``inputs`` and ``result`` are parsed from their JSON."""

    id: str
    owner: str
    kind: str
    state: JobState
    options: dict[str, Any]
    inputs: JobInputs
    created_at: float
    output_path: str | None = None
    preview_path: str | None = None
    progress: float = 0.0
    frames_done: int = 0
    frames_total: int | None = None
    eta_s: float | None = None
    error_code: str | None = None
    error_message: str | None = None
    result: JobResult | None = None
    started_at: float | None = None
    finished_at: float | None = None
    attempts: int = 0
    worker_id: str | None = None
    lease_expires: float | None = None
    heartbeat_at: float | None = None
    expires_at: float | None = None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> JobRecord:
        """The record of one ``jobs`` row (its JSON columns parsed)."""
        values = dict(row)
        values["state"] = JobState(values["state"])
        values["inputs"] = JobInputs.model_validate(values["inputs"])
        values["result"] = parse_result(values["kind"], values["result"])
        return cls(**values)


def new_job_id() -> str:
    """A random, unguessable job id (32 hex digits)."""
    return uuid.uuid4().hex


class JobStore:
    """Jobs in a database; safe to share between threads.  Call :meth:`close`."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        try:
            self.engine: Engine = create_engine(url, echo=echo, **_engine_options(url))
        except Exception as exc:  # SQLAlchemy's and the drivers' errors: one InvalidOptionError
            raise InvalidOptionError(f"cannot use the database '{_redact(url)}': {exc}") from exc
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        _Base.metadata.create_all(self.engine)
        _namespace_owners(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # -- creating and reading ------------------------------------------------
    def create(
        self,
        *,
        owner: str,
        kind: str,
        options: dict[str, Any],
        inputs: JobInputs | Mapping[str, Any],
        job_id: str | None = None,
        now: float | None = None,
    ) -> JobRecord:
        """Queue a new job; ``inputs`` as :class:`JobInputs` or its JSON."""
        stored = inputs if isinstance(inputs, JobInputs) else JobInputs.model_validate(inputs)
        values: dict[str, Any] = dict(
            id=job_id or new_job_id(),
            owner=owner,
            kind=kind,
            state=JobState.QUEUED,
            options=options,
            inputs=stored.stored(),
            created_at=time.time() if now is None else now,
            progress=0.0,
            frames_done=0,
            attempts=0,
        )
        with self.engine.begin() as conn:
            conn.execute(insert(JobRow).values(**values))
        created = self.get(values["id"])
        if created is None:  # only if someone deleted it within these microseconds
            raise JobStateError(f"job {values['id']} was deleted as it was created")
        return created

    def get(self, job_id: str, *, owner: str | None = None) -> JobRecord | None:
        """The job, or ``None`` when unknown or (with ``owner``) someone else's."""
        query = select(JobRow).where(JobRow.id == job_id)
        if owner is not None:
            query = query.where(JobRow.owner == owner)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else JobRecord.from_row(row)

    def list(self, *, owner: str, limit: int = 100, offset: int = 0) -> builtins.list[JobRecord]:
        """The owner's jobs, newest first."""
        query = (
            select(JobRow).where(JobRow.owner == owner).order_by(JobRow.created_at.desc()).limit(limit).offset(offset)
        )
        with self.engine.connect() as conn:
            return [JobRecord.from_row(r) for r in conn.execute(query).mappings()]

    def counts(self) -> dict[str, int]:
        """Number of jobs in each state (every state present, 0 when none)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(JobRow.state, func.count()).group_by(JobRow.state)).all()
        out = {str(state): 0 for state in STATES}
        out.update({state: int(n) for state, n in rows})
        return out

    def oldest_queued(self) -> float | None:
        """When the oldest queued job was submitted (seconds since the epoch); ``None`` when none waits."""
        with self.engine.connect() as conn:
            oldest = conn.execute(select(func.min(JobRow.created_at)).where(JobRow.state == "queued")).scalar()
        return None if oldest is None else float(oldest)

    # -- the worker's side ---------------------------------------------------
    def claim(self, worker_id: str, *, lease_s: float, now: float | None = None) -> JobRecord | None:
        """Atomically take the oldest queued job for ``worker_id``; ``None`` when
        the queue is empty.  The job's ``attempts`` counts this claim."""
        now = time.time() if now is None else now
        for _ in range(8):  # another worker may take a candidate first: try the next
            with self.engine.connect() as conn:
                candidates = (
                    conn.execute(select(JobRow.id).where(JobRow.state == "queued").order_by(JobRow.created_at).limit(4))
                    .scalars()
                    .all()
                )
            if not candidates:
                return None
            for job_id in candidates:
                with self.engine.begin() as conn:
                    done = conn.execute(
                        update(JobRow)
                        .where(JobRow.id == job_id, JobRow.state == "queued")
                        .values(
                            state="running",
                            worker_id=worker_id,
                            attempts=JobRow.attempts + 1,
                            started_at=func.coalesce(JobRow.started_at, now),
                            lease_expires=now + lease_s,
                            heartbeat_at=now,
                        )
                    ).rowcount
                if done == 1:
                    return self.get(job_id)
        return None

    def heartbeat(
        self, job_id: str, *, worker_id: str, attempt: int, lease_s: float, now: float | None = None, **progress: Any
    ) -> bool:
        """Renew the lease and record progress (``progress``, ``frames_done``,
        ``frames_total``, ``eta_s``, ``preview_path``).  ``False`` when the job
        is no longer this worker's (cancelled, or requeued after its lease ran out)."""
        allowed = {"progress", "frames_done", "frames_total", "eta_s", "preview_path"}
        unknown = set(progress) - allowed
        if unknown:
            raise InvalidOptionError(f"heartbeat got unknown fields {sorted(unknown)}")
        now = time.time() if now is None else now
        with self.engine.begin() as conn:
            return (
                conn.execute(
                    update(JobRow)
                    .where(*_held(job_id, worker_id, attempt))
                    .values(lease_expires=now + lease_s, heartbeat_at=now, **progress)
                ).rowcount
                == 1
            )

    def finish(
        self,
        job_id: str,
        *,
        worker_id: str,
        attempt: int,
        state: str,
        ttl_s: float,
        now: float | None = None,
        output_path: str | None = None,
        error_code: str | None = None,
        error_message: str | None = None,
        result: JobResult | None = None,
    ) -> bool:
        """Record the outcome, once: ``True`` only for the worker and attempt
        that hold the running job.  The caller keeps its output only then."""
        if state not in ("succeeded", "failed"):
            raise InvalidOptionError(f"a job finishes as succeeded or failed, not {state!r}")
        now = time.time() if now is None else now
        values: dict[str, Any] = dict(
            state=state,
            finished_at=now,
            expires_at=now + ttl_s,
            lease_expires=None,
            output_path=output_path,
            error_code=error_code,
            error_message=error_message,
            result=result.stored() if result is not None else None,
            eta_s=None,
        )
        if state == "succeeded":
            values["progress"] = 100.0
        with self.engine.begin() as conn:
            return conn.execute(update(JobRow).where(*_held(job_id, worker_id, attempt)).values(**values)).rowcount == 1

    def release(self, job_id: str, *, worker_id: str, attempt: int) -> bool:
        """Give a held job back to the queue without counting the attempt
        (the worker is stopping, not failing)."""
        with self.engine.begin() as conn:
            return (
                conn.execute(
                    update(JobRow)
                    .where(*_held(job_id, worker_id, attempt))
                    .values(**REQUEUED, attempts=JobRow.attempts - 1)
                ).rowcount
                == 1
            )

    def hand_back(
        self,
        job_id: str,
        *,
        worker_id: str,
        attempt: int,
        code: str,
        message: str,
        max_attempts: int,
        ttl_s: float,
        now: float | None = None,
    ) -> str:
        """After a device fault: the held job back to the queue for another
        worker, the attempt counted and the fault recorded; or, once it has used
        ``max_attempts`` (it faulted every worker it met: a poison job), failed
        with the reason.  Returns ``"queued"``, ``"failed"`` or ``"lost"`` (not
        this worker's any more)."""
        now = time.time() if now is None else now
        failed = dict(
            state="failed",
            finished_at=now,
            expires_at=now + ttl_s,
            lease_expires=None,
            eta_s=None,
            error_code=code,
            error_message=f"failed on {attempt} worker(s) in a row; the last: {message}",
        )
        queued = dict(REQUEUED, error_code=code, error_message=f"handed back to the queue: {message}")
        with self.engine.begin() as conn:
            held = _held(job_id, worker_id, attempt)
            if conn.execute(update(JobRow).where(*held, JobRow.attempts >= max_attempts).values(**failed)).rowcount:
                return "failed"
            if conn.execute(update(JobRow).where(*held).values(**queued)).rowcount:
                return "queued"
        return "lost"

    # -- the API's side ------------------------------------------------------
    def cancel(self, job_id: str, *, owner: str, ttl_s: float, now: float | None = None) -> bool:
        """Cancel the owner's queued or running job; ``False`` when it is not active."""
        now = time.time() if now is None else now
        with self.engine.begin() as conn:
            return (
                conn.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id, JobRow.owner == owner, JobRow.state.in_(ACTIVE))
                    .values(
                        state="cancelled",
                        finished_at=now,
                        expires_at=now + ttl_s,
                        lease_expires=None,
                        eta_s=None,
                        error_code="cancelled",
                        error_message="cancelled by the caller",
                    )
                ).rowcount
                == 1
            )

    def delete(self, job_id: str, *, owner: str | None = None) -> bool:
        """Remove a job that is not active (its files are the caller's business)."""
        query = delete(JobRow).where(JobRow.id == job_id, JobRow.state.in_(TERMINAL))
        if owner is not None:
            query = query.where(JobRow.owner == owner)
        with self.engine.begin() as conn:
            return conn.execute(query).rowcount == 1

    # -- housekeeping --------------------------------------------------------
    def requeue_expired(
        self, *, max_attempts: int, now: float | None = None
    ) -> tuple[builtins.list[str], builtins.list[str]]:
        """Running jobs whose lease has run out (their worker died): back to
        the queue, or failed with ``worker_lost`` once they used ``max_attempts``.
        Returns ``(requeued ids, failed ids)``."""
        now = time.time() if now is None else now
        with self.engine.connect() as conn:
            stale = conn.execute(
                select(JobRow.id, JobRow.attempts, JobRow.worker_id).where(
                    JobRow.state == "running", JobRow.lease_expires < now
                )
            ).all()
        requeued: builtins.list[str] = []
        failed: builtins.list[str] = []
        for job_id, attempts, worker in stale:
            give_up = attempts >= max_attempts
            values: dict[str, Any] = (
                dict(
                    state="failed",
                    finished_at=now,
                    error_code="worker_lost",
                    lease_expires=None,
                    error_message=f"the worker running this job stopped answering {attempts} time(s)",
                )
                if give_up
                else dict(REQUEUED)  # the next attempt discards the dead one's files
            )
            with self.engine.begin() as conn:
                changed = conn.execute(
                    update(JobRow)
                    .where(
                        JobRow.id == job_id,
                        JobRow.state == "running",
                        JobRow.attempts == attempts,
                        JobRow.worker_id == worker,
                        JobRow.lease_expires < now,
                    )
                    .values(**values)
                ).rowcount
            if changed:
                (failed if give_up else requeued).append(job_id)
        return requeued, failed

    def expired(self, *, now: float | None = None, limit: int = 500) -> builtins.list[JobRecord]:
        """Finished jobs whose results have expired."""
        now = time.time() if now is None else now
        query = select(JobRow).where(JobRow.state.in_(TERMINAL), JobRow.expires_at < now).limit(limit)
        with self.engine.connect() as conn:
            return [JobRecord.from_row(r) for r in conn.execute(query).mappings()]

    def known(self, job_ids: Iterable[str]) -> set[str]:
        """Those of ``job_ids`` that have a row (any state, any owner)."""
        wanted, found = builtins.list(job_ids), set[str]()
        with self.engine.connect() as conn:
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                found.update(conn.execute(select(JobRow.id).where(JobRow.id.in_(batch))).scalars())
        return found

    def ids(self, states: Iterable[str]) -> builtins.list[str]:
        with self.engine.connect() as conn:
            return list(conn.execute(select(JobRow.id).where(JobRow.state.in_(tuple(states)))).scalars())


#: what a job's row becomes when it goes back to the queue (requeued, released, handed back)
REQUEUED: Mapping[str, Any] = MappingProxyType(
    dict(state="queued", worker_id=None, lease_expires=None, progress=0.0, frames_done=0, eta_s=None, preview_path=None)
)


def _held(job_id: str, worker_id: str, attempt: int) -> tuple:
    """The condition under which a worker still holds a job."""
    return (JobRow.id == job_id, JobRow.state == "running", JobRow.worker_id == worker_id, JobRow.attempts == attempt)


def _namespace_owners(engine: Engine) -> None:
    """Jobs of releases before owner namespaces have bare owners (``alice``):
    they become API-key owners (``key:alice``), so key users keep their jobs;
    ``local`` stays.  Idempotent (every open runs it; new owners all have a prefix)."""
    with engine.begin() as conn:
        conn.execute(
            update(JobRow)
            .where(~JobRow.owner.startswith("key:"), ~JobRow.owner.startswith("jwt:"), JobRow.owner != "local")
            .values(owner="key:" + JobRow.owner)
        )


def _engine_options(url: str) -> dict[str, Any]:
    if url.startswith("sqlite"):
        return {"connect_args": {"check_same_thread": False, "timeout": 30}}
    return {"pool_pre_ping": True}


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _redact(url: str) -> str:
    """The URL without its password."""
    head, sep, tail = url.partition("@")
    if not sep or "://" not in head:
        return url
    scheme, _, creds = head.partition("://")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{tail}"
