"""The job core both worker kinds share (``faceweave.service.lease``): the
lease that beats with the progress and stops once lost, and the failure
recorded under the holder's lease."""

from __future__ import annotations

import threading
import time

from faceweave.errors import NoFaceError
from faceweave.service.errors import JobProblem
from faceweave.service.jobdata import JobState
from faceweave.service.lease import Lease, beat_interval, job_problem, record_failure
from faceweave.service.store import JobStore


def _running(store: JobStore, worker: str = "w1"):
    store.create(owner="alice", kind="video", options={}, inputs={"target": "t"}, now=1.0)
    return store.claim(worker, lease_s=60)


def _wait(condition, limit_s: float = 5.0) -> None:
    end = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_a_lease_beats_with_the_latest_values_until_the_run_ends():
    beats: list[dict] = []
    stop = threading.Event()
    with Lease(lambda v: beats.append(dict(v)) or True, interval_s=0.01, stop=stop, name="t") as lease:
        lease.update(frames_done=3)
        _wait(lambda: any(b.get("frames_done") == 3 for b in beats))
        lease.update(frames_done=7, progress=50.0)
        _wait(lambda: any(b.get("frames_done") == 7 for b in beats))
    count = len(beats)
    time.sleep(0.05)
    assert len(beats) == count and not stop.is_set() and not lease.lost  # no beat after the run
    assert beats[-1] == {"frames_done": 7, "progress": 50.0}


def test_a_lost_lease_sets_stop_and_beats_no_more():
    beats: list[int] = []
    stop = threading.Event()
    with Lease(lambda v: beats.append(1) or len(beats) < 3, interval_s=0.01, stop=stop, name="t") as lease:
        assert stop.wait(5.0)
        time.sleep(0.08)  # eight more intervals: none beats
        assert lease.lost and len(beats) == 3


def test_a_failed_beat_is_retried_at_the_next():
    calls: list[int] = []

    def renew(values) -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("the store is away")
        return True

    stop = threading.Event()
    with Lease(renew, interval_s=0.01, stop=stop, name="t") as lease:
        _wait(lambda: len(calls) >= 3)
    assert not stop.is_set() and not lease.lost


def test_a_job_lease_renews_the_store_and_ends_when_the_job_is_cancelled(store):
    job = _running(store)
    stop = threading.Event()

    def renew(values) -> bool:
        return store.heartbeat(job.id, worker_id="w1", attempt=job.attempts, lease_s=60, **values)

    with Lease(renew, interval_s=0.01, stop=stop, name="t") as lease:
        lease.update(frames_done=5, progress=25.0)
        _wait(lambda: store.get(job.id).frames_done == 5)
        store.cancel(job.id, owner="alice", ttl_s=100)
        assert stop.wait(5.0) and lease.lost


def test_the_failure_is_recorded_once_and_only_by_the_holder(store):
    job = _running(store)
    problem = job_problem(job, NoFaceError("no face found in the target", role="target"), ())
    assert problem.code == NoFaceError.code
    assert not record_failure(store, job, problem, holder="w2", ttl_s=100)
    assert record_failure(store, job, problem, holder="w1", ttl_s=100)
    assert not record_failure(store, job, problem, holder="w1", ttl_s=100)
    failed = store.get(job.id)
    assert (failed.state, failed.error_code) == (JobState.FAILED, problem.code)


def test_a_problem_without_an_exception_and_an_internal_one():
    job = type("J", (), {"id": "j1"})()
    assert job_problem(job, None, (), code="worker_lost", message="lost twice") == JobProblem(
        "worker_lost", "lost twice"
    )
    internal = job_problem(job, RuntimeError("/srv/secret/path broke"), ())
    assert internal.code == "internal_error" and "/srv" not in internal.message


def test_the_beat_interval_leaves_two_beats_before_the_lease_ends():
    assert beat_interval(5.0, 60.0) == 5.0
    assert beat_interval(5.0, 9.0) == 3.0
