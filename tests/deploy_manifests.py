"""The deployment files as data, for the deploy tests: rendered Kubernetes
overlays, their probes and their FACEWEAVE_* variables, the Containerfile's
stages."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
OVERLAYS = ("cpu", "nvidia", "ascend", "cambricon")
#: the device each overlay's worker asks for (None: the CPU)
DEVICES = {"cpu": None, "nvidia": "nvidia.com/gpu", "ascend": "huawei.com/Ascend910", "cambricon": "cambricon.com/mlu"}


def find_kubectl() -> str | None:
    return shutil.which("kubectl")


def render(overlay: str) -> list[dict]:
    """``kubectl kustomize deploy/k8s/overlays/<overlay>`` as a list of resources."""
    kubectl = find_kubectl()
    if kubectl is None:
        raise RuntimeError("kubectl is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / "k8s" / "overlays" / overlay)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def by_kind(resources: list[dict], kind: str) -> dict[str, dict]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


def containers(resources: list[dict]) -> list[tuple[str, dict]]:
    """``(deployment name, container)`` for every container of every Deployment."""
    return [
        (name, container)
        for name, deployment in by_kind(resources, "Deployment").items()
        for container in deployment["spec"]["template"]["spec"]["containers"]
    ]


@dataclass(frozen=True)
class Probe:
    deployment: str
    kind: str  # startupProbe, readinessProbe, livenessProbe
    path: str
    port: int


def probes(resources: list[dict]) -> list[Probe]:
    """Every HTTP probe, its named port resolved to the container's number."""
    found = []
    for name, container in containers(resources):
        ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = container.get(kind)
            if probe is None:
                continue
            port = probe["httpGet"]["port"]
            found.append(Probe(name, kind, probe["httpGet"]["path"], ports[port] if isinstance(port, str) else port))
    return found


def environment(resources: list[dict]) -> dict[str, str]:
    """Every variable the manifests give a container: ConfigMap and Secret data, then each container's ``env``."""
    env: dict[str, str] = {}
    for config in by_kind(resources, "ConfigMap").values():
        env.update(config.get("data", {}))
    for secret in by_kind(resources, "Secret").values():
        env.update(secret.get("stringData", {}))
    for _, container in containers(resources):
        # a value the pod fills in (valueFrom: its name, say) stands as a placeholder
        env.update(
            {
                item["name"]: item.get("value", "pod-value" if "valueFrom" in item else "")
                for item in container.get("env", [])
            }
        )
    return env


def setting_exists(name: str) -> bool:
    """Whether ``FACEWEAVE_A__B`` names a field of :class:`ServiceSettings` (``a.b``), or is ``FACEWEAVE_CONFIG``."""
    from pydantic import BaseModel

    from faceweave.service.settings import ENV_PREFIX, ServiceSettings

    if name == ENV_PREFIX + "CONFIG":
        return True
    model: type[BaseModel] = ServiceSettings
    parts = name.removeprefix(ENV_PREFIX).lower().split("__")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        if i < len(parts) - 1:
            section = field.annotation
            if not (isinstance(section, type) and issubclass(section, BaseModel)):
                return False
            model = section
    return True


def containerfile_stages(path: Path = DEPLOY / "Containerfile") -> dict[str, dict]:
    """Each named stage of the Containerfile: its ``FROM`` (build arguments substituted), ``ENV`` and ``RUN`` texts."""
    from dockerfile_parse import DockerfileParser

    with open(path, "rb") as handle:  # path= would take a folder holding "Dockerfile"
        structure = DockerfileParser(fileobj=handle).structure
    args: dict[str, str] = {}
    stages: dict[str, dict] = {}
    current: dict | None = None
    for instruction in structure:
        kind, value = instruction["instruction"], instruction["value"]
        if kind == "ARG" and current is None and "=" in value:
            key, _, default = value.partition("=")
            args[key.strip()] = default.strip()
        elif kind == "FROM":
            image, _, name = value.partition(" AS ")
            for key, default in args.items():
                image = image.replace("${" + key + "}", default)
            current = {"from": image.strip(), "env": {}, "run": [], "user": None, "instructions": []}
            stages[name.strip()] = current
        elif current is not None:
            current["instructions"].append((kind, value))
            if kind == "ENV":
                current["env"].update(_env_pairs(value))
            elif kind == "RUN":
                current["run"].append(value)
            elif kind == "USER":
                current["user"] = value
    return stages


def _env_pairs(value: str) -> dict[str, str]:
    import shlex

    pairs = {}
    for token in shlex.split(value.replace("\\\n", " ")):
        key, _, val = token.partition("=")
        pairs[key] = val
    return pairs
