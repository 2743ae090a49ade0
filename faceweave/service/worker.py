"""Running one job: :func:`run_job`, callable from any worker kind (the
embedded :class:`~faceweave.service.pool.WorkerPool` inside ``serve``, a
Celery task).  The swap steps it shares with the routes and the Celery tasks
are in :mod:`faceweave.service.jobs`.

A job's result is written under a name that holds the attempt number
(``result-<attempt>.<ext>``, itself written to a temporary name and renamed
when complete), and the outcome is recorded with a conditional update that
only the worker holding the job can make; a worker that lost its job (it was
cancelled, or presumed dead and requeued) deletes what it wrote.  So a job is
never done twice into the same result file, and the store points at exactly
one result.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faceweave.errors import DeviceFaultError
from faceweave.service.distributed.telemetry import stage_seconds
from faceweave.service.jobdata import JobResult, JobState, VideoResult
from faceweave.service.jobs import (
    JobOutcome,
    RunConfig,
    VideoPaths,
    discard_earlier_attempts,
    discard_files,
    remove_inputs,
    swap_image,
    swap_video,
    write_audit,
)
from faceweave.service.jobspec import JobOptions
from faceweave.service.lease import Lease, beat_interval, job_problem, record_failure
from faceweave.service.models import JobModels
from faceweave.service.storage import Storage
from faceweave.service.store import JobRecord, JobStore

if TYPE_CHECKING:
    from faceweave.provenance.audit import AuditLog
    from faceweave.service.metrics import Metrics

log = logging.getLogger("faceweave.service.worker")


def job_lease(store: JobStore, job: JobRecord, worker_id: str, config: RunConfig, stop: threading.Event) -> Lease:
    """The lease of a job this worker holds: renewed with its progress every
    interval; ``stop`` is set when the job is no longer this worker's."""

    def renew(values: Mapping[str, Any]) -> bool:
        return store.heartbeat(job.id, worker_id=worker_id, attempt=job.attempts, lease_s=config.lease_s, **values)

    interval = beat_interval(config.progress_interval_s, config.lease_s)
    return Lease(renew, interval_s=interval, stop=stop, name=f"faceweave-heartbeat-{job.id[:8]}")


#: ``fault_check(error) -> DeviceFaultError | None`` (see :func:`run_job`)
FaultCheck = Callable[[BaseException], "DeviceFaultError | None"]


def run_job(
    job: JobRecord,
    models: JobModels,
    store: JobStore,
    storage: Storage,
    *,
    worker_id: str,
    config: RunConfig | None = None,
    stop: threading.Event | None = None,
    metrics: Metrics | None = None,
    audit: AuditLog | None = None,
    fault_check: FaultCheck | None = None,
) -> JobOutcome:
    """Run one claimed job (``job`` as returned by :meth:`JobStore.claim`) and
    record its outcome.  ``config``: :class:`RunConfig`'s defaults when not given;
    ``metrics`` and ``audit`` are optional.

    ``fault_check(error)`` is asked about an error the job ended with: a
    :class:`DeviceFaultError` it returns means the device failed (its
    self-test), not the job, so the job is handed back to the queue
    (:meth:`JobStore.hand_back`) instead of failed."""
    config = config or RunConfig()
    with storage.workspace(job.id):  # an object store's local copies go when the run ends
        return _run(
            job,
            models,
            store,
            storage,
            worker_id=worker_id,
            config=config,
            stop=stop,
            metrics=metrics,
            audit=audit,
            fault_check=fault_check,
        )


def _run(
    job: JobRecord,
    models: JobModels,
    store: JobStore,
    storage: Storage,
    *,
    worker_id: str,
    config: RunConfig,
    stop: threading.Event | None,
    metrics: Metrics | None,
    audit: AuditLog | None,
    fault_check: FaultCheck | None = None,
) -> JobOutcome:
    run = _JobRun(job, store, storage, worker_id=worker_id, config=config, stop=stop or threading.Event())
    discard_earlier_attempts(job, storage)
    error = run.work(models)
    seconds = time.perf_counter() - run.started
    if metrics is not None:
        metrics.busy.inc(seconds)
    if run.stop.is_set():  # cancelled, taken away, or the pool is stopping
        return run.release(seconds)
    if error is not None and not isinstance(error, Exception):
        raise error  # KeyboardInterrupt / SystemExit of the process
    fault = fault_check(error) if error is not None and fault_check is not None else None
    if fault is not None:
        outcome: JobOutcome | None = run.hand_back(fault, seconds)
        if outcome is None or outcome.state != "failed":  # handed back, or not ours any more
            return outcome or run.release(seconds)
        error = fault  # a poison job: failed with the fault it caused
    else:
        outcome = run.succeed(seconds) if error is None else run.fail(error, seconds)
    if outcome is None:  # cancelled or requeued meanwhile: the outcome is not ours to keep
        return run.release(seconds)
    remove_inputs(job, storage)
    if metrics is not None:
        _count(metrics, job, outcome)
    if audit is not None:
        write_audit(audit, job, outcome=outcome, error=error, provenance=run.provenance, hide=config.hide)
    return outcome


class _JobRun:
    """One attempt of a job on this worker: the files it writes, its heartbeat,
    and the outcome it records (only while it still holds the job)."""

    def __init__(
        self,
        job: JobRecord,
        store: JobStore,
        storage: Storage,
        *,
        worker_id: str,
        config: RunConfig,
        stop: threading.Event,
    ) -> None:
        self.job, self.store, self.storage, self.worker_id, self.config, self.stop = (
            job,
            store,
            storage,
            worker_id,
            config,
            stop,
        )
        self.started = time.perf_counter()
        self.provenance = config.provenance()
        self.beat = job_lease(store, job, worker_id, config, stop)
        self.output: Path | None = None
        self.preview: Path | None = None
        self.result: JobResult | None = None
        self.timings: dict[str, float] = {}

    def work(self, models: JobModels) -> BaseException | None:
        """Do the swap under the heartbeat; returns what it raised, if anything."""
        try:
            with self.beat:
                self._swap(models)
        except BaseException as exc:  # noqa: BLE001 - recorded as the job's outcome
            return exc
        return None

    def _swap(self, models: JobModels) -> None:
        job, storage, config = self.job, self.storage, self.config
        options = JobOptions.model_validate(job.options)
        swap_options = options.swap_options(
            kind=job.kind,
            has_reference=bool(job.inputs.reference),
            max_pixels=config.max_pixels,
            video_working_size=config.video_working_size,
            runtime=config.runtime,
        )
        swapper = models.swapper(swap_options)
        folder = storage.job_dir(job.id)
        self.output = folder / f"result-{job.attempts}.{options.output_format(job.kind)}"
        work_started = time.perf_counter()
        result: JobResult
        if job.kind == "image":
            result = swap_image(
                job.inputs,
                swapper,
                storage=storage,
                options=options,
                output=self.output,
                provenance=self.provenance,
                timings=self.timings,
            )
            self.preview = self.output
        else:
            self.preview = folder / f"preview-{job.attempts}.png"
            result = swap_video(
                job.inputs,
                swapper,
                storage=storage,
                options=config.video_options(options.video_options(), self.provenance),
                paths=VideoPaths(output=self.output, preview=self.preview),
                progress=self.beat,
                stop=self.stop,
                timings=self.timings,
            )
            if not self.preview.exists():
                self.preview = None
        storage.publish(self.output)  # an object store's result is visible once whole
        # the swap itself, for overhead figures
        self.result = result.model_copy(update={"work_s": round(time.perf_counter() - work_started, 4)})

    def succeed(self, seconds: float) -> JobOutcome | None:
        """Record the result; ``None`` when the job is no longer this worker's."""
        job, storage = self.job, self.storage
        rel_out = storage.relative(self.output) if self.output else None
        rel_preview = storage.relative(self.preview) if self.preview else None
        lease_s = self.config.lease_s
        self.store.heartbeat(
            job.id, worker_id=self.worker_id, attempt=job.attempts, lease_s=lease_s, preview_path=rel_preview
        )
        held = self.store.finish(
            job.id,
            worker_id=self.worker_id,
            attempt=job.attempts,
            state=JobState.SUCCEEDED,
            ttl_s=self.config.ttl_s,
            output_path=rel_out,
            result=self.result,
        )
        if not held:
            return None
        return JobOutcome(
            state="succeeded", seconds=seconds, output=rel_out, result=self.result, timings_ms=self.timings
        )

    def fail(self, error: Exception, seconds: float) -> JobOutcome | None:
        """Record the failure (its files deleted); ``None`` when the job is no longer this worker's."""
        problem = job_problem(self.job, error, self.config.hide)
        discard_files(self.storage, self.output, self.preview)
        held = record_failure(self.store, self.job, problem, holder=self.worker_id, ttl_s=self.config.ttl_s)
        return JobOutcome(state="failed", seconds=seconds, error_code=problem.code) if held else None

    def hand_back(self, fault: DeviceFaultError, seconds: float) -> JobOutcome | None:
        """A device fault: delete the attempt's files and give the job back to
        the queue (or fail it when it faulted ``max_attempts`` workers);
        ``None`` when the job is no longer this worker's."""
        discard_files(self.storage, self.output, self.preview)
        state = self.store.hand_back(
            self.job.id,
            worker_id=self.worker_id,
            attempt=self.job.attempts,
            code=fault.code,
            message=str(fault),
            max_attempts=self.config.max_attempts,
            ttl_s=self.config.ttl_s,
        )
        log.error("job %s attempt %d: %s; the job is %s", self.job.id, self.job.attempts, fault, state)
        if state == "lost":
            return None
        return JobOutcome(state=state.replace("queued", "handed_back"), seconds=seconds, error_code=fault.code)

    def release(self, seconds: float) -> JobOutcome:
        """Give up the attempt: delete its files and settle the job (see :func:`settle_stopped`)."""
        discard_files(self.storage, self.output, self.preview)
        settle_stopped(self.job, self.store, self.storage, self.worker_id)
        return JobOutcome(state="released", seconds=seconds)


def _count(metrics: Metrics, job: JobRecord, outcome: JobOutcome) -> None:
    """The finished job in ``/metrics``: its state, time, faces and frames, error code."""
    result = outcome.result
    metrics.jobs_finished.labels(kind=job.kind, state=outcome.state).inc()
    metrics.job_seconds.labels(kind=job.kind).observe(outcome.seconds)
    metrics.faces.inc(result.faces_swapped if result is not None else 0)
    frames = result.frames if isinstance(result, VideoResult) else 0
    metrics.frames.inc(frames)
    for stage, seconds in stage_seconds(outcome.timings_ms, per=max(1, frames)).items():
        metrics.stages.labels(stage=stage).observe(seconds)
    if outcome.error_code:
        metrics.errors.labels(code=outcome.error_code).inc()


def settle_stopped(job: JobRecord, store: JobStore, storage: Storage, worker_id: str) -> None:
    """After a stop: hand a job this worker still holds back to the queue
    (the pool is stopping); remove the files of a cancelled one."""
    current = store.get(job.id)
    if current is None or current.state == JobState.CANCELLED:
        storage.remove_job(job.id)
    elif current.state == JobState.RUNNING and current.worker_id == worker_id and current.attempts == job.attempts:
        store.release(job.id, worker_id=worker_id, attempt=job.attempts)
