"""The service's OpenAPI schema, fuzzed with schemathesis: no server errors,
every answer documented (status code, media type, body schema), every error
JSON ``{"error": {"code", "message"}}`` without a traceback or a storage path;
as a caller with a valid API key and as an anonymous one.  Then regression
tests for what the fuzzing found, and one error of each documented status.

One app with real models (one sync slot, no job workers: queued jobs stay
queued) serves the module; schemathesis sends its requests in-process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.service_fixtures import (
    ALICE_KEY,
    multipart,
    png_bytes,
    running_app,
    settings,
)

pytestmark = pytest.mark.slow  # loads the face models once (a few seconds)

UPLOAD_LIMIT = 1024 * 1024
#: examples per operation and mode; FACEWEAVE_FUZZ_EXAMPLES=500 for a deeper run by hand
MAX_EXAMPLES = int(os.environ.get("FACEWEAVE_FUZZ_EXAMPLES", "25"))
ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
CALLERS = {"api-key": ALICE, "anonymous": {}}
#: every operation of the schema, so that a new route cannot go unfuzzed
OPERATIONS = (
    "GET /healthz",
    "GET /readyz",
    "GET /metrics",
    "POST /v1/swap",
    "POST /v1/jobs",
    "GET /v1/jobs",
    "GET /v1/jobs/{job_id}",
    "DELETE /v1/jobs/{job_id}",
    "GET /v1/jobs/{job_id}/preview",
    "GET /v1/jobs/{job_id}/result",
    "POST /v1/verify",
    "POST /v1/faces",
    "POST /swap",
    "POST /v1/live",
    "POST /v1/live/reservations",
    "GET /v1/live/config",
    "GET /v1/live/{session_id}",
    "POST /v1/live/{session_id}/source",
    "DELETE /v1/live/{session_id}",
)
#: routes anyone may call; every other one must answer an anonymous caller 401
PUBLIC = {"GET /healthz", "GET /readyz", "GET /metrics"}
#: the multipart routes: generated bodies must reach the checks of their parts and fields
#: (400: an empty or unreadable file, 422: a missing part or an invalid field), not only 415
UPLOADS = {"POST /v1/swap", "POST /v1/jobs", "POST /v1/verify", "POST /v1/faces", "POST /swap", "POST /v1/live"}
#: the drop-in for the classic Flask service answers its errors as {"status": "error", "message": ...}
CLASSIC = {"POST /swap"}
#: what the job routes answer about a queued job of the caller's (no workers run it):
#: the job; no preview or result yet; cancelled (nothing else varies: one request each)
OWN_JOB = {
    "GET /v1/jobs/{job_id}": {200},
    "GET /v1/jobs/{job_id}/preview": {409},
    "GET /v1/jobs/{job_id}/result": {409},
    "DELETE /v1/jobs/{job_id}": {200},
}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("schema")
    config = settings(
        tmp,
        workers=0,
        sync_slots=1,
        auth={"api_keys": [{"user": "alice", "key": ALICE_KEY}]},
        limits={"max_upload_bytes": UPLOAD_LIMIT},
        runtime={"models_dir": str(tmp / "models")},
    )
    with running_app(config) as c:
        c.storage = Path(config.storage).resolve()
        c.models = tmp / "models"  # empty: every neural model is missing
        yield c


@pytest.fixture(scope="module")
def schema(client):
    import schemathesis

    return schemathesis.openapi.from_asgi("/openapi.json", without_lifespan(client.app), config=schemathesis.Config())


def without_lifespan(app):
    """``app`` for schemathesis' in-process client: its lifespan is owned by the
    TestClient of the fixture, so schemathesis must not start a second one."""

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return

    return wrapped


def check_body(response, storage: Path, *, classic: bool = False) -> None:
    """No traceback or server path in any answer; every error a JSON error body
    (``classic``: the classic Flask service's)."""
    text = response.content.decode("utf-8", "replace")
    assert "Traceback (most recent call last)" not in text, text[:500]
    assert str(storage) not in text and str(storage.parent) not in text, text[:500]
    if response.status_code >= 400:
        assert response.headers["content-type"][0].startswith("application/json"), response.headers
        if classic:
            body = json.loads(text)
            assert body["status"] == "error" and isinstance(body["message"], str) and body["message"].strip(), body
            return
        error = json.loads(text)["error"]
        assert isinstance(error["code"], str) and error["code"].isidentifier(), error
        assert isinstance(error["message"], str) and error["message"].strip(), error


def test_every_operation_is_fuzzed(schema):
    assert sorted(r.ok().label for r in schema.get_all_operations()) == sorted(OPERATIONS)


@pytest.mark.parametrize("caller", sorted(CALLERS))
@pytest.mark.parametrize("label", OPERATIONS)
def test_schema_fuzzing_finds_no_server_error(schema, client, label, caller):
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    method, path = label.split(" ")
    operation = schema[path][method]
    answered: set[int] = set()
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        try:
            answered |= fuzz(operation, mode, CALLERS[caller], client.storage)
        except Unsatisfiable:
            # nothing of this operation can be made invalid (no parameters, or free-form strings)
            assert mode is GenerationMode.NEGATIVE, label
    if label in OWN_JOB:  # the same, with the id of a queued job of Alice's
        own = fuzz(
            operation,
            GenerationMode.POSITIVE,
            CALLERS[caller],
            client.storage,
            path_parameters={"job_id": queue_job(client)},
        )
        assert own == ({401} if caller == "anonymous" else OWN_JOB[label]), (label, own)
        answered |= own
    assert answered, label
    if caller == "api-key" and label in UPLOADS:
        assert {400, 422} <= answered, (label, answered)
    if caller == "anonymous" and label not in PUBLIC:
        assert answered == {401}, (label, answered)
    assert not any(status >= 500 for status in answered), (label, answered)


def queue_job(client) -> str:
    """The id of a new queued job of Alice's (faceless photos: no worker runs it)."""
    files = [
        ("source", ("s.png", png_bytes(seed=1), "image/png")),
        ("target", ("t.png", png_bytes(seed=2), "image/png")),
    ]
    response = client.post("/v1/jobs", files=files, headers=ALICE)
    assert response.status_code == 202, response.text
    return response.json()["id"]


def fuzz(operation, mode, headers: dict[str, str], storage: Path, **fixed: Any) -> set[int]:
    """Send :data:`MAX_EXAMPLES` generated requests (deterministic) to ``operation``,
    check each answer, and return the statuses seen.  ``fixed``: parts of the
    request not to generate (``path_parameters={...}``)."""
    from hypothesis import HealthCheck, Phase, given
    from hypothesis import settings as hypothesis_settings
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    # not negative_data_rejection: it counts an empty array field as invalid data
    # although the request then carries no such field at all (a valid request)
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
    seen: set[int] = set()

    @hypothesis_settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    @given(case=operation.as_strategy(generation_mode=mode, **fixed))
    def run(case) -> None:
        response = case.call(headers=headers)
        seen.add(response.status_code)
        case.validate_response(response, checks=checks, headers=headers)
        check_body(response, storage, classic=operation.label in CLASSIC)

    run()
    return seen


# ------------------------------------------------------------------ what the fuzzing found
def test_a_utf8_file_name_is_received_unchanged(tmp_path: Path):
    """A browser sends a file name as raw UTF-8; beyond latin-1 it used to be a 500."""
    import asyncio

    from faceweave.service.settings import LimitSettings
    from faceweave.service.storage import LocalStorage as Storage
    from faceweave.service.uploads import receive_form

    body, content_type = multipart([("file", "写真 ø.png", b"data"), ("名前", None, "値".encode())])

    async def chunks():
        yield body

    form = asyncio.run(
        receive_form(
            chunks(),
            content_type=content_type,
            content_length=str(len(body)),
            storage=Storage(tmp_path),
            limits=LimitSettings(),
        )
    )
    try:
        assert [f.filename for f in form.files["file"]] == ["写真 ø.png"]
        assert form.files["file"][0].path.read_bytes() == b"data"
        assert form.fields == {"名前": ["値"]}
    finally:
        form.cleanup()


def test_utf8_names_over_http_are_answered_not_crashed(client):
    body, content_type = multipart([("file", "写真.png", png_bytes())])
    verified = client.post("/v1/verify", content=body, headers={**ALICE, "Content-Type": content_type})
    assert verified.status_code == 200, verified.text
    assert verified.json()["marked"] is False
    body, content_type = multipart([("target", "t.png", png_bytes()), ("源", "写真.png", png_bytes())])
    refused = client.post("/v1/jobs", content=body, headers={**ALICE, "Content-Type": content_type})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == {
        "code": "invalid_option",
        "message": "unknown file part '源'; use source, target, reference or map.<INDEX>",
    }


@pytest.mark.parametrize(("offset", "status"), [(0, 200), (10**9, 200), (10**9 + 1, 422), (2**63, 422), (2**70, 422)])
def test_a_huge_list_offset_is_422_not_a_database_overflow(client, offset, status):
    response = client.get("/v1/jobs", params={"offset": offset}, headers=ALICE)
    assert response.status_code == status, response.text
    if status == 422:
        assert response.json()["error"]["code"] == "invalid_option"
        assert "offset" in response.json()["error"]["message"]
    else:
        jobs = response.json()["jobs"]
        assert isinstance(jobs, list) and (offset == 0 or jobs == [])


def _post(client, path: str, parts: list[tuple[str, str | None, bytes]]):
    body, content_type = multipart(parts)
    return client.post(path, content=body, headers={**ALICE, "Content-Type": content_type})


@pytest.mark.parametrize(
    ("path", "parts", "message"),
    [
        # "²".isdigit() is true but int("²") fails; int() refuses 5000 digits
        ("/v1/jobs", [("target", "t.png", png_bytes()), ("map.²", "m.png", png_bytes())], "unknown file part 'map.²'"),
        ("/v1/jobs", [("target", "t.png", png_bytes()), ("map.1234567", "m.png", png_bytes())], "unknown file part"),
        (
            "/v1/faces",
            [("target", "t.png", png_bytes()), ("min_face_size", None, "²".encode())],
            "min_face_size must be",
        ),
        (
            "/v1/faces",
            [("target", "t.png", png_bytes()), ("min_face_size", None, b"9" * 5000)],
            "min_face_size must be",
        ),
        # json.loads raises RecursionError (not ValueError) on deep nesting
        (
            "/v1/jobs",
            [("source", "s.png", png_bytes()), ("target", "t.png", png_bytes()), ("options", None, b"[" * 30000)],
            "the 'options' field is not valid JSON",
        ),
        (
            "/v1/swap",
            [("source", "s.png", png_bytes()), ("target", "t.png", png_bytes()), ("options", None, b'{"a":' * 12000)],
            "the 'options' field is not valid JSON",
        ),
    ],
    ids=[
        "map-superscript",
        "map-huge-index",
        "min-face-superscript",
        "min-face-5000-digits",
        "deep-array",
        "deep-object",
    ],
)
def test_odd_numbers_and_deep_json_are_422_not_500(client, path, parts, message):
    response = _post(client, path, parts)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_option" and error["message"].startswith(message), error


def test_a_model_missing_on_this_server_is_422_without_its_folder(client, faces_dir):
    single = faces_dir / "single"
    files = [
        ("source", "s.jpg", (single / "attr_1996_asian_man.jpg").read_bytes()),
        ("target", "t.jpg", (single / "attr_1423_black_woman.jpg").read_bytes()),
    ]
    for options, role in (
        ({"swapper": "inswapper_128"}, "swapper inswapper_128: model "),
        ({"face_enhancer": "gfpgan_1.4"}, "face enhancer gfpgan_1.4: model "),
    ):
        response = _post(client, "/v1/swap", [*files, ("options", None, json.dumps(options).encode())])
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "model_not_found"
        assert error["message"].startswith(role) and "is not present in the server's folder" in error["message"]
        assert str(client.models) not in response.text and "/" not in error["message"].split(";")[0]


def test_messages_name_no_server_folder(tmp_path: Path):
    from faceweave.options import RuntimeOptions
    from faceweave.service.errors import clean_message, model_folders
    from faceweave.service.jobs import RunConfig
    from faceweave.service.settings import ServiceSettings
    from faceweave.service.storage import LocalStorage as Storage

    models = tmp_path / "models"
    hide = (str(tmp_path / "storage"), *model_folders(RuntimeOptions(models_dir=str(models))))
    assert hide == (str(tmp_path / "storage"), str(models))
    text = f"no face in {tmp_path}/storage/uploads/a.part;\nmodel x is not present in {models}"
    assert clean_message(text, hide) == "no face in uploads/a.part; model x is not present in the server's folder"
    config = ServiceSettings(storage=tmp_path / "storage", runtime=RuntimeOptions(models_dir=str(models)))
    run = RunConfig.from_settings(config, Storage(tmp_path / "storage"))
    assert str(models) in run.hide  # failed jobs' messages are cleaned with it too


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-99", [(0, 99)]),
        ("bytes=" + "9" * 5000 + "-", None),  # int() would refuse it: an overlong range, ignored
        ("bytes=0-" + "9" * 19, [(0, 999)]),  # a last byte past the end is the end
        ("bytes=0-" + "9" * 18, [(0, 999)]),
        ("bytes=\u0661-", None),  # "١" (Arabic-Indic one) is a \d but not an HTTP digit
    ],
)
def test_range_numbers_are_ascii_and_bounded(header, expected):
    from faceweave.service.ranges import byte_ranges

    assert byte_ranges(header, 1000) == expected


# ------------------------------------------------------------------ documented errors
def _photo_files(target: bytes, source: bytes | None = None) -> list:
    return [
        ("source", ("s.png", source or png_bytes(64, 64, seed=1), "image/png")),
        ("target", ("t.png", target, "image/png")),
    ]


ERROR_CASES = [
    # (name, operation or None for no route, request, status, code)
    ("no credentials", "GET /v1/jobs", lambda c: c.get("/v1/jobs"), 401, "unauthorized"),
    ("wrong key", "GET /v1/jobs", lambda c: c.get("/v1/jobs", headers={"X-API-Key": "x" * 20}), 401, "unauthorized"),
    ("unknown job", "GET /v1/jobs/{job_id}", lambda c: c.get("/v1/jobs/0123abcd", headers=ALICE), 404, "not_found"),
    (
        "foreign-looking job",
        "DELETE /v1/jobs/{job_id}",
        lambda c: c.delete("/v1/jobs/" + "f" * 32, headers=ALICE),
        404,
        "not_found",
    ),
    ("unknown route", None, lambda c: c.get("/v1/nothing", headers=ALICE), 404, "not_found"),
    (
        "truncated body",
        "POST /v1/swap",
        lambda c: c.post(
            "/v1/swap",
            content=multipart([("target", "t.png", b"x")])[0][:-10],
            headers={**ALICE, "Content-Type": multipart([])[1]},
        ),
        400,
        "bad_input",
    ),
    (
        "empty file",
        "POST /v1/swap",
        lambda c: c.post("/v1/swap", files=_photo_files(b""), headers=ALICE),
        400,
        "unreadable_file",
    ),
    (
        "upload too large",
        "POST /v1/swap",
        lambda c: c.post("/v1/swap", files=_photo_files(b"\0" * (UPLOAD_LIMIT + 1)), headers=ALICE),
        413,
        "too_large",
    ),
    ("not multipart", "POST /v1/jobs", lambda c: c.post("/v1/jobs", json={}, headers=ALICE), 415, "unsupported_format"),
    (
        "text as a photo",
        "POST /v1/verify",
        lambda c: c.post("/v1/verify", files=[("file", ("f.jpg", b"hello, world", "image/jpeg"))], headers=ALICE),
        415,
        "unsupported_format",
    ),
    (
        "no face",
        "POST /v1/swap",
        lambda c: c.post("/v1/swap", files=_photo_files(png_bytes(96, 80)), headers=ALICE),
        422,
        "no_face",
    ),
    (
        "unknown option",
        "POST /v1/jobs",
        lambda c: c.post(
            "/v1/jobs", files=_photo_files(png_bytes()), headers=ALICE, data={"options": json.dumps({"nope": 1})}
        ),
        422,
        "invalid_option",
    ),
    ("bad query", "GET /v1/jobs", lambda c: c.get("/v1/jobs?limit=0", headers=ALICE), 422, "invalid_option"),
    (
        "no preview yet",
        "GET /v1/jobs/{job_id}/preview",
        lambda c: c.get(f"/v1/jobs/{queue_job(c)}/preview", headers=ALICE),
        409,
        "job_not_ready",
    ),
]


@pytest.mark.parametrize(("name", "operation", "send", "status", "code"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_each_error_is_documented_json(client, name, operation, send, status, code):
    response = send(client)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == code
    check_body(_AsSchemathesis(response), client.storage)
    _assert_documented(client, operation, response)


def test_rate_limit_and_not_ready_are_documented_json(tmp_path: Path):
    """429 and 503 on a small app with no models and a burst of two requests."""
    config = settings(tmp_path, limits={"rate_per_second": 0.001, "rate_burst": 2})
    with running_app(config) as c:
        body, content_type = multipart([("target", "t.png", png_bytes())])
        not_ready = c.post("/v1/faces", content=body, headers={"Content-Type": content_type})
        assert c.get("/v1/jobs").status_code == 200
        limited = c.get("/v1/jobs")
        for response, status, code in ((not_ready, 503, "not_ready"), (limited, 429, "rate_limited")):
            assert response.status_code == status, response.text
            assert response.json()["error"]["code"] == code
            _assert_documented(c, "POST /v1/faces" if status == 503 else "GET /v1/jobs", response)
        assert int(limited.headers["retry-after"]) >= 1


def test_error_bodies_are_declared_in_the_schema(client):
    spec = client.get("/openapi.json").json()
    assert spec["components"]["schemas"]["ErrorDetail"]["required"] == ["code", "message"]
    assert "HTTPValidationError" not in json.dumps(spec["paths"])  # FastAPI's own 422 shape is never answered
    for label in OPERATIONS:
        method, path = label.split(" ")
        responses = spec["paths"][path][method.lower()]["responses"]
        if label not in PUBLIC:
            assert {"401", "429", "500"} <= set(responses), label
        body = "ClassicError" if label in CLASSIC else "ErrorBody"
        for status, answer in responses.items():
            if int(status) >= 400:
                assert answer["content"] == {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}}


def _assert_documented(client, operation: str | None, response) -> None:
    """The body is an error body, and its status is declared for ``operation`` with that body."""
    from faceweave.service.errors import ErrorBody

    ErrorBody.model_validate(response.json())
    if operation is None:  # no route: nothing declares it
        return
    method, path = operation.split(" ")
    declared = client.get("/openapi.json").json()["paths"][path][method.lower()]["responses"]
    assert declared[str(response.status_code)]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorBody"
    }


class _AsSchemathesis:
    """An httpx response as :func:`check_body` reads a schemathesis one (headers map to lists)."""

    def __init__(self, response) -> None:
        self.content = response.content
        self.status_code = response.status_code
        self.headers = {k: [v] for k, v in response.headers.items()}


def test_generated_storage_names_are_left_out_of_messages():
    from faceweave.service.errors import clean_message

    stored = "uploads/01f3f82107e9cf03309c7a051cda1ef4.part"
    assert clean_message(f"target image '{stored}' is truncated or corrupt") == "target image is truncated or corrupt"
    assert clean_message(f"no face found in target image {stored}") == "no face found in target image"
    job_file = "jobs/0123456789abcdef0123456789abcdef/target"
    assert clean_message(f"the video '{job_file}' lasts 7 s") == "the video lasts 7 s"
