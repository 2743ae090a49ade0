"""The Celery tasks' bodies, and :func:`register_tasks` that binds them to a runtime.

* ``faceweave.run_job(job_id)``: claim the job (:func:`claim_job`; a task
  that cannot claim it acknowledges and returns: another worker has it, or it
  is done).  A video job of more than ``settings.segment_frames`` frames is
  planned into segments (:func:`plan_segments`), given to its segments and
  one ``run_segment`` task is published per segment; any other job runs here
  with :func:`~faceweave.service.worker.run_job`.  The steps shared with the
  embedded worker (audit line, input removal) are in :mod:`faceweave.service.jobs`.
* ``faceweave.run_segment(job_id, attempt, index)``: claim the segment row,
  swap its frames into a part on the shared storage
  (:func:`~faceweave.video.segmented.swap_segment`); the last segment done
  publishes the join.
* ``faceweave.join_segments(job_id, attempt)``: concatenate the parts with
  the input's audio into ``result-<attempt>.<ext>`` (written atomically) and
  record the outcome, once, under the :data:`SEGMENTED` holder.

(Over 350 lines on purpose: the three tasks hand a job to each other through
the same rows and leases, and read best next to each other.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faceweave.errors import InvalidOptionError, NoFaceError
from faceweave.service.distributed.celery_app import TASK_JOB, TASK_JOIN, TASK_SEGMENT
from faceweave.service.distributed.records import JOIN, SEGMENTED, SegmentRecord, claim_job, hand_to_segments
from faceweave.service.distributed.runtime import WorkerRuntime
from faceweave.service.jobdata import JobState, VideoResult
from faceweave.service.jobs import NO_FACE_WARNING, JobOutcome, discard_earlier_attempts, remove_inputs, write_audit
from faceweave.service.jobspec import JobOptions
from faceweave.service.lease import Lease, beat_interval, job_problem, record_failure
from faceweave.service.models import JobModels
from faceweave.service.store import JobRecord
from faceweave.service.worker import run_job

if TYPE_CHECKING:
    from faceweave.provenance.stamp import Provenance
    from faceweave.video.concat import JoinedVideo
    from faceweave.video.pipeline import VideoSwapper, VideoSwapReport

log = logging.getLogger("faceweave.service.distributed")


def register_tasks(app: Any, runtime: WorkerRuntime) -> None:
    """Register the three tasks on ``app``, each calling its body with ``runtime``."""

    @app.task(name=TASK_JOB, ignore_result=True)
    def run_job_task(job_id: str) -> str:
        return job_task(runtime, job_id)

    @app.task(name=TASK_SEGMENT, ignore_result=True)
    def run_segment_task(job_id: str, attempt: int, index: int) -> str:
        return segment_task(runtime, job_id, attempt, index)

    @app.task(name=TASK_JOIN, ignore_result=True)
    def join_task_(job_id: str, attempt: int) -> str:
        return join_task(runtime, job_id, attempt)


# ---------------------------------------------------------------- the job
def job_task(rt: WorkerRuntime, job_id: str) -> str:
    """Returns what happened: skipped, bounced (this worker is unhealthy),
    segmented, or the job's outcome state."""
    if not rt.healthy:
        return rt.bounce(TASK_JOB, job_id)
    with rt.borrow() as models:
        worker_id = rt.worker_id()
        job = claim_job(rt.store, job_id, worker_id, lease_s=rt.settings.lease_s, max_attempts=rt.settings.max_attempts)
        if job is None:
            return "skipped"
        with rt.task(job.kind, queued_s=time.time() - job.created_at) as counted, rt.storage.workspace(job.id):
            plan = _plan(rt, job)
            if plan:
                counted["state"] = _start_segments(rt, job, models, plan, worker_id)
                return str(counted["state"])
            outcome = _run_whole(rt, job, models, worker_id)
            counted.update(state=outcome.state, code=outcome.error_code)
        if outcome.state in ("handed_back", "released"):
            rt.publish(TASK_JOB, job_id)  # for a healthy worker (a finished or cancelled job is skipped there)
        return outcome.state


def _run_whole(rt: WorkerRuntime, job: JobRecord, models: JobModels, worker_id: str) -> JobOutcome:
    """Run the job here; a video is stopped (and handed back) when the worker shuts down."""
    stop = threading.Event()
    watching = rt.watch_draining(stop) if job.kind == "video" else nullcontext()
    with watching:
        outcome = run_job(
            job,
            models,
            rt.store,
            rt.storage,
            worker_id=worker_id,
            config=rt.config,
            audit=rt.audit,
            stop=stop,
            fault_check=rt.fault_check(models),
        )
    if rt.metrics is not None and outcome.state == "succeeded":
        result = outcome.result
        frames = result.frames if isinstance(result, VideoResult) else 0
        faces = result.faces_swapped if result is not None else 0
        rt.metrics.work_done(frames=frames, faces=faces, timings_ms=outcome.timings_ms)
    return outcome


def _plan(rt: WorkerRuntime, job: JobRecord):
    """The segments of a video job worth splitting, else ``None`` (the job runs whole;
    a video that cannot be planned fails there with the usual error)."""
    from faceweave.video.concat import join_kind
    from faceweave.video.segments import plan_segments

    if job.kind != "video" or not rt.settings.segment_frames or job.inputs.map:
        return None
    try:
        options = JobOptions.model_validate(job.options)
        if options.fps is not None:
            return None  # frames dropped to another rate would not line up at the boundaries
        join_kind(f"result.{options.output_format('video')}")
        video = options.video_options()
        plan = plan_segments(
            rt.storage.resolve(job.inputs.target),
            segments=rt.settings.segments,
            min_frames=rt.settings.segment_frames,
            start=video.start,
            end=video.end,
        )
    except Exception:  # noqa: BLE001 - run_job reports it as the job's error
        return None
    return plan if len(plan) > 1 else None


def _start_segments(rt: WorkerRuntime, job: JobRecord, models, plan, worker_id: str) -> str:
    from faceweave.provenance.stamp import Provenance
    from faceweave.video.concat import join_kind, part_suffix

    storage, attempt = rt.storage, job.attempts
    discard_earlier_attempts(job, storage)
    folder = storage.job_dir(job.id)
    provenance = Provenance.new(watermark=rt.config.watermark)
    try:
        options = JobOptions.model_validate(job.options)
        kind = join_kind(f"result.{options.output_format('video')}")
        preview = _preview(rt, job, models, options, provenance, folder / f"preview-{attempt}.png")
        if preview is not None:
            storage.publish(preview)
        parts_dir = folder / f"parts-{attempt}"
        parts_dir.mkdir(parents=True, exist_ok=True)
    except Exception as exc:  # noqa: BLE001 - the job's outcome
        return _fail(rt, job, exc, holder=worker_id)
    plans = [
        dict(
            index=s.index,
            start_frame=s.start_frame,
            end_frame=s.end_frame,
            start_time=s.start_time,
            end_time=s.end_time,
            keyframe=s.keyframe,
        )
        for s in plan
    ]
    parts = [storage.relative(parts_dir / f"part_{s.index:05d}{part_suffix(kind)}") for s in plan]
    frames = sum(s.frames for s in plan)
    join = dict(segments=len(plan), frames=frames, run_id=provenance.run_id, created=provenance.created)
    rt.segments.create(job.id, attempt, plans, parts, join)
    if not hand_to_segments(rt.store, job, worker_id=worker_id, lease_s=rt.settings.lease_s, frames_total=frames):
        rt.segments.delete(job.id, attempt)  # cancelled meanwhile
        storage.remove_tree(storage.relative(parts_dir))
        return "released"
    rt.store.heartbeat(
        job.id,
        worker_id=SEGMENTED,
        attempt=attempt,
        lease_s=rt.settings.lease_s,
        preview_path=storage.relative(preview) if preview else None,
    )
    for segment in plan:
        rt.publish(TASK_SEGMENT, job.id, attempt, segment.index)
        rt.segments.mark_published(job.id, attempt, segment.index)
    log.info("job %s: %d frames in %d segments", job.id, frames, len(plan))
    return "segmented"


def _preview(rt: WorkerRuntime, job: JobRecord, models, options: JobOptions, provenance, path):
    """The first swapped frame, for ``GET /v1/jobs/{id}/preview``; ``None`` when no face is found."""
    video = _video_swapper(rt, job, models, options)
    prepared = video.prepare_sources([rt.storage.resolve(p) for p in job.inputs.sources])
    try:
        video.preview(
            prepared,
            rt.storage.resolve(job.inputs.target),
            path,
            reference=_reference(rt, job),
            options=rt.config.video_options(options.video_options(), provenance),
        )
    except NoFaceError:
        return None
    return path


# ---------------------------------------------------------------- a segment
def segment_task(rt: WorkerRuntime, job_id: str, attempt: int, index: int) -> str:
    """Swap one segment into its part; the last one done publishes the join.
    Returns what happened: skipped, released, failed or done."""
    job = _segmented(rt, job_id, attempt)
    if job is None:
        return "skipped"
    with rt.storage.workspace(job_id):  # an object store's local copies go when done
        return _run_segment(rt, job, index)


def _run_segment(rt: WorkerRuntime, job: JobRecord, index: int) -> str:
    if not rt.healthy:
        return rt.bounce(TASK_SEGMENT, job.id, job.attempts, index)
    with rt.borrow() as models:
        worker_id = rt.worker_id()
        row = rt.segments.claim(job.id, job.attempts, index, worker_id, lease_s=rt.settings.lease_s)
        if row is None:
            return "skipped"
        with rt.task("segment") as counted:
            counted["state"] = state = _segment_attempt(rt, job, models, row, worker_id)
    if state in ("released", "handed_back"):  # shutting down or a device fault: for another worker
        rt.publish(TASK_SEGMENT, job.id, job.attempts, index)
    return state


def _segment_attempt(rt: WorkerRuntime, job: JobRecord, models: JobModels, row: SegmentRecord, worker_id: str) -> str:
    """Swap the claimed segment ``row``; returns released, handed_back, failed or done."""
    job_id, attempt, index = job.id, job.attempts, row.index
    if row.tries > rt.settings.max_attempts:
        message = f"segment {index} of this job lost its worker {row.tries - 1} time(s)"
        return _fail(rt, job, None, code="worker_lost", message=message)
    part = rt.storage.resolve(row.part_path or "")
    stop = threading.Event()
    report: VideoSwapReport | None = None
    error: Exception | None = None
    with _segment_lease(rt, job, row, worker_id, stop) as lease, rt.watch_draining(stop):
        try:
            report = _swap_segment(rt, job, models, row, part, stop, progress=lambda n: lease.update(frames_done=n))
        except KeyboardInterrupt:
            if not stop.is_set():
                raise  # the process's own interrupt
        except Exception as exc:  # noqa: BLE001 - the job's outcome, unless stopped
            error = exc
    if stop.is_set():  # cancelled, the job was taken back, or the worker is shutting down
        if rt.state is not None and rt.state.draining:
            log.info("job %s segment %d: worker shutting down: handing back the running video work", job_id, index)
        part.unlink(missing_ok=True)
        rt.segments.release(job_id, attempt, index, worker_id)
        return "released"
    if error is not None and rt.fault_check(models)(error) is not None:
        part.unlink(missing_ok=True)
        rt.segments.release(job_id, attempt, index, worker_id, counted=True)
        return "handed_back"
    if error is not None or report is None:
        part.unlink(missing_ok=True)
        return _fail(rt, job, error)
    if rt.metrics is not None:
        rt.metrics.work_done(frames=report.frames, faces=report.faces_swapped, timings_ms=report.timings_ms)
    return _segment_done(rt, job, index, worker_id, report, part)


def _swap_segment(
    rt: WorkerRuntime,
    job: JobRecord,
    models: JobModels,
    row: SegmentRecord,
    part: Path,
    stop: threading.Event,
    *,
    progress: Callable[[int], None] | None = None,
) -> VideoSwapReport:
    """Swap the frames of the segment ``row`` into ``part``, with the job
    attempt's provenance; ``progress(frames)`` as its frames are written."""
    from faceweave.video.segmented import swap_segment
    from faceweave.video.segments import Segment

    options = JobOptions.model_validate(job.options)
    join = rt.segments.get(job.id, job.attempts, JOIN)
    video_options = rt.config.video_options(options.video_options(), _provenance(rt, join))
    video = _video_swapper(rt, job, models, options)
    prepared = video.prepare_sources([rt.storage.resolve(p) for p in job.inputs.sources])
    _, report = swap_segment(
        video,
        prepared,
        rt.storage.resolve(job.inputs.target),
        Segment(**row.plan),
        part,
        reference=_reference(rt, job),
        options=video_options,
        stop=stop,
        progress=progress,
    )
    return report


def _segment_done(
    rt: WorkerRuntime, job: JobRecord, index: int, worker_id: str, report: VideoSwapReport, part: Path
) -> str:
    """Record the segment's report; the last segment done publishes the join."""
    done = dict(
        frames=report.frames,
        frames_with_swap=report.frames_with_swap,
        faces_swapped=report.faces_swapped,
        scene_cuts=report.scene_cuts,
        worker=worker_id,
    )
    try:
        rt.storage.publish(part)  # where the joining worker finds it
    except Exception as exc:  # noqa: BLE001 - the job's outcome
        part.unlink(missing_ok=True)
        return _fail(rt, job, exc)
    if not rt.segments.finish(job.id, job.attempts, index, worker_id, report=done):
        rt.storage.delete(rt.storage.relative(part))
        return "released"
    if rt.segments.open_join(job.id, job.attempts):
        rt.publish(TASK_JOIN, job.id, job.attempts)
        rt.segments.mark_published(job.id, job.attempts, JOIN)
    return "done"


# ---------------------------------------------------------------- the join
def join_task(rt: WorkerRuntime, job_id: str, attempt: int) -> str:
    """Join the parts into the result and record the outcome, once.
    Returns what happened: skipped, released, failed or succeeded."""
    job = _segmented(rt, job_id, attempt)
    if job is None:
        return "skipped"
    with rt.task("join") as counted, rt.storage.workspace(job_id):  # an object store's local copies go when done
        counted["state"] = _join(rt, job)
        return str(counted["state"])


def _join(rt: WorkerRuntime, job: JobRecord) -> str:
    job_id, attempt = job.id, job.attempts
    worker_id = rt.worker_id()
    row = rt.segments.claim(job_id, attempt, JOIN, worker_id, lease_s=rt.settings.lease_s)
    if row is None:
        return "skipped"
    rows = [r for r in rt.segments.rows(job_id, attempt) if r.index != JOIN]
    options = JobOptions.model_validate(job.options)
    output = rt.storage.job_dir(job_id) / f"result-{attempt}.{options.output_format('video')}"
    stop = threading.Event()
    with _segment_lease(rt, job, row, worker_id, stop):
        try:
            joined = _join_parts(rt, job, options, rows, output)
            rt.storage.publish(output)  # an object store's result is visible once whole
        except Exception as exc:  # noqa: BLE001 - the job's outcome
            rt.storage.delete(rt.storage.relative(output))
            return _fail(rt, job, exc)
    result = _joined_result(joined, rows, run_id=int(row.plan["run_id"]))
    held = rt.store.finish(
        job_id,
        worker_id=SEGMENTED,
        attempt=attempt,
        state=JobState.SUCCEEDED,
        ttl_s=rt.config.ttl_s,
        output_path=rt.storage.relative(output),
        result=result,
    )
    if not held:
        rt.storage.delete(rt.storage.relative(output))
        return "released"
    _cleanup(rt, job, attempt)
    outcome = JobOutcome(state="succeeded", seconds=0.0, output=rt.storage.relative(output), result=result)
    write_audit(rt.audit, job, outcome=outcome, error=None, provenance=_provenance(rt, row), hide=rt.config.hide)
    return "succeeded"


def _join_parts(
    rt: WorkerRuntime, job: JobRecord, options: JobOptions, rows: list[SegmentRecord], output: Path
) -> JoinedVideo:
    """Concatenate the segments' parts with the input's audio into ``output``."""
    from faceweave.video.concat import join_segments
    from faceweave.video.segments import Segment, SegmentPart

    video = options.video_options()
    parts = [
        SegmentPart(
            segment=Segment(**r.plan),
            path=rt.storage.resolve(r.part_path or ""),
            frames=int((r.report or {}).get("frames", 0)),
        )
        for r in rows
    ]
    target = rt.storage.resolve(job.inputs.target)
    return join_segments(parts, output, audio_from=target if video.audio else None, start=video.start, end=video.end)


def _joined_result(joined: JoinedVideo, rows: list[SegmentRecord], *, run_id: int) -> VideoResult:
    """The job's result: the joined video's figures and the segments' reports summed."""
    reports = [r.report or {} for r in rows]
    swapped = sum(int(r.get("frames_with_swap", 0)) for r in reports)
    return VideoResult(
        frames=joined.frames,
        frames_with_swap=swapped,
        faces_swapped=sum(int(r.get("faces_swapped", 0)) for r in reports),
        scene_cuts=sum(int(r.get("scene_cuts", 0)) for r in reports),
        duration_s=round(joined.duration, 4),
        audio=joined.audio,
        broken_at=None,
        run_id=f"{run_id:06x}",
        segments=len(rows),
        segment_workers=[r.get("worker") for r in reports],
        warning=None if swapped else NO_FACE_WARNING,
    )


# ---------------------------------------------------------------- helpers
def _segment_lease(
    rt: WorkerRuntime, job: JobRecord, row: SegmentRecord, worker_id: str, stop: threading.Event
) -> Lease:
    """The lease of a segment row (or the join's) and, under the
    :data:`SEGMENTED` holder, of its job: each beat renews both and writes
    the frames this segment has written (``frames_done``, given by the
    segment's progress hook) on its row and the job's sum of its rows;
    ``stop`` is set when either is lost."""
    lease_s = rt.settings.lease_s

    def renew(values: Mapping[str, Any]) -> bool:
        frames = int(values.get("frames_done", 0))
        mine = rt.segments.heartbeat(job.id, job.attempts, row.index, worker_id, lease_s=lease_s, frames_done=frames)
        done = rt.segments.frames_done(job.id, job.attempts)
        total = job.frames_total or 0
        progress = round(min(99.9, 100.0 * done / total), 2) if total else 0.0
        held = rt.store.heartbeat(
            job.id, worker_id=SEGMENTED, attempt=job.attempts, lease_s=lease_s, frames_done=done, progress=progress
        )
        return bool(mine and held)

    interval = beat_interval(rt.settings.progress_interval_s, lease_s)
    return Lease(renew, interval_s=interval, stop=stop, name=f"faceweave-segment-{job.id[:8]}-{row.index}")


def _segmented(rt: WorkerRuntime, job_id: str, attempt: int) -> JobRecord | None:
    """The job, when its ``attempt`` is still with its segments."""
    if not rt.opened:
        rt.open()
    job = rt.store.get(job_id)
    if job is None or job.state != JobState.RUNNING or job.worker_id != SEGMENTED or job.attempts != attempt:
        return None
    return job


def _video_swapper(rt: WorkerRuntime, job: JobRecord, models: JobModels, options: JobOptions) -> VideoSwapper:
    from faceweave.video.pipeline import VideoSwapper

    swap_options = options.swap_options(
        kind="video",
        has_reference=bool(job.inputs.reference),
        max_pixels=rt.config.max_pixels,
        video_working_size=rt.config.video_working_size,
        runtime=rt.config.runtime,
    )
    return VideoSwapper(models.swapper(swap_options))


def _reference(rt: WorkerRuntime, job: JobRecord) -> Path | None:
    return rt.storage.resolve(job.inputs.reference) if job.inputs.reference else None


def _provenance(rt: WorkerRuntime, join: SegmentRecord | None) -> Provenance:
    """The job attempt's provenance (one run id for all its segments)."""
    from faceweave.provenance.stamp import Provenance

    if join is None:
        raise InvalidOptionError("the segment plan of this job is gone")
    return Provenance(run_id=int(join.plan["run_id"]), created=str(join.plan["created"]), watermark=rt.config.watermark)


def _fail(
    rt: WorkerRuntime,
    job: JobRecord,
    error: Exception | None,
    *,
    holder: str = SEGMENTED,
    code: str | None = None,
    message: str | None = None,
) -> str:
    """Record the job as failed (once) and remove its parts."""
    problem = job_problem(job, error, rt.config.hide, code=code or "", message=message or "")
    if not record_failure(rt.store, job, problem, holder=holder, ttl_s=rt.config.ttl_s):
        return "released"
    _cleanup(rt, job, job.attempts)
    outcome = JobOutcome(state="failed", seconds=0.0, error_code=problem.code)
    write_audit(rt.audit, job, outcome=outcome, error=error, provenance=None, hide=rt.config.hide)
    return "failed"


def _cleanup(rt: WorkerRuntime, job: JobRecord, attempt: int) -> None:
    rt.storage.remove_tree(rt.storage.relative(rt.storage.job_dir(job.id) / f"parts-{attempt}"))
    rt.segments.delete(job.id)
    remove_inputs(job, rt.storage)
