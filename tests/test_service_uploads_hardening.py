"""Upload hardening of ``faceweave serve``: overlong boundaries, clients that
hang up, many empty parts, slow or stalled bodies, and uvicorn's connection
limits.  The apps load no models, so every check happens at the boundary."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from tests.service_fixtures import multipart, png_bytes, running_app, settings, stream_post

from faceweave.errors import ClientDisconnectedError, RequestTimeoutError

IDLE_S = 0.3


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    config = settings(tmp_path_factory.mktemp("hardening"), limits={"upload_idle_s": IDLE_S})
    with running_app(config) as c:
        c.storage = Path(config.storage).resolve()
        yield c


def _error(response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert "Traceback" not in response.text
    return body["error"]


def _uploads(client) -> list[Path]:
    return list((client.storage / "uploads").iterdir())


def _no_error_logged(caplog) -> None:
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]


def _open_file_part(boundary: str = "faceweave-test-boundary") -> tuple[bytes, str]:
    """The start of a body whose file part stays open (the rest would stream in)."""
    head, content_type = multipart([("source", "s.png", b"\x89PNG")], boundary=boundary)
    return head[: head.rindex(b"\r\n--")], content_type


def _metric(client, name: str, **labels: str) -> float:
    """A sample of ``/metrics`` (0 when it is absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


# ------------------------------------------------------------------ 3: boundary
@pytest.mark.parametrize("path", ["/v1/swap", "/v1/jobs", "/v1/faces", "/v1/verify"])
def test_an_overlong_boundary_is_400_on_every_upload_endpoint(client, caplog, path):
    body, content_type = multipart([("source", "s.png", png_bytes())], boundary="b" * 300)
    with caplog.at_level(logging.INFO):
        response = client.post(path, content=body, headers={"Content-Type": content_type})
    assert response.status_code == 400, response.text
    error = _error(response)
    assert error["code"] == "bad_input" and "boundary is over 256 characters" in error["message"]
    _no_error_logged(caplog)


def test_a_boundary_of_256_characters_is_accepted(client):
    parts = [("source", "s.png", png_bytes(96, 96, seed=1)), ("target", "t.png", png_bytes(96, 96, seed=2))]
    body, content_type = multipart(parts, boundary="b" * 256)
    response = client.post("/v1/jobs", content=body, headers={"Content-Type": content_type})
    assert response.status_code == 202, response.text
    client.delete(response.headers["location"])


# ------------------------------------------------------------------ 4: client disconnects
def _post_then_hang_up(client, path: str, first: bytes, content_type: str) -> list[dict]:
    """Drive the app directly: one chunk of the body, then ``http.disconnect``."""
    messages = [{"type": "http.request", "body": first, "more_body": True}, {"type": "http.disconnect"}]
    sent: list[dict] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", content_type.encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    client.portal.call(client.app, scope, receive, send)
    return sent


def test_a_client_that_hangs_up_mid_upload_is_no_server_error(client, caplog):
    first, content_type = _open_file_part()
    with caplog.at_level(logging.DEBUG):
        sent = _post_then_hang_up(client, "/v1/jobs", first + b"\0" * 4096, content_type)
    assert sent[0]["status"] == 499  # recorded as nginx's "client closed request"; the client sees nothing
    _no_error_logged(caplog)
    closed = [r for r in caplog.records if "closed" in r.getMessage() and r.name.startswith("faceweave")]
    assert len(closed) == 1 and closed[0].levelno == logging.INFO
    assert _uploads(client) == []  # the partial file is gone
    assert _metric(client, "faceweave_http_requests_total", route="/v1/jobs", status="500") == 0
    assert _metric(client, "faceweave_errors_total", code="internal_error") == 0
    assert _metric(client, "faceweave_errors_total", code=ClientDisconnectedError.code) >= 1
    assert _metric(client, "faceweave_http_requests_total", route="/v1/jobs", status="499") >= 1


# ------------------------------------------------------------------ 5: many parts
def _many_parts(count: int, *, files: bool) -> tuple[bytes, str]:
    return multipart([("x", "f.png" if files else None, b"") for _ in range(count)])


@pytest.mark.parametrize(("files", "named"), [(False, "text fields"), (True, "files")])
def test_thousands_of_empty_parts_are_413_while_parsing(client, files, named):
    body, content_type = _many_parts(20_000, files=files)  # about 1 MB of empty parts
    size = 16384
    consumed: list[int] = []

    def chunks():
        for start in range(0, len(body), size):
            consumed.append(1)
            yield body[start : start + size]

    started = time.monotonic()
    response = stream_post(client, "/v1/jobs", chunks(), headers={"Content-Type": content_type})
    assert time.monotonic() - started < 20  # a bound against a hang, not a timing assertion
    assert response.status_code == 413, response.text
    error = _error(response)
    assert error["code"] == "too_large" and f"too many {named}" in error["message"]
    assert len(consumed) <= 2 < len(body) // size  # stopped in the first chunks, not after parsing it all
    assert _uploads(client) == []


def test_the_options_of_a_normal_upload_are_well_under_max_fields():
    from faceweave.service.jobspec import JobOptions
    from faceweave.service.settings import LimitSettings

    assert len(JobOptions.model_fields) + 1 < LimitSettings().max_fields  # every option once, and "options"


# ------------------------------------------------------------------ 6: slow bodies
def _slow_post(client, path: str, steps: list[bytes | float], headers: dict[str, str]):
    """POST a body of ``steps``: bytes are sent, numbers are pauses (async, so the
    server's timers run).  Returns the response and how many steps were reached."""
    import anyio
    import httpx

    reached: list[int] = []

    async def body():
        for step in steps:
            reached.append(1)
            if isinstance(step, bytes):
                yield step
            else:
                await anyio.sleep(step)

    async def send():
        transport = httpx.ASGITransport(app=client.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            return await http.post(path, content=body(), headers=headers)

    return client.portal.call(send), len(reached)


def test_a_stalled_upload_is_408_and_closes_the_connection(client):
    first, content_type = _open_file_part()
    steps: list[bytes | float] = [first, b"\0" * 1024, IDLE_S * 10, b"\0" * 1024]
    started = time.monotonic()
    response, reached = _slow_post(client, "/v1/jobs", steps, headers={"Content-Type": content_type})
    assert time.monotonic() - started < 20
    assert response.status_code == 408, response.text
    error = _error(response)
    assert error["code"] == RequestTimeoutError.code and "no data for" in error["message"]
    assert response.headers["connection"] == "close"
    assert reached == 3  # the pause was cut short: the last chunk was never asked for
    assert _uploads(client) == []


def test_an_upload_slower_than_upload_timeout_s_is_refused(tmp_path: Path):
    """Chunks well within the idle limit, but the whole body too slow."""
    import anyio

    from faceweave.service.settings import LimitSettings
    from faceweave.service.storage import LocalStorage as Storage
    from faceweave.service.uploads import receive_form

    storage = Storage(tmp_path / "storage")
    limits = LimitSettings(upload_timeout_s=0.5, upload_idle_s=5.0)
    first, content_type = _open_file_part()

    async def trickle():
        yield first
        for _ in range(400):  # 20 s if it were all read
            await anyio.sleep(0.05)
            yield b"\0" * 16

    async def receive():
        await receive_form(trickle(), content_type=content_type, content_length=None, storage=storage, limits=limits)

    started = time.monotonic()
    with pytest.raises(RequestTimeoutError, match="did not arrive within 0.5 s"):
        anyio.run(receive)
    assert time.monotonic() - started < 20
    assert list(storage.uploads.iterdir()) == []


def test_408_is_documented_for_uploads(client):
    responses = client.get("/openapi.json").json()["paths"]["/v1/jobs"]["post"]["responses"]
    assert "408" in responses


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (
            {},
            {
                "limit_concurrency": 128,
                "timeout_keep_alive": 5,
                "timeout_graceful_shutdown": 30,
                "h11_max_incomplete_event_size": 16384,
            },
        ),
        (
            {"max_connections": 7, "keep_alive_s": 2, "graceful_shutdown_s": 3, "max_header_bytes": 4096},
            {
                "limit_concurrency": 7,
                "timeout_keep_alive": 2,
                "timeout_graceful_shutdown": 3,
                "h11_max_incomplete_event_size": 4096,
            },
        ),
    ],
)
def test_uvicorn_gets_the_connection_limits_from_settings(tmp_path: Path, limits, expected):
    import uvicorn

    from faceweave.cli.serve import uvicorn_options

    options = uvicorn_options(settings(tmp_path, limits=limits), log_level="INFO", access_log=False)
    assert {k: options[k] for k in expected} == expected and options["log_level"] == "info"
    config = uvicorn.Config(app=lambda scope, receive, send: None, **options)  # this uvicorn takes them all
    assert (config.limit_concurrency, config.timeout_keep_alive) == (
        expected["limit_concurrency"],
        expected["timeout_keep_alive"],
    )


def test_serve_passes_the_limits_to_uvicorn(tmp_path: Path, monkeypatch):
    import typer
    import uvicorn
    from typer.testing import CliRunner

    from faceweave.cli.serve import serve_command

    calls: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: calls.append(kwargs))
    for name in ("GLOG_minloglevel", "TF_CPP_MIN_LOG_LEVEL"):  # set by serve; restored after the test
        monkeypatch.setenv(name, "3")
    app = typer.Typer()
    app.command()(serve_command)
    env = {"FACEWEAVE_CONFIG": "", "FACEWEAVE_LIMITS__MAX_CONNECTIONS": "9", "FACEWEAVE_LIMITS__KEEP_ALIVE_S": "4"}
    result = CliRunner().invoke(app, ["--port", "0", "--storage", str(tmp_path / "s")], env=env)
    assert result.exit_code == 0, result.output
    assert len(calls) == 1
    assert (calls[0]["limit_concurrency"], calls[0]["timeout_keep_alive"]) == (9, 4)
    assert calls[0]["timeout_graceful_shutdown"] == 30
