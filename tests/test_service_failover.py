"""Device-fault fail-over, the poison-job guard, graceful shutdown and idle
release, on real ``faceweave worker`` processes (Celery prefork, real models)
with ``redis-server`` and PostgreSQL (``tests/servers.py``).

The faulty worker is ``tests.faulty_worker``: its device breaks after ``k``
inferences, for good (so its self-test after the job's error fails too).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from tests import servers
from tests.cluster import Cluster
from tests.faulty_worker import FAULT
from tests.service_fixtures import running_app, wait_for, wait_state

VIDEO = "video/lp_d18_talking_face.mp4"  # 7.2 s, 30 fps, 216 frames: four segments of 54
ARTIFACTS = Path(__file__).parents[1] / "test-artifacts"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def redis() -> Iterator[servers.Redis]:
    for found, why in (servers.find_redis(), servers.find_postgres()):
        if found is None:
            pytest.skip(why)
    with servers.redis_server() as server:
        yield server


@pytest.fixture(scope="module")
def postgres(redis) -> Iterator[servers.Postgres]:
    with servers.postgres_server() as server:
        yield server


@pytest.fixture
def make_cluster(tmp_path, redis, postgres, request) -> Iterator:
    """A new cluster (its own database and Redis database) per test."""
    made: list[Cluster] = []

    def make(**settings) -> Cluster:
        name = request.node.name.split("[")[0][-40:].lower()
        database = servers.new_database(postgres, f"{name}_{len(made)}")
        broker = redis.url.rsplit("/", 1)[0] + f"/{2 + len(made)}"
        cluster = Cluster(tmp_path / f"cluster{len(made)}", database, broker, **settings)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close()


def _photo(faces_dir: Path, target: str = "biden2.jpg"):
    single = faces_dir / "single"
    return [
        ("source", ("source.jpg", (single / "paul_rudd.jpg").read_bytes(), "image/jpeg")),
        ("target", (target, (single / target).read_bytes(), "application/octet-stream")),
    ]


def _metric(text: str, line_start: str) -> float:
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start)]
    return sum(values)


def _save(name: str, value: object) -> None:
    """A figure for the closing note, in test-artifacts/failover.json."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "failover.json"
    figures = json.loads(path.read_text()) if path.exists() else {}
    figures[name] = value
    path.write_text(json.dumps(figures, indent=1))


def _results(cluster: Cluster, job_id: str) -> list[str]:
    folder = cluster.config.storage / "jobs" / job_id
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("result")) if folder.exists() else []


def test_a_faulty_worker_hands_its_job_to_the_healthy_one(make_cluster, faces_dir):
    cluster = make_cluster()
    cluster.start_worker("bad", fault_after=0)
    cluster.start_worker("good")
    for name in ("bad", "good"):
        cluster.wait_ready(name)
    assert cluster.health("bad", "/readyz")[0] == 200  # its self-test at start passed: the device breaks later
    ids: list[str] = []
    with running_app(cluster.config) as client:
        while cluster.health("bad")[0] == 200 and len(ids) < 10:  # until the faulty worker got one
            created = client.post("/v1/jobs", files=_photo(faces_dir))
            assert created.status_code == 202, created.text
            ids.append(created.json()["id"])
            time.sleep(0.7)
        status, body = cluster.health("bad")
        assert status == 503 and FAULT in body["fault"], body
        assert cluster.health("bad", "/readyz")[0] == 503
        done = [wait_state(client, job_id, ("succeeded", "failed"), limit_s=180.0) for job_id in ids]
    assert [d["state"] for d in done] == ["succeeded"] * len(ids), done
    rows = {job_id: cluster.row(job_id) for job_id in ids}
    handed = [job_id for job_id, row in rows.items() if row.attempts == 2]
    assert len(handed) == 1, {j: r.attempts for j, r in rows.items()}
    for job_id, row in rows.items():
        assert row.worker_id.startswith("good@test") and row.error_code is None
        assert _results(cluster, job_id) == [f"result-{row.attempts}.png"]  # one result, no duplicate
    bad = cluster.get("bad", "/metrics")[1].decode()
    assert _metric(bad, "faceweave_device_faults_total") == 1
    assert _metric(bad, 'faceweave_worker_selftests_total{result="failed"}') == 1
    assert _metric(bad, 'faceweave_jobs_finished_total{kind="image",state="handed_back"}') == 1
    assert _metric(bad, "faceweave_worker_healthy") == 0
    assert "Canceling queue faceweave" in cluster.log("bad")  # it stopped consuming
    good = cluster.get("good", "/metrics")[1].decode()
    assert _metric(good, 'faceweave_jobs_finished_total{kind="image",state="succeeded"}') == len(ids)


def test_failover_time_from_the_fault_to_the_healthy_worker(make_cluster, faces_dir):
    """Measured for the closing note (test-artifacts/failover.json): from the
    job's error on the faulty worker (its log's time) to the job running on
    the healthy worker, which is waiting already."""
    cluster = make_cluster()
    cluster.start_worker("good")
    cluster.wait_ready("good")
    cluster.start_worker("bad", fault_after=0)
    cluster.wait_ready("bad")
    running_at = None
    with running_app(cluster.config) as client:
        while running_at is None and cluster.health("bad")[0] == 200:
            job_id = client.post("/v1/jobs", files=_photo(faces_dir)).json()["id"]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                row = cluster.row(job_id)
                if row.attempts == 2 and row.state in ("running", "succeeded"):
                    running_at = time.time()
                    break
                if row.state == "succeeded":
                    break  # the good worker took it first: try again
                time.sleep(0.005)
            wait_state(client, job_id, ("succeeded", "failed"), limit_s=120.0)
    assert running_at is not None, "the faulty worker never took a job"
    (line,) = [x for x in cluster.log("bad").splitlines() if "a job failed with RuntimeError" in x]
    fault_at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    _save("fault_to_running_on_the_healthy_worker_s", round(running_at - fault_at, 3))
    assert 0 <= running_at - fault_at < 30.0  # the broker hands it on at once: far under the job lease


def test_a_job_that_faults_every_worker_fails_with_its_reason(make_cluster, faces_dir):
    cluster = make_cluster(max_attempts=2)
    for name in ("bad1", "bad2"):
        cluster.start_worker(name, fault_after=0)
    for name in ("bad1", "bad2"):
        cluster.wait_ready(name)
    with running_app(cluster.config) as client:
        created = client.post("/v1/jobs", files=_photo(faces_dir))
        job_id = created.json()["id"]
        done = wait_state(client, job_id, ("succeeded", "failed"), limit_s=120.0)
    assert done["state"] == "failed" and done["attempts"] == 2, done
    assert done["error"]["code"] == "device_fault"
    message = done["error"]["message"]
    assert message.startswith("failed on 2 worker(s) in a row; the last: self-test failed") and FAULT in message
    assert _results(cluster, job_id) == []
    assert [cluster.health(name)[0] for name in ("bad1", "bad2")] == [503, 503]


def test_sigterm_hands_back_the_running_segment_and_it_finishes_elsewhere(make_cluster, faces_dir):
    from faceweave.service.distributed.records import SegmentStore
    from faceweave.service.store import JobStore

    cluster = make_cluster()
    for name in ("w1", "w2"):
        cluster.start_worker(name)
    for name in ("w1", "w2"):
        cluster.wait_ready(name)
    files = [
        ("source", ("s.jpg", (faces_dir / "single" / "paul_rudd.jpg").read_bytes(), "image/jpeg")),
        ("target", ("clip.mp4", (faces_dir / VIDEO).read_bytes(), "application/octet-stream")),
    ]
    store = JobStore(cluster.config.database_url)
    segments = SegmentStore(store)
    try:
        with running_app(cluster.config) as client:
            job_id = client.post("/v1/jobs", files=files, data={"format": "mp4"}).json()["id"]

            def w1_busy() -> bool:
                rows = segments.rows(job_id, 1)
                return any(r.state == "running" and (r.worker_id or "").startswith("w1@") for r in rows)

            wait_for(w1_busy, what="worker w1 to run a segment", limit_s=180.0, every_s=0.05)
            began = time.monotonic()
            assert cluster.terminate("w1") == 0  # SIGTERM to its main process, as Kubernetes sends
            stopped_s = time.monotonic() - began
            done = wait_state(client, job_id, ("succeeded", "failed"), limit_s=300.0)
    finally:
        store.close()
    assert done["state"] == "succeeded", done
    assert done["result"]["frames"] == 216
    log = cluster.log("w1")
    assert "handing back the running video work" in log and "Warm shutdown" in log
    assert stopped_s < 30.0  # handed back at once, not run to its end
    _save("sigterm_to_exit_s", stopped_s)
    assert done["result"]["segment_workers"].count(None) == 0


def test_max_idle_exits_cleanly_after_the_idle_time(make_cluster):
    cluster = make_cluster()
    cluster.start_worker("idle", "--max-idle", "2s")
    cluster.wait_ready("idle")
    process = cluster.workers.pop("idle")
    assert process.wait(60) == 0
    assert "had no work for 2 s: shutting down" in cluster.log("idle")
