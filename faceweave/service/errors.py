"""Every error as JSON ``{"error": {"code": ..., "message": ...}}`` with its status.

faceweave's exceptions map to HTTP statuses by class (most specific first);
request validation to 422; anything else to 500 with a generic message while
the traceback goes to the server log only.  Storage paths are cut out of
messages so that no server path reaches a client.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from faceweave import errors as fe

log = logging.getLogger("faceweave.service")
#: the status recorded (in ``/metrics``) for a client that hung up mid-request, as
#: nginx's 499: a 4xx, so no 5xx alert fires; the client never sees the answer
CLIENT_CLOSED = 499

#: (exception class, HTTP status), most specific first
STATUS_BY_CLASS: tuple[tuple[type[BaseException], int], ...] = (
    (fe.AuthenticationError, 401),
    (fe.PermissionDeniedError, 403),
    (fe.LiveSessionElsewhereError, 421),
    (fe.NotFoundError, 404),
    (fe.RateLimitedError, 429),
    (fe.NotReadyError, 503),  # StorageUnavailableError among them
    (fe.ImageTooLargeError, 413),
    (fe.LimitExceededError, 413),
    (fe.RangeNotSatisfiableError, 416),
    (fe.JobStateError, 409),
    (fe.UnsupportedFormatError, 415),
    (fe.UnreadableFileError, 400),
    (fe.RequestTimeoutError, 408),
    (fe.ClientDisconnectedError, CLIENT_CLOSED),
    (fe.InvalidOptionError, 422),
    (fe.ContentRefusedError, 422),
    (fe.NoFaceError, 422),
    (fe.TooSmallToMarkError, 422),
    (fe.NoMatchingFaceError, 422),
    (fe.ModelNotFoundError, 422),  # an option names a model this server does not have (any kind)
    (fe.InputError, 400),
    (fe.ModelError, 500),
    (fe.OutputError, 500),
    (fe.FaceweaveError, 500),
)
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "too_large",
    415: "unsupported_format",
    422: "invalid_option",
    429: "rate_limited",
}


#: what each error status means, as the OpenAPI schema documents it
ERROR_STATUSES: dict[int, str] = {
    400: "bad input: a malformed body or an unreadable file",
    401: "missing, unknown, forged or expired credentials",
    404: "no such job or live session, or one of another caller",
    408: "the upload arrived too slowly (limits.upload_timeout_s) or stalled (limits.upload_idle_s)",
    409: "the job has no preview or result (yet)",
    413: "too large: the upload, an image's pixels or a video's duration or frames",
    415: "unsupported type: not an image or video (by its bytes), or not multipart/form-data",
    416: "the requested byte range is outside the file",
    421: "a live session held by another node: route the session's calls to the node that opened it"
    " (the ingress's affinity cookie)",
    422: "no face, an invalid or unknown option (such as a model this server does not have), or a target too"
    " small to carry the watermark",
    429: "rate limited, or the caller holds as many live places as one caller may (see Retry-After)",
    500: "internal error (the details are in the server log)",
    503: "not ready (see Retry-After): the models are loading, no model slot is free, the live sessions are all"
    " taken, or the job storage does not answer (storage_unavailable)",
}


#: the errors of every ``/v1`` route (credentials, rate limit), and of every upload
AUTH_STATUSES = (401, 429)
UPLOAD_STATUSES = (400, 408, 413, 415, 422)


class ErrorDetail(BaseModel):
    code: str = Field(description="stable machine-readable code, e.g. 'no_face' or 'too_large'")
    message: str = Field(description="one line for a person")


class ErrorBody(BaseModel):
    """The JSON body of every error response."""

    error: ErrorDetail


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses=``: :class:`ErrorBody` under each of ``statuses``
    (and 500, which any route may answer)."""
    return {status: {"model": ErrorBody, "description": ERROR_STATUSES[status]} for status in sorted({*statuses, 500})}


def status_for(exc: BaseException) -> int:
    for cls, status in STATUS_BY_CLASS:
        if isinstance(exc, cls):
            return status
    return 500


#: the headers of every API answer that sets none of its own (the app's
#: middleware adds them; error answers carry them too, as the 500s that
#: Starlette sends outside the middleware): no sniffing, nothing runs in it
API_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'; sandbox",
}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers={**API_HEADERS, **(headers or {})}
    )


#: the names storage gives uploads and job files (random, meaningless to the
#: caller): cut from messages, which already say which file ("target image")
_STORED_NAME = re.compile(r"'?\b(?:(?:uploads|scratch)/[0-9a-f]{32}[\w.]*|jobs/[0-9a-f]{32}/[\w.-]+)'?")


def clean_message(text: str, hide: tuple[str, ...] = ()) -> str:
    """One line, with the storage folder (and other ``hide`` folders) cut out:
    paths under them become relative, the folder itself "the server's folder",
    and the generated names of stored files are left out."""
    for part in hide:
        if part:
            text = text.replace(part.rstrip("/") + "/", "").replace(part, "the server's folder")
    text = _STORED_NAME.sub("", text)
    return " ".join(text.split())[:1000]


def model_folders(runtime: Any) -> tuple[str, ...]:
    """The model folder of a :class:`~faceweave.options.RuntimeOptions`, as
    model errors name it, to cut from messages like the storage folder."""
    from pathlib import Path

    from faceweave.models.cache import default_models_dir

    folder = Path(runtime.models_dir).expanduser() if runtime.models_dir else default_models_dir()
    return (str(folder),)


def validation_message(exc: ValidationError | RequestValidationError) -> str:
    """``unknown option 'x'`` or ``invalid option x: <problem>`` from the first error."""
    first = exc.errors()[0]
    names = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
    name = ".".join(names) or "request"
    if first.get("type") == "extra_forbidden":
        return f"unknown option '{name}'"
    return f"invalid option {name}: {first.get('msg', 'invalid')}"


class _Handlers:
    """The app's exception handlers; ``hide``: strings (storage root) cut from messages."""

    def __init__(self, hide: tuple[str, ...]) -> None:
        self.hide = hide

    async def faceweave_error(self, request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, fe.FaceweaveError)  # registered for FaceweaveError only
        status = status_for(exc)
        if isinstance(exc, fe.ClientDisconnectedError):
            log.info("client closed %s %s mid-request", request.method, request.url.path)
        if status >= 500 and not isinstance(exc, fe.NotReadyError):  # loading or busy is not a failure
            log.error("request %s %s failed", request.method, request.url.path, exc_info=exc)
        _count(request, exc.code)
        message = clean_message(str(exc), self.hide) or type(exc).__name__
        return error_response(status, exc.code, message, error_headers(exc) or None)

    async def validation_error(self, request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ValidationError | RequestValidationError)  # registered for these only
        _count(request, "invalid_option")
        return error_response(422, "invalid_option", clean_message(validation_message(exc), self.hide))

    async def http_error(self, request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)  # registered for it only
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        _count(request, code)
        detail = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        return error_response(exc.status_code, code, detail, dict(exc.headers or {}) or None)

    async def client_disconnect(self, request: Request, exc: Exception) -> JSONResponse:
        """Starlette's ``ClientDisconnect`` met outside :func:`receive_form`: as its error."""
        return await self.faceweave_error(request, fe.ClientDisconnectedError("the client closed the connection"))

    async def internal_error(self, request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error in %s %s", request.method, request.url.path, exc_info=exc)
        _count(request, "internal_error")
        return error_response(500, "internal_error", "internal server error; the details are in the server log")


def error_headers(exc: fe.FaceweaveError) -> dict[str, str]:
    """The headers an error answer carries: how to authenticate, when to retry,
    that the connection is done (the rest of a timed-out body is not read)."""
    headers: dict[str, str] = {}
    if isinstance(exc, fe.NotReadyError):  # every 503, as every 429 below
        headers["Retry-After"] = str(max(1, int(exc.retry_after + 0.999)))
    if isinstance(exc, fe.AuthenticationError):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, fe.RateLimitedError | fe.AtCapacityError):
        headers["Retry-After"] = str(max(1, int(exc.retry_after + 0.999)))
    if isinstance(exc, fe.RequestTimeoutError):
        headers["Connection"] = "close"
    return headers


def _count(request: Request, code: str) -> None:
    """One error of ``code`` in ``/metrics`` (once the service is up)."""
    service = getattr(request.app.state, "service", None)
    if service is not None:
        service.metrics.errors.labels(code=code).inc()


def install(app: FastAPI, *, hide: tuple[str, ...] = ()) -> None:
    """Register the handlers on ``app``; ``hide``: strings (storage root) cut from messages."""
    handlers = _Handlers(hide)
    app.add_exception_handler(fe.FaceweaveError, handlers.faceweave_error)
    app.add_exception_handler(RequestValidationError, handlers.validation_error)
    app.add_exception_handler(ValidationError, handlers.validation_error)
    app.add_exception_handler(StarletteHTTPException, handlers.http_error)
    app.add_exception_handler(ClientDisconnect, handlers.client_disconnect)
    app.add_exception_handler(Exception, handlers.internal_error)


@dataclass(frozen=True)
class JobProblem:
    """What the store records about a failed job: a stable ``code`` and a
    one-line ``message`` without server paths."""

    code: str
    message: str


def job_error(exc: BaseException, hide: tuple[str, ...] = ()) -> JobProblem:
    """What to store for a job that failed with ``exc``."""
    if isinstance(exc, fe.FaceweaveError):
        return JobProblem(exc.code, clean_message(str(exc), hide) or type(exc).__name__)
    if isinstance(exc, ValidationError):
        return JobProblem("invalid_option", clean_message(validation_message(exc), hide))
    return JobProblem("internal_error", "internal error; the details are in the server log")
