"""The CPU container image, built and run here (slow): built from
Debian-made bases (mmdebstrap, no registry: one with a C compiler for the
build stages) and a host wheelhouse as ``make image`` does; run read-only
(``/tmp`` included) as its non-root user, without build tools but with
faceweave's compiled kernels; the API
container answers ``/readyz`` and a ``POST /v1/swap`` whose image ``faceweave
verify`` reports watermarked, and every API probe of the Kubernetes manifests;
a live session (WebRTC, aiortc from the image's webrtc extra) with a peer on
the host gets swapped frames and its microphone back;
a worker container (same image, ``worker``, Redis from Debian on the host)
answers its probes.  A job posted to an API container is run by a separate
worker container, with Redis and PostgreSQL from Debian on the host and
moto's S3 server on loopback as the only shared storage: the result comes
through the presigned URL, watermarked, and no job file is left on either
container's disk.  A swap through the container and the same swap on a host
``faceweave serve`` are timed alternately, and that job end to end
(test-artifacts/deploy-figures.json).

Skipped with the reason where podman, runc or mmdebstrap (or, for the job,
redis-server, PostgreSQL, boto3 or moto's server) are missing or
podman cannot run a container here.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests import deploy_manifests as dm
from tests import servers
from tools import container_image as ci

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "test-artifacts" / "deploy-figures.json"
API_KEY = "ci-key-" + "0123456789abcdef"
RUN = ("--read-only", "--read-only-tmpfs=false", *ci.ULIMITS)
SOURCE, TARGET = "single/biden2.jpg", "single/astronaut_eileen_collins.png"


def _record(**figures: object) -> None:
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    known.update(figures)
    FIGURES.write_text(json.dumps(known, indent=2) + "\n")


def _podman_works() -> str | None:
    why = ci.missing_tools()
    if why:
        return why
    out = subprocess.run(ci.podman("info", "--format", "{{.Host.OCIRuntime.Name}}"), capture_output=True, text=True)
    return None if out.returncode == 0 else f"podman cannot run here: {out.stderr.strip()[:200]}"


@pytest.fixture(scope="module")
def image() -> str:
    why = _podman_works()
    if why:
        pytest.skip(why)
    began = time.monotonic()
    ci.ensure_bases()
    base_s = time.monotonic() - began
    began = time.monotonic()
    ci.ensure_wheelhouse()
    wheels_s = time.monotonic() - began
    build_s = ci.build()
    _record(
        base_s=round(base_s, 1),
        wheelhouse_s=round(wheels_s, 1),
        build_s=round(build_s, 1),
        image_mb=round(ci.image_size() / 1e6),
    )
    return ci.IMAGE


@pytest.fixture
def run_container(image) -> Iterator:
    names: list[str] = []

    def start(*args: str, ports: dict[int, int] | None = None, network: str | None = None) -> str:
        name = f"faceweave-test-{uuid.uuid4().hex[:8]}"
        published = [f"-p=127.0.0.1:{host}:{inside}" for inside, host in (ports or {}).items()]
        command = ci.podman("run", "-d", "--name", name, *RUN, *published)
        if network:
            command.append(f"--network={network}")
        subprocess.run([*command, *args[:-1], image, *args[-1].split()], check=True, capture_output=True)
        names.append(name)
        return name

    yield start
    for name in names:
        subprocess.run(ci.podman("rm", "-f", "-t", "5", name), capture_output=True)


def _logs(name: str) -> str:
    out = subprocess.run(ci.podman("logs", name), capture_output=True, text=True)
    return (out.stdout + out.stderr)[-3000:]


def _wait_ready(url: str, name: str, limit_s: float = 180.0) -> float:
    began = time.monotonic()
    while time.monotonic() - began < limit_s:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return time.monotonic() - began
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{url} not 200 within {limit_s:.0f} s; container log:\n{_logs(name)}")


def _swap(base: str, faces_dir: Path, **headers: str) -> httpx.Response:
    files = [
        ("source", ("s.jpg", (faces_dir / SOURCE).read_bytes())),
        ("target", ("t.png", (faces_dir / TARGET).read_bytes())),
    ]
    return httpx.post(f"{base}/v1/swap", files=files, headers=headers, timeout=120)


def _overlay_probes(deployment: str) -> set[tuple[str, int]]:
    if dm.find_kubectl() is None:
        pytest.skip("kubectl is not installed: the manifests' probes cannot be read")
    return {(p.path, p.port) for o in dm.OVERLAYS for p in dm.probes(dm.render(o)) if p.deployment == deployment}


def test_image_is_non_root_without_build_tools(image):
    out = subprocess.run(ci.podman("image", "inspect", image), check=True, capture_output=True)
    (inspected,) = json.loads(out.stdout)
    config = inspected["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["/opt/faceweave/bin/faceweave"] and config["Cmd"] == ["serve"]
    assert "healthcheck.py" in " ".join(inspected["Healthcheck"]["Test"])  # kept by --format docker
    check = (
        "for t in gcc cc g++ make pip pip3; do command -v $t; done; "
        "ls -d /usr/include/python3* /root/.cache /cache/.cache 2>/dev/null; "
        '/opt/faceweave/bin/python -c \'import importlib.util as u; print(u.find_spec("pip"), u.find_spec("jax"))\''
    )
    out = subprocess.run(
        [*ci.podman("run", "--rm", *RUN, "--entrypoint", "sh", image), "-c", check], capture_output=True, text=True
    )
    assert out.stdout.split() == ["None", "None"], out.stdout + out.stderr


def test_image_runs_the_compiled_kernels(image):
    """The build stages compiled faceweave/kernels/_raster.c and _pixels.c; the runtime loads both (no fallback)."""
    check = (
        "import faceweave.kernels as k; from faceweave.kernels import raster as r, pixels as p;"
        " print(k.compiled(), r._raster.__file__, p._pixels.__file__)"
    )
    out = subprocess.run(
        [*ci.podman("run", "--rm", *RUN, "--entrypoint", "/opt/faceweave/bin/python", image), "-c", check],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and out.stdout.split()[0] == "True", out.stdout + out.stderr
    site = "/opt/faceweave/lib/python3.11/site-packages/faceweave/kernels/"
    assert out.stdout.split()[1:] and out.stdout.split()[1].startswith(site + "_raster."), out.stdout
    assert out.stdout.split()[2].startswith(site + "_pixels."), out.stdout


def test_api_container_swaps_read_only_and_answers_its_probes(run_container, faces_dir, tmp_path):
    port = servers.free_port()
    keys = json.dumps([{"user": "ci", "key": API_KEY}])
    began = time.monotonic()
    name = run_container(f"-e=FACEWEAVE_AUTH__API_KEYS={keys}", "serve", ports={8000: port})
    base = f"http://127.0.0.1:{port}"
    ready_s = _wait_ready(f"{base}/readyz", name)  # from podman run's return
    _record(api_start_to_readyz_s=round(time.monotonic() - began, 2), api_readyz_after_run_s=round(ready_s, 2))

    answer = _swap(base, faces_dir, Authorization=f"Bearer {API_KEY}")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "image/png"
    result = tmp_path / "swapped.png"
    result.write_bytes(answer.content)
    verify = subprocess.run(
        [sys.executable, "-m", "faceweave.cli", "verify", str(result)], capture_output=True, text=True, timeout=120
    )
    assert verify.returncode == 0 and "watermark: found" in verify.stdout, verify.stdout + verify.stderr
    assert _swap(base, faces_dir).status_code == 401  # the image's API requires the key it was given

    for path, inside in _overlay_probes("faceweave-api"):
        assert inside == 8000
        assert httpx.get(f"{base}{path}", timeout=5).status_code == 200, path
    assert "Traceback" not in _logs(name)


async def _live_round_trip(base: str, photo: bytes, frames: list, headers: dict) -> dict:
    """A live session with an aiortc peer on the host: the answer, frames back, the figures, the end."""
    import asyncio

    from aiortc import RTCSessionDescription
    from tests.live_peer import Received, offer_sdp

    pc, sdp = await offer_sdp(frames=frames, audio=True)
    received = Received()
    pc.on("track", received.on_track)
    seen: dict = {}
    async with httpx.AsyncClient(base_url=base, timeout=120, headers=headers) as http:
        seen["config"] = (await http.get("/v1/live/config")).json()
        opened = await http.post("/v1/live", files={"source": ("s.jpg", photo)}, data={"sdp": sdp})
        assert opened.status_code == 201, opened.text
        answer = opened.json()
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
        deadline = time.monotonic() + 90
        while (len(received.frames) < 5 or len(received.sound) < 20) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        seen["stats"] = (await http.get(answer["links"]["self"])).json()
        seen["ended"] = (await http.delete(answer["links"]["self"])).json()
    await pc.close()
    seen["frames"], seen["sound"] = len(received.frames), len(received.sound)
    return seen


def test_api_container_answers_a_live_session(run_container, faces_dir):
    """aiortc is in the image (the webrtc extra) and a live session with a
    peer on the host runs through it: swapped frames and the microphone come
    back.  The container is on the host's network, so that the candidates of
    both sides are the host's (as with deploy/k8s/components/live-host-network)."""
    import asyncio

    pytest.importorskip("aiortc", reason="the webrtc extra (aiortc) is not installed on the host")
    import numpy as np

    from faceweave.io import read_image

    port = servers.free_port()
    keys = json.dumps([{"user": "ci", "key": API_KEY}])
    name = run_container(f"-e=FACEWEAVE_AUTH__API_KEYS={keys}", f"-e=FACEWEAVE_PORT={port}", "serve", network="host")
    base = f"http://127.0.0.1:{port}"
    _wait_ready(f"{base}/readyz", name)
    versions = subprocess.run(
        ci.podman("exec", name, "/opt/faceweave/bin/python", "-c", "import aiortc, av; print(aiortc.__version__)"),
        capture_output=True,
        text=True,
    )
    assert versions.returncode == 0 and versions.stdout.strip() == "1.16.0", versions.stdout + versions.stderr
    frames = [np.ascontiguousarray(read_image(faces_dir / TARGET).pixels)]
    began = time.monotonic()
    seen = asyncio.run(
        _live_round_trip(base, (faces_dir / SOURCE).read_bytes(), frames, {"Authorization": f"Bearer {API_KEY}"})
    )
    _record(live_session_s=round(time.monotonic() - began, 2))
    assert seen["config"]["ice_servers"] == [] and seen["config"]["sessions"] == 2
    assert seen["frames"] >= 5 and seen["stats"]["swapped"] >= 5, seen
    assert seen["sound"] >= 20 and seen["stats"]["audio_frames"] >= 20, seen
    assert seen["ended"]["state"] == "ended" and seen["ended"]["reason"] == "stopped by the caller"
    assert "Traceback" not in _logs(name)


def test_worker_container_answers_its_probes(run_container):
    try:
        redis_cm = servers.redis_server()
        redis = redis_cm.__enter__()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    try:
        port = servers.free_port()
        # slirp4netns reaches the host's loopback (the test Redis) at 10.0.2.2
        name = run_container(
            f"-e=FACEWEAVE_BROKER=redis://10.0.2.2:{redis.port}/0",
            "worker --concurrency 1 --health-port 8001",
            ports={8001: port},
            network="slirp4netns:allow_host_loopback=true",
        )
        base = f"http://127.0.0.1:{port}"
        _record(worker_readyz_after_run_s=round(_wait_ready(f"{base}/readyz", name), 2))
        for path, inside in _overlay_probes("faceweave-worker"):
            assert inside == 8001
            assert httpx.get(f"{base}{path}", timeout=5).status_code == 200, path
        assert httpx.get(f"{base}/readyz", timeout=5).json() == {"ready": True, "processes_ready": 1, "processes": 1}
    finally:
        redis_cm.__exit__(None, None, None)


def test_swap_through_the_container_and_on_the_host(run_container, faces_dir, tmp_path):
    """The same swap, alternately through the container and a host ``faceweave serve`` (figures only)."""
    port, host_port = servers.free_port(), servers.free_port()
    name = run_container("-e=FACEWEAVE_AUTH__MODE=none", "serve", ports={8000: port})
    env = {**os.environ, "FACEWEAVE_STORAGE": str(tmp_path / "host"), "FACEWEAVE_PORT": str(host_port)}
    host = subprocess.Popen(
        [sys.executable, "-m", "faceweave.cli", "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        _wait_ready(f"http://127.0.0.1:{port}/readyz", name)
        _wait_ready(f"http://127.0.0.1:{host_port}/readyz", "host")
        times: dict[str, list[float]] = {"container": [], "host": []}
        for _ in range(5):
            for where, at in (("container", port), ("host", host_port)):
                began = time.monotonic()
                assert _swap(f"http://127.0.0.1:{at}", faces_dir).status_code == 200
                times[where].append(time.monotonic() - began)
    finally:
        host.terminate()
        host.wait(30)
    medians = {k: round(statistics.median(v) * 1000) for k, v in times.items()}
    _record(swap_ms_container=medians["container"], swap_ms_host=medians["host"], swap_rounds=5)
    assert medians["container"] < 3 * medians["host"] + 500, medians


# ------------------------------------------------------------------ two containers, S3 the only shared storage
BUCKET, PREFIX = "faceweave-cluster", "cluster"
HOST = "10.0.2.2"  # slirp4netns: the host's loopback as the containers see it
#: what a node keeps on its own disk by design: the audit log (and its lock), matplotlib's font list
#: what a node keeps that is not a job's: the audit log, matplotlib's font cache, and a
#: worker's metrics (prometheus_client's multiprocess files, removed when it stops)
NODE_FILES = ("/data/audit.jsonl", "/cache/matplotlib/fontlist-", "/cache/faceweave-metrics-")


@pytest.fixture
def cluster_servers() -> Iterator[tuple[servers.Redis, servers.Postgres, str]]:
    """Redis and PostgreSQL from Debian and moto's S3 server, all on the host's loopback."""
    pytest.importorskip("boto3", reason="the s3 extra (boto3) is not installed")
    pytest.importorskip("moto.server", reason="moto[server] (test extra) is not installed")
    for found, why in (servers.find_redis(), servers.find_postgres()):
        if found is None:
            pytest.skip(why)
    from moto.server import ThreadedMotoServer

    s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    s3.start()
    try:
        _, s3_port = s3.get_host_and_port()
        _bucket_client(s3_port).create_bucket(Bucket=BUCKET)
        with servers.redis_server() as redis, servers.postgres_server() as postgres:
            yield redis, postgres, str(s3_port)
    finally:
        s3.stop()


def _bucket_client(port: int | str):
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _fetch_presigned(url: str) -> httpx.Response:
    """GET a presigned URL made for the containers' view of the host, as a CDN
    in front of the bucket would: to the host's loopback, with the signed Host."""
    parts = httpx.URL(url)
    return httpx.get(parts.copy_with(host="127.0.0.1"), headers={"Host": parts.netloc.decode()}, timeout=60)


def _files_on_disk(name: str) -> list[str]:
    """Every file on the container's writable places: its volumes /data and /cache, and /dev/shm."""
    out = subprocess.run(
        ci.podman("exec", name, "find", "/data", "/cache", "/dev/shm", "-type", "f"),
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted(out.stdout.split())


def test_a_job_through_an_api_and_a_worker_container_sharing_only_s3(
    run_container, cluster_servers, faces_dir, tmp_path
):
    """POST /v1/jobs to the API container; the worker container (no volume in
    common) runs it; the result comes through the presigned URL, watermarked;
    no job file on either container's disk; the bucket holds the result only."""
    redis, postgres, s3_port = cluster_servers
    database = servers.new_database(postgres, "cluster").replace("127.0.0.1", HOST)
    env = [
        f"-e=FACEWEAVE_BROKER=redis://{HOST}:{redis.port}/0",
        f"-e=FACEWEAVE_DATABASE={database}",
        f"-e=FACEWEAVE_STORAGE=s3://{BUCKET}/{PREFIX}",
        "-e=FACEWEAVE_LOCAL_STORAGE=/data",
        f"-e=FACEWEAVE_S3__ENDPOINT_URL=http://{HOST}:{s3_port}",
        "-e=FACEWEAVE_S3__ADDRESSING_STYLE=path",
        "-e=AWS_ACCESS_KEY_ID=testing",
        "-e=AWS_SECRET_ACCESS_KEY=testing",
        "-e=AWS_DEFAULT_REGION=us-east-1",
        f"-e=FACEWEAVE_AUTH__API_KEYS={json.dumps([{'user': 'ci', 'key': API_KEY}])}",
    ]
    network = "slirp4netns:allow_host_loopback=true"
    api_port, worker_port = servers.free_port(), servers.free_port()
    api = run_container(*env, "serve --workers 0", ports={8000: api_port}, network=network)
    worker = run_container(
        *env, "worker --concurrency 1 --health-port 8001", ports={8001: worker_port}, network=network
    )
    base, auth = f"http://127.0.0.1:{api_port}", {"Authorization": f"Bearer {API_KEY}"}
    _wait_ready(f"{base}/readyz", api)
    _wait_ready(f"http://127.0.0.1:{worker_port}/readyz", worker)

    files = [
        ("source", ("s.jpg", (faces_dir / SOURCE).read_bytes(), "image/jpeg")),
        ("target", ("t.png", (faces_dir / TARGET).read_bytes(), "image/png")),
    ]
    began = time.monotonic()
    posted = httpx.post(f"{base}/v1/jobs", files=files, data={"options": '{"format": "png"}'}, headers=auth)
    assert posted.status_code == 202, posted.text
    job_id = posted.json()["id"]
    while True:
        job = httpx.get(f"{base}/v1/jobs/{job_id}", headers=auth, timeout=10).json()
        if job["state"] in ("succeeded", "failed", "cancelled") or time.monotonic() - began > 180:
            break
        time.sleep(0.1)
    assert job["state"] == "succeeded", f"{job}\napi:\n{_logs(api)}\nworker:\n{_logs(worker)}"
    redirect = httpx.get(f"{base}/v1/jobs/{job_id}/result", headers=auth, follow_redirects=False, timeout=10)
    assert redirect.status_code == 307, redirect.text
    assert redirect.headers["location"].startswith(f"http://{HOST}:{s3_port}/{BUCKET}/{PREFIX}/jobs/{job_id}/")
    fetched = _fetch_presigned(redirect.headers["location"])
    job_s = time.monotonic() - began
    assert fetched.status_code == 200 and fetched.headers["content-type"] == "image/png", fetched.text[:300]
    assert _fetch_presigned(job["result_url"]).content == fetched.content
    _record(cluster_job_s=round(job_s, 2))

    result = tmp_path / "result.png"
    result.write_bytes(fetched.content)
    verify = subprocess.run(
        [sys.executable, "-m", "faceweave.cli", "verify", str(result)], capture_output=True, text=True, timeout=120
    )
    assert verify.returncode == 0 and "watermark: found" in verify.stdout, verify.stdout + verify.stderr

    # the two containers have no volume in common: each has its own anonymous /data and /cache
    mounts = {
        name: {m["Name"] for m in json.loads(subprocess.check_output(ci.podman("inspect", name)))[0]["Mounts"]}
        for name in (api, worker)
    }
    assert not mounts[api] & mounts[worker], mounts
    for name in (api, worker):
        left = [f for f in _files_on_disk(name) if not f.startswith(NODE_FILES)]
        assert left == [], f"{name}: {left}"
    # the bucket: the result alone (the inputs are deleted once the job is done), no upload left open
    bucket = _bucket_client(s3_port)
    keys = sorted(item["Key"] for item in bucket.list_objects_v2(Bucket=BUCKET).get("Contents", ()))
    assert keys == [f"{PREFIX}/jobs/{job_id}/result-1.png"], keys
    assert bucket.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    for name in (api, worker):
        assert "Traceback" not in _logs(name), _logs(name)
