"""The steps of a job that every runner shares: the synchronous swap of the
routes, the embedded worker (:mod:`faceweave.service.worker`) and the Celery
tasks (:mod:`faceweave.service.distributed.tasks`).

* :class:`RunConfig`: what a runner needs from the settings, as plain values;
* :func:`swap_image` and :func:`swap_video`: one swap into an output file,
  returning the typed result the store keeps;
* :func:`discard_earlier_attempts`, :func:`remove_inputs`,
  :func:`discard_files`: the files of a job attempt;
* :func:`write_audit`: the job's audit line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from faceweave.errors import NoFaceError
from faceweave.options import VIDEO_WORKING_SIZE, RuntimeOptions
from faceweave.service.errors import job_error, model_folders
from faceweave.service.jobdata import ImageResult, JobInputs, JobResult, JobState, SwappedFace, VideoResult
from faceweave.service.jobspec import JobOptions
from faceweave.service.storage import Storage
from faceweave.service.store import JobRecord

if TYPE_CHECKING:
    from faceweave.pipeline import FaceSwapper, ImageInput
    from faceweave.provenance.audit import AuditLog
    from faceweave.provenance.stamp import Provenance
    from faceweave.service.settings import ServiceSettings
    from faceweave.video.pipeline import VideoOptions

log = logging.getLogger("faceweave.service.worker")

#: what a video result says when no frame had a face to swap
NO_FACE_WARNING = "no face to swap was found; the video is unchanged"


@dataclass(frozen=True)
class RunConfig:
    """What a job runner needs from the settings (plain values, so a
    Celery task can build it from the same settings)."""

    lease_s: float = 60.0
    ttl_s: float = 24 * 3600.0
    progress_interval_s: float = 0.5
    max_pixels: int = 40_000_000
    #: a video's length limits, held while decoding too (a header may not say)
    max_video_seconds: float | None = None
    max_video_frames: int | None = None
    video_working_size: int = VIDEO_WORKING_SIZE
    watermark: bool = True
    hide: tuple[str, ...] = ()
    #: where neural models run on this worker (execution provider, device, model folder)
    runtime: RuntimeOptions = RuntimeOptions()
    #: workers a job may be handed to after device faults before it fails (the poison-job guard)
    max_attempts: int = 3

    def video_options(self, options: VideoOptions, provenance: Provenance | None) -> VideoOptions:
        """``options`` with ``provenance`` (watermark and label every frame) and
        this worker's length limits, which hold while decoding too."""
        return replace(
            options, provenance=provenance, max_seconds=self.max_video_seconds, max_frames=self.max_video_frames
        )

    def provenance(self) -> Provenance:
        """A new run's provenance (its own run id), marked unless the settings turn marking off."""
        from faceweave.provenance.stamp import Provenance

        return Provenance.new(watermark=self.watermark)

    @classmethod
    def from_settings(cls, settings: ServiceSettings, storage: Storage) -> RunConfig:
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
            max_attempts=settings.max_attempts,
        )


@dataclass(frozen=True)
class JobOutcome:
    """How a job run ended: ``state`` is succeeded, failed, ``released``
    (stopped, cancelled or taken away: someone else decides) or ``handed_back``
    (a device fault: back in the queue for another worker)."""

    state: str
    seconds: float
    output: str | None = None
    error_code: str | None = None
    result: JobResult | None = None
    #: milliseconds by pipeline step (the photo's, or summed over the video's frames)
    timings_ms: Mapping[str, float] = field(default_factory=dict)


class ProgressSink(Protocol):
    """Where a running video job reports its progress (a worker's heartbeat)."""

    def update(self, **values: Any) -> None: ...

    def flush(self) -> None: ...


def swap_image(
    inputs: JobInputs,
    swapper: FaceSwapper,
    *,
    storage: Storage,
    options: JobOptions,
    output: Path,
    provenance: Provenance | None,
    timings: dict[str, float] | None = None,
) -> ImageResult:
    """Swap one photo into ``output`` (marked by the library with ``provenance``,
    and labelled); ``timings`` gets the milliseconds of each pipeline step."""
    result = swapper.swap(
        [storage.resolve(p) for p in inputs.sources],
        storage.resolve(inputs.target),
        reference=storage.resolve(inputs.reference) if inputs.reference else None,
        provenance=provenance,
    )
    began = time.perf_counter()
    result.save(output, quality=options.quality or 95)
    if timings is not None:
        timings.update(result.timings_ms)
        timings["encode"] = timings.get("encode", 0.0) + (time.perf_counter() - began) * 1000.0
    return ImageResult(
        width=int(result.image.shape[1]),
        height=int(result.image.shape[0]),
        faces_found=len(result.faces),
        faces_swapped=len(result.swapped),
        swapped=[
            SwappedFace(face=s.target_index, box=s.bbox.as_list(), source_index=s.source_index) for s in result.swapped
        ],
        run_id=provenance.run_hex if provenance else None,
    )


@dataclass(frozen=True)
class VideoPaths:
    """Where a video job writes: the result and the first swapped frame."""

    output: Path
    preview: Path


class FrameProgress:
    """The video pipeline's ``progress(done, total)`` callback: frames,
    percent and the time left, into a :class:`ProgressSink`."""

    def __init__(self, sink: ProgressSink) -> None:
        self.sink = sink
        self.began = time.perf_counter()

    def __call__(self, done: int, total: int | None) -> None:
        elapsed = time.perf_counter() - self.began
        values: dict[str, Any] = {"frames_done": done, "frames_total": total}
        if total:
            values["progress"] = round(min(99.9, 100.0 * done / total), 2)
            values["eta_s"] = round(elapsed / done * max(0, total - done), 2) if done else None
        self.sink.update(**values)


def swap_video(
    inputs: JobInputs,
    swapper: FaceSwapper,
    *,
    storage: Storage,
    options: VideoOptions,
    paths: VideoPaths,
    progress: ProgressSink,
    stop: threading.Event,
    timings: dict[str, float] | None = None,
) -> VideoResult:
    """Swap a video into ``paths.output`` (``options`` carry the provenance and
    limits), writing the preview first unless ``stop`` is set already;
    ``timings`` gets the milliseconds of each step, summed over the frames."""
    from faceweave.video.pipeline import VideoSwapper

    target = storage.resolve(inputs.target)
    reference = storage.resolve(inputs.reference) if inputs.reference else None
    video = VideoSwapper(swapper)
    mapping: dict[int, Sequence[ImageInput]] = {
        index: [storage.resolve(p) for p in group] for index, group in inputs.map.items()
    }
    people = video.people_map(target, mapping, options=options) if mapping else None
    prepared = video.prepare_sources([storage.resolve(p) for p in inputs.sources]) if people is None else []
    if not stop.is_set():
        try:
            video.preview(prepared, target, paths.preview, reference=reference, options=options, mapping=people)
        except NoFaceError:
            pass  # no face anywhere: the video is copied unchanged, as the CLI does
        else:
            progress.update(preview_path=storage.publish(paths.preview))
            progress.flush()
    report = video.swap_video(
        prepared,
        target,
        paths.output,
        reference=reference,
        options=options,
        progress=FrameProgress(progress),
        stop=stop,
        mapping=people,
    )
    if timings is not None:
        timings.update(report.timings_ms)
    return VideoResult(
        frames=report.frames,
        frames_with_swap=report.frames_with_swap,
        faces_swapped=report.faces_swapped,
        scene_cuts=report.scene_cuts,
        fps=round(report.fps, 2),
        broken_at=report.broken_at,
        run_id=options.provenance.run_hex if options.provenance else None,
        warning=None if report.frames_with_swap else NO_FACE_WARNING,
    )


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


def discard_files(storage: Storage, *paths: Path | None) -> None:
    """Delete the files an attempt wrote that it does not keep (and what of them was published)."""
    for path in paths:
        if path is not None:
            storage.delete(storage.relative(path))


def remove_inputs(job: JobRecord, storage: Storage) -> None:
    """Delete a finished job's uploaded files (its result stays)."""
    for rel in job.inputs.stored_paths():
        storage.delete(rel)


def write_audit(
    audit: AuditLog,
    job: JobRecord,
    *,
    outcome: JobOutcome | None,
    error: BaseException | None,
    provenance: Provenance | None,
    hide: tuple[str, ...] = (),
    state: str | None = None,
) -> None:
    """One audit line for a job: owner, inputs' hashes, options, outcome.
    A line that cannot be written is logged, never raised."""
    from faceweave.provenance.audit import AuditEntry, AuditInput
    from faceweave.provenance.stamp import audit_watermark

    inputs = tuple(AuditInput(role=f.role, path=f.filename or f.path, sha256=f.sha256) for f in job.inputs.files)
    final = state or (outcome.state if outcome else "unknown")
    problem = job_error(error, hide) if error is not None else None
    entry = AuditEntry(
        command=f"service.job.{job.kind}",
        inputs=inputs,
        options={"job_id": job.id, **job.options},
        outcome="ok" if final == JobState.SUCCEEDED else final if final == JobState.CANCELLED else "error",
        watermark=audit_watermark(provenance),
        output=outcome.output if outcome else None,
        code=problem.code if problem else None,
        message=problem.message if problem else None,
        user=job.owner,
        run_id=provenance.run_hex if provenance else None,
    )
    try:
        audit.append(entry)
    except Exception:  # the job's result stands without its audit line: logged
        log.exception("cannot write the audit line of job %s", job.id)
