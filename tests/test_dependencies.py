"""pyproject.toml's dependencies are ranges; requirements.lock holds the
exact versions development, CI and the image install, and every one of
them lies in its range (a lock that drifted from the ranges fails here)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
#: the extras make setup and the image install (the lock covers them); `live` (a virtual camera) is not locked
LOCKED_EXTRAS = ("test", "lint", "c2pa", "distributed", "s3", "webrtc")


def _requirements() -> dict[str, list[Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    return {name: [Requirement(r) for r in reqs] for name, reqs in groups.items()}


def _locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not NAME==VERSION"
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_the_package_metadata_has_ranges_not_pins():
    pinned = [
        f"{group or 'dependencies'}: {r}"
        for group, reqs in _requirements().items()
        for r in reqs
        if any(s.operator in ("==", "===") for s in r.specifier)
    ]
    assert pinned == [], "pyproject.toml pins exact versions (use ranges; exact versions go to requirements.lock)"


@pytest.mark.parametrize("group", ["", *LOCKED_EXTRAS])
def test_every_locked_version_lies_in_its_range(group):
    locked = _locked()
    for r in _requirements()[group]:
        if canonicalize_name(r.name) == "faceweave":
            continue  # an extra of its own extras
        name = canonicalize_name(r.name)
        assert name in locked, f"{r.name} ({group or 'dependencies'}) is not in requirements.lock: run make lock"
        assert r.specifier.contains(locked[name], prereleases=True), (
            f"requirements.lock has {r.name}=={locked[name]}, outside pyproject.toml's {r}: run make lock"
        )


def test_the_lock_pins_no_profiling_tools_or_faceweave_itself():
    locked = _locked()
    assert "faceweave" not in locked and "py-spy" not in locked and "line-profiler" not in locked
