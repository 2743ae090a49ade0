"""Every 503 and 429 of the HTTP API says when to come back (``Retry-After``):
models loading, busy or absent swap slots (``/v1/swap`` and the classic
``POST /swap``), the rate limit.  Fake models: nothing is loaded."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.service_fixtures import png_bytes, running_app, settings

from faceweave.service.app import create_app


class _FakeModels:
    """Stands in for :class:`~faceweave.service.models.JobModels` (a slot that is never used)."""

    def prepare(self) -> None:
        pass

    def close(self) -> None:
        pass


def _photos() -> list:
    return [
        ("source", ("s.png", png_bytes(96, 96, seed=1), "image/png")),
        ("target", ("t.png", png_bytes(), "image/png")),
    ]


def test_readyz_while_models_load_says_when_to_retry(tmp_path: Path, monkeypatch):
    loading = threading.Event()

    class SlowModels(_FakeModels):
        def prepare(self) -> None:
            loading.wait(60)

    monkeypatch.setattr("faceweave.service.node.JobModels", SlowModels)
    with TestClient(create_app(settings(tmp_path, sync_slots=1)), raise_server_exceptions=False) as client:
        try:
            answer = client.get("/readyz")
        finally:
            loading.set()
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"


@pytest.mark.parametrize("path", ["/v1/swap", "/swap"])
def test_busy_swap_slots_say_when_to_retry(tmp_path: Path, monkeypatch, path):
    monkeypatch.setattr("faceweave.service.node.JobModels", _FakeModels)
    config = settings(tmp_path, sync_slots=1, sync_wait_s=0.05, watermark=False)
    with running_app(config) as client, client.app.state.service.slots.borrow(1.0):  # the one slot is taken
        answer = client.post(path, files=_photos())
    assert answer.status_code == 503 and answer.headers["retry-after"] == "2", answer.text
    assert "busy" in answer.text


@pytest.mark.parametrize("path", ["/v1/swap", "/swap"])
def test_a_node_without_swap_slots_says_when_to_retry(tmp_path: Path, path):
    with running_app(settings(tmp_path, watermark=False)) as client:
        answer = client.post(path, files=_photos())
    assert answer.status_code == 503 and answer.headers["retry-after"] == "60", answer.text


def test_the_rate_limit_says_when_to_retry(tmp_path: Path):
    config = settings(tmp_path, limits={"rate_per_second": 0.5, "rate_burst": 1})
    with running_app(config) as client:
        answers = [client.get("/v1/jobs") for _ in range(3)]
    limited = [a for a in answers if a.status_code == 429]
    assert limited and all(1 <= int(a.headers["retry-after"]) <= 2 for a in limited)
