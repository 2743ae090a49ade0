"""Running jobs: :func:`run_job` (one job, callable from any worker kind) and
:class:`WorkerPool` (the embedded pool of worker threads inside ``serve``).

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
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from faceweave.errors import NoFaceError
from faceweave.options import RuntimeOptions
from faceweave.service.errors import job_error, model_folders
from faceweave.service.jobspec import JobOptions
from faceweave.service.models import JobModels
from faceweave.service.storage import Storage
from faceweave.service.store import JobRecord, JobStore

log = logging.getLogger("faceweave.service.worker")


@dataclass(frozen=True)
class RunConfig:
    """What :func:`run_job` needs from the settings (plain values, so a
    Celery task can build it from the same settings)."""

    lease_s: float = 60.0
    ttl_s: float = 24 * 3600.0
    progress_interval_s: float = 0.5
    max_pixels: int = 40_000_000
    #: a video's length limits, held while decoding too (a header may not say)
    max_video_seconds: float | None = None
    max_video_frames: int | None = None
    video_working_size: int = 192
    watermark: bool = True
    hide: tuple[str, ...] = ()
    #: where neural models run on this worker (execution provider, device, model folder)
    runtime: RuntimeOptions = RuntimeOptions()

    def video_options(self, options: Any, provenance: Any) -> Any:
        """``options`` (:class:`~faceweave.video.pipeline.VideoOptions`) with
        ``provenance`` (watermark and label every frame) and this worker's
        length limits, which hold while decoding too."""
        return replace(
            options, provenance=provenance, max_seconds=self.max_video_seconds, max_frames=self.max_video_frames
        )

    @classmethod
    def from_settings(cls, settings: Any, storage: Storage) -> RunConfig:
        return cls(
            lease_s=settings.lease_s,
            ttl_s=settings.results_ttl_s,
            progress_interval_s=settings.progress_interval_s,
            max_pixels=settings.limits.max_image_pixels,
            max_video_seconds=settings.limits.max_video_seconds,
            max_video_frames=settings.limits.max_video_frames,
            video_working_size=settings.video_working_size,
            watermark=settings.watermark,
            hide=(str(storage.root), *model_folders(settings.runtime)),
            runtime=settings.runtime,
        )


@dataclass(frozen=True)
class JobOutcome:
    """How :func:`run_job` ended: ``state`` is succeeded, failed, or
    ``released`` (stopped, cancelled or taken away: someone else decides)."""

    state: str
    seconds: float
    output: str | None = None
    error_code: str | None = None
    result: dict[str, Any] = field(default_factory=dict)


class _Heartbeat:
    """Renews the job's lease and writes its progress every interval, on its
    own thread; sets ``stop`` when the job is no longer this worker's."""

    def __init__(self, store: JobStore, job: JobRecord, worker_id: str, config: RunConfig, stop: threading.Event):
        self.store, self.job, self.worker_id, self.config, self.stop = store, job, worker_id, config, stop
        self.values: dict[str, Any] = {}
        self.lost = False
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"faceweave-heartbeat-{job.id[:8]}", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def update(self, **values: Any) -> None:
        with self._lock:
            self.values.update(values)

    def _run(self) -> None:
        interval = min(self.config.progress_interval_s, self.config.lease_s / 3.0)
        while not self._done.wait(interval):
            self.flush()

    def flush(self) -> None:
        with self._lock:
            values = dict(self.values)
        try:
            held = self.store.heartbeat(
                self.job.id, worker_id=self.worker_id, attempt=self.job.attempts, lease_s=self.config.lease_s, **values
            )
        except Exception:
            log.warning("heartbeat of job %s failed", self.job.id, exc_info=True)
            return
        if not held:
            self.lost = True
            self.stop.set()


def run_job(  # noqa: C901 - to be split into steps (issue 14)
    job: JobRecord,
    models: JobModels,
    store: JobStore,
    storage: Storage,
    *,
    worker_id: str,
    config: RunConfig = RunConfig(),
    stop: threading.Event | None = None,
    metrics: Any = None,
    audit: Any = None,
) -> JobOutcome:
    """Run one claimed job (``job`` as returned by :meth:`JobStore.claim`) and
    record its outcome.  ``metrics`` (:class:`~faceweave.service.metrics.Metrics`)
    and ``audit`` (:class:`~faceweave.provenance.audit.AuditLog`) are optional."""
    stop = stop or threading.Event()
    started = time.perf_counter()
    provenance = _provenance(config)
    beat = _Heartbeat(store, job, worker_id, config, stop)
    output: Path | None = None
    preview: Path | None = None
    error: BaseException | None = None
    result: dict[str, Any] = {}
    discard_earlier_attempts(job, storage)
    try:
        with beat:
            options = JobOptions.model_validate(job.options)
            swap_options = options.swap_options(
                kind=job.kind,
                has_reference=bool(job.inputs.get("reference")),
                max_pixels=config.max_pixels,
                video_working_size=config.video_working_size,
                runtime=config.runtime,
            )
            swapper = models.swapper(swap_options)
            output = storage.job_dir(job.id) / f"result-{job.attempts}.{options.output_format(job.kind)}"
            work_started = time.perf_counter()
            if job.kind == "image":
                result = _image_job(job, swapper, storage, options, output, provenance)
                preview = output
            else:
                preview = storage.job_dir(job.id) / f"preview-{job.attempts}.png"
                result = _video_job(job, swapper, storage, options, output, preview, provenance, beat, stop, config)
                if not preview.exists():
                    preview = None
            result["work_s"] = round(time.perf_counter() - work_started, 4)  # the swap itself, for overhead figures
    except BaseException as exc:  # noqa: BLE001 - recorded as the job's outcome
        error = exc
    seconds = time.perf_counter() - started
    if metrics is not None:
        metrics.busy.inc(seconds)
    if stop.is_set():  # cancelled, taken away, or the pool is stopping
        _discard(output, preview)
        _settle_stopped(job, store, storage, worker_id)
        return JobOutcome(state="released", seconds=seconds)
    if error is not None and not isinstance(error, Exception):
        raise error  # KeyboardInterrupt / SystemExit of the process
    if error is None:
        rel_out = storage.relative(output) if output else None
        rel_preview = storage.relative(preview) if preview else None
        store.heartbeat(
            job.id, worker_id=worker_id, attempt=job.attempts, lease_s=config.lease_s, preview_path=rel_preview
        )
        held = store.finish(
            job.id,
            worker_id=worker_id,
            attempt=job.attempts,
            state="succeeded",
            ttl_s=config.ttl_s,
            output_path=rel_out,
            result=result,
        )
        outcome = JobOutcome(state="succeeded", seconds=seconds, output=rel_out, result=result)
    else:
        problem = job_error(error, config.hide)
        if problem["code"] == "internal_error":
            log.error("job %s failed", job.id, exc_info=error)
        _discard(output, preview)
        held = store.finish(
            job.id,
            worker_id=worker_id,
            attempt=job.attempts,
            state="failed",
            ttl_s=config.ttl_s,
            error_code=problem["code"],
            error_message=problem["message"],
        )
        outcome = JobOutcome(state="failed", seconds=seconds, error_code=problem["code"])
    if not held:  # cancelled or requeued meanwhile: the outcome is not ours to keep
        _discard(output, preview)
        _settle_stopped(job, store, storage, worker_id)
        return JobOutcome(state="released", seconds=seconds)
    _remove_inputs(job, storage)
    if metrics is not None:
        metrics.jobs_finished.labels(kind=job.kind, state=outcome.state).inc()
        metrics.job_seconds.labels(kind=job.kind).observe(seconds)
        metrics.faces.inc(result.get("faces_swapped", 0))
        metrics.frames.inc(result.get("frames", 0))
        if outcome.error_code:
            metrics.errors.labels(code=outcome.error_code).inc()
    if audit is not None:
        write_audit(audit, job, outcome=outcome, error=error, provenance=provenance, hide=config.hide)
    return outcome


def _image_job(job, swapper, storage: Storage, options: JobOptions, output: Path, provenance) -> dict[str, Any]:
    inputs = job.inputs
    result = swapper.swap(  # marked by the library with the job's provenance
        [storage.resolve(p) for p in inputs["sources"]],
        storage.resolve(inputs["target"]),
        reference=storage.resolve(inputs["reference"]) if inputs.get("reference") else None,
        provenance=provenance,
    )
    result.save(output, quality=options.quality or 95)  # with its label
    return {
        "width": int(result.image.shape[1]),
        "height": int(result.image.shape[0]),
        "faces_found": len(result.faces),
        "faces_swapped": len(result.swapped),
        "swapped": [
            {"face": s.target_index, "box": s.bbox.as_list(), "source_index": s.source_index} for s in result.swapped
        ],
        "run_id": provenance.run_hex if provenance else None,
    }


def _video_job(
    job,
    swapper,
    storage: Storage,
    options: JobOptions,
    output: Path,
    preview: Path,
    provenance,
    beat: _Heartbeat,
    stop: threading.Event,
    config: RunConfig,
) -> dict[str, Any]:
    from faceweave.video.pipeline import VideoSwapper

    inputs = job.inputs
    target = storage.resolve(inputs["target"])
    reference = storage.resolve(inputs["reference"]) if inputs.get("reference") else None
    video_options = config.video_options(options.video_options(), provenance)
    video = VideoSwapper(swapper)
    mapping = {int(k): [storage.resolve(p) for p in v] for k, v in (inputs.get("map") or {}).items()}
    people = video.people_map(target, mapping, options=video_options) if mapping else None
    prepared = video.prepare_sources([storage.resolve(p) for p in inputs["sources"]]) if people is None else []
    if not stop.is_set():
        try:
            video.preview(prepared, target, preview, reference=reference, options=video_options, mapping=people)
        except NoFaceError:
            pass  # no face anywhere: the video is copied unchanged, as the CLI does
        else:
            beat.update(preview_path=storage.relative(preview))
            beat.flush()
    began = time.perf_counter()

    def progress(done: int, total: int | None) -> None:
        elapsed = time.perf_counter() - began
        values: dict[str, Any] = {"frames_done": done, "frames_total": total}
        if total:
            values["progress"] = round(min(99.9, 100.0 * done / total), 2)
            values["eta_s"] = round(elapsed / done * max(0, total - done), 2) if done else None
        beat.update(**values)

    report = video.swap_video(
        prepared,
        target,
        output,
        reference=reference,
        options=video_options,
        progress=progress,
        stop=stop,
        mapping=people,
    )
    return {
        "frames": report.frames,
        "frames_with_swap": report.frames_with_swap,
        "faces_swapped": report.faces_swapped,
        "scene_cuts": report.scene_cuts,
        "fps": round(report.fps, 2),
        "broken_at": report.broken_at,
        "run_id": provenance.run_hex if provenance else None,
        "warning": None if report.frames_with_swap else "no face to swap was found; the video is unchanged",
    }


def _provenance(config: RunConfig):
    from faceweave.provenance.stamp import Provenance

    return Provenance.new(watermark=config.watermark)


def discard_earlier_attempts(job: JobRecord, storage: Storage) -> None:
    """Remove what a dead worker's earlier attempt left: its temporary or
    finished result, preview and parts (the store no longer points at them)."""
    try:
        removed = storage.discard_attempts(job.id, before=job.attempts)
    except OSError:
        log.warning("cannot remove the earlier attempts' files of job %s", job.id, exc_info=True)
        return
    if removed:
        log.info("job %s attempt %d: removed %d file(s) of earlier attempts", job.id, job.attempts, removed)


def _discard(*paths: Path | None) -> None:
    for path in paths:
        if path is not None:
            path.unlink(missing_ok=True)


def _settle_stopped(job: JobRecord, store: JobStore, storage: Storage, worker_id: str) -> None:
    """After a stop: hand a job this worker still holds back to the queue
    (the pool is stopping); remove the files of a cancelled one."""
    current = store.get(job.id)
    if current is None or current.state == "cancelled":
        storage.remove_job(job.id)
    elif current.state == "running" and current.worker_id == worker_id and current.attempts == job.attempts:
        store.release(job.id, worker_id=worker_id, attempt=job.attempts)


def _remove_inputs(job: JobRecord, storage: Storage) -> None:
    for rel in [
        *job.inputs.get("sources", []),
        job.inputs.get("target"),
        job.inputs.get("reference"),
        *(p for paths in (job.inputs.get("map") or {}).values() for p in paths),
    ]:
        if rel:
            storage.resolve(rel).unlink(missing_ok=True)


def write_audit(
    audit,
    job: JobRecord,
    *,
    outcome: JobOutcome | None,
    error: BaseException | None,
    provenance,
    hide: tuple[str, ...] = (),
    state: str | None = None,
) -> None:
    """One audit line for a job: owner, inputs' hashes, options, outcome."""
    from faceweave.provenance.audit import AuditEntry, AuditInput
    from faceweave.provenance.stamp import audit_watermark

    files = job.inputs.get("files", [])
    inputs = tuple(AuditInput(role=f["role"], path=f.get("filename") or f["path"], sha256=f["sha256"]) for f in files)
    final = state or (outcome.state if outcome else "unknown")
    problem = job_error(error, hide) if error is not None else None
    entry = AuditEntry(
        command=f"service.job.{job.kind}",
        inputs=inputs,
        options={"job_id": job.id, **job.options},
        outcome="ok" if final == "succeeded" else final if final == "cancelled" else "error",
        watermark=audit_watermark(provenance),
        output=outcome.output if outcome else None,
        code=problem["code"] if problem else None,
        message=problem["message"] if problem else None,
        user=job.owner,
        run_id=provenance.run_hex if provenance else None,
    )
    try:
        audit.append(entry)
    except Exception:
        log.exception("cannot write the audit line of job %s", job.id)


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
        metrics: Any = None,
        audit: Any = None,
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
        while not self._stopping.is_set():
            try:
                job = self.store.claim(worker_id, lease_s=self.config.lease_s)
            except Exception:
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
                )
            except Exception:
                log.exception("worker %s crashed on job %s", worker_id, job.id)
            finally:
                with self._lock:
                    self._running.pop(job.id, None)
                    self.busy -= 1
