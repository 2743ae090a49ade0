"""The monitoring files, checked without a running Prometheus or Grafana:
promtool accepts both Prometheus configurations (Compose, Kubernetes) and the
rules, and the rules' unit tests (``deploy/prometheus/tests``) pass and cover
every alert (firing and not) and every recording rule; every expression of
the rules and dashboards parses and selects only names docs/METRICS.md
documents; the dashboards are well formed; Compose mounts what exists; and
every Kubernetes overlay renders the ConfigMaps with the files' exact text.

promtool comes with Debian's ``prometheus`` package (2.42, ``make test``
installs it); the tests that need it skip without it, as the kustomize ones
do without kubectl."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests import deploy_manifests as dm
from tests import monitoring_queries as mq

JOBS = ("faceweave-api", "faceweave-worker")
#: Kubernetes has the live pods' job too (in Compose the API node carries the live sessions)
K8S_JOBS = (*JOBS, "faceweave-live")


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian package prometheus, a system package of `make test`)")
    return found


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def _ok(out: subprocess.CompletedProcess[str]) -> str:
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    return text


def _compose() -> dict[str, Any]:
    stack: dict[str, Any] = yaml.safe_load((dm.DEPLOY / "compose.yaml").read_text())
    return stack


def _binds(service: str) -> dict[str, Path]:
    """The bind mounts of a Compose service: container path -> host path."""
    binds = {}
    for volume in _compose()["services"][service]["volumes"]:
        source, target, *_ = str(volume).split(":")
        if source.startswith("."):
            binds[target] = (dm.DEPLOY / source).resolve()
    return binds


# ---------------------------------------------------------------- Prometheus configuration
def test_compose_prometheus_config_as_mounted(promtool, tmp_path):
    """The configuration as the Prometheus container sees it (Compose's bind
    mounts laid out under a temporary root): valid, and its rule_files find the rules."""
    binds = _binds("prometheus")
    assert set(binds) == {"/etc/prometheus/prometheus.yml", "/etc/prometheus/rules"}
    for target, source in binds.items():
        assert source.exists(), source
        place = tmp_path / target.lstrip("/")
        place.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, place)
        else:
            shutil.copy(source, place)
    text = _ok(_run([promtool, "check", "config", "prometheus.yml"], tmp_path / "etc" / "prometheus"))
    assert f"SUCCESS: {len(mq.rule_files())} rule files found" in text, text


def test_compose_prometheus_config_scrapes_the_api_and_every_worker():
    config = yaml.safe_load((mq.PROMETHEUS / "prometheus.yml").read_text())
    assert config["global"]["evaluation_interval"] == "15s"
    assert config["rule_files"] == ["rules/*.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == set(JOBS)
    assert jobs["faceweave-api"]["static_configs"] == [{"targets": ["api:8000"]}]
    (dns,) = jobs["faceweave-worker"]["dns_sd_configs"]
    assert dns["names"] == ["worker"] and dns["type"] == "A" and dns["port"] == 8001
    services = _compose()["services"]
    assert "--health-port" in services["worker"]["command"] and "8001" in services["worker"]["command"]
    assert all(job.get("metrics_path", "/metrics") == "/metrics" for job in jobs.values())


def _k8s_config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((mq.PROMETHEUS / "prometheus-k8s.yml").read_text())
    return config


def _kubernetes_sd_supported(promtool: str, tmp_path: Path) -> bool:
    probe = tmp_path / "probe.yml"
    probe.write_text("scrape_configs:\n  - job_name: probe\n    kubernetes_sd_configs: [{role: pod}]\n")
    return _run([promtool, "check", "config", probe.name], tmp_path).returncode == 0


def _k8s_layout(tmp_path: Path, config: dict[str, Any]) -> Path:
    """The ConfigMaps as the Kubernetes variant's header says to mount them."""
    root = tmp_path / "etc" / "prometheus"
    (root / "rules").mkdir(parents=True)
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    for path in mq.rule_files():
        shutil.copy(path, root / "rules" / path.name)
    return root


def test_k8s_prometheus_config(promtool, tmp_path):
    if not _kubernetes_sd_supported(promtool, tmp_path):
        pytest.skip(
            "this promtool has no kubernetes_sd_configs (Debian's 2.42 is built without it); "
            "test_k8s_prometheus_config_relabelling checks the rest"
        )
    root = _k8s_layout(tmp_path, _k8s_config())
    text = _ok(_run([promtool, "check", "config", "prometheus.yml"], root))
    assert "rule files found" in text


def test_k8s_prometheus_config_relabelling(promtool, tmp_path):
    """The Kubernetes variant with each kubernetes_sd_configs replaced by an
    empty static one, so that any promtool checks the rest (relabelling
    regexes, rule files), and its service discovery and relabelling read."""
    config = _k8s_config()
    assert config["global"]["evaluation_interval"] == "15s" and config["rule_files"] == ["rules/*.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == set(K8S_JOBS)
    for name, job in jobs.items():
        (sd,) = job["kubernetes_sd_configs"]
        assert sd["role"] == "pod" and sd["namespaces"]["names"] == ["faceweave"]
        relabel = {tuple(r.get("source_labels", [])): r for r in job["relabel_configs"]}
        keep = relabel[("__meta_kubernetes_pod_label_app_kubernetes_io_name",)]
        assert keep["action"] == "keep" and keep["regex"] == name  # the job name is the pod's app name
        scrape = relabel[("__meta_kubernetes_pod_annotation_prometheus_io_scrape",)]
        assert scrape["action"] == "keep" and scrape["regex"] == "true"
        path = relabel[("__meta_kubernetes_pod_annotation_prometheus_io_path",)]
        assert path["target_label"] == "__metrics_path__"
        port = relabel[("__address__", "__meta_kubernetes_pod_annotation_prometheus_io_port")]
        assert port["target_label"] == "__address__"
        address = re.fullmatch(port["regex"], "10.1.2.3:8000;8001")
        assert address is not None and address.expand(port["replacement"].replace("$", "\\")) == "10.1.2.3:8001"
        del job["kubernetes_sd_configs"]
        job["static_configs"] = [{"targets": []}]
    root = _k8s_layout(tmp_path, config)
    text = _ok(_run([promtool, "check", "config", "prometheus.yml"], root))
    assert f"SUCCESS: {len(mq.rule_files())} rule files found" in text, text


# ---------------------------------------------------------------- rules
def test_promtool_checks_the_rules(promtool):
    text = _ok(_run([promtool, "check", "rules", *map(str, mq.rule_files())], mq.PROMETHEUS))
    assert f"SUCCESS: {len(mq.rules())} rules found" in text


def test_promtool_rule_unit_tests_pass(promtool):
    tests = sorted(mq.RULE_TESTS.glob("*.yml"))
    assert tests
    text = _ok(_run([promtool, "test", "rules", *map(str, tests)], mq.PROMETHEUS))
    assert "FAILED" not in text


def _unit_tests() -> list[dict[str, Any]]:
    found = []
    for path in sorted(mq.RULE_TESTS.glob("*.yml")):
        found.extend(yaml.safe_load(path.read_text())["tests"])
    return found


def test_the_unit_tests_cover_every_alert_firing_and_not():
    firing: set[str] = set()
    silent: set[str] = set()
    for test in _unit_tests():
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    names = {rule["alert"] for rule in mq.alerts()}
    assert names - firing == set(), "alerts no unit test sees firing"
    assert names - silent == set(), "alerts no unit test sees silent"
    assert (firing | silent) <= names


def test_the_unit_tests_give_every_recording_rule_exact_values():
    checked = set()
    for test in _unit_tests():
        for case in test.get("promql_expr_test", []):
            if case.get("exp_samples"):
                checked.add(case["expr"].strip())
    assert mq.recording_rules() - checked == set()


def test_every_alert_has_for_severity_summary_and_description():
    for rule in mq.alerts():
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
    assert {rule["alert"] for rule in mq.alerts()} >= {
        "FaceweaveWorkerDown",
        "FaceweaveApiDown",
        "FaceweaveWorkerUnhealthy",
        "FaceweaveBacklogGrowing",
        "FaceweaveJobFailureRate",
        "FaceweaveJobLatencyHigh",
        "FaceweaveDeviceHot",
        "FaceweaveDeviceErrors",
        "FaceweaveNoDeviceVisible",
        "FaceweaveDeviceScrapeErrors",
    }


def test_rules_use_only_documented_metrics():
    unknown = {name: mq.unknown_metrics(expr) for name, expr in mq.rule_expressions()}
    assert {k: v for k, v in unknown.items() if v} == {}
    assert all(mq.metric_names(expr) for _, expr in mq.rule_expressions())


# ---------------------------------------------------------------- dashboards
def test_every_dashboard_query_parses(promtool, tmp_path):
    """promtool 2.42 has no check for a lone expression: each query (Grafana's
    variables substituted) becomes a recording rule, and promtool checks those."""
    queries = mq.dashboard_queries()
    rules = [{"record": f"dashboard:query_{i}:check", "expr": mq.substitute(q)} for i, (_, _, q) in enumerate(queries)]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard-queries", "rules": rules}]}))
    out = _run([promtool, "check", "rules", str(path)], tmp_path)
    assert out.returncode == 0, "\n".join([out.stdout + out.stderr, *(f"{d} / {p}: {q}" for d, p, q in queries)])


def test_dashboards_use_only_documented_metrics():
    queries = mq.dashboard_queries()
    assert queries
    unknown = {(d, p, q): mq.unknown_metrics(mq.substitute(q)) for d, p, q in queries}
    assert {k: v for k, v in unknown.items() if v} == {}
    assert all(mq.metric_names(mq.substitute(q)) for _, _, q in queries)


def test_dashboards_are_well_formed():
    files = mq.dashboard_files()
    assert mq.FLEET_DASHBOARD in files
    uids = set()
    for path in files:
        dashboard = mq.load_dashboard(path)
        assert dashboard["uid"] not in uids and dashboard["title"]
        uids.add(dashboard["uid"])
        assert 36 <= dashboard["schemaVersion"] <= 41, path.name
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        source = variables["datasource"]
        assert source["type"] == "datasource" and source["query"] == "prometheus"
        ids = [panel["id"] for panel in mq.panels(dashboard)]
        assert len(ids) == len(set(ids)), (path.name, ids)
        for panel in mq.panels(dashboard):
            assert panel.get("title"), (path.name, panel["id"])
            if panel["type"] == "row":
                continue
            where = (path.name, panel["title"])
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
            assert panel["targets"], where
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}" and target["expr"], where
                # a multi-value variable is a regex: match it with =~
                assert not re.search(r'[^=~!]=\s*"\$\{?worker', target["expr"]), where
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, where


def test_the_fleet_dashboard():
    dashboard = mq.load_dashboard(mq.FLEET_DASHBOARD)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    worker = variables["worker"]
    assert worker["type"] == "query" and worker["datasource"]["uid"] == "${datasource}"
    assert worker["query"]["query"] == worker["definition"] == "label_values(faceweave_device_info, worker)"
    assert worker["includeAll"] and worker["multi"] and worker["allValue"] == ".*"
    titles = {panel["title"] for panel in mq.panels(dashboard)}
    assert titles >= mq.CORE_PANELS, mq.CORE_PANELS - titles
    rows = {panel["title"]: panel for panel in dashboard["panels"] if panel["type"] == "row"}
    live = rows["Live"]
    assert live["collapsed"] is True
    exprs = " ".join(t["expr"] for panel in live["panels"] for t in panel["targets"])
    for name in (  # every live metric (docs/METRICS.md)
        "faceweave_live_sessions",
        "faceweave_live_sessions_started_total",
        "faceweave_live_sessions_refused_total",
        "faceweave_live_fps",
        "faceweave_live_frames_total",
        "faceweave_live_latency_seconds_bucket",
    ):
        assert re.search(rf"\b{name}\b", exprs), name
    queries = " ".join(q for d, _, q in mq.dashboard_queries() if d == dashboard["title"])
    # the device panels follow the worker variable
    for name in ("faceweave_device_utilization_ratio", "faceweave_device_memory_used_bytes"):
        assert f'{name}{{worker=~"$worker"}}' in queries


def test_grafana_provisioning_matches_the_compose_stack():
    binds = _binds("grafana")
    assert binds == {
        "/etc/grafana/provisioning": mq.GRAFANA / "provisioning",
        "/var/lib/grafana/dashboards": mq.DASHBOARDS,
    }
    (source,) = yaml.safe_load((mq.GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text())[
        "datasources"
    ]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    assert "9090:9090" in _compose()["services"]["prometheus"]["ports"]
    (provider,) = yaml.safe_load((mq.GRAFANA / "provisioning" / "dashboards" / "faceweave.yaml").read_text())[
        "providers"
    ]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    for path in mq.dashboard_files():  # the provisioned source is the dashboards' default
        current = {v["name"]: v for v in mq.load_dashboard(path)["templating"]["list"]}["datasource"]["current"]
        assert current["value"] == source["uid"]


# ---------------------------------------------------------------- the helper for the live-scrape test
def test_substitute():
    expr = 'sum by (w) (rate(x{worker=~"$worker"}[$__rate_interval])) + y{worker=~"${worker}"}[$__interval]'
    assert mq.substitute(expr) == 'sum by (w) (rate(x{worker=~".*"}[1m])) + y{worker=~".*"}[1m]'
    assert mq.substitute("up") == "up"


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('histogram_quantile(0.95, sum by (kind, le) (rate(a_bucket{le!="1"}[5m])))', {"a_bucket"}),
        ('label_replace(increase(b_total[10m]) > 0, "reason", "x y", "device", ".*") or c == 0', {"b_total", "c"}),
        ("absent(up{job='w'} == 1) and on () max(d) > 0", {"up", "d"}),
        ("e:f:rate5m > 0.1 and on (kind) sum without (g) (h offset 5m) >= 1e3", {"e:f:rate5m", "h"}),
        ("sum(x) by (le) / ignoring (a) group_left (b) y", {"x", "y"}),
    ],
)
def test_metric_names(expr, names):
    assert mq.metric_names(expr) == names


def test_documented_metrics_come_from_the_tables():
    names = mq.documented_metrics()
    assert {"faceweave_queue_depth", "faceweave_devices_visible", "faceweave_jobs_finished_total"} <= names
    assert {
        "faceweave_job_run_seconds_bucket",
        "faceweave_stage_seconds_sum",
        "faceweave_job_queued_seconds_count",
    } <= (names)
    assert "faceweave_jobs_bucket" not in names  # a gauge
    assert all(re.fullmatch(r"faceweave_[a-z_]+", n) for n in names), names


def test_the_query_lists():
    queries = mq.dashboard_queries()
    assert all(isinstance(part, str) and part for q in queries for part in q)
    assert {p for d, p, _ in queries if d == "faceweave fleet"} >= mq.CORE_PANELS
    assert len(mq.rule_expressions()) == len(mq.rules())


# ---------------------------------------------------------------- Kubernetes
@pytest.fixture(scope="module", params=dm.OVERLAYS)
def rendered(request) -> list[dict[str, Any]]:
    if dm.find_kubectl() is None:
        pytest.skip("kubectl is not installed: the overlays cannot be rendered")
    return dm.render(request.param)


def test_every_overlay_has_the_monitoring_configmaps_with_the_files(rendered):
    configs = dm.by_kind(rendered, "ConfigMap")
    expected = {
        "faceweave-prometheus": {"prometheus.yml": mq.PROMETHEUS / "prometheus-k8s.yml"},
        "faceweave-prometheus-rules": {p.name: p for p in mq.rule_files()},
        "faceweave-grafana-dashboards": {p.name: p for p in mq.dashboard_files()},
    }
    for name, files in expected.items():
        config = configs[name]
        assert config["metadata"]["namespace"] == "faceweave"
        assert config["data"] == {key: path.read_text() for key, path in files.items()}, name
    assert configs["faceweave-grafana-dashboards"]["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_every_overlay_annotates_the_pods_for_scraping(rendered):
    deployments = dm.by_kind(rendered, "Deployment")
    for name, port in (("faceweave-api", 8000), ("faceweave-worker", 8001)):
        template = deployments[name]["spec"]["template"]
        assert template["metadata"]["annotations"] == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(port),
            "prometheus.io/path": "/metrics",
        }
        (container,) = template["spec"]["containers"]
        assert port in {p["containerPort"] for p in container["ports"]}
        assert template["metadata"]["labels"]["app.kubernetes.io/name"] == name  # what the scrape jobs keep


def test_the_prometheus_operator_alternative():
    kubectl = dm.find_kubectl()
    if kubectl is None:
        pytest.skip("kubectl is not installed: deploy/k8s/prometheus-operator cannot be rendered")
    out = subprocess.run(
        [kubectl, "kustomize", str(mq.PROMETHEUS_RULE.parent)], check=True, capture_output=True, text=True, timeout=60
    )
    resources = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    rule = dm.by_kind(resources, "PrometheusRule")["faceweave"]
    assert rule["spec"] == mq.prometheus_rule_manifest()["spec"], (
        "deploy/k8s/prometheus-operator/prometheusrule.yaml differs from the rules: write it again with "
        '`.venv/bin/python -c "from tests.monitoring_queries import write_prometheus_rule; write_prometheus_rule()"`'
    )
    monitor = dm.by_kind(resources, "PodMonitor")["faceweave"]
    assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/name"
    ports = {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]}
    base = [
        doc
        for f in ("api.yaml", "live.yaml", "worker.yaml")
        for doc in yaml.safe_load_all((dm.DEPLOY / "k8s" / "base" / f).read_text())
    ]
    named = {
        p["name"]
        for d in base
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
        for p in c["ports"]
    }
    assert ports == named == {"http", "health"}
    assert set(monitor["spec"]["selector"]["matchExpressions"][0]["values"]) == set(K8S_JOBS)
