"""HTTP hardening of ``faceweave serve``: the failed-authentication limit,
owner namespaces per kind of credential, security headers on every answer,
HEAD and If-Range on results, quiet readiness, and the API docs served from
the app itself under a strict CSP.  No models are loaded."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

import pytest

from faceweave.errors import RateLimitedError
from faceweave.service.lockout import FailureLimiter
from tests.service_fixtures import (
    ALICE_KEY,
    AUDIENCE,
    BOB_KEY,
    HS_SECRET,
    ISSUER,
    claims,
    hs_token,
    png_bytes,
    running_app,
    settings,
    wait_for,
)

ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
WRONG = {"Authorization": "Bearer not-a-key-0123456789"}


def _auth(**changes) -> dict:
    return {"api_keys": [{"user": "alice", "key": ALICE_KEY}, {"user": "bob", "key": BOB_KEY}],
            "jwt_secret": HS_SECRET, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE, **changes}


def _bearer(sub: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {hs_token(claims(sub=sub))}"}


def _image_job(client, headers) -> str:
    files = [("source", ("s.png", png_bytes(96, 96, seed=1), "image/png")),
             ("target", ("t.png", png_bytes(96, 96, seed=2), "image/png"))]
    created = client.post("/v1/jobs", files=files, headers=headers)
    assert created.status_code == 202, created.text
    return created.json()["id"]


def _from(client, address: str):
    """A second client on the same running app, calling from ``address``."""
    from fastapi.testclient import TestClient

    return TestClient(client.app, raise_server_exceptions=False, client=(address, 40000))


# ------------------------------------------------------------------ 8. failed authentication
@pytest.fixture()
def limited(tmp_path: Path):
    config = settings(tmp_path, auth=_auth(), limits={"auth_failures": 10, "auth_failure_window_s": 60.0})
    with running_app(config) as client:
        yield client


def test_the_eleventh_wrong_key_is_429_with_retry_after(limited):
    codes = [limited.get("/v1/jobs", headers=WRONG).status_code for _ in range(10)]
    assert codes == [401] * 10
    blocked = limited.get("/v1/jobs", headers=WRONG)
    assert blocked.status_code == 429 and blocked.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(blocked.headers["retry-after"]) <= 60
    # per address: a correct key from the blocked address is refused too, for as long
    assert limited.get("/v1/jobs", headers=ALICE).status_code == 429
    # another address is not blocked, with a correct key or another wrong one
    elsewhere = _from(limited, "192.0.2.7")
    assert elsewhere.get("/v1/jobs", headers=ALICE).status_code == 200
    assert elsewhere.get("/v1/jobs", headers={"X-API-Key": "another-wrong-key-000"}).status_code == 401


def test_the_same_wrong_key_from_many_addresses_is_blocked(limited):
    codes = [_from(limited, f"198.51.100.{i}").get("/v1/jobs", headers=WRONG).status_code for i in range(11)]
    assert codes == [401] * 10 + [429]  # per credential
    assert _from(limited, "198.51.100.200").get("/v1/jobs", headers=ALICE).status_code == 200


def test_no_credentials_and_health_are_not_counted(limited):
    assert [limited.get("/v1/jobs").status_code for _ in range(12)] == [401] * 12
    assert limited.get("/v1/jobs", headers=ALICE).status_code == 200


@pytest.mark.parametrize(("failures", "checks"), [
    # (failure times of one address, [(now, blocked?)])
    ([0, 1, 2], [(3, True), (59.9, True), (60.1, False)]),  # the oldest ages out at 60
    ([0, 1], [(2, False)]),
    ([0, 10, 20, 30], [(61, True), (70.5, False)]),  # only the last three count
])
def test_the_limiter_counts_failures_in_a_window(failures, checks):
    limiter = FailureLimiter(max_failures=3, window_s=60.0)
    for t in failures:
        limiter.failed(address="203.0.113.1", credential="k", now=t)
    limiter.check(address="203.0.113.2", credential="other", now=3)  # others are free
    for now, blocked in checks:
        if blocked:
            with pytest.raises(RateLimitedError) as caught:
                limiter.check(address="203.0.113.1", credential=None, now=now)
            assert 0 < caught.value.retry_after <= 60
            with pytest.raises(RateLimitedError):
                limiter.check(address=None, credential="k", now=now)
        else:
            limiter.check(address="203.0.113.1", credential="k", now=now)


def test_the_limiter_keeps_bounded_memory_and_no_credential_in_clear():
    limiter = FailureLimiter(max_failures=2, window_s=60.0, max_tracked=100)
    for i in range(1000):
        limiter.failed(address=f"10.0.{i // 256}.{i % 256}", credential=f"secret-key-{i}", now=float(i) / 1000)
    assert limiter.tracked == (100, 100)
    assert not any("secret-key" in repr(k) for k in limiter._credentials)
    limiter.failed(address="10.9.9.9", credential=None, now=1.0)
    limiter.failed(address="10.9.9.9", credential=None, now=1.0)
    with pytest.raises(RateLimitedError):
        limiter.check(address="10.9.9.9", credential=None, now=2.0)
    assert FailureLimiter(max_failures=0, window_s=1.0).tracked == (0, 0)


# ------------------------------------------------------------------ 9. owner namespaces
def test_a_token_subject_is_not_the_key_user_of_the_same_name(tmp_path: Path):
    with running_app(settings(tmp_path, auth=_auth())) as client:
        by_key = _image_job(client, ALICE)
        by_token = _image_job(client, _bearer("alice"))
        assert client.get(f"/v1/jobs/{by_key}", headers=_bearer("alice")).status_code == 404
        assert client.get(f"/v1/jobs/{by_token}", headers=ALICE).status_code == 404
        assert client.delete(f"/v1/jobs/{by_key}", headers=_bearer("alice")).status_code == 404
        assert [j["id"] for j in client.get("/v1/jobs", headers=ALICE).json()["jobs"]] == [by_key]
        assert [j["id"] for j in client.get("/v1/jobs", headers=_bearer("alice")).json()["jobs"]] == [by_token]
        store = client.app.state.service.store
        assert (store.get(by_key).owner, store.get(by_token).owner) == ("key:alice", "jwt:alice")


def test_a_mapped_subject_shares_the_key_users_jobs(tmp_path: Path):
    config = settings(tmp_path, auth=_auth(jwt_subject_owners={"alice@idp": "alice"}))
    with running_app(config) as client:
        by_key = _image_job(client, ALICE)
        assert client.get(f"/v1/jobs/{by_key}", headers=_bearer("alice@idp")).status_code == 200
        by_token = _image_job(client, _bearer("alice@idp"))
        assert client.get(f"/v1/jobs/{by_token}", headers=ALICE).status_code == 200
        assert client.get(f"/v1/jobs/{by_key}", headers=_bearer("alice")).status_code == 404  # unmapped


def test_a_mapping_to_an_unknown_key_user_is_refused(tmp_path: Path):
    from faceweave.errors import InvalidOptionError
    from faceweave.service.settings import load_settings

    with pytest.raises(InvalidOptionError, match="jwt_subject_owners"):
        load_settings(environ={}, overrides={"storage": str(tmp_path), "auth.jwt_subject_owners": {"x": "nobody"}})


def test_jobs_of_an_older_release_stay_the_key_users(tmp_path: Path):
    from faceweave.service.store import JobStore

    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    old = JobStore(url)
    bare = old.create(owner="alice", kind="image", options={}, inputs={})
    local = old.create(owner="local", kind="image", options={}, inputs={})
    old.close()
    store = JobStore(url)  # opening migrates bare owners once; again changes nothing
    store.close()
    store = JobStore(url)
    try:
        assert store.get(bare.id, owner="key:alice") is not None and store.get(local.id, owner="local") is not None
    finally:
        store.close()
