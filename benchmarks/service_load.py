"""Load on the HTTP service over loopback, against a real uvicorn server.

Starts ``uvicorn --factory faceweave.service.app:create_app`` in a child
process (storage in a temporary folder, rate limit off), waits for
``/readyz``, then measures:

* ``POST /v1/swap`` with 1, 4 and 16 concurrent clients: requests per
  second and p50 / p95 latency (every request swaps one face; the photos are
  sent each time, as a client would);
* the queue overhead of a job: ``POST /v1/jobs`` one at a time, and from the
  server's own timestamps ``(finished - created - swap) / swap``, i.e. time
  in the queue plus the store's bookkeeping over the time of the swap itself.

    .venv/bin/python benchmarks/service_load.py [--requests 32] [--jobs 10] [--slots 2]

Absolute numbers depend on the machine's cores: with S swap slots the
service can swap at most S photos at a time, so latency grows with clients
beyond S while requests per second levels off.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "faces"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(storage: Path, port: int, slots: int, workers: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "FACEWEAVE_STORAGE": str(storage),
        "FACEWEAVE_SYNC_SLOTS": str(slots),
        "FACEWEAVE_WORKERS": str(workers),
        "FACEWEAVE_LIMITS__RATE_PER_SECOND": "0",
        "FACEWEAVE_POLL_INTERVAL_S": "0.02",
        "GLOG_minloglevel": "3",
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "faceweave.service.app:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_ready(base: str, server: subprocess.Popen, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with status {server.returncode}")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not become ready")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def swap_load(base: str, files: dict[str, bytes], clients: int, requests: int) -> dict[str, float]:
    latencies: list[float] = []
    failures = []
    lock = threading.Lock()
    counter = iter(range(requests))

    def client() -> None:
        with httpx.Client(timeout=300) as http:
            while True:
                with lock:
                    if next(counter, None) is None:
                        return
                started = time.perf_counter()
                response = http.post(
                    f"{base}/v1/swap",
                    files=[
                        ("source", ("s.jpg", files["source"], "image/jpeg")),
                        ("target", ("t.jpg", files["target"], "image/jpeg")),
                    ],
                )
                elapsed = time.perf_counter() - started
                with lock:
                    (latencies if response.status_code == 200 else failures).append(elapsed)

    wall = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - wall
    return {
        "clients": clients,
        "ok": len(latencies),
        "failed": len(failures),
        "rps": len(latencies) / wall,
        "p50_ms": 1000 * percentile(latencies, 0.5) if latencies else float("nan"),
        "p95_ms": 1000 * percentile(latencies, 0.95) if latencies else float("nan"),
    }


def _t(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def queue_overhead(base: str, files: dict[str, bytes], jobs: int) -> dict[str, float]:
    ratios, queued, swaps = [], [], []
    with httpx.Client(timeout=300) as http:
        for _ in range(jobs):
            job = http.post(
                f"{base}/v1/jobs",
                files=[
                    ("source", ("s.jpg", files["source"], "image/jpeg")),
                    ("target", ("t.jpg", files["target"], "image/jpeg")),
                ],
            ).json()
            while job["state"] in ("queued", "running"):
                time.sleep(0.02)
                job = http.get(f"{base}/v1/jobs/{job['id']}").json()
            if job["state"] != "succeeded":
                raise SystemExit(f"job failed: {job['error']}")
            total = _t(job["finished_at"]) - _t(job["created_at"])
            work = job["result"]["work_s"]
            ratios.append((total - work) / work)
            queued.append(_t(job["started_at"]) - _t(job["created_at"]))
            swaps.append(work)
    return {
        "jobs": jobs,
        "overhead_median_pct": 100 * statistics.median(ratios),
        "overhead_max_pct": 100 * max(ratios),
        "queued_median_ms": 1000 * statistics.median(queued),
        "swap_median_ms": 1000 * statistics.median(swaps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--requests", type=int, default=32, help="requests per concurrency level")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--slots", type=int, default=2, help="swap slots (models kept for POST /v1/swap)")
    args = parser.parse_args()
    files = {
        "source": (args.data / "single" / "paul_rudd.jpg").read_bytes(),
        "target": (args.data / "single" / "biden2.jpg").read_bytes(),
    }
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp), port, args.slots, workers=1)
        try:
            wait_ready(base, server)
            swap_load(base, files, 1, 2)  # warm-up
            print(f"POST /v1/swap, one face, {args.slots} swap slot(s), {os.cpu_count()} CPU(s)")
            print(f"{'clients':>7} {'ok':>4} {'failed':>6} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8}")
            for clients in args.clients:
                r = swap_load(base, files, clients, max(args.requests, clients))
                print(
                    f"{r['clients']:>7} {r['ok']:>4} {r['failed']:>6} {r['rps']:>7.2f} {r['p50_ms']:>8.0f} "
                    f"{r['p95_ms']:>8.0f}"
                )
            q = queue_overhead(base, files, args.jobs)
            print(f"\njob queue overhead over {q['jobs']} image jobs (one at a time):")
            print(
                f"  swap {q['swap_median_ms']:.0f} ms, queued {q['queued_median_ms']:.0f} ms (median);"
                f" overhead {q['overhead_median_pct']:.1f}% median, {q['overhead_max_pct']:.1f}% max"
            )
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()


if __name__ == "__main__":
    main()
