"""The CPU container image, built and run here (slow): built from a
Debian-made base (mmdebstrap, no registry) and a host wheelhouse as ``make
image`` does; run read-only (``/tmp`` included) as its non-root user; the API
container answers ``/readyz`` and a ``POST /v1/swap`` whose image ``faceweave
verify`` reports watermarked, and every API probe of the Kubernetes manifests;
a worker container (same image, ``worker``, Redis from Debian on the host)
answers its probes.  A swap through the container and the same swap on a host
``faceweave serve`` are timed alternately (test-artifacts/deploy-figures.json).

Skipped with the reason where podman, runc or mmdebstrap are missing or
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
    ci.ensure_base()
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
