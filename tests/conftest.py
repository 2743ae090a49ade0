"""Shared fixtures: the real test photos beside the repository, and a stock image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

FACES_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "faces"


@pytest.fixture(scope="session")
def faces_dir() -> Path:
    """``../shared/data/faces`` (real photos and videos); skips the test when missing."""
    if not FACES_DIR.is_dir():
        pytest.skip(
            f"shared test data not found at {FACES_DIR}: these tests need ../shared/data/faces beside the repository"
        )
    return FACES_DIR


@pytest.fixture(scope="session")
def astronaut() -> np.ndarray:
    """``(512, 512, 3)`` uint8 RGB public-domain photo (skimage), read-only: copy before changing it."""
    from skimage.data import astronaut as load

    pixels = load()
    pixels.setflags(write=False)
    return pixels


@pytest.fixture(autouse=True, scope="session")
def _private_state_and_models(tmp_path_factory):
    """Audit logs and model caches of the tests go to a temporary folder, not
    to the user's home (the CLI subprocesses inherit the environment)."""
    import os

    root = tmp_path_factory.mktemp("xdg")
    saved = {k: os.environ.get(k) for k in ("XDG_STATE_HOME", "XDG_DATA_HOME", "FACEWEAVE_MODELS")}
    os.environ["XDG_STATE_HOME"] = str(root / "state")
    os.environ["XDG_DATA_HOME"] = str(root / "data")
    os.environ["FACEWEAVE_MODELS"] = str(root / "models")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture()
def store(tmp_path: Path):
    """A job store in a fresh SQLite file (the service's tests; a module may define its own)."""
    from faceweave.service.store import JobStore

    s = JobStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    yield s
    s.close()
