"""The deployment files, checked without running them: every Kubernetes
overlay renders (``kubectl kustomize``) and passes ``kubernetes-validate``
for a current Kubernetes; every FACEWEAVE_* variable the manifests set is a
real setting and the whole set loads; workers ask for their device; the
Compose files are accepted by ``podman-compose config``; the Containerfile's
accelerator stages use the right base, ONNX Runtime build and device
environment (dockerfile-parse).  Nothing here builds or pulls an image."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests import deploy_manifests as dm

from faceweave.service.distributed.celery_app import QUEUE
from faceweave.service.distributed.health import DEFAULT_HEALTH_PORT
from faceweave.service.settings import load_settings

#: a current Kubernetes release that kubernetes-validate has offline schemas for
K8S_VERSION = "1.34.0"


@pytest.fixture(scope="module", params=dm.OVERLAYS)
def rendered(request) -> tuple[str, list[dict]]:
    if dm.find_kubectl() is None:
        pytest.skip("kubectl is not installed: the overlays cannot be rendered")
    return request.param, dm.render(request.param)


def test_every_overlay_renders_the_whole_deployment(rendered):
    _, resources = rendered
    kinds = sorted((r["kind"], r["metadata"]["name"]) for r in resources)
    assert kinds == [
        ("ConfigMap", "faceweave-grafana-dashboards"),  # monitoring: deploy/grafana, deploy/prometheus
        ("ConfigMap", "faceweave-live-settings"),
        ("ConfigMap", "faceweave-prometheus"),
        ("ConfigMap", "faceweave-prometheus-rules"),
        ("ConfigMap", "faceweave-settings"),
        ("Deployment", "faceweave-api"),
        ("Deployment", "faceweave-live"),  # live sessions (WebRTC): deploy/k8s/base/live.yaml
        ("Deployment", "faceweave-worker"),
        ("Ingress", "faceweave"),
        ("Ingress", "faceweave-live"),
        ("Namespace", "faceweave"),
        ("PersistentVolumeClaim", "faceweave-models"),
        ("PersistentVolumeClaim", "faceweave-storage"),
        ("PodDisruptionBudget", "faceweave-api"),
        ("PodDisruptionBudget", "faceweave-live"),
        ("PodDisruptionBudget", "faceweave-worker"),
        ("ScaledObject", "faceweave-worker"),
        ("Secret", "faceweave-live-secrets"),
        ("Secret", "faceweave-secrets"),
        ("Service", "faceweave-api"),
        ("Service", "faceweave-live"),
    ]
    ingress = dm.by_kind(resources, "Ingress")["faceweave"]
    assert ingress["spec"]["tls"][0]["secretName"] == "faceweave-tls"


def test_kubernetes_validate_passes(rendered):
    import kubernetes_validate

    _, resources = rendered
    for resource in resources:
        if resource["apiVersion"].startswith("keda.sh/"):
            continue  # a CRD: no schema in kubernetes-validate; checked in test_workers_scale_on_the_queue
        kubernetes_validate.validate(resource, K8S_VERSION, strict=True)


def test_every_variable_is_a_real_setting_and_they_load(rendered):
    _, resources = rendered
    env = dm.environment(resources)
    assert env, "the manifests set no FACEWEAVE_* variable"
    unknown = sorted(name for name in env if name.startswith("FACEWEAVE_") and not dm.setting_exists(name))
    assert unknown == []
    settings = load_settings(environ=env)  # the values are valid too (placeholders included)
    assert settings.broker and settings.database and settings.auth.required


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("FACEWEAVE_BROKER", True),
        ("FACEWEAVE_AUTH__API_KEYS", True),
        ("FACEWEAVE_RUNTIME__EXECUTION_PROVIDER", True),
        ("FACEWEAVE_CONFIG", True),
        ("FACEWEAVE_MODELS", False),  # the model cache's variable, not a service setting
        ("FACEWEAVE_AUTH__NOPE", False),
        ("FACEWEAVE_PORT__X", False),
    ],
)
def test_setting_names(name, expected):
    assert dm.setting_exists(name) is expected


def test_probes_are_on_the_real_endpoints(rendered):
    _, resources = rendered
    found = {(p.deployment, p.kind, p.path, p.port) for p in dm.probes(resources)}
    assert found == {
        ("faceweave-api", "startupProbe", "/healthz", 8000),
        ("faceweave-api", "readinessProbe", "/readyz", 8000),
        ("faceweave-api", "livenessProbe", "/healthz", 8000),
        ("faceweave-live", "startupProbe", "/healthz", 8000),
        ("faceweave-live", "readinessProbe", "/readyz", 8000),
        ("faceweave-live", "livenessProbe", "/healthz", 8000),
        ("faceweave-worker", "startupProbe", "/readyz", DEFAULT_HEALTH_PORT),
        ("faceweave-worker", "readinessProbe", "/readyz", DEFAULT_HEALTH_PORT),
        ("faceweave-worker", "livenessProbe", "/healthz", DEFAULT_HEALTH_PORT),
    }
    worker = dict(dm.containers(resources))["faceweave-worker"]
    assert worker["args"][:1] == ["worker"] and "--health-port" in worker["args"]


def test_workers_ask_for_their_device_and_hand_back_jobs(rendered):
    overlay, resources = rendered
    worker = dm.by_kind(resources, "Deployment")["faceweave-worker"]["spec"]["template"]["spec"]
    (container,) = worker["containers"]
    device = dm.DEVICES[overlay]
    limits = container["resources"]["limits"]
    assert "memory" in limits and "cpu" in container["resources"]["requests"]
    if device is None:
        assert not worker.get("tolerations") and not worker.get("nodeSelector")
    else:
        assert limits[device] == 1
        assert any(t["key"] == device for t in worker["tolerations"])
        assert worker["nodeSelector"]
    assert worker["terminationGracePeriodSeconds"] >= 600
    deployments = dm.by_kind(resources, "Deployment")
    for spec in (worker, *(deployments[n]["spec"]["template"]["spec"] for n in ("faceweave-api", "faceweave-live"))):
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_workers_scale_on_the_queue(rendered):
    _, resources = rendered
    scaled = dm.by_kind(resources, "ScaledObject")["faceweave-worker"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == "faceweave-worker"
    trigger, waited = scaled["spec"]["triggers"]
    broker = dm.by_kind(resources, "ConfigMap")["faceweave-settings"]["data"]["FACEWEAVE_BROKER"]
    assert trigger["type"] == "redis" and trigger["metadata"]["listName"] == QUEUE
    assert trigger["metadata"]["address"].split(".")[0] == broker.split("//")[1].split(":")[0]
    assert scaled["spec"]["minReplicaCount"] >= 1
    # the second signal: the age of the oldest queued job, a metric the API exports (docs/METRICS.md)
    assert waited["type"] == "prometheus" and float(waited["metadata"]["threshold"]) > 0
    from tests.monitoring_queries import unknown_metrics

    assert "faceweave_queue_oldest_age_seconds" in waited["metadata"]["query"]
    assert not unknown_metrics(waited["metadata"]["query"])


# ---------------------------------------------------------------- live sessions
def _container_env(resources: list[dict], deployment: str) -> dict[str, str]:
    """The variables one Deployment's container gets: its envFrom sources in order, then its env."""
    (container,) = dm.by_kind(resources, "Deployment")[deployment]["spec"]["template"]["spec"]["containers"]
    sources = {**dm.by_kind(resources, "ConfigMap"), **dm.by_kind(resources, "Secret")}
    env: dict[str, str] = {}
    for item in container.get("envFrom", []):
        ref = item.get("configMapRef") or item["secretRef"]
        found = sources[ref["name"]]
        env.update(found.get("data") or found.get("stringData") or {})
    for item in container.get("env", []):
        env[item["name"]] = item.get("value", "live-pod-0" if "valueFrom" in item else "")
    return env


def test_live_pods_carry_the_sessions_and_their_ice_servers(rendered):
    """The live pods: the session cap, the ICE/TURN servers from a ConfigMap and
    the TURN secret from a Secret (the settings load), their pod name as
    live.node; the API pods carry no live session."""
    _, resources = rendered
    live = load_settings(environ=_container_env(resources, "faceweave-live")).live
    assert live.sessions >= 1 and live.node == "live-pod-0"
    assert any(server.turn and server.username is None for server in live.ice_servers)  # time-limited credentials
    assert live.turn_secret and live.turn_ttl_s >= live.max_seconds
    settings_data = dm.by_kind(resources, "ConfigMap")["faceweave-live-settings"]["data"]
    assert "FACEWEAVE_LIVE__ICE_SERVERS" in settings_data and "FACEWEAVE_LIVE__TURN_SECRET" not in settings_data
    assert "FACEWEAVE_LIVE__TURN_SECRET" in dm.by_kind(resources, "Secret")["faceweave-live-secrets"]["stringData"]
    (container,) = dm.by_kind(resources, "Deployment")["faceweave-live"]["spec"]["template"]["spec"]["containers"]
    node = next(item for item in container["env"] if item["name"] == "FACEWEAVE_LIVE__NODE")
    assert node["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert container["args"] == ["serve", "--workers", "0"]
    assert load_settings(environ=_container_env(resources, "faceweave-api")).live.sessions == 0


def test_live_routes_are_sticky_to_the_pod_that_holds_the_session(rendered):
    _, resources = rendered
    ingresses = dm.by_kind(resources, "Ingress")
    live, main = ingresses["faceweave-live"], ingresses["faceweave"]
    notes = live["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert notes["nginx.ingress.kubernetes.io/affinity-mode"] == "persistent"
    assert notes["nginx.ingress.kubernetes.io/session-cookie-name"]
    # a full pod's 503 (nothing taken yet) goes on to the next pod, and the cookie follows; a timeout does not
    retried = notes["nginx.ingress.kubernetes.io/proxy-next-upstream"].split()
    assert "http_503" in retried and "non_idempotent" in retried and "timeout" not in retried
    assert notes["nginx.ingress.kubernetes.io/session-cookie-change-on-failure"] == "true"
    assert "nginx.ingress.kubernetes.io/affinity" not in main["metadata"]["annotations"]
    assert live["spec"]["tls"] == main["spec"]["tls"]
    (rule,) = live["spec"]["rules"]
    assert rule["host"] == main["spec"]["rules"][0]["host"]
    routes = {(p["path"], p["pathType"]): p["backend"]["service"]["name"] for p in rule["http"]["paths"]}
    assert routes == {("/v1/live", "Prefix"): "faceweave-live", ("/live", "Exact"): "faceweave-live"}
    service = dm.by_kind(resources, "Service")["faceweave-live"]
    assert service["spec"]["sessionAffinity"] == "ClientIP"
    assert service["spec"]["selector"] == {"app.kubernetes.io/name": "faceweave-live"}
    template = dm.by_kind(resources, "Deployment")["faceweave-live"]["spec"]["template"]
    assert template["metadata"]["labels"]["app.kubernetes.io/name"] == "faceweave-live"
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "true"  # the faceweave-live scrape job
    assert not template["spec"].get("hostNetwork")  # media through TURN by default


def test_the_host_network_component_puts_the_live_pods_on_the_nodes(tmp_path):
    """deploy/k8s/components/live-host-network, added to the cpu overlay: the
    live pods on the nodes' network, one per node; the rest unchanged."""
    import os

    import kubernetes_validate

    if dm.find_kubectl() is None:
        pytest.skip("kubectl is not installed: the component cannot be rendered")
    k8s = Path(os.path.relpath(dm.DEPLOY / "k8s", tmp_path))  # kustomize takes relative folders only
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [str(k8s / "overlays" / "cpu")],
                "components": [str(k8s / "components" / "live-host-network")],
            }
        )
    )
    out = subprocess.run(
        [dm.find_kubectl(), "kustomize", str(tmp_path)], check=True, capture_output=True, text=True, timeout=60
    )
    resources = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    deployments = dm.by_kind(resources, "Deployment")
    spec = deployments["faceweave-live"]["spec"]
    pod = spec["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {"app.kubernetes.io/name": "faceweave-live"}
    assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    assert pod["containers"][0]["envFrom"]  # the patch keeps the rest of the pod
    assert not deployments["faceweave-api"]["spec"]["template"]["spec"].get("hostNetwork")
    kubernetes_validate.validate(deployments["faceweave-live"], K8S_VERSION, strict=True)


# ---------------------------------------------------------------- Compose
def _podman_compose() -> list[str]:
    found = shutil.which("podman-compose") or str(Path(sys.executable).with_name("podman-compose"))
    if not Path(found).exists():
        pytest.skip("podman-compose is not installed (pip package podman-compose, in the test extra)")
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (Debian package podman): podman-compose config needs it")
    return [found]


@pytest.mark.parametrize("files", [("compose.yaml",), ("compose.yaml", "compose.gpu.yaml")])
def test_podman_compose_accepts_the_stack(files):
    command = _podman_compose()
    for name in files:
        command += ["-f", str(dm.DEPLOY / name)]
    out = subprocess.run([*command, "config"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    stack = yaml.safe_load(out.stdout)
    services = stack["services"]
    assert set(services) == {
        "api",
        "worker",
        "turn",
        "redis",
        "postgres",
        "minio",
        "minio-init",
        "prometheus",
        "grafana",
    }
    assert all("healthcheck" in s for n, s in services.items() if n != "minio-init")  # minio-init: one shot
    assert services["minio-init"]["restart"] == "no" and "mc mb" in " ".join(services["minio-init"]["command"])
    assert {"api-data", "redis", "postgres", "minio", "prometheus", "grafana"} <= set(stack["volumes"])
    worker = services["worker"]
    assert worker["command"][:1] == ["worker"] and worker["read_only"] is True
    for name in ("api", "worker"):
        env, depends = services[name]["environment"], services[name]["depends_on"]
        unknown = [n for n in env if n.startswith("FACEWEAVE_") and not dm.setting_exists(n)]
        assert unknown == []
        # MinIO is the only storage the API and the workers share: no volume in common but the models
        assert env["FACEWEAVE_STORAGE"] == "s3://faceweave/jobs" and env["FACEWEAVE_LOCAL_STORAGE"] == "/data"
        assert depends["minio-init"]["condition"] == "service_completed_successfully"
        assert depends["minio"]["condition"] == "service_healthy"
    shared = {str(v).split(":")[0] for v in services["api"].get("volumes", [])}
    shared &= {str(v).split(":")[0] for v in worker.get("volumes", [])}
    assert shared <= {"models"}, shared
    # live sessions on the API node; their media through the TURN server, which publishes its ports
    api_env = services["api"]["environment"]
    live = load_settings(
        environ={k: v for k, v in api_env.items() if k.startswith("FACEWEAVE_LIVE__")} | {"FACEWEAVE_STORAGE": "/data"}
    ).live
    assert live.sessions >= 1 and live.turn_secret
    (browser,) = live.ice_servers
    assert browser.use == "browser" and all(u.startswith("turn:") and ":3478" in u for u in browser.urls)
    turn = services["turn"]
    assert {"3478:3478/udp", "3478:3478/tcp"} <= set(turn["ports"])
    low, high = (int(p.split("=")[1]) for p in turn["command"] if p.startswith(("--min-port=", "--max-port=")))
    assert f"{low}-{high}:{low}-{high}/udp" in turn["ports"]
    assert "--use-auth-secret" in turn["command"] and "--no-tcp-relay" in turn["command"]
    assert f"--static-auth-secret={live.turn_secret}" in turn["command"]  # the same secret on both sides
    if "compose.gpu.yaml" in files:
        assert worker["deploy"]["resources"]["reservations"]["devices"][0]["driver"] == "nvidia"
        assert worker["environment"]["FACEWEAVE_RUNTIME__EXECUTION_PROVIDER"] == "cuda"


def test_grafana_dashboard_queries_real_metrics():
    import json
    import re

    from faceweave.service.metrics import Metrics

    dashboard = json.loads((dm.DEPLOY / "grafana" / "dashboards" / "faceweave.json").read_text())
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    names = {m.name for m in Metrics().registry.collect()}
    used = set(re.findall(r"faceweave_[a-z_]+", exprs))
    assert used and all(u.removesuffix("_total").removesuffix("_bucket") in names for u in used), (used, names)


# ---------------------------------------------------------------- the Containerfile's accelerator stages
@pytest.fixture(scope="module")
def stages() -> dict[str, dict]:
    return dm.containerfile_stages()


@pytest.mark.parametrize(
    ("stage", "base", "onnxruntime", "device_env"),
    [
        ("cpu", "runtime", None, {}),
        ("cuda", "runtime", "onnxruntime-gpu[cuda,cudnn]==", {"FACEWEAVE_RUNTIME__EXECUTION_PROVIDER": "cuda"}),
        ("ascend", "ascendhub.huawei.com/", "onnxruntime-cann==", {"FACEWEAVE_RUNTIME__EXECUTION_PROVIDER": "cann"}),
        ("cambricon", "yellow.hub.cambricon.com/magicmind/", None, {"FACEWEAVE_RUNTIME__EXECUTION_PROVIDER": "cpu"}),
    ],
)
def test_accelerator_stages(stages, stage, base, onnxruntime, device_env):
    final = stages[stage]
    assert final["from"].startswith(base)
    build = stages[f"build-{stage}"]
    runs = " ".join(build["run"])
    if onnxruntime is None:
        assert "swap-onnxruntime" not in runs
    else:
        assert "swap-onnxruntime.sh" in runs and onnxruntime in runs
    env = dict(stages["runtime"]["env"]) if final["from"] == "runtime" else {}
    env.update(final["env"])
    assert {k: env.get(k) for k in device_env} == device_env
    copies = [v for k, v in final["instructions"] if k == "COPY" and "--from=" in v]
    # cpu and cuda: the dependencies' venv, then faceweave alone over it (a source change copies only that)
    app = ["--from=build-app /app/ /"] if final["from"] == "runtime" else []
    assert copies == [f"--from=build-{stage} /opt/faceweave /opt/faceweave", *app]


def test_runtime_stages_share_the_environment_and_run_as_non_root(stages):
    common = stages["runtime"]["env"]
    assert common["FACEWEAVE_STORAGE"] == "/data" and common["HOME"] == "/cache"
    assert all(
        not v.startswith("/") or v.startswith(("/data", "/cache", "/models", "/opt")) or k == "PATH"
        for k, v in common.items()
    )
    for name in ("runtime", "ascend", "cambricon"):
        stage = stages[name]
        assert {k: stage["env"].get(k) for k in common if k != "PATH"} == {
            k: v for k, v in common.items() if k != "PATH"
        }
        assert stage["user"] == "10001:10001"
        kinds = [k for k, _ in stage["instructions"]]
        assert {"HEALTHCHECK", "ENTRYPOINT", "CMD"} <= set(kinds)
    cuda = stages["cuda"]["env"]
    assert cuda["NVIDIA_VISIBLE_DEVICES"] == "all" and "tensorrt_libs" in cuda["LD_LIBRARY_PATH"]
    ascend = stages["ascend"]["env"]
    assert (
        ascend["ASCEND_TOOLKIT_HOME"].startswith("/usr/local/Ascend/")
        and "/usr/local/Ascend/driver" in ascend["LD_LIBRARY_PATH"]
    )
    assert "ascend-toolkit/latest/bin" in ascend["PATH"]  # atc


def test_build_stages_install_the_dependencies_before_copying_the_source(stages):
    """A change to faceweave's source keeps the dependency layers cached: every
    stage that installs them does so before any COPY of the source, and
    faceweave itself goes in with --no-deps (install-faceweave.sh)."""
    installers = 0
    for name, stage in stages.items():
        steps = [(k, v) for k, v in stage["instructions"] if k in ("COPY", "RUN")]
        deps = [i for i, (k, v) in enumerate(steps) if k == "RUN" and "install-deps.sh" in v]
        if not deps:
            continue
        installers += 1
        source = [i for i, (k, v) in enumerate(steps) if k == "COPY" and "faceweave/" in v.split()[0]]
        assert all(i > deps[0] for i in source), name
        copied = [v for k, v in steps[: deps[0]] if k == "COPY"]
        before = {v.split()[0] for v in copied}
        assert before <= {"deploy/wheels/", "deploy/image/", "pyproject.toml"}, (name, copied)
    assert installers == 3  # build-base (cpu, cuda, build-app), build-ascend, build-cambricon
    script = (dm.DEPLOY / "image" / "install-faceweave.sh").read_text()
    assert script.count("--no-deps") == 2


def test_build_stages_compile_the_kernels_on_their_own_base(stages):
    """cpu and cuda build on BUILD_BASE_IMAGE (a C compiler, Python's headers) and run on
    BASE_IMAGE; every stage that installs faceweave hands it REQUIRE_KERNELS, on by default
    where the build base is ours and off on the vendors' images (their NumPy kernels run)."""
    from tools import container_image as ci

    assert stages["build-base"]["from"] == "python:3.11-bookworm"
    assert stages["runtime"]["from"] == "python:3.11-slim-bookworm"
    installs = {name for name, stage in stages.items() if "install-faceweave.sh" in " ".join(stage["run"])}
    assert installs == {"build-app", "build-ascend", "build-cambricon"}
    for name in installs:
        assert all("REQUIRE_KERNELS=${REQUIRE_KERNELS}" in r for r in stages[name]["run"] if "install-faceweave" in r)
    defaults = {
        name: v for name in installs for k, v in stages[name]["instructions"] if k == "ARG" and "REQUIRE_KERNELS" in v
    }
    assert defaults == {
        "build-app": "REQUIRE_KERNELS=1",
        "build-ascend": "REQUIRE_KERNELS=0",
        "build-cambricon": "REQUIRE_KERNELS=0",
    }
    # make image: the build base is the runtime's packages and a compiler, and the build must compile
    assert set(ci.BASE.packages) < set(ci.BUILD_BASE.packages) and "gcc" in ci.BUILD_BASE.packages
    assert not {"gcc", "libc6-dev"} & set(ci.BASE.packages)
