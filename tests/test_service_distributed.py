"""Distributed mode against real servers: PostgreSQL (job store) and
``redis-server`` (Celery broker) started in temporary folders, two
``faceweave worker`` processes (Celery prefork, real models) and API apps.

* the job store's contract tests (from ``test_service_store``) on PostgreSQL,
  and the claims the Celery tasks use;
* a video split into segments that both workers process, joined with its
  audio: frame count and audio duration equal the input's;
* a worker killed (SIGKILL, the whole process group) in the middle of a job:
  the other worker finishes it (attempts 2), one valid result file;
* an API restart with queued jobs while no worker runs and the broker lost
  its messages: every job finishes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import servers
from tests.cluster import Cluster
from tests.service_fixtures import running_app, settings, wait_for, wait_state
from tests.test_service_store import (  # noqa: F401 - the same contract, run here on PostgreSQL
    test_cancel_makes_the_heartbeat_fail,
    test_claim_takes_the_oldest_and_counts_attempts,
    test_claims_are_exclusive_across_threads,
    test_create_get_list_and_owner_scoping,
    test_expired_leases_are_requeued_then_failed,
    test_expired_lists_only_finished_jobs_past_their_time,
    test_only_the_holder_finishes_once,
    test_release_gives_the_attempt_back,
)

VIDEO = "video/lp_d18_talking_face.mp4"  # 7.2 s, 30 fps, AAC audio
LONG_JOB = "video/short_hamilton_clip.mp4"  # no audio; 0-2.5 s is one segment of 75 frames


def _need_servers() -> None:
    for found, why in (servers.find_redis(), servers.find_postgres()):
        if found is None:
            pytest.skip(why)


@pytest.fixture(scope="module")
def redis() -> Iterator[servers.Redis]:
    _need_servers()
    with servers.redis_server() as server:
        yield server


@pytest.fixture(scope="module")
def postgres() -> Iterator[servers.Postgres]:
    _need_servers()
    with servers.postgres_server() as server:
        yield server


# ---------------------------------------------------------------- settings and the CLI (no servers)
def test_celery_settings_follow_the_service_settings(tmp_path):
    from faceweave.service.distributed.celery_app import QUEUE, celery_config

    config = celery_config(settings(tmp_path, broker="redis://127.0.0.1:1/0", lease_s=45.0))
    expected = {
        "task_acks_late": True,
        "worker_prefetch_multiplier": 1,
        "task_reject_on_worker_lost": True,
        "broker_transport_options": {"visibility_timeout": 45},
        "task_default_queue": QUEUE,
        "broker_url": "redis://127.0.0.1:1/0",
    }
    assert {k: config[k] for k in expected} == expected


@pytest.mark.parametrize(
    ("database", "url"),
    [
        ("postgresql://u:p@db/faceweave", "postgresql+psycopg://u:p@db/faceweave"),
        ("postgres://db/x", "postgresql+psycopg://db/x"),
        ("postgresql+psycopg://db/x", "postgresql+psycopg://db/x"),
        ("sqlite:////tmp/j.db", "sqlite:////tmp/j.db"),
    ],
)
def test_postgresql_urls_use_psycopg_3(tmp_path, database, url):
    assert settings(tmp_path, database=database).database_url == url
    assert not settings(tmp_path, database=database).distributed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "needs a broker"),
        (["--broker", "redis://127.0.0.1:1/0", "--pool", "gevent"], "--pool must be one of prefork, solo, threads"),
        (["--broker", "redis://127.0.0.1:1/0", "--log-level", "loud"], "--log-level must be"),
        (["--broker", "redis://127.0.0.1:1/0", "--execution-provider", "cuda", "--device-id", "99"], "device_id"),
        (["--broker", "redis://127.0.0.1:1/0", "--max-idle", "soon"], "--max-idle must be a time above zero"),
        (["--broker", "redis://127.0.0.1:1/0", "--max-idle", "-5m"], "--max-idle must be a time above zero"),
        (["--broker", "redis://127.0.0.1:1/0", "--device-monitor", "tpu"], "--device-monitor must be one of"),
    ],
)
def test_worker_command_refuses_bad_options_in_one_line(tmp_path, monkeypatch, capfd, args, message):
    import typer
    from typer.testing import CliRunner

    from faceweave.cli.worker import worker_command

    monkeypatch.delenv("FACEWEAVE_BROKER", raising=False)
    monkeypatch.delenv("FACEWEAVE_CONFIG", raising=False)
    app = typer.Typer()
    app.command()(worker_command)
    result = CliRunner().invoke(app, [*args, "--storage", str(tmp_path / "s")])
    stderr = capfd.readouterr().err.strip()
    assert result.exit_code == 2, stderr
    assert stderr.startswith("error: ") and len(stderr.splitlines()) == 1 and message in stderr, stderr


def test_a_health_port_in_use_is_one_clear_line(tmp_path, monkeypatch, capfd):
    import socket

    import typer
    from typer.testing import CliRunner

    from faceweave.cli.worker import worker_command

    monkeypatch.delenv("FACEWEAVE_CONFIG", raising=False)
    app = typer.Typer()
    app.command()(worker_command)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["--broker", "redis://127.0.0.1:1/0", "--health-port", str(port), "--storage", str(tmp_path / "s")]
        result = CliRunner().invoke(app, args)
    stderr = capfd.readouterr().err.strip()
    assert result.exit_code == 2 and len(stderr.splitlines()) == 1, stderr
    assert f"--health-port {port}: the port is already in use" in stderr


@pytest.mark.parametrize(("text", "seconds"), [("5m", 300.0), ("90s", 90.0), ("300", 300.0), ("1.5h", 5400.0)])
def test_max_idle_reads_seconds_minutes_and_hours(text, seconds):
    from faceweave.cli.worker import parse_duration

    assert parse_duration(text, flag="--max-idle") == seconds


# ---------------------------------------------------------------- the store on PostgreSQL
@pytest.fixture(scope="module")
def contract_url(postgres) -> str:
    return servers.new_database(postgres, "contract")


@pytest.fixture()
def store(contract_url):
    from sqlalchemy import text

    from faceweave.service.store import JobStore

    s = JobStore(contract_url)
    yield s
    with s.engine.begin() as conn:
        conn.execute(text("DELETE FROM jobs"))
    s.close()


def test_named_claims_are_exclusive_and_take_over_expired_leases(store):
    from faceweave.service.distributed.records import claim_job

    job = store.create(owner="alice", kind="image", options={}, inputs={"target": "t"}, now=1.0)
    got: list[str] = []
    barrier = threading.Barrier(6)

    def claim(name: str) -> None:
        barrier.wait()
        if claim_job(store, job.id, name, lease_s=10.0, max_attempts=3, now=100.0) is not None:
            got.append(name)

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 1  # exactly one of six concurrent claimers
    assert claim_job(store, job.id, "late", lease_s=10.0, max_attempts=3, now=105.0) is None  # lease still running
    taken = claim_job(store, job.id, "next", lease_s=10.0, max_attempts=3, now=111.0)  # lease ran out at 110
    assert (taken.worker_id, taken.attempts, taken.state) == ("next", 2, "running")
    assert not store.finish(job.id, worker_id=got[0], attempt=1, state="succeeded", ttl_s=60.0)  # the dead one lost it
    assert claim_job(store, job.id, "x", lease_s=10.0, max_attempts=2, now=200.0) is None  # no attempts left


def test_segments_join_opens_once_and_expired_segments_come_back(store):
    from faceweave.service.distributed.records import JOIN, SegmentStore

    segments = SegmentStore(store)
    job = store.create(owner="alice", kind="video", options={}, inputs={"target": "t"})
    segments.create(job.id, 1, [{"index": 0}, {"index": 1}], ["p0", "p1"], {"segments": 2})
    assert segments.claim(job.id, 1, 0, "a", lease_s=5.0, now=10.0) is not None
    assert segments.claim(job.id, 1, 0, "b", lease_s=5.0, now=12.0) is None
    assert segments.claim(job.id, 1, 1, "b", lease_s=5.0, now=10.0) is not None
    assert segments.finish(job.id, 1, 0, "a", report={"frames": 7})
    assert not segments.open_join(job.id, 1)  # segment 1 is not done
    # segment 1's worker died: its row comes back to the queue, and is published again
    stalled = segments.stalled(older_than_s=5.0, now=20.0)
    assert [(r.index, r.state) for r in stalled] == [(1, "queued")]
    assert not segments.finish(job.id, 1, 1, "b", report={"frames": 5})  # too late for the dead one
    again = segments.claim(job.id, 1, 1, "c", lease_s=5.0, now=21.0)
    assert (again.worker_id, again.tries) == ("c", 2)
    assert segments.finish(job.id, 1, 1, "c", report={"frames": 5})
    assert segments.frames_done(job.id, 1) == 12
    assert [segments.open_join(job.id, 1) for _ in range(3)] == [True, False, False]
    assert segments.get(job.id, 1, JOIN).state == "queued"
    segments.delete(job.id)
    assert segments.rows(job.id, 1) == []


# ---------------------------------------------------------------- the cluster
@pytest.fixture(scope="module")
def cluster(tmp_path_factory, redis, postgres) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster")
    made = Cluster(root, servers.new_database(postgres, "cluster"), redis.url)
    try:
        for name in ("w1", "w2"):
            made.start_worker(name)
        for name in ("w1", "w2"):
            made.wait_ready(name)
        yield made
    finally:
        made.close()


def _files(faces_dir: Path, target: str, name: str):
    source = (faces_dir / "single" / "paul_rudd.jpg").read_bytes()
    return [
        ("source", ("source.jpg", source, "image/jpeg")),
        ("target", (name, (faces_dir / target).read_bytes(), "application/octet-stream")),
    ]


def _audio_seconds(path: Path) -> float:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        ticks = sum(p.duration or 0 for p in container.demux(stream) if p.size)
        return float(ticks * stream.time_base)


def _progress_before_a_segment_ends(cluster: Cluster, job_id: str) -> dict | None:
    """The job's frames and progress once they have moved, while none of its
    segments has finished yet; ``None`` until then.  A segment that finishes
    first fails the test: its frames would have come from its end alone."""
    from faceweave.service.distributed.records import JOIN, SegmentStore
    from faceweave.service.store import JobStore

    store = JobStore(cluster.config.database_url)
    try:
        job = store.get(job_id)
        if job is None or job.worker_id != "segmented":
            return None
        parts = [r for r in SegmentStore(store).rows(job_id, job.attempts) if r.index != JOIN]
        assert not any(r.state == "done" for r in parts), "a segment ended before the job's progress moved"
        return {"frames_done": job.frames_done, "progress": job.progress} if job.frames_done else None
    finally:
        store.close()


@pytest.mark.slow
def test_a_video_is_split_across_both_workers_and_joined(cluster, faces_dir, tmp_path):
    from faceweave.video.io import probe_video

    source_video = faces_dir / VIDEO
    expected = probe_video(source_video)
    with running_app(cluster.config) as client:
        created = client.post("/v1/jobs", files=_files(faces_dir, VIDEO, "clip.mp4"), data={"format": "mp4"})
        assert created.status_code == 202, created.text
        early = wait_for(
            lambda: _progress_before_a_segment_ends(cluster, created.json()["id"]),
            what="the job's progress to move while its segments run",
            limit_s=300.0,
        )
        assert early["frames_done"] > 0 and 0.0 < early["progress"] < 100.0, early
        done = wait_state(client, created.json()["id"], ("succeeded", "failed", "cancelled"), limit_s=400.0)
        assert done["state"] == "succeeded", done
        result = done["result"]
        assert result["segments"] >= 2 and result["frames"] == expected.frame_count == 216
        nodes = {worker.split(":")[0] for worker in result["segment_workers"]}
        assert nodes == {"w1@test", "w2@test"}  # both workers swapped a part
        assert result["faces_swapped"] > 0 and result["audio"] in ("copied", "encoded")
        output = tmp_path / "joined.mp4"
        output.write_bytes(client.get(done["links"]["result"]).content)
        assert client.get(done["links"]["preview"]).status_code == 200
    joined = probe_video(output)
    assert joined.frame_count == expected.frame_count and joined.has_audio
    assert abs(joined.duration - expected.duration) < 1.5 / 30  # within a frame or so
    # the audio lasts as long as the input's, to within one AAC frame (1024 samples)
    assert abs(_audio_seconds(output) - _audio_seconds(source_video)) <= 1024 / 44100 + 1e-3
    job_dir = cluster.config.storage / "jobs" / done["id"]
    assert sorted(p.name for p in job_dir.iterdir()) == ["preview-1.png", "result-1.mp4"]  # parts and inputs gone


@pytest.mark.slow
def test_cancelling_a_segmented_job_stops_its_segments(cluster, faces_dir):
    from faceweave.service.distributed.records import SegmentStore
    from faceweave.service.store import JobStore

    with running_app(cluster.config) as client:
        created = client.post("/v1/jobs", files=_files(faces_dir, VIDEO, "clip.mp4"), data={"format": "mp4"})
        job_id = created.json()["id"]
        wait_for(lambda: cluster.row(job_id).worker_id == "segmented", what="the segments to start", limit_s=120.0)
        cancelled = client.delete(f"/v1/jobs/{job_id}")
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
        store = JobStore(cluster.config.database_url)
        try:
            segments = SegmentStore(store)
            # the workers notice at their next heartbeat; the sweeper drops the rows of the cancelled attempt
            wait_for(lambda: segments.rows(job_id, 1) == [], what="the segment rows to go", limit_s=120.0)
        finally:
            store.close()
        final = client.get(f"/v1/jobs/{job_id}").json()
    assert final["state"] == "cancelled" and final["links"].get("result") is None
    job_dir = cluster.config.storage / "jobs" / job_id
    assert not list(job_dir.glob("result-*")) and not list(job_dir.glob("parts-*/*.mp4"))


@pytest.mark.slow
def test_a_killed_worker_s_job_finishes_on_the_other_worker(cluster, faces_dir, tmp_path):
    from faceweave.video.io import probe_video

    with running_app(cluster.config) as client:
        created = client.post(
            "/v1/jobs", files=_files(faces_dir, LONG_JOB, "clip.mp4"), data={"format": "mp4", "trim": "0-2.5"}
        )
        assert created.status_code == 202, created.text
        job_id = created.json()["id"]
        running = wait_state(client, job_id, ("running", "succeeded", "failed"), limit_s=120.0)
        assert running["state"] == "running", running
        store_row = cluster.row(job_id)
        wait_for(lambda: cluster.row(job_id).frames_done > 0, what="the job to be under way", limit_s=120.0)
        victim = store_row.worker_id.split("@")[0]
        cluster.kill(victim)  # the whole worker: its main and pool processes
        done = wait_state(client, job_id, ("succeeded", "failed"), limit_s=300.0)
    assert done["state"] == "succeeded", done
    survivor = {"w1", "w2"} - {victim}
    final = cluster.row(job_id)
    assert final.attempts == 2 and final.worker_id.split("@")[0] in survivor
    job_dir = cluster.config.storage / "jobs" / job_id
    results = sorted(p.name for p in job_dir.iterdir() if p.name.startswith("result"))
    assert results == ["result-2.mp4"]  # exactly one result, from the second attempt
    video = probe_video(job_dir / "result-2.mp4")
    assert video.frame_count == done["result"]["frames"] == 75


@pytest.mark.slow
def test_queued_jobs_survive_an_api_restart_and_a_lost_broker(cluster, faces_dir, redis):
    import redis as redis_client

    for name in list(cluster.workers):
        cluster.stop(name)  # nothing runs the jobs while the API restarts
    single = faces_dir / "single"
    ids = []
    with running_app(cluster.config) as client:
        for target in ("biden2.jpg", "happy_man.png", "sad_woman.png"):
            created = client.post(
                "/v1/jobs",
                files=[
                    ("source", ("s.jpg", (single / "paul_rudd.jpg").read_bytes(), "image/jpeg")),
                    ("target", (target, (single / target).read_bytes(), "application/octet-stream")),
                ],
            )
            assert created.status_code == 202, created.text
            ids.append(created.json()["id"])
    flushed = redis_client.Redis.from_url(redis.url)
    waiting = flushed.llen("faceweave")
    assert waiting >= 3, waiting  # (and maybe messages of earlier tests redelivered after a lease)
    flushed.flushall()  # the broker lost every message: the job store still has the jobs
    flushed.close()
    with running_app(cluster.config) as client:
        cluster.start_worker("w3")
        states = [wait_state(client, job_id, ("succeeded", "failed"), limit_s=300.0) for job_id in ids]
    assert [(s["state"], s["attempts"], s["result"]["faces_swapped"]) for s in states] == [("succeeded", 1, 1)] * 3


# ---------------------------------------------------------------- over S3
S3_BUCKET = "faceweave-cluster"


@pytest.fixture(scope="module")
def s3_cluster(tmp_path_factory, redis, postgres) -> Iterator[tuple[Cluster, str]]:
    """Two workers and the API sharing only the database, the broker and a
    bucket on moto's S3 server: each keeps its working copies in its own folder."""
    pytest.importorskip("boto3", reason="the s3 extra (boto3) is not installed")
    moto_server = pytest.importorskip("moto.server", reason="moto[server] (test extra) is not installed")
    import boto3

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    keys = {"access_key_id": "testing", "secret_access_key": "testing"}
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ).create_bucket(Bucket=S3_BUCKET)
    root = tmp_path_factory.mktemp("s3cluster")
    made = Cluster(
        root,
        servers.new_database(postgres, "s3cluster"),
        redis.url.rsplit("/", 1)[0] + "/1",  # its own queue: the other cluster's workers must not take its tasks
        storage=f"s3://{S3_BUCKET}/c",
        s3={"endpoint_url": endpoint, **keys},
    )
    try:
        for name in ("w1", "w2"):
            made.start_worker(name, FACEWEAVE_LOCAL_STORAGE=str(root / f"local-{name}"))
        for name in ("w1", "w2"):
            made.wait_ready(name)
        yield made, endpoint
    finally:
        made.close()
        server.stop()


@pytest.mark.slow
def test_a_split_video_over_s3_is_joined_and_served_by_a_presigned_url(s3_cluster, faces_dir, tmp_path):
    import boto3
    import httpx

    from faceweave.video.io import probe_video

    cluster, endpoint = s3_cluster
    with running_app(cluster.config) as client:
        created = client.post("/v1/jobs", files=_files(faces_dir, VIDEO, "clip.mp4"), data={"format": "mp4"})
        assert created.status_code == 202, created.text
        early = wait_for(
            lambda: _progress_before_a_segment_ends(cluster, created.json()["id"]),
            what="the job's progress to move while its segments run",
            limit_s=300.0,
        )
        assert early["frames_done"] > 0 and 0.0 < early["progress"] < 100.0, early
        done = wait_state(client, created.json()["id"], ("succeeded", "failed", "cancelled"), limit_s=400.0)
        assert done["state"] == "succeeded", done
        assert done["result"]["segments"] >= 2
        redirect = client.get(done["links"]["result"], follow_redirects=False)
        assert redirect.status_code == 307
        output = tmp_path / "joined.mp4"
        output.write_bytes(httpx.get(redirect.headers["location"]).content)
    assert probe_video(output).frame_count == probe_video(faces_dir / VIDEO).frame_count
    bucket = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    keys = sorted(o["Key"] for o in bucket.list_objects_v2(Bucket=S3_BUCKET, Prefix="c/").get("Contents", ()))
    job = done["id"]
    assert keys == [f"c/jobs/{job}/preview-1.png", f"c/jobs/{job}/result-1.mp4"]  # parts and inputs gone
    for name in ("w1", "w2"):  # nothing of the job left in the workers' own folders
        left = [p for p in (cluster.root / f"local-{name}").rglob("*") if p.is_file() and job in str(p)]
        assert left == []
