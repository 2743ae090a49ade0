"""``POST /v1/verify``: is an uploaded file marked by faceweave (the
AI-generated label and the invisible watermark)?  The same check as
``faceweave verify``, behind the service's authentication and upload limits."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from starlette.concurrency import run_in_threadpool

from faceweave.errors import InvalidOptionError
from faceweave.service.deps import CallerDep, ServiceDep
from faceweave.service.errors import AUTH_STATUSES, UPLOAD_STATUSES, error_responses
from faceweave.service.openapi import BINARY, multipart_body
from faceweave.service.uploads import inspect_upload, receive_form

verify_router = APIRouter()

_BODY = multipart_body(["file"], {"file": BINARY, "frames": {"type": "integer", "minimum": 1, "maximum": 100}})


def install_verify(app: FastAPI) -> None:
    app.include_router(verify_router)


def _frames(fields: dict[str, list[str]]) -> int:
    values = fields.get("frames") or ["8"]
    try:
        frames = int(values[-1])
    except ValueError:
        frames = 0
    if not 1 <= frames <= 100:
        raise InvalidOptionError(f"frames must be a whole number from 1 to 100; got {values[-1]!r}")
    return frames


@verify_router.post(
    "/v1/verify", tags=["verify"], openapi_extra=_BODY, responses=error_responses(*AUTH_STATUSES, *UPLOAD_STATUSES)
)
async def verify(request: Request, caller: CallerDep, service: ServiceDep) -> dict[str, Any]:
    """Read the label and detect the watermark of one uploaded image or video.
    ``marked`` is true when either is found; a video is checked on ``frames``
    frames spread evenly."""
    from faceweave.provenance.verify import verify_file

    limits = service.settings.limits
    form = await receive_form(
        request.stream(),
        content_type=request.headers.get("content-type"),
        content_length=request.headers.get("content-length"),
        storage=service.storage,
        limits=limits,
    )
    try:
        extra = sorted(set(form.files) - {"file"}) + sorted(set(form.fields) - {"frames"})
        if extra or len(form.files.get("file", [])) != 1:
            raise InvalidOptionError("send exactly one file part, 'file' (and optionally a 'frames' field)")
        frames = _frames(form.fields)
        upload = await run_in_threadpool(inspect_upload, form.files["file"][0], limits)
        found = await run_in_threadpool(verify_file, upload.path, frames=frames)
        answer = found.as_dict()
        answer.pop("path", None)  # a storage name, not the caller's
        return answer
    finally:
        form.cleanup()
