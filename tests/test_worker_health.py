"""The Celery worker's health endpoints (``faceweave worker --health-port``):
``/healthz`` answers while the main process runs, ``/readyz`` once every task
process (forked, as Celery's prefork pool does) has marked its models warm,
and again 503 when one has gone."""

from __future__ import annotations

import json
import logging
import multiprocessing
import socket
import urllib.error
import urllib.request

import pytest

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
    readiness = WorkerReadiness(2)
    server = HealthServer(readiness, host="127.0.0.1", port=0)
    server.start()
    yield readiness, server.port
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
        ("GET", "/metrics", 404),
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


def test_a_taken_port_is_logged_and_the_worker_runs_without(caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="faceweave.service.distributed"):
            assert _start_health(WorkerReadiness(1), host="127.0.0.1", port=port) is None
    assert f"not started on 127.0.0.1:{port}" in caplog.text
    assert _start_health(WorkerReadiness(1), host="127.0.0.1", port=None) is None
    assert _start_health(WorkerReadiness(1), host="127.0.0.1", port=0) is None
