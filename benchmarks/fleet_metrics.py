"""What the fleet's metrics cost, and how long each model takes to warm up.

Prints, from one run on this machine:

* the milliseconds of one ``/metrics`` scrape of a worker (its health port,
  prometheus_client's multiprocess files of 1 and 4 task processes that have
  run jobs, the state and the host device monitor) and of an API node's
  registry, alternated over ``--scrapes`` requests (median, p90);
* the cost per frame: the stream's decode and encode timing (two clock reads
  a frame each) and the per-segment metric updates over its frames, next to
  what a scrape every 15 s costs spread over the frames a worker swaps in
  that time (``--fps``, default 28: this machine's one-face video rate);
* load and warm-up seconds per model, and the self-test, in a fresh process.

    .venv/bin/python benchmarks/fleet_metrics.py [--scrapes 200] [--fps 28]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

SCRAPE_INTERVAL_S = 15.0
SEGMENT_FRAMES = 54


def _jobs_in_child(jobs: int) -> None:
    from faceweave.service.distributed.telemetry import WorkerMetrics

    metrics = WorkerMetrics()
    timings = {"decode": 90.0, "detect": 400.0, "track": 50.0, "swap": 600.0, "paste": 200.0, "encode": 300.0}
    for index in range(jobs):
        kind = ("image", "video", "segment", "join")[index % 4]
        began = metrics.task_started(kind, queued_s=0.5)
        metrics.work_done(frames=SEGMENT_FRAMES, faces=SEGMENT_FRAMES, timings_ms=timings)
        metrics.task_ended(kind, "succeeded" if index % 5 else "failed", began, code="no_face")
    metrics.models_loaded({"analysis": 0.2, "swapper:mesh": 0.01}, {"analysis": 0.01, "pipeline": 0.07})


def _worker_scrapes(processes: int, scrapes: int) -> list[float]:
    """Milliseconds per worker scrape, ``processes`` task processes having counted."""
    from faceweave.monitoring import DeviceCollector, open_monitor
    from faceweave.service.distributed.fleet import WorkerState
    from faceweave.service.distributed.health import HealthServer
    from faceweave.service.distributed.telemetry import MULTIPROC_ENV, exposition, metrics_folder

    folder = metrics_folder()
    for old in folder.glob("*.db"):
        old.unlink()
    context = multiprocessing.get_context("fork")
    for _ in range(processes):
        child = context.Process(target=_jobs_in_child, args=(40,))
        child.start()
        child.join()
    state = WorkerState(processes)
    devices = DeviceCollector(open_monitor("host"), worker="bench")
    server = HealthServer(state, host="127.0.0.1", port=0, metrics=lambda: exposition(state, devices, folder))
    server.start()
    try:
        return [_timed_get(f"http://127.0.0.1:{server.port}/metrics") for _ in range(scrapes)]
    finally:
        server.close()
        assert os.environ[MULTIPROC_ENV] == str(folder)


def _timed_get(url: str) -> float:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as answer:
        answer.read()
    return (time.perf_counter() - began) * 1000.0


def _api_renders(scrapes: int) -> list[float]:
    """Milliseconds per render of an API node's registry (as ``GET /metrics`` does, store counts given)."""
    from faceweave.service.metrics import Metrics

    metrics = Metrics()
    for route in ("/v1/jobs", "/v1/jobs/{job_id}", "/v1/swap", "/healthz", "/metrics"):
        for status in ("200", "202", "404", "422"):
            metrics.requests.labels(method="GET", route=route, status=status).inc()
            metrics.latency.labels(method="GET", route=route).observe(0.01)
    counts = {"queued": 3, "running": 2, "succeeded": 100, "failed": 4, "cancelled": 1}
    out = []
    for _ in range(scrapes):
        began = time.perf_counter()
        metrics.render(counts, oldest_queued=time.time() - 30)
        out.append((time.perf_counter() - began) * 1000.0)
    return out


def _api_renders_in_child(scrapes: int) -> list[float]:
    """:func:`_api_renders` in a process of its own, outside multiprocess mode (as the API runs)."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    code = f"import json, fleet_metrics; print(json.dumps(fleet_metrics._api_renders({scrapes})))"
    folder = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=folder)
    return json.loads(done.stdout)


def _per_frame_us() -> dict[str, float]:
    """Microseconds per frame the instrumentation adds to a video's swap."""
    from faceweave.service.distributed.telemetry import WorkerMetrics

    reps = 200_000
    began = time.perf_counter()
    for _ in range(reps):
        a = time.perf_counter()
        _ = time.perf_counter() - a
    clock_pair_us = (time.perf_counter() - began) / reps * 1e6
    metrics = WorkerMetrics()
    timings = {"decode": 90.0, "detect": 400.0, "track": 50.0, "swap": 600.0, "paste": 200.0, "encode": 300.0}
    reps = 2000
    began = time.perf_counter()
    for _ in range(reps):
        started = metrics.task_started("segment", queued_s=0.5)
        metrics.work_done(frames=SEGMENT_FRAMES, faces=SEGMENT_FRAMES, timings_ms=timings)
        metrics.task_ended("segment", "succeeded", started)
    per_task_us = (time.perf_counter() - began) / reps * 1e6
    return {"stream_clock_reads_us": 2 * clock_pair_us, "metric_updates_us": per_task_us / SEGMENT_FRAMES}


def _warmup_in_child() -> dict:
    script = """
import json, time
from faceweave.options import SwapOptions
from faceweave.service.models import JobModels
from faceweave.service.selftest import self_test
models = JobModels()
times = models.prepare_timed(SwapOptions())
first = self_test(models, SwapOptions())
second = self_test(models, SwapOptions())
models.close()
print(json.dumps({"load_s": times.load_s, "warmup_s": times.warmup_s, "self_test_s": [first, second]}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _summary(values: list[float]) -> str:
    ordered = sorted(values)
    return f"median {statistics.median(ordered):.2f} ms, p90 {ordered[int(len(ordered) * 0.9)]:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--fps", type=float, default=28.0)
    args = parser.parse_args()
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    with tempfile.TemporaryDirectory(prefix="faceweave-metrics-bench-") as folder:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
        one, four, api = [], [], []
        for _ in range(4):  # alternated, a quarter each time
            one += _worker_scrapes(1, args.scrapes // 4)
            four += _worker_scrapes(4, args.scrapes // 4)
            api += _api_renders_in_child(args.scrapes // 4)
        frame = _per_frame_us()
    frames_per_scrape = args.fps * SCRAPE_INTERVAL_S
    scrape_ms = statistics.median(four)
    print(f"worker /metrics, 1 task process:  {_summary(one)}")
    print(f"worker /metrics, 4 task processes: {_summary(four)}")
    print(f"API registry render:               {_summary(api)}")
    print(
        f"per frame: stream timing {frame['stream_clock_reads_us']:.2f} us, metric updates "
        f"{frame['metric_updates_us']:.2f} us, one scrape every {SCRAPE_INTERVAL_S:.0f} s over "
        f"{frames_per_scrape:.0f} frames {scrape_ms * 1000.0 / frames_per_scrape:.2f} us "
        f"(a frame takes {1e6 / args.fps:.0f} us at {args.fps:.0f} fps)"
    )
    warm = _warmup_in_child()
    for model, seconds in warm["load_s"].items():
        print(f"model {model}: load {seconds * 1000:.0f} ms, warm-up {warm['warmup_s'].get(model, 0.0) * 1000:.1f} ms")
    first, second = warm["self_test_s"]
    print(f"self-test swap: first {first * 1000:.0f} ms (the pipeline's warm-up), then {second * 1000:.0f} ms")


if __name__ == "__main__":
    main()
