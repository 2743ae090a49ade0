"""A Celery worker's Prometheus metrics (names in ``docs/METRICS.md``).

This module imports ``prometheus_client`` only inside functions: the worker
sets the multiprocess folder first (:func:`metrics_folder`).

Tasks run in the prefork pool's processes, forked from the worker's main
process, so the counters and histograms use ``prometheus_client``'s
multiprocess mode: every process writes its values to memory-mapped files in
one folder (:func:`metrics_folder`, made before the first import of
``prometheus_client`` in the worker) and the main process reads them all when
``/metrics`` is scraped (:func:`exposition`), together with the worker's
state (:class:`StateCollector`, from the shared :class:`WorkerState`) and the
devices (:class:`~faceweave.monitoring.DeviceCollector`).

:class:`WorkerMetrics` holds the metric objects of one process; it is made in
each task process, never at module level.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from faceweave.service.distributed.fleet import WorkerState

log = logging.getLogger("faceweave.service.distributed")

#: the environment variable prometheus_client's multiprocess mode reads
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: per-frame stage times (the API's embedded workers use the same)
STAGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: job and task times (both worker kinds)
JOB_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


@dataclass(frozen=True)
class Family:
    """A metric family that both worker kinds count (the API's embedded
    workers in :mod:`faceweave.service.metrics`, the Celery task processes
    in :class:`WorkerMetrics`): one name, help text and label set."""

    name: str
    help: str
    labels: tuple[str, ...] = ()

    def counter(self, registry: Any) -> Any:
        from prometheus_client import Counter

        return Counter(self.name, self.help, self.labels, registry=registry)

    def histogram(self, registry: Any, buckets: tuple[float, ...]) -> Any:
        from prometheus_client import Histogram

        return Histogram(self.name, self.help, self.labels, buckets=buckets, registry=registry)


JOBS_FINISHED = Family(
    "faceweave_jobs_finished",
    "Jobs that ended, by kind (and a Celery worker's segment and join tasks) and state",
    ("kind", "state"),
)
JOB_RUN_SECONDS = Family(
    "faceweave_job_run_seconds", "Time a worker spent on a job (or a segment or join task)", ("kind",)
)
JOB_QUEUED_SECONDS = Family("faceweave_job_queued_seconds", "Time from submission to a worker taking the job")
FRAMES_PROCESSED = Family("faceweave_frames_processed", "Video frames swapped")
FACES_SWAPPED = Family("faceweave_faces_swapped", "Faces swapped (photos and video frames)")
STAGE_SECONDS = Family("faceweave_stage_seconds", "Seconds per frame (video) or per photo in each stage", ("stage",))

#: the pipeline's timing names (``timings_ms`` keys) -> the stage they count toward
STAGE_OF: Mapping[str, str] = MappingProxyType(
    {
        "decode": "decode",
        "sources": "decode",
        "detect": "detect",
        "mesh": "detect",
        "embed": "detect",
        "track": "track",
        "colour": "track",
        "swap": "model",
        "expression": "model",
        "enhance": "model",
        "crop": "composite",
        "segment": "composite",
        "hands": "composite",
        "blend": "composite",
        "paste": "composite",
        "mark": "encode",
        "encode": "encode",
    }
)
STAGES = ("decode", "detect", "track", "model", "composite", "encode")


def metrics_folder() -> Path:
    """The multiprocess folder for this worker, made empty, and named in the
    environment so that the pool's processes (forked later) write there.

    Call before anything imports ``prometheus_client``.  A folder given in
    ``PROMETHEUS_MULTIPROC_DIR`` is used (its old ``*.db`` files removed);
    otherwise a new temporary folder (removed by :func:`remove_metrics_folder`)."""
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        folder = Path(given)
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.db"):
            old.unlink(missing_ok=True)
    else:
        folder = Path(tempfile.mkdtemp(prefix="faceweave-metrics-"))
        os.environ[MULTIPROC_ENV] = str(folder)
    _check_multiprocess()
    return folder


def _check_multiprocess() -> None:
    import prometheus_client.values as values

    if values.ValueClass.__name__ != "MmapedValue":
        log.warning(
            "prometheus_client was imported before %s was set: the task processes' metrics are not collected",
            MULTIPROC_ENV,
        )


def remove_metrics_folder(folder: Path) -> None:
    """Remove a folder :func:`metrics_folder` made (not one the environment named)."""
    if folder.name.startswith("faceweave-metrics-"):
        shutil.rmtree(folder, ignore_errors=True)


def process_gone(pid: int) -> None:
    """A task process ended: drop its live gauges (the counters stay counted)."""
    from prometheus_client import multiprocess

    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid)


class WorkerMetrics:
    """The metric objects of one task process (they write to the multiprocess folder)."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Gauge

        self.started = Counter("faceweave_jobs_started", "Tasks started", ["kind"], registry=None)
        self.finished = JOBS_FINISHED.counter(None)
        self.failed = Counter("faceweave_jobs_failed", "Failed jobs by error code", ["kind", "code"], registry=None)
        self.run_seconds = JOB_RUN_SECONDS.histogram(None, JOB_BUCKETS)
        self.queued_seconds = JOB_QUEUED_SECONDS.histogram(None, JOB_BUCKETS)
        self.frames = FRAMES_PROCESSED.counter(None)
        self.faces = FACES_SWAPPED.counter(None)
        self.stage_seconds = STAGE_SECONDS.histogram(None, STAGE_BUCKETS)
        self.model_load = Gauge(
            "faceweave_model_load_seconds", "Time to load each model", ["model"], multiprocess_mode="max", registry=None
        )
        self.model_warmup = Gauge(
            "faceweave_model_warmup_seconds",
            "Time of each model's warm-up inference",
            ["model"],
            multiprocess_mode="max",
            registry=None,
        )
        self.selftests = Counter("faceweave_worker_selftests", "Self-test inferences", ["result"], registry=None)
        self.device_faults = Counter("faceweave_device_faults", "Device faults found by a self-test", registry=None)
        for stage in STAGES:  # every stage present from the start, so rates exist
            self.stage_seconds.labels(stage=stage)

    def task_started(self, kind: str, *, queued_s: float | None = None) -> float:
        """Count a task of ``kind``; returns its start time for :meth:`task_ended`."""
        self.started.labels(kind=kind).inc()
        if queued_s is not None:
            self.queued_seconds.observe(max(0.0, queued_s))
        return time.perf_counter()

    def task_ended(self, kind: str, state: str, started: float, *, code: str | None = None) -> None:
        self.finished.labels(kind=kind, state=state).inc()
        self.run_seconds.labels(kind=kind).observe(time.perf_counter() - started)
        if state == "failed":
            self.failed.labels(kind=kind, code=code or "internal_error").inc()

    def work_done(self, *, frames: int = 0, faces: int = 0, timings_ms: Mapping[str, float] | None = None) -> None:
        """Frames and faces swapped, and the stage times of one photo or of a
        video's frames (``timings_ms`` summed over ``frames``; one observation
        of the mean per frame)."""
        self.frames.inc(frames)
        self.faces.inc(faces)
        for stage, seconds in stage_seconds(timings_ms or {}, per=max(1, frames)).items():
            self.stage_seconds.labels(stage=stage).observe(seconds)

    def models_loaded(self, load_s: Mapping[str, float], warmup_s: Mapping[str, float]) -> None:
        for model, seconds in load_s.items():
            self.model_load.labels(model=model).set(seconds)
        for model, seconds in warmup_s.items():
            self.model_warmup.labels(model=model).set(seconds)


def stage_seconds(timings_ms: Mapping[str, float], *, per: int = 1) -> dict[str, float]:
    """The pipeline's timings (milliseconds by step) summed into the six
    stages, in seconds, divided by ``per`` (frames); unknown steps are left out."""
    out: dict[str, float] = {}
    for name, ms in timings_ms.items():
        stage = STAGE_OF.get(name)
        if stage is not None:
            out[stage] = out.get(stage, 0.0) + ms / 1000.0 / per
    return out


class StateCollector:
    """The worker's state (from shared memory) at scrape time: processes, busy,
    ready, healthy, draining, idle seconds; labelled with the worker's name."""

    def __init__(self, state: WorkerState, *, worker: str = "") -> None:
        self.state = state
        self.worker = worker

    def describe(self) -> Iterable[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        s = self.state
        values = (
            ("faceweave_worker_processes", "Task processes alive", s.readiness.ready_processes),
            ("faceweave_worker_busy", "Tasks running now", s.busy),
            ("faceweave_worker_ready", "1 once every task process has warm models", int(s.readiness.ready)),
            ("faceweave_worker_healthy", "1, or 0 after a device fault", int(s.healthy)),
            ("faceweave_worker_draining", "1 while the worker shuts down", int(s.draining)),
            ("faceweave_worker_idle_seconds", "Seconds since the last task ended (0 while busy)", s.idle_seconds()),
        )
        for name, text, value in values:
            family = GaugeMetricFamily(name, text, labels=["worker"])
            family.add_metric([self.worker], float(value))
            yield family


def exposition(state: WorkerState, devices: Any | None, folder: Path | None, *, worker: str = "") -> bytes:
    """``/metrics`` of the worker: the task processes' files, its state, its devices."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    if folder is not None:
        MultiProcessCollector(registry, path=str(folder))
    registry.register(StateCollector(state, worker=worker))
    if devices is not None:
        registry.register(devices)
    return generate_latest(registry)
