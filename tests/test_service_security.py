"""Service security: authentication, ownership, upload limits, content checks,
file names, rate limit, safe defaults.  These apps load no models (no workers,
no swap slots), so jobs stay queued and every check happens at the boundary."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.service_fixtures import (
    ALICE_KEY,
    AUDIENCE,
    BOB_KEY,
    HS_SECRET,
    ISSUER,
    bomb_png,
    claims,
    hs_token,
    multipart,
    png_bytes,
    raw_hs256_token,
    rsa_keys,
    running_app,
    settings,
    stream_post,
    unsigned_token,
)

from faceweave.errors import InvalidOptionError

UPLOAD_LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def keys():
    return rsa_keys(), rsa_keys()


@pytest.fixture(scope="module")
def client(tmp_path_factory, keys):
    (_, public), _ = keys
    tmp = tmp_path_factory.mktemp("security")
    config = settings(
        tmp,
        auth={
            "api_keys": [{"user": "alice", "key": ALICE_KEY}, {"user": "bob", "key": BOB_KEY}],
            "jwt_secret": HS_SECRET,
            "jwt_public_key": public,
            "jwt_issuer": ISSUER,
            "jwt_audience": AUDIENCE,
            "jwt_leeway_s": 0,
        },
        limits={"max_upload_bytes": UPLOAD_LIMIT, "max_image_pixels": 4_000_000},
    )
    with running_app(config) as c:
        c.storage = Path(config.storage).resolve()
        yield c


ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
BOB = {"X-API-Key": BOB_KEY}


def _image_job(client, headers, target: bytes | None = None, filename: str = "t.png", **fields):
    files = [
        ("source", ("s.png", png_bytes(seed=1), "image/png")),
        ("target", (filename, target if target is not None else png_bytes(seed=2), "image/png")),
    ]
    return client.post("/v1/jobs", files=files, data=fields, headers=headers)


def _error(response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert "Traceback" not in response.text and 'File "' not in response.text
    return body["error"]


def _now() -> int:
    return int(time.time())


def test_no_credentials_is_401_with_a_challenge(client):
    response = client.get("/v1/jobs")
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert _error(response)["code"] == "unauthorized"
    assert client.get("/healthz").status_code == 200  # health stays open


@pytest.mark.parametrize("headers", [ALICE, {"X-API-Key": ALICE_KEY}, BOB])
def test_api_keys_in_either_header_are_accepted(client, headers):
    assert client.get("/v1/jobs", headers=headers).status_code == 200


def _bad_tokens(keys) -> dict[str, str]:
    _, (other_private, _) = keys
    return {
        "unknown api key": "not-a-key-0123456789",
        "expired": hs_token(claims(exp=_now() - 60, iat=_now() - 120)),
        "forged signature": hs_token(claims(), secret="another-secret-that-is-long-enough-000"),
        "alg none": unsigned_token(claims()),
        "wrong audience": hs_token(claims(aud="someone-else")),
        "wrong issuer": hs_token(claims(iss="https://evil.test")),
        "no expiry": hs_token(claims(exp=None)),
        "rs256 from another key": _rs_token(other_private, claims()),
        "hs256 signed with the public key": raw_hs256_token(claims(), keys[0][1]),
        "hs512 not configured": hs_token(claims(), algorithm="HS512"),
    }


def _rs_token(private: str, payload: dict) -> str:
    import jwt

    return jwt.encode(payload, private, algorithm="RS256")


@pytest.mark.parametrize(
    "case",
    [
        "unknown api key",
        "expired",
        "forged signature",
        "alg none",
        "wrong audience",
        "wrong issuer",
        "no expiry",
        "rs256 from another key",
        "hs256 signed with the public key",
        "hs512 not configured",
    ],
)
def test_bad_credentials_are_401(client, keys, case):
    token = _bad_tokens(keys)[case]
    response = client.get("/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401, case
    assert _error(response)["code"] == "unauthorized"


def test_valid_jwts_name_the_caller(client, keys):
    (private, _), _ = keys
    hs = hs_token(claims(sub="carol"))
    rs = _rs_token(private, claims(sub="carol"))
    created = _image_job(client, {"Authorization": f"Bearer {hs}"})
    assert created.status_code == 202, created.text
    listed = client.get("/v1/jobs", headers={"Authorization": f"Bearer {rs}"}).json()["jobs"]
    assert created.json()["id"] in [j["id"] for j in listed]  # same user "carol" by either algorithm
    assert client.get("/v1/jobs", headers={"Authorization": "Basic abc"}).status_code == 401


def test_one_user_cannot_see_download_or_cancel_anothers_job(client):
    created = _image_job(client, ALICE)
    assert created.status_code == 202
    job_id = created.json()["id"]
    assert created.headers["location"] == f"/v1/jobs/{job_id}"
    unknown = "0" * 32
    for method, suffix in [("GET", ""), ("GET", "/preview"), ("GET", "/result"), ("DELETE", "")]:
        foreign = client.request(method, f"/v1/jobs/{job_id}{suffix}", headers=BOB)
        missing = client.request(method, f"/v1/jobs/{unknown}{suffix}", headers=BOB)
        assert foreign.status_code == missing.status_code == 404, (method, suffix)
        assert _error(foreign)["code"] == _error(missing)["code"] == "not_found"
        assert _error(foreign)["message"] == _error(missing)["message"].replace(unknown, job_id)
    assert job_id not in [j["id"] for j in client.get("/v1/jobs", headers=BOB).json()["jobs"]]
    assert client.get(f"/v1/jobs/{job_id}", headers=ALICE).json()["state"] == "queued"  # untouched
    cancelled = client.delete(f"/v1/jobs/{job_id}", headers=ALICE)
    assert cancelled.json()["state"] == "cancelled"
    assert not (client.storage / "jobs" / job_id).exists()


def test_an_oversize_upload_is_refused_before_it_is_read(client):
    consumed = []
    chunk = b"x" * 16384
    head, content_type = multipart([("source", "s.png", b"")])
    head = head[: head.rindex(b"\r\n--")]  # leave the part open: the rest streams in

    def body():
        yield head
        for _ in range(4000):  # 64 MB if it were all read
            consumed.append(1)
            yield chunk

    response = stream_post(client, "/v1/jobs", body(), headers={**ALICE, "Content-Type": content_type})
    assert response.status_code == 413
    assert _error(response)["code"] == "too_large"
    assert 0 < len(consumed) <= UPLOAD_LIMIT // len(chunk) + 2  # stopped right after crossing the limit
    assert not any((client.storage / "uploads").iterdir())  # the partial file is gone


def test_a_declared_oversize_length_is_refused_without_reading(client):
    consumed = []

    def body():
        consumed.append(1)
        yield b"x"

    headers = {**ALICE, "Content-Type": "multipart/form-data; boundary=b", "Content-Length": str(UPLOAD_LIMIT + 1)}
    response = stream_post(client, "/v1/jobs", body(), headers=headers)
    assert response.status_code == 413 and consumed == []


def test_a_decompression_bomb_is_refused(client):
    response = _image_job(client, ALICE, target=bomb_png())
    assert response.status_code == 413
    error = _error(response)
    assert error["code"] == "image_too_large" and "target" in error["message"]


def test_a_text_file_named_jpg_is_415(client):
    response = _image_job(client, ALICE, target=b"hello, I am not a photo\n" * 20, filename="photo.jpg")
    assert response.status_code == 415
    assert _error(response)["code"] == "unsupported_format"


def test_a_path_like_file_name_never_becomes_a_path(client):
    before = set(client.storage.rglob("*"))
    response = _image_job(client, ALICE, filename="../../etc/passwd")
    assert response.status_code == 202
    job_id = response.json()["id"]
    created = set(client.storage.rglob("*")) - before
    assert created and all(p.resolve().is_relative_to(client.storage / "jobs" / job_id) for p in created)
    assert sorted(p.name for p in created if p.is_file()) == ["source-0", "target"]
    assert not (client.storage.parent / "etc").exists()
    assert "passwd" not in response.text and str(client.storage) not in response.text


def test_unknown_option_is_422_and_named(client):
    response = _image_job(client, ALICE, colour="blue")
    assert response.status_code == 422
    error = _error(response)
    assert error["code"] == "invalid_option" and "colour" in error["message"]
    bad_json = _image_job(client, ALICE, options='{"faces": "all"}')
    assert bad_json.status_code == 422 and "faces" in _error(bad_json)["message"]
    video_only = _image_job(client, ALICE, trim="1-2")
    assert video_only.status_code == 422 and "trim" in _error(video_only)["message"]


def test_malformed_requests_are_json_errors(client):
    not_multipart = client.post("/v1/jobs", content=b"{}", headers={**ALICE, "Content-Type": "application/json"})
    assert not_multipart.status_code == 415 and _error(not_multipart)["code"] == "unsupported_format"
    body, content_type = multipart([("source", "s.png", png_bytes())])
    truncated = client.post("/v1/jobs", content=body[:-30], headers={**ALICE, "Content-Type": content_type})
    assert truncated.status_code == 400 and _error(truncated)["code"] == "bad_input"
    no_target = client.post("/v1/jobs", content=body, headers={**ALICE, "Content-Type": content_type})
    assert no_target.status_code == 422 and "target" in _error(no_target)["message"]
    assert _error(client.get("/v1/nothing-here", headers=ALICE))["code"] == "not_found"


def test_swap_is_503_where_no_models_are_loaded(client):
    response = client.post(
        "/v1/swap",
        files=[("source", ("s.png", png_bytes(), "image/png")), ("target", ("t.png", png_bytes(), "image/png"))],
        headers=ALICE,
    )
    assert response.status_code == 503 and _error(response)["code"] == "not_ready"


def test_cors_is_off_by_default(client):
    response = client.options(
        "/v1/jobs", headers={"Origin": "https://evil.test", "Access-Control-Request-Method": "GET"}
    )
    assert "access-control-allow-origin" not in response.headers


def test_rate_limit_is_429_with_retry_after(tmp_path: Path):
    config = settings(
        tmp_path,
        auth={"api_keys": [{"user": "alice", "key": ALICE_KEY}, {"user": "bob", "key": BOB_KEY}]},
        limits={"rate_per_second": 0.01, "rate_burst": 2},
    )
    with running_app(config) as c:
        codes = [c.get("/v1/jobs", headers=ALICE).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        limited = c.get("/v1/jobs", headers=ALICE)
        assert _error(limited)["code"] == "rate_limited" and int(limited.headers["retry-after"]) >= 1
        assert c.get("/v1/jobs", headers=BOB).status_code == 200  # per caller


def test_no_credentials_means_localhost_only(tmp_path: Path):
    from faceweave.service.app import create_app

    with pytest.raises(InvalidOptionError, match="without authentication"):
        create_app(settings(tmp_path, host="0.0.0.0"))
    with pytest.raises(InvalidOptionError, match="required"):
        create_app(settings(tmp_path, auth={"mode": "required"}))
    create_app(settings(tmp_path, host="0.0.0.0", auth={"mode": "none"}))  # an explicit choice
    with running_app(settings(tmp_path)) as c:  # local default: one local user, no credentials
        created = _image_job(c, {})
        assert created.status_code == 202
        assert [j["id"] for j in c.get("/v1/jobs").json()["jobs"]] == [created.json()["id"]]


def test_serve_refuses_an_open_host_without_auth_in_one_line(tmp_path: Path, capfd):
    import typer
    from typer.testing import CliRunner

    from faceweave.cli.serve import serve_command

    app = typer.Typer()
    app.command()(serve_command)
    result = CliRunner().invoke(
        app, ["--host", "0.0.0.0", "--storage", str(tmp_path / "s")], env={"FACEWEAVE_CONFIG": ""}
    )
    err = capfd.readouterr().err  # the CLI writes its messages to the real stderr
    assert result.exit_code == 2
    assert "without authentication" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    bad = CliRunner().invoke(app, ["--config", str(tmp_path / "missing.toml")])
    assert bad.exit_code == 2 and "cannot read the config file" in capfd.readouterr().err
