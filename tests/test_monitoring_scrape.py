"""A real Prometheus (Debian's ``prometheus``) scrapes a running API node
(``faceweave serve``) and two workers on loopback while jobs run, with the
rules of ``deploy/prometheus/rules`` loaded:

* every metric the rules and dashboards name is there (but the ones a CPU
  host cannot have: temperatures, power, ECC and Xid of accelerators, and
  live sessions, which do not exist yet), with sane values: job counters
  went up, histograms have buckets;
* every dashboard query and every rule expression runs without error, and
  the core panels return series;
* the scrape cost of each endpoint, per request, is written to
  ``test-artifacts/metrics_scrape.json`` for the closing note.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from tests import monitoring_queries as mq
from tests import servers
from tests.cluster import ROOT, Cluster
from tests.service_fixtures import wait_for

pytestmark = pytest.mark.slow

ARTIFACTS = ROOT / "test-artifacts"
#: named by the rules or dashboards, but not exported on a machine without an accelerator
NOT_ON_A_CPU_HOST = frozenset(
    {
        "faceweave_device_temperature_celsius",
        "faceweave_device_power_watts",
        "faceweave_device_ecc_errors_total",
        "faceweave_device_xid_errors_total",
        "faceweave_device_healthy",
    }
)


def _prometheus() -> str:
    found = shutil.which("prometheus")
    if found is None:
        pytest.skip("the prometheus binary is missing (Debian's prometheus package; make system-deps)")
    return found


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, faces_dir) -> Iterator[dict]:
    """The API, two workers and Prometheus, jobs run through them."""
    binary = _prometheus()
    for found, why in (servers.find_redis(), servers.find_postgres()):
        if found is None:
            pytest.skip(why)
    root = tmp_path_factory.mktemp("fleet")
    with servers.redis_server() as redis, servers.postgres_server() as postgres:
        cluster = Cluster(root / "cluster", servers.new_database(postgres, "fleet"), redis.url.rsplit("/", 1)[0] + "/5")
        api_port = servers.free_port()
        api = _start_api(cluster, api_port)
        prometheus = None
        try:
            for name in ("w1", "w2"):
                cluster.start_worker(name)
            _wait_api(api, api_port)
            for name in ("w1", "w2"):
                cluster.wait_ready(name)
            prometheus, prom_port = _start_prometheus(binary, root, api_port, cluster)
            jobs = _run_jobs(api_port, faces_dir)
            yield {"cluster": cluster, "api_port": api_port, "prom": prom_port, "jobs": jobs}
        finally:
            for process in (prometheus, api):
                if process is not None:
                    process.terminate()
                    try:
                        process.wait(30)
                    except subprocess.TimeoutExpired:
                        process.kill()
            cluster.close()


def _start_api(cluster: Cluster, port: int) -> subprocess.Popen:
    log = open(cluster.root / "api.log", "ab")  # noqa: SIM115 - the server keeps its own descriptor
    with log:
        return subprocess.Popen(
            [
                str(Path(sys.executable).parent / "faceweave"),
                "serve",
                "--config",
                str(cluster.config_file),
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(ROOT),
        )


def _wait_api(api: subprocess.Popen, port: int) -> None:
    def ready() -> bool:
        if api.poll() is not None:
            raise AssertionError("the API exited")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    wait_for(ready, what="the API to be ready", limit_s=120.0, every_s=0.2)


def _start_prometheus(binary: str, root: Path, api_port: int, cluster: Cluster) -> tuple[subprocess.Popen, int]:
    folder = root / "prometheus"
    shutil.copytree(mq.RULES, folder / "rules")
    workers = [f"127.0.0.1:{cluster.ports[name]}" for name in ("w1", "w2")]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules/*.yml"],
        "scrape_configs": [
            {"job_name": "faceweave-api", "static_configs": [{"targets": [f"127.0.0.1:{api_port}"]}]},
            {"job_name": "faceweave-worker", "static_configs": [{"targets": workers}]},
        ],
    }
    (folder / "prometheus.yml").write_text(json.dumps(config))  # YAML is a superset of JSON
    port = servers.free_port()
    log = open(root / "prometheus.log", "ab")  # noqa: SIM115
    with log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(folder),
        )
    wait_for(lambda: _up_targets(port) == 3, what="Prometheus to scrape the API and both workers", limit_s=60.0)
    return process, port


def _query(port: int, expr: str) -> dict:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return json.loads(body)
        except ValueError:  # not ready yet: "Service Unavailable"
            return {"status": "error", "error": body.decode(errors="replace")}


def _up_targets(port: int) -> int:
    try:
        answer = _query(port, "sum(up)")
    except OSError:
        return 0
    result = answer.get("data", {}).get("result", []) if answer.get("status") == "success" else []
    return int(float(result[0]["value"][1])) if result else 0


def _run_jobs(api_port: int, faces: Path) -> list[dict]:
    """Four photos, one without a face, and one video split into segments,
    run to their end; and an upload refused by the API."""
    import httpx

    single = faces / "single"
    source = ("source", ("s.jpg", (single / "paul_rudd.jpg").read_bytes(), "image/jpeg"))
    base = f"http://127.0.0.1:{api_port}"
    targets = [single / n for n in ("biden2.jpg", "happy_man.png", "sad_woman.png", "biden2.jpg")]
    ids = []
    with httpx.Client(base_url=base, timeout=60) as client:
        for target in targets:
            files = [source, ("target", (target.name, target.read_bytes(), "application/octet-stream"))]
            ids.append(client.post("/v1/jobs", files=files).json()["id"])
        blank = io.BytesIO()
        Image.new("RGB", (320, 240), (128, 128, 128)).save(blank, format="PNG")
        files = [source, ("target", ("blank.png", blank.getvalue(), "image/png"))]
        ids.append(client.post("/v1/jobs", files=files).json()["id"])  # no face: fails on a worker
        refused = client.post("/v1/jobs", files=[source, ("target", ("t.jpg", b"not an image", "image/jpeg"))])
        assert refused.status_code == 415, refused.text  # counted in faceweave_errors_total
        video = faces / "video" / "lp_d18_talking_face.mp4"
        files = [source, ("target", ("clip.mp4", video.read_bytes(), "application/octet-stream"))]
        ids.append(client.post("/v1/jobs", files=files, data={"format": "mp4"}).json()["id"])

        def finished() -> list[dict] | None:
            jobs = [client.get(f"/v1/jobs/{job_id}").json() for job_id in ids]
            return jobs if all(j["state"] in ("succeeded", "failed") for j in jobs) else None

        jobs = wait_for(finished, what="the jobs to finish", limit_s=300.0, every_s=0.5)
    time.sleep(3.0)  # a few more scrapes and rule evaluations after the last job
    return jobs


def test_the_jobs_ran_on_both_workers(fleet):
    states = [j["state"] for j in fleet["jobs"]]
    assert states == ["succeeded"] * 4 + ["failed", "succeeded"], fleet["jobs"]
    assert fleet["jobs"][4]["error"]["code"] == "no_face"


def test_every_metric_the_rules_and_dashboards_name_is_scraped(fleet):
    port = fleet["prom"]
    named = set()
    for _, expr in mq.rule_expressions():
        named |= mq.metric_names(expr)
    for _, _, expr in mq.dashboard_queries():
        named |= mq.metric_names(mq.substitute(expr))
    named -= mq.recording_rules() | NOT_ON_A_CPU_HOST
    named = {n for n in named if not n.startswith(mq.FUTURE_METRICS)}
    missing = sorted(n for n in named if not _query(port, f"count({n})")["data"]["result"])
    assert not missing, missing


def test_counters_went_up_and_histograms_have_buckets(fleet):
    port = fleet["prom"]

    def value(expr: str) -> float:
        result = _query(port, expr)["data"]["result"]
        return sum(float(r["value"][1]) for r in result)

    assert value('sum(faceweave_jobs_finished_total{job="faceweave-worker",state="succeeded"})') >= 5
    assert value('sum(faceweave_jobs_started_total{kind="segment"})') >= 2
    assert value("sum(faceweave_frames_processed_total)") >= 216
    assert value('sum(faceweave_http_requests_total{job="faceweave-api"})') > 5
    for histogram in ("faceweave_job_run_seconds", "faceweave_stage_seconds", "faceweave_job_queued_seconds"):
        buckets = _query(port, f"{histogram}_bucket")["data"]["result"]
        assert len({b["metric"]["le"] for b in buckets}) > 5, histogram
    stages = {r["metric"]["stage"] for r in _query(port, "faceweave_stage_seconds_count > 0")["data"]["result"]}
    assert stages == {"decode", "detect", "track", "model", "composite", "encode"}
    assert value("sum(faceweave_worker_ready)") == 2 and value("sum(faceweave_worker_healthy)") == 2
    assert value('count(faceweave_devices_visible{vendor="host"})') == 2
    assert value("max(faceweave_model_warmup_seconds)") > 0


def test_every_dashboard_query_and_rule_runs_and_core_panels_have_series(fleet):
    port = fleet["prom"]
    failed, empty_core = [], []
    for dashboard, panel, expr in mq.dashboard_queries():
        answer = _query(port, mq.substitute(expr))
        if answer.get("status") != "success":
            failed.append((dashboard, panel, answer.get("error")))
        elif panel in mq.CORE_PANELS and not answer["data"]["result"]:
            empty_core.append(panel)
    for name, expr in mq.rule_expressions():
        answer = _query(port, expr)
        if answer.get("status") != "success":
            failed.append(("rules", name, answer.get("error")))
    assert not failed, failed
    assert not empty_core, empty_core
    alerts = _query(port, "ALERTS")["data"]["result"]
    assert not [a for a in alerts if a["metric"]["alertname"] in ("FaceweaveWorkerDown", "FaceweaveApiDown")]


def test_scrape_cost_per_request(fleet):
    """Each endpoint scraped 50 times in turn; the median milliseconds are saved."""
    cluster, api_port = fleet["cluster"], fleet["api_port"]
    urls = {
        "api": f"http://127.0.0.1:{api_port}/metrics",
        "worker": f"http://127.0.0.1:{cluster.ports['w1']}/metrics",
    }
    times: dict[str, list[float]] = {name: [] for name in urls}
    sizes = {}
    for _ in range(50):
        for name, url in urls.items():
            began = time.perf_counter()
            with urllib.request.urlopen(url, timeout=10) as answer:
                sizes[name] = len(answer.read())
            times[name].append((time.perf_counter() - began) * 1000.0)
    medians = {name: sorted(values)[len(values) // 2] for name, values in times.items()}
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "metrics_scrape.json").write_text(json.dumps({"median_ms": medians, "bytes": sizes}))
    assert all(size > 1000 for size in sizes.values()), sizes
