"""``POST /swap``: a drop-in for the classic Flask face-swap service, so that
a client written for it keeps working unchanged.

It takes multipart file parts ``source`` and ``target`` (photos; other
``/v1`` options may be given as form fields, as for ``POST /v1/swap``) and
answers ``{"status": "success", "result": "data:image/jpeg;base64,..."}``,
or ``{"status": "error", "message": ...}`` with the status ``/v1`` gives the
same failure (4xx/5xx).  Authentication, rate limits and upload limits are
the rest of the API's; the result is watermarked and audited like any swap.
"""

from __future__ import annotations

import base64
import logging
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from faceweave import errors as fe
from faceweave.service.deps import ServiceDep, current_caller
from faceweave.service.errors import (
    AUTH_STATUSES,
    UPLOAD_STATUSES,
    clean_message,
    error_headers,
    status_for,
    validation_message,
)
from faceweave.service.jobspec import options_from_form
from faceweave.service.node import Service
from faceweave.service.submit import mark_side, sort_roles, swap_now
from faceweave.service.uploads import receive_form

log = logging.getLogger("faceweave.service")
router = APIRouter()


class ClassicAnswer(BaseModel):
    status: Literal["success"] = "success"
    result: str  # data:image/jpeg;base64,...


class ClassicError(BaseModel):
    status: Literal["error"] = "error"
    message: str


_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["source", "target"],
                    "properties": {
                        "source": {"type": "string", "format": "binary"},
                        "target": {"type": "string", "format": "binary"},
                    },
                }
            }
        },
    }
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ClassicError, "description": "the classic error body"}
    for status in sorted({*AUTH_STATUSES, *UPLOAD_STATUSES, 500, 503})
}


@router.post("/swap", tags=["compat"], openapi_extra=_BODY, responses={200: {"model": ClassicAnswer}, **_ERRORS})
async def classic_swap(request: Request, service: ServiceDep) -> JSONResponse:
    """The classic Flask service's swap: the result as a JPEG data URL in JSON."""
    try:
        data = await _swap(request, service)
    except (fe.FaceweaveError, ValidationError) as exc:
        return _error(request, service, exc)
    except Exception as exc:  # noqa: BLE001 - the client gets the classic body, the log the traceback
        log.error("unhandled error in POST /swap", exc_info=exc)
        service.metrics.errors.labels(code="internal_error").inc()
        return _answer(500, "internal server error; the details are in the server log")
    result = "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")
    return JSONResponse(ClassicAnswer(result=result).model_dump())


async def _swap(request: Request, service: Service) -> bytes:
    """Authenticate, receive, check and swap as ``POST /v1/swap`` does; the JPEG bytes."""
    caller = await current_caller(request, service)
    service.check_ready()
    form = await receive_form(
        request.stream(),
        content_type=request.headers.get("content-type"),
        content_length=request.headers.get("content-length"),
        storage=service.storage,
        limits=service.settings.limits,
    )
    try:
        roles = await run_in_threadpool(sort_roles, form, service.settings.limits, mark_side(service))
        if roles.target.kind != "image":
            raise fe.UnsupportedFormatError("POST /swap takes a photo target; submit videos to POST /v1/jobs")
        options = options_from_form(form.fields).model_copy(update={"format": "jpg"})
        options.check(kind="image")
        swapped = await run_in_threadpool(swap_now, service, caller, options, roles)
    finally:
        form.cleanup()
    return swapped.data


def _error(request: Request, service: Service, exc: fe.FaceweaveError | ValidationError) -> JSONResponse:
    if isinstance(exc, ValidationError):
        service.metrics.errors.labels(code="invalid_option").inc()
        return _answer(422, clean_message(validation_message(exc), service.hide))
    status = status_for(exc)
    if status >= 500 and not isinstance(exc, fe.NotReadyError):
        log.error("request POST /swap failed", exc_info=exc)
    service.metrics.errors.labels(code=exc.code).inc()
    message = clean_message(str(exc), service.hide) or type(exc).__name__
    return _answer(status, message, error_headers(exc))


def _answer(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(ClassicError(message=message).model_dump(), status_code=status, headers=headers or None)
