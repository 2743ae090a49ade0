"""The job store (SQLite), byte ranges and settings precedence: no models, no HTTP."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from faceweave.errors import InvalidOptionError, RangeNotSatisfiableError
from faceweave.service.ranges import byte_ranges
from faceweave.service.settings import load_settings
from faceweave.service.store import JobStore


def _job(store: JobStore, owner: str = "alice", now: float = 1000.0):
    return store.create(owner=owner, kind="image", options={"faces": "one"}, inputs={"target": "t"}, now=now)


def test_create_get_list_and_owner_scoping(store):
    a = _job(store, "alice", now=1.0)
    b = _job(store, "alice", now=2.0)
    _job(store, "bob", now=3.0)
    assert store.get(a.id).state == "queued"
    assert store.get(a.id, owner="bob") is None  # someone else's job is invisible
    assert [j.id for j in store.list(owner="alice")] == [b.id, a.id]  # newest first
    assert store.counts() == {"queued": 3, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0}


def test_claims_are_exclusive_across_threads(store):
    ids = {_job(store, now=float(i)).id for i in range(12)}
    claimed: list[str] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        while (job := store.claim(name, lease_s=60)) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == sorted(ids)  # every job once, none twice
    assert store.counts()["running"] == 12


def test_claim_takes_the_oldest_and_counts_attempts(store):
    old = _job(store, now=1.0)
    _job(store, now=5.0)
    job = store.claim("w1", lease_s=30, now=100.0)
    assert (job.id, job.state, job.worker_id, job.attempts, job.lease_expires) == (old.id, "running", "w1", 1, 130.0)


def test_only_the_holder_finishes_once(store):
    job = store.claim("w1", lease_s=30, now=10.0) if _job(store) else None
    assert store.heartbeat(job.id, worker_id="w1", attempt=1, lease_s=30, progress=50.0, now=20.0)
    assert store.get(job.id).lease_expires == 50.0
    assert not store.finish(job.id, worker_id="w2", attempt=1, state="succeeded", ttl_s=100)
    assert not store.finish(job.id, worker_id="w1", attempt=2, state="succeeded", ttl_s=100)
    assert store.finish(job.id, worker_id="w1", attempt=1, state="succeeded", ttl_s=100, output_path="x", now=30.0)
    assert not store.finish(job.id, worker_id="w1", attempt=1, state="failed", ttl_s=100)  # not twice
    done = store.get(job.id)
    assert (done.state, done.output_path, done.progress, done.expires_at) == ("succeeded", "x", 100.0, 130.0)


def test_cancel_makes_the_heartbeat_fail(store):
    job = _job(store)
    store.claim("w1", lease_s=30)
    assert not store.cancel(job.id, owner="bob", ttl_s=10)  # not bob's
    assert store.cancel(job.id, owner="alice", ttl_s=10)
    assert not store.heartbeat(job.id, worker_id="w1", attempt=1, lease_s=30)
    assert not store.cancel(job.id, owner="alice", ttl_s=10)  # already finished
    assert store.get(job.id).state == "cancelled"


def test_expired_leases_are_requeued_then_failed(store):
    job = _job(store)
    store.claim("dead", lease_s=10, now=100.0)
    assert store.requeue_expired(max_attempts=2, now=105.0) == ([], [])  # lease still valid
    assert store.requeue_expired(max_attempts=2, now=111.0) == ([job.id], [])
    again = store.claim("w2", lease_s=10, now=112.0)
    assert (again.id, again.attempts) == (job.id, 2)
    # the dead worker wakes up: it no longer holds the job
    assert not store.finish(job.id, worker_id="dead", attempt=1, state="succeeded", ttl_s=10)
    assert store.requeue_expired(max_attempts=2, now=200.0) == ([], [job.id])
    failed = store.get(job.id)
    assert (failed.state, failed.error_code) == ("failed", "worker_lost")


def test_release_gives_the_attempt_back(store):
    job = _job(store)
    store.claim("w1", lease_s=10)
    assert store.release(job.id, worker_id="w1", attempt=1)
    back = store.get(job.id)
    assert (back.state, back.attempts, back.worker_id) == ("queued", 0, None)


def test_expired_lists_only_finished_jobs_past_their_time(store):
    a, b = _job(store, now=1.0), _job(store, now=2.0)
    store.claim("w", lease_s=10, now=3.0)
    store.finish(a.id, worker_id="w", attempt=1, state="failed", ttl_s=50, now=10.0, error_code="no_face")
    assert store.expired(now=59.0) == []
    assert [j.id for j in store.expired(now=61.0)] == [a.id]
    assert store.delete(a.id) and not store.delete(b.id)  # an active job is not deleted


def test_heartbeat_rejects_unknown_fields(store):
    job = _job(store)
    with pytest.raises(InvalidOptionError):
        store.heartbeat(job.id, worker_id="w", attempt=1, lease_s=1, owner="mallory")


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        (None, 100, None),
        ("bytes=0-9", 100, [(0, 9)]),
        ("bytes=90-", 100, [(90, 99)]),
        ("bytes=-10", 100, [(90, 99)]),
        ("bytes=-1000", 100, [(0, 99)]),
        ("bytes=50-5000", 100, [(50, 99)]),
        ("bytes=0-1,5-9", 100, [(0, 1), (5, 9)]),  # several ranges: one multipart answer
        ("bytes=5-9,0-6", 100, [(0, 9)]),  # overlaps merged
        ("items=0-9", 100, None),
        ("bytes=9-3", 100, None),  # an invalid range is ignored (RFC 9110): the whole file
        ("bytes=100-", 100, RangeNotSatisfiableError),
        ("bytes=-0", 100, RangeNotSatisfiableError),
    ],
)
def test_byte_ranges(header, size, expected):
    if isinstance(expected, type):
        with pytest.raises(expected):
            byte_ranges(header, size)
    else:
        assert byte_ranges(header, size) == expected


def test_settings_precedence_file_env_flags(tmp_path: Path):
    config = tmp_path / "service.toml"
    config.write_text("port = 9000\nworkers = 3\n[limits]\nmax_upload_bytes = 5000\nrate_burst = 7\n")
    env = {
        "FACEWEAVE_WORKERS": "2",
        "FACEWEAVE_LIMITS__RATE_BURST": "9",
        "FACEWEAVE_MODELS": "/elsewhere",
        "FACEWEAVE_AUTH__API_KEYS": json.dumps([{"user": "ann", "key": "k" * 20}]),
    }
    s = load_settings(config, environ=env, overrides={"workers": 4, "host": None, "auth.jwt_issuer": "iss"})
    assert (s.port, s.workers, s.limits.max_upload_bytes, s.limits.rate_burst) == (9000, 4, 5000, 9)
    assert s.auth.api_keys[0].user == "ann" and s.auth.jwt_issuer == "iss" and s.auth.required
    assert s.host == "127.0.0.1"


@pytest.mark.parametrize(
    ("content", "env", "message"),
    [
        ("bogus = 1\n", {}, "bogus"),
        ("", {"FACEWEAVE_WORKERS": "many"}, "workers"),
        ("[limits]\nmax_files = 0\n", {}, "limits.max_files"),
    ],
)
def test_settings_errors_name_the_setting(tmp_path: Path, content, env, message):
    config = tmp_path / "service.toml"
    config.write_text(content)
    with pytest.raises(InvalidOptionError, match=message):
        load_settings(config, environ=env)


def test_a_list_setting_in_the_environment_that_is_not_json_is_named(tmp_path: Path):
    with pytest.raises(InvalidOptionError, match=r"invalid setting auth: FACEWEAVE_AUTH__API_KEYS must be JSON"):
        load_settings(None, environ={"FACEWEAVE_AUTH__API_KEYS": "ann:secret", "FACEWEAVE_AUTH__MODE": "none"})


def test_settings_made_directly_read_no_environment(monkeypatch):
    from faceweave.service.settings import ServiceSettings

    monkeypatch.setenv("FACEWEAVE_PORT", "9123")
    assert ServiceSettings(workers=2).port == 8000  # only load_settings reads the environment
    assert load_settings(None).port == 9123


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("list.json", "[1, 2]", "must hold a table of settings"),
        ("broken.json", "{", "is not valid .json"),
        ("broken.toml", "port = = 1", "is not valid .toml"),
    ],
)
def test_config_files_that_hold_no_settings_are_refused(tmp_path: Path, name, content, message):
    from faceweave.errors import UnreadableFileError

    config = tmp_path / name
    config.write_text(content)
    with pytest.raises(UnreadableFileError, match=message):
        load_settings(config, environ={})
