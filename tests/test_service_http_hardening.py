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
    set_job_fields,
    settings,
    wait_for,
)

from faceweave.errors import RateLimitedError
from faceweave.service.lockout import FailureLimiter

ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
WRONG = {"Authorization": "Bearer not-a-key-0123456789"}


def _auth(**changes) -> dict:
    return {
        "api_keys": [{"user": "alice", "key": ALICE_KEY}, {"user": "bob", "key": BOB_KEY}],
        "jwt_secret": HS_SECRET,
        "jwt_issuer": ISSUER,
        "jwt_audience": AUDIENCE,
        **changes,
    }


def _bearer(sub: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {hs_token(claims(sub=sub))}"}


def _image_job(client, headers) -> str:
    files = [
        ("source", ("s.png", png_bytes(96, 96, seed=1), "image/png")),
        ("target", ("t.png", png_bytes(96, 96, seed=2), "image/png")),
    ]
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


@pytest.mark.parametrize(
    ("failures", "checks"),
    [
        # (failure times of one address, [(now, blocked?)])
        ([0, 1, 2], [(3, True), (59.9, True), (60.1, False)]),  # the oldest ages out at 60
        ([0, 1], [(2, False)]),
        ([0, 10, 20, 30], [(61, True), (70.5, False)]),  # only the last three count
    ],
)
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


# ------------------------------------------------------------------ a finished job, without models
@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """An app (API keys) with one succeeded job of alice's whose result and preview are a PNG."""
    config = settings(tmp_path_factory.mktemp("hardening"), auth=_auth())
    with running_app(config) as client:
        service = client.app.state.service
        job = service.store.create(owner="key:alice", kind="image", options={}, inputs={})
        result = service.storage.job_dir(job.id) / "result-1.png"
        result.parent.mkdir(parents=True, exist_ok=True)
        result.write_bytes(png_bytes(200, 150, seed=3))
        relative = service.storage.relative(result)
        set_job_fields(
            service.store,
            job.id,
            state="succeeded",
            output_path=relative,
            preview_path=relative,
            finished_at=1.0,
            expires_at=4e9,
        )
        client.job_id, client.result = job.id, result.read_bytes()
        yield client


# ------------------------------------------------------------------ 11. security headers
def _is_nosniff(response) -> bool:
    return response.headers.get("x-content-type-options") == "nosniff"


@pytest.mark.parametrize(
    ("method", "path", "headers", "status"),
    [
        ("GET", "/healthz", {}, 200),
        ("GET", "/v1/jobs", ALICE, 200),
        ("GET", "/openapi.json", {}, 200),
        ("GET", "/v1/jobs", {}, 401),
        ("GET", "/v1/jobs/" + "0" * 32, ALICE, 404),
        ("GET", "/v1/nothing-here", ALICE, 404),
        ("POST", "/v1/jobs", {**ALICE, "Content-Type": "application/json"}, 415),
        ("GET", "/v1/jobs?limit=0", ALICE, 422),
    ],
)
def test_json_and_error_answers_are_nosniff(served, method, path, headers, status):
    response = served.request(method, path, headers=headers)
    assert response.status_code == status
    assert _is_nosniff(response)
    assert "sandbox" in response.headers["content-security-policy"]


def test_an_internal_error_is_nosniff_too(served, monkeypatch):
    def broken(**_):
        raise RuntimeError("boom")

    monkeypatch.setattr(served.app.state.service.store, "list", broken)
    response = served.get("/v1/jobs", headers=ALICE)
    assert response.status_code == 500 and _is_nosniff(response)


@pytest.mark.parametrize(
    ("suffix", "name"),
    [
        ("/result", "faceweave-{id}.png"),
        ("/preview", "faceweave-{id}-preview.png"),
    ],
)
def test_results_and_previews_are_nosniff_sandboxed_attachments(served, suffix, name):
    response = served.get(f"/v1/jobs/{served.job_id}{suffix}", headers=ALICE)
    assert response.status_code == 200 and response.content == served.result
    assert response.headers["content-type"] == "image/png" and _is_nosniff(response)
    assert response.headers["content-security-policy"].startswith("default-src 'none'")
    assert "sandbox" in response.headers["content-security-policy"]
    expected = name.format(id=served.job_id[:8])
    assert response.headers["content-disposition"] == f'attachment; filename="{expected}"'


def test_the_web_page_keeps_its_own_policy(served):
    from faceweave.service.web import CONTENT_SECURITY_POLICY

    page = served.get("/")
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY and _is_nosniff(page)


# ------------------------------------------------------------------ 14. HEAD, If-Range, readiness
@pytest.mark.parametrize("suffix", ["/result", "/preview"])
def test_head_answers_the_headers_without_a_body(served, suffix):
    response = served.head(f"/v1/jobs/{served.job_id}{suffix}", headers=ALICE)
    assert response.status_code == 200 and response.content == b""
    assert response.headers["content-length"] == str(len(served.result))
    assert response.headers["accept-ranges"] == "bytes" and response.headers["etag"]
    assert served.head(f"/v1/jobs/{'0' * 32}{suffix}", headers=ALICE).status_code == 404


def test_if_range_gives_the_part_only_for_the_current_version(served):
    url = f"/v1/jobs/{served.job_id}/result"
    whole = served.get(url, headers=ALICE)
    etag, modified = whole.headers["etag"], whole.headers["last-modified"]
    for validator in (etag, modified):
        part = served.get(url, headers={**ALICE, "Range": "bytes=10-19", "If-Range": validator})
        assert part.status_code == 206 and part.content == served.result[10:20]
    for stale in ('"0123456789abcdef"', "W/" + etag, "Thu, 01 Jan 1970 00:00:00 GMT"):
        full = served.get(url, headers={**ALICE, "Range": "bytes=10-19", "If-Range": stale})
        assert full.status_code == 200 and full.content == served.result
    # a stale If-Range wins over a range outside the file: the whole file, not 416
    beyond = {"Range": f"bytes={len(served.result)}-"}
    assert served.get(url, headers={**ALICE, **beyond, "If-Range": '"stale"'}).status_code == 200
    refused = served.get(url, headers={**ALICE, **beyond, "If-Range": etag})
    assert refused.status_code == 416 and refused.json()["error"]["code"] == "range_not_satisfiable"
    assert refused.headers["content-range"] == f"bytes */{len(served.result)}" and _is_nosniff(refused)


def test_several_ranges_are_one_multipart_answer(served):
    part = served.get(f"/v1/jobs/{served.job_id}/result", headers={**ALICE, "Range": "bytes=0-3,-4"})
    assert part.status_code == 206
    assert part.headers["content-type"].startswith("multipart/byteranges; boundary=")
    assert served.result[:4] in part.content and served.result[-4:] in part.content
    assert f"Content-Range: bytes 0-3/{len(served.result)}".encode() in part.content


@pytest.mark.parametrize("header", ["bytes=9-3", "items=0-9", "bytes=\u0661-", "bytes=" + "9" * 5000 + "-", "nonsense"])
def test_a_range_that_cannot_be_used_gives_the_whole_file(served, header):
    from faceweave.service.ranges import byte_ranges

    assert byte_ranges(header, len(served.result)) is None
    if header.isascii():  # (an HTTP header is Latin-1; httpx sends ASCII)
        whole = served.get(f"/v1/jobs/{served.job_id}/result", headers={**ALICE, "Range": header})
        assert whole.status_code == 200 and whole.content == served.result


def test_readyz_while_models_load_is_a_quiet_503(tmp_path: Path, monkeypatch, caplog):
    from fastapi.testclient import TestClient

    from faceweave.service.app import create_app

    loading = threading.Event()

    class SlowModels:
        def prepare(self) -> None:
            loading.wait(60)

        def close(self) -> None:
            pass

    monkeypatch.setattr("faceweave.service.node.JobModels", SlowModels)
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(settings(tmp_path, sync_slots=1)), raise_server_exceptions=False) as client:
        try:
            answer = client.get("/readyz")
        finally:
            loading.set()
        wait_for(lambda: client.get("/readyz").status_code == 200, what="the app to be ready")
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "not_ready"
    assert "loading" in answer.json()["error"]["message"] and _is_nosniff(answer)
    assert [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []


# ------------------------------------------------------------------ 10. offline API docs
def _referenced(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]+)"', html)


@pytest.mark.parametrize(("path", "needle"), [("/docs", 'id="swagger-ui"'), ("/redoc", "<redoc spec-url=")])
def test_docs_pages_load_only_their_own_files(served, path, needle):
    page = served.get(path)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert needle in page.text and _is_nosniff(page)
    assert not re.search(r"(?:https?:)?//", page.text), "the page names another host"
    policy = page.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["script-src"] == "'self'" and directives["default-src"] == "'none'"
    assert "http" not in policy and "cdn" not in policy and "'unsafe-eval'" not in policy
    for url in _referenced(page.text):
        asset = served.get(url)
        assert asset.status_code == 200, url
        kind = {".js": "text/javascript", ".css": "text/css", ".png": "image/png", ".json": "application/json"}
        assert asset.headers["content-type"].startswith(kind[Path(url).suffix]), url
        assert _is_nosniff(asset)
    assert served.get("/docs/assets/../app.py").status_code == 404
    assert served.get("/docs/assets/core.py").status_code == 404


def test_fastapis_cdn_pages_are_off(served):
    assert served.get("/docs/oauth2-redirect").status_code == 404
    paths = served.get("/openapi.json").json()["paths"]
    assert not any(p.startswith(("/docs", "/redoc")) for p in paths)


@pytest.mark.browser
@pytest.mark.parametrize(("path", "rendered"), [("/docs", ".opblock-summary-path"), ("/redoc", "h1")])
def test_docs_render_offline_in_chromium(tmp_path: Path, path, rendered):
    from playwright.sync_api import sync_playwright
    from tests.test_service_web import _chromium, _server

    executable = _chromium()
    with _server(settings(tmp_path)) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True)
        try:
            page = browser.new_page()
            errors: list[str] = []
            hosts: set[str] = set()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
            page.on("request", lambda r: hosts.add(r.url.split("/")[2]) if r.url.startswith("http") else None)
            page.goto(base + path)
            page.wait_for_selector(rendered, timeout=30_000)
            text = page.inner_text("body")
        finally:
            browser.close()
    assert "/v1/jobs" in text and "faceweave" in text
    own = base.split("/")[2]
    assert hosts <= {own, "cdn.redoc.ly"}  # ReDoc's footer logo: asked for, and refused by the CSP
    assert [e for e in errors if "cdn.redoc.ly" not in e] == []
