"""Build faceweave's CPU container image here: ``make image`` (docs/DEPLOY.md).

No container registry can be reached from this machine and a build container
cannot reach PyPI (its TLS is intercepted by a certificate the container does
not trust), so:

* the bases are made from Debian's packages: ``mmdebstrap`` writes a bookworm
  root with Python 3.11 (``deploy/.cache/base.tar``, kept between runs) and
  ``podman import`` names it ``localhost/python-base:3.11``, the runtime's
  base; a second root, the same packages with a C compiler and Python's
  headers added (``deploy/.cache/build-base.tar``), becomes
  ``localhost/python-build:3.11``, the base of the build stages only, which
  compile faceweave's kernels (faceweave/kernels/_raster.c);
* the wheels are fetched on the host (``pip wheel`` into ``deploy/wheels``,
  rebuilt when ``pyproject.toml`` changes) and installed offline in the build
  (``PIP_NO_INDEX=1``).

Podman runs with runc and cgroupfs and no higher open-file and process limits
than this machine allows (crun fails on its cgroups, raising a limit is
refused).  ``python tools/container_image.py build`` prints the build's
seconds and the image's size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "deploy" / ".cache"
WHEELS = ROOT / "deploy" / "wheels"
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
IMAGE = "localhost/faceweave:cpu"
#: Debian packages of the base: Python 3.11 and the libraries OpenCV needs (python:3.11-slim gets
#: the libraries from deploy/image/setup-runtime.sh instead)
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "libgl1", "libglib2.0-0")
#: what the build stages add to build faceweave's C extension: Debian's Python is built with
#: ``x86_64-linux-gnu-gcc`` (the gcc package's name for it), and libc6-dev is only gcc's Recommends,
#: which mmdebstrap does not install
BUILD_PACKAGES = ("gcc", "libc6-dev", "libpython3.11-dev")


@dataclass(frozen=True)
class Base:
    """A base image made from Debian packages: its podman name, its cached tar and its packages."""

    name: str
    tar: str
    packages: tuple[str, ...]


#: the runtime stages' base (no compiler, no headers) and the build stages' (the same Python and more)
BASE = Base("localhost/python-base:3.11", "base.tar", BASE_PACKAGES)
BUILD_BASE = Base("localhost/python-build:3.11", "build-base.tar", BASE_PACKAGES + BUILD_PACKAGES)
BASE_IMAGE, BUILD_BASE_IMAGE = BASE.name, BUILD_BASE.name
#: what the wheelhouse holds besides faceweave's own requirements: setuptools (the build backend
#: and pkg_resources), wheel, and redis's async-timeout (Debian's Python is 3.11.2; redis asks
#: for it below 3.11.3, which the host's newer Python does not)
WHEELHOUSE_EXTRA = ("setuptools>=68,<81", "wheel", "async-timeout>=4.0.3")
#: the extras the image installs (deploy/image/install-deps.sh names the same)
IMAGE_EXTRAS = ("distributed", "s3", "webrtc")
PODMAN_GLOBAL = ("--runtime", "runc", "--cgroup-manager", "cgroupfs")
ULIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")


def podman(*args: str) -> list[str]:
    """A podman command line with this machine's runtime flags."""
    return ["podman", *PODMAN_GLOBAL, *args]


def missing_tools() -> str | None:
    """Why an image cannot be built here, or ``None``."""
    for tool, package in (("podman", "podman"), ("runc", "runc"), ("mmdebstrap", "mmdebstrap")):
        if shutil.which(tool) is None and not Path("/usr/bin", tool).exists():
            return f"{tool} is not installed (Debian package {package})"
    return None


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=True, **kwargs)


def image_exists(name: str) -> bool:
    return subprocess.run(podman("image", "exists", name), capture_output=True).returncode == 0


def ensure_base(base: Base = BASE) -> None:
    """``base`` in podman's store, imported from its cached tar or made by mmdebstrap first."""
    if image_exists(base.name):
        return
    tar = CACHE / base.tar
    if not tar.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = tar.with_suffix(".tar.part")
        _run(
            [
                "mmdebstrap",
                "--quiet",
                "--variant=minbase",
                "--format=tar",
                f"--include={','.join(base.packages)}",
                "bookworm",
                str(partial),
            ]
        )
        partial.replace(tar)
    _run(podman("import", "--quiet", str(tar), base.name), stdout=subprocess.DEVNULL)


def ensure_bases() -> None:
    """Both bases: the runtime's and the build stages'."""
    for base in (BASE, BUILD_BASE):
        ensure_base(base)


def _pyproject_digest() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + (ROOT / "requirements.lock").read_bytes())
    digest.update(json.dumps([WHEELHOUSE_EXTRA, IMAGE_EXTRAS]).encode())
    return digest.hexdigest()


def ensure_wheelhouse(python: str = sys.executable) -> None:
    """``deploy/wheels``: every wheel the image installs (at requirements.lock's versions), fetched again when
    pyproject.toml or the lock changes."""
    stamp = WHEELS / ".stamp"
    digest = _pyproject_digest()
    if stamp.exists() and stamp.read_text() == digest:
        return
    for old in WHEELS.glob("*.whl"):
        old.unlink()
    _run(
        [
            *(python, "-m", "pip", "wheel", "-q", "-w", str(WHEELS), "-c", str(ROOT / "requirements.lock")),
            *(f"{ROOT}[{','.join(IMAGE_EXTRAS)}]", *WHEELHOUSE_EXTRA),
        ]
    )
    for own in WHEELS.glob("faceweave-*.whl"):
        own.unlink()  # the image builds faceweave from the source it is given
    stamp.write_text(digest)


def build(
    tag: str = IMAGE, *, base: str = BASE_IMAGE, build_base: str = BUILD_BASE_IMAGE, target: str = "cpu"
) -> float:
    """Build ``tag`` from the Containerfile offline; returns the seconds the build took.

    The build stages run on ``build_base`` and must compile faceweave's kernels
    (``REQUIRE_KERNELS=1``: the build fails rather than fall back to NumPy)."""
    began = time.monotonic()
    _run(
        podman(
            "build",
            "--format",
            "docker",
            *ULIMITS,
            "--build-arg",
            f"BASE_IMAGE={base}",
            "--build-arg",
            f"BUILD_BASE_IMAGE={build_base}",
            "--build-arg",
            "PIP_NO_INDEX=1",
            "--build-arg",
            "REQUIRE_KERNELS=1",
            "--target",
            target,
            "-f",
            str(CONTAINERFILE),
            "-t",
            tag,
            str(ROOT),
        )
    )
    return time.monotonic() - began


def image_size(tag: str = IMAGE) -> int:
    out = subprocess.run(podman("image", "inspect", "--format", "{{.Size}}", tag), capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("base", "wheels", "build"), help="build runs the other two first")
    parser.add_argument("--tag", default=IMAGE)
    args = parser.parse_args(argv)
    why = missing_tools()
    if why:
        print(f"cannot build the image here: {why}", file=sys.stderr)
        return 2
    timings: dict[str, float] = {}
    for step, work in (("base", ensure_bases), ("wheels", ensure_wheelhouse)):
        began = time.monotonic()
        work()
        timings[step] = time.monotonic() - began
        if args.step == step:
            break
    if args.step == "build":
        timings["build"] = build(args.tag)
        timings["size_mb"] = image_size(args.tag) / 1e6
    print(json.dumps({k: round(v, 1) for k, v in timings.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
