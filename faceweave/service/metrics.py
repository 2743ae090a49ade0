"""Prometheus metrics of one app, in a registry that the app owns (no globals).

Request counts and latencies come from :class:`MetricsMiddleware`; job
counters from the workers; jobs by state and the queue depth are read from
the store when ``/metrics`` is scraped.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from faceweave.service.distributed.telemetry import (
    FACES_SWAPPED,
    FRAMES_PROCESSED,
    JOB_BUCKETS,
    JOB_QUEUED_SECONDS,
    JOB_RUN_SECONDS,
    JOBS_FINISHED,
    STAGE_BUCKETS,
    STAGE_SECONDS,
)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_LIVE_BUCKETS = (0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """The service's metrics; :meth:`render` gives the text exposition format."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("faceweave_http_requests", "HTTP requests", ["method", "route", "status"], registry=r)
        self.latency = Histogram(
            "faceweave_http_request_seconds",
            "HTTP request latency",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter("faceweave_errors", "Errors answered or met by jobs, by code", ["code"], registry=r)
        self.jobs = Gauge("faceweave_jobs", "Jobs in the store by state", ["state"], registry=r)
        self.queue_depth = Gauge("faceweave_queue_depth", "Jobs waiting for a worker", registry=r)
        self.queue_age = Gauge(
            "faceweave_queue_oldest_age_seconds",
            "Age of the oldest queued job (0 when none waits): the autoscaling signal",
            registry=r,
        )
        # the job families, as the Celery workers count them too
        self.jobs_finished = JOBS_FINISHED.counter(r)
        self.job_seconds = JOB_RUN_SECONDS.histogram(r, JOB_BUCKETS)
        self.queue_seconds = JOB_QUEUED_SECONDS.histogram(r, JOB_BUCKETS)
        self.stages = STAGE_SECONDS.histogram(r, STAGE_BUCKETS)
        self.frames = FRAMES_PROCESSED.counter(r)
        self.faces = FACES_SWAPPED.counter(r)
        self.busy = Counter("faceweave_worker_busy_seconds", "Seconds workers spent running jobs", registry=r)
        self.workers = Gauge("faceweave_workers", "Embedded workers", ["state"], registry=r)
        self.live_sessions = Gauge("faceweave_live_sessions", "Live (WebRTC) sessions running now", registry=r)
        self.live_started = Counter("faceweave_live_sessions_started", "Live sessions started", registry=r)
        self.live_refused = Counter(
            "faceweave_live_sessions_refused", "Live sessions refused, by reason", ["reason"], registry=r
        )
        self.live_fps = Gauge(
            "faceweave_live_fps", "Swapped frames per second, summed over the running live sessions", registry=r
        )
        self.live_frames = Counter(
            "faceweave_live_frames",
            "Live frames received, swapped, dropped (stale) and audio sent back",
            ["kind"],
            registry=r,
        )
        self.live_latency = Histogram(
            "faceweave_live_latency_seconds",
            "From a live frame's arrival to its swapped frame being ready to send",
            buckets=_LIVE_BUCKETS,
            registry=r,
        )

    def render(self, job_counts: dict[str, int] | None = None, *, oldest_queued: float | None = None) -> bytes:
        """The exposition; ``job_counts`` and ``oldest_queued`` (a submission
        time, seconds since the epoch) are read from the store by the caller."""
        if job_counts is not None:
            for state, count in job_counts.items():
                self.jobs.labels(state=state).set(count)
            self.queue_depth.set(job_counts.get("queued", 0))
        self.queue_age.set(0.0 if oldest_queued is None else max(0.0, time.time() - oldest_queued))
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Pure ASGI middleware: counts requests and times them by route template
    (``/v1/jobs/{job_id}``, not the concrete path, to keep labels few)."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def send_wrapper(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            self.metrics.requests.labels(method=method, route=name, status=str(status["code"])).inc()
            self.metrics.latency.labels(method=method, route=name).observe(time.perf_counter() - started)
