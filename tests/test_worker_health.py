"""The Celery worker's health endpoints (``faceweave worker --health-port``):
``/healthz`` answers while the main process runs (503 after a device fault),
``/readyz`` once every task process (forked, as Celery's prefork pool does)
has marked its models warm, and again 503 when one has gone, after a fault
and while draining; ``/metrics`` gathers what the forked processes counted."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from faceweave.service.distributed.fleet import WorkerState
from faceweave.service.distributed.health import HealthServer, WorkerReadiness
from faceweave.service.distributed.worker_main import _start_health


def _get(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def served():
    state = WorkerState(2)
    server = HealthServer(state, host="127.0.0.1", port=0)
    server.start()
    yield state.readiness, server.port
    server.close()


def _ready_then_wait(readiness: WorkerReadiness, marked, leave) -> None:
    readiness.mark_ready()
    marked.set()
    leave.wait(10)


def test_readiness_follows_the_forked_task_processes(served):
    readiness, port = served
    assert _get(port, "/healthz") == (200, {"status": "ok"})
    assert _get(port, "/readyz") == (503, {"ready": False, "processes_ready": 0, "processes": 2})

    context = multiprocessing.get_context("fork")
    children = []
    for _ in range(2):
        marked, leave = context.Event(), context.Event()
        child = context.Process(target=_ready_then_wait, args=(readiness, marked, leave))
        child.start()
        assert marked.wait(10)
        children.append((child, leave))
    assert _get(port, "/readyz") == (200, {"ready": True, "processes_ready": 2, "processes": 2})

    child, leave = children[0]
    leave.set()
    child.join(10)  # it died without marking itself gone: its id no longer counts
    assert _get(port, "/readyz")[0] == 503
    readiness.mark_ready()  # its replacement (here: this process)
    assert _get(port, "/readyz")[0] == 200
    readiness.mark_gone()
    assert _get(port, "/readyz") == (503, {"ready": False, "processes_ready": 1, "processes": 2})
    for child, leave in children[1:]:
        leave.set()
        child.join(10)


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/healthz", 200),
        ("HEAD", "/healthz", 200),
        ("GET", "/readyz", 503),
        ("GET", "/healthz?probe=1", 200),
        ("GET", "/metrics", 404),  # a server made without metrics
        ("GET", "/", 404),
    ],
)
def test_paths(served, method, path, status):
    _, port = served
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            got = answer.status
    except urllib.error.HTTPError as exc:
        got = exc.code
    assert got == status


@pytest.mark.parametrize(
    ("expected", "error"),
    [(1, None), (64, None), (0, ValueError), (65, ValueError)],
)
def test_expected_processes_are_checked(expected, error):
    if error is None:
        assert WorkerReadiness(expected).expected == expected
    else:
        with pytest.raises(error, match="1 to 64"):
            WorkerReadiness(expected)


def test_a_taken_port_raises_and_no_port_runs_no_server():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError):
            _start_health(WorkerState(1), host="127.0.0.1", port=port)
    assert _start_health(WorkerState(1), host="127.0.0.1", port=None) is None
    assert _start_health(WorkerState(1), host="127.0.0.1", port=0) is None


def test_a_device_fault_and_draining_turn_the_probes_to_503():
    state = WorkerState(1)
    server = HealthServer(state, host="127.0.0.1", port=0)
    server.start()
    try:
        state.readiness.mark_ready()
        assert _get(server.port, "/readyz")[0] == 200
        state.start_draining()
        assert _get(server.port, "/readyz") == (
            503,
            {"ready": False, "processes_ready": 1, "processes": 1, "draining": True},
        )
        assert _get(server.port, "/healthz") == (200, {"status": "ok"})  # shutting down is not a failure
        state.mark_faulty("self-test failed: RuntimeError: CUDA error 700")
        state.mark_faulty("a second fault does not replace the first")
        assert _get(server.port, "/healthz") == (
            503,
            {"status": "unhealthy", "fault": "self-test failed: RuntimeError: CUDA error 700"},
        )
        assert _get(server.port, "/readyz")[1]["fault"].startswith("self-test failed")
    finally:
        server.close()
        state.readiness.mark_gone()


def _count_in_child(folder: str, done) -> None:
    from faceweave.service.distributed.telemetry import WorkerMetrics

    metrics = WorkerMetrics()
    began = metrics.task_started("image", queued_s=0.3)
    metrics.work_done(faces=2, timings_ms={"detect": 12.0, "mesh": 3.0, "swap": 40.0, "unknown": 1.0})
    metrics.task_ended("image", "succeeded", began)
    began = metrics.task_started("video")
    metrics.work_done(frames=10, faces=10, timings_ms={"decode": 50.0, "encode": 20.0})
    metrics.task_ended("video", "failed", began, code="unreadable_file")
    metrics.models_loaded({"analysis": 0.2}, {"pipeline": 0.1})
    done.set()


def test_metrics_counted_in_forked_processes_are_served_by_the_main_process():
    """prometheus_client's multiprocess mode: a child forked after the folder
    was set counts; the main process's /metrics serves the sums, and the state."""
    import subprocess
    import sys

    # a fresh interpreter: prometheus_client must be imported after the folder is set
    script = f"""
import multiprocessing, os, sys, urllib.request
os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
from faceweave.service.distributed.telemetry import metrics_folder
folder = metrics_folder()
sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
from tests.test_worker_health import _count_in_child
from faceweave.service.distributed.fleet import WorkerState
state = WorkerState(1)
ctx = multiprocessing.get_context("fork")
for _ in range(2):
    done = ctx.Event()
    child = ctx.Process(target=_count_in_child, args=(str(folder), done))
    child.start(); child.join(30)
from faceweave.service.distributed.health import HealthServer
from faceweave.service.distributed.telemetry import exposition
server = HealthServer(state, host="127.0.0.1", port=0, metrics=lambda: exposition(state, None, folder))
server.start()
with urllib.request.urlopen(f"http://127.0.0.1:{{server.port}}/metrics", timeout=5) as answer:
    sys.stdout.write(answer.read().decode())
server.close()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for line in (
        'faceweave_jobs_started_total{kind="image"} 2.0',
        'faceweave_jobs_finished_total{kind="image",state="succeeded"} 2.0',
        'faceweave_jobs_failed_total{code="unreadable_file",kind="video"} 2.0',
        "faceweave_frames_processed_total 20.0",
        "faceweave_faces_swapped_total 24.0",
        'faceweave_stage_seconds_count{stage="detect"} 2.0',
        'faceweave_stage_seconds_sum{stage="detect"} 0.03',
        'faceweave_stage_seconds_sum{stage="decode"} 0.01',  # 50 ms over 10 frames, twice
        'faceweave_model_load_seconds{model="analysis"} 0.2',
        "faceweave_job_queued_seconds_count 2.0",
        'faceweave_worker_healthy{worker=""} 1.0',
        'faceweave_worker_busy{worker=""} 0.0',
    ):
        assert line in text, (line, text)
    assert 'faceweave_job_run_seconds_bucket{kind="image",le="+Inf"} 2.0' in text


def test_the_worker_entry_does_not_import_prometheus_client_before_the_folder_is_set():
    """prometheus_client picks its value class when first imported: the worker's
    modules must leave that to :func:`metrics_folder` (else the task processes'
    counts are lost)."""
    import subprocess
    import sys

    code = (
        "import sys; import faceweave.cli.worker, faceweave.service.distributed.worker_main, "
        "faceweave.service.distributed.tasks, faceweave.service.worker; print('prometheus_client' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def _raw(port: int, request: bytes) -> bytes:
    """The whole answer to ``request`` sent as it is."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data


def _native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _closed_by_server(conn: socket.socket) -> bool:
    conn.settimeout(10)
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:  # closed for a newer connection (aborted: a reset)
        return True


def test_half_sent_requests_take_no_threads_and_the_probes_still_answer():
    """The attack run's 300 half-sent requests took the stdlib server to 303
    threads, held open after 60 s: here the threads stay as they were, the
    probes answer meanwhile, and each half-sent request is closed after the
    request timeout (those over max_connections at once)."""
    state = WorkerState(1)
    server = HealthServer(state, host="127.0.0.1", port=0, request_timeout_s=1.0, max_connections=100)
    server.start()
    half_sent: list[socket.socket] = []
    try:
        threads = _native_threads()
        for _ in range(300):
            conn = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never end
            half_sent.append(conn)
        assert _get(server.port, "/healthz") == (200, {"status": "ok"})
        assert _get(server.port, "/readyz")[0] == 503
        assert _native_threads() <= threads  # the loop's thread was there before
        started = time.monotonic()
        assert all(_closed_by_server(conn) for conn in half_sent)
        assert time.monotonic() - started < 8.0  # the 1 s timeout, not never
        assert _native_threads() <= threads
    finally:
        for conn in half_sent:
            conn.close()
        server.close()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200),
        (b"GET /nope HTTP/1.0\r\n\r\n", 404),
        (b"POST /healthz HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
        (b"garbage\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nX: " + b"a" * 10000 + b"\r\n\r\n", None),  # too long: closed unanswered
    ],
)
def test_no_answer_names_the_server_or_its_version(served, request_bytes, status):
    _, port = served
    answer = _raw(port, request_bytes)
    if status is None:
        assert answer == b""
        return
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(f"http/1.1 {status} ".encode())
    assert b"server:" not in head and b"python" not in answer.lower()
