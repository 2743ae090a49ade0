"""The HTTP endpoints: ``/v1`` swaps and jobs, health, readiness and metrics.

Uploads are ``multipart/form-data`` with file parts ``source`` (one or more
photos), ``target`` (a photo, or a video for jobs), optional ``reference``
(a photo of the person to replace) and, for videos, ``map.<INDEX>`` (a photo
for person INDEX, as ``faceweave swap --map``); options as described in
:mod:`faceweave.service.jobspec`.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool

from faceweave.errors import (
    AuthenticationError,
    InvalidOptionError,
    JobStateError,
    NotFoundError,
    NotReadyError,
    UnsupportedFormatError,
)
from faceweave.service.auth import Caller, presented_credential
from faceweave.service.errors import (
    AUTH_STATUSES,
    UPLOAD_STATUSES,
    error_responses,
)
from faceweave.service.jobspec import MEDIA_TYPES, JobOptions, options_from_form
from faceweave.service.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from faceweave.service.ranges import RangedFile
from faceweave.service.store import ACTIVE, JobRecord
from faceweave.service.uploads import (
    UploadedFile,
    UploadedForm,
    check_markable,
    inspect_upload,
    receive_form,
)

router = APIRouter()
#: the largest ``offset`` of ``GET /v1/jobs`` (the database's integers are 64-bit)
MAX_OFFSET = 1_000_000_000

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["target"],
                    "properties": {
                        "source": {"type": "array", "items": {"type": "string", "format": "binary"}},
                        "target": {"type": "string", "format": "binary"},
                        "reference": {"type": "string", "format": "binary"},
                        "options": {"type": "string", "description": "JSON object of options (see JobOptions)"},
                    },
                }
            }
        },
    }
}


def _file_answer(description: str) -> dict[str, Any]:
    """An OpenAPI response: a file in any of the output formats."""
    binary = {"schema": {"type": "string", "format": "binary"}}
    return {"description": description, "content": {media: binary for media in sorted(set(MEDIA_TYPES.values()))}}


def _ranges_answer() -> dict[str, Any]:
    """The OpenAPI 206: one range in the file's format, or several as ``multipart/byteranges``."""
    answer = _file_answer("part of the result file (several ranges: multipart/byteranges)")
    answer["content"]["multipart/byteranges"] = {"schema": {"type": "string", "format": "binary"}}
    return answer


_SWAP_ANSWER = {
    "description": "the swapped image, or with ?format=json (or Accept: application/json) JSON with it in base64",
    "content": {
        **{
            media: {"schema": {"type": "string", "format": "binary"}}
            for media in ("image/png", "image/jpeg", "image/webp")
        },
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["image", "media_type", "format", "faces_swapped"],
                "properties": {
                    "image": {"type": "string", "contentEncoding": "base64"},
                    "media_type": {"type": "string"},
                    "format": {"type": "string"},
                    "faces_swapped": {"type": "integer"},
                    "faces_found": {"type": "integer"},
                    "width": {"type": "integer"},
                    "height": {"type": "integer"},
                },
            }
        },
    },
}


def _service(request: Request):
    return request.app.state.service


async def current_caller(request: Request) -> Caller:
    """Authenticate the request and spend one token of the caller's rate limit.
    An address or credential with too many recent failed authentications is
    refused (429) before its credentials are looked at."""
    service = _service(request)
    address = request.client.host if request.client else None
    presented = presented_credential(request.headers)
    service.auth_failures.check(address=address, credential=presented)
    try:
        caller = service.auth.identify(request.headers)
    except AuthenticationError:
        if presented is not None:  # no credential at all guesses nothing
            service.auth_failures.failed(address=address, credential=presented)
        raise
    service.limiter.take(caller.owner)
    return caller


# ------------------------------------------------------------------ health
@router.get("/healthz", tags=["health"])
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", tags=["health"], responses=error_responses(503))
async def readyz(request: Request) -> dict[str, Any]:
    service = _service(request)
    service.check_ready()
    return {"status": "ready", "workers": service.pool.size, "sync_slots": service.slots.size}


@router.get("/metrics", tags=["health"], response_class=PlainTextResponse)
async def metrics(request: Request) -> Response:
    service = _service(request)
    counts = await run_in_threadpool(service.store.counts)
    return Response(service.metrics.render(counts), media_type=METRICS_CONTENT_TYPE)


# ------------------------------------------------------------------ uploads
async def _receive(request: Request) -> UploadedForm:
    service = _service(request)
    return await receive_form(
        request.stream(),
        content_type=request.headers.get("content-type"),
        content_length=request.headers.get("content-length"),
        storage=service.storage,
        limits=service.settings.limits,
    )


def _roles(form: UploadedForm, limits, min_side: int = 0) -> dict[str, Any]:
    """Check every file by content and sort them into roles; ``min_side``:
    the target's least side (the watermark's, when marking is on)."""
    checked = {name: [inspect_upload(f, limits) for f in files] for name, files in form.files.items()}
    form.files = checked
    sources = checked.get("source", []) + checked.get("sources", [])
    targets = checked.get("target", [])
    references = checked.get("reference", [])
    mapping: dict[int, list[UploadedFile]] = {}
    for name, files in checked.items():
        if name in ("source", "sources", "target", "reference"):
            continue
        prefix, _, index = name.partition(".")
        if prefix != "map" or not (index.isascii() and index.isdigit() and len(index) <= 6):  # not "²", not 10**5000
            raise InvalidOptionError(f"unknown file part '{name[:60]}'; use source, target, reference or map.<INDEX>")
        mapping[int(index)] = files
    if len(targets) != 1:
        raise InvalidOptionError("send exactly one 'target' file")
    check_markable(targets[0], min_side)
    if len(references) > 1:
        raise InvalidOptionError("send at most one 'reference' file")
    for item in [*sources, *references, *(f for fs in mapping.values() for f in fs)]:
        if item.kind != "image":
            raise UnsupportedFormatError(f"'{item.field}' must be a photo, not a {item.kind}")
    if not sources and not mapping:
        raise InvalidOptionError("send a 'source' photo (or, for a video, 'map.<INDEX>' photos)")
    if sources and mapping:
        raise InvalidOptionError("send either 'source' photos or 'map.<INDEX>' photos, not both")
    if mapping and targets[0].kind != "video":
        raise InvalidOptionError("'map.<INDEX>' photos are for video targets")
    return {
        "sources": sources,
        "target": targets[0],
        "reference": references[0] if references else None,
        "map": mapping,
    }


def _mark_side(service) -> int:
    """The least side a target needs: the watermark's when marking is on."""
    from faceweave.provenance.watermark import MIN_SIDE

    return MIN_SIDE if service.settings.watermark else 0


def _files_record(roles: dict[str, Any], stored: dict[int, str]) -> list[dict[str, Any]]:
    items = [("source", f) for f in roles["sources"]] + [("target", roles["target"])]
    items += [("reference", roles["reference"])] if roles["reference"] else []
    items += [(f"map.{i}", f) for i, fs in roles["map"].items() for f in fs]
    return [
        {"role": role, "path": stored.get(id(f), ""), "sha256": f.sha256, "filename": f.filename} for role, f in items
    ]


# ------------------------------------------------------------------ sync swap
@router.post(
    "/v1/swap",
    tags=["swap"],
    openapi_extra=_UPLOAD_BODY,
    response_class=Response,
    responses={200: _SWAP_ANSWER, **error_responses(*AUTH_STATUSES, *UPLOAD_STATUSES, 503)},
)
async def swap(
    request: Request,
    caller: Annotated[Caller, Depends(current_caller)],
    format: Literal["json", "image"] | None = Query(None, description="json: base64 image in JSON"),
) -> Response:
    """Swap faces in one photo and answer with the image (or JSON with base64)."""
    service = _service(request)
    service.check_ready()
    form = await _receive(request)
    try:
        roles = await run_in_threadpool(_roles, form, service.settings.limits, _mark_side(service))
        options = options_from_form(form.fields)
        if roles["target"].kind != "image":
            raise UnsupportedFormatError("POST /v1/swap takes a photo target; submit videos to POST /v1/jobs")
        options.check(kind="image")
        data, meta = await run_in_threadpool(_swap_now, service, caller, options, roles)
    finally:
        form.cleanup()
    media_type = MEDIA_TYPES[meta["format"]]
    wants_json = format == "json" or (format is None and "application/json" in request.headers.get("accept", ""))
    if wants_json:
        return JSONResponse({**meta, "media_type": media_type, "image": base64.b64encode(data).decode("ascii")})
    return Response(
        data,
        media_type=media_type,
        headers={
            "X-Faceweave-Faces-Swapped": str(meta["faces_swapped"]),
            "X-Faceweave-Run-Id": str(meta["run_id"]),
        },
    )


def _swap_now(service, caller: Caller, options: JobOptions, roles: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    from faceweave.service.store import new_job_id
    from faceweave.service.worker import (
        JobOutcome,
        _image_job,
        _provenance,
        write_audit,
    )

    fmt = options.output_format("image")
    swap_options = options.swap_options(
        kind="image",
        has_reference=roles["reference"] is not None,
        max_pixels=service.config.max_pixels,
        video_working_size=service.config.video_working_size,
        runtime=service.config.runtime,
    )
    inputs = {
        "sources": [service.storage.relative(f.path) for f in roles["sources"]],
        "target": service.storage.relative(roles["target"].path),
        "reference": service.storage.relative(roles["reference"].path) if roles["reference"] else None,
    }
    inputs["files"] = _files_record(roles, {})
    job = JobRecord(
        id=new_job_id(),
        owner=caller.owner,
        kind="image",
        state="running",
        options=options.model_dump(exclude_defaults=True),
        inputs=inputs,
        created_at=0.0,
    )
    provenance = _provenance(service.config)
    output = service.storage.scratch_path(f".{fmt}")
    error: BaseException | None = None
    try:
        with service.slots.borrow(service.settings.sync_wait_s) as models:
            meta = _image_job(job, models.swapper(swap_options), service.storage, options, output, provenance)
        data = output.read_bytes()
        service.metrics.faces.inc(meta["faces_swapped"])
        return data, {**meta, "format": fmt}
    except BaseException as exc:
        error = exc
        raise
    finally:
        output.unlink(missing_ok=True)
        if not isinstance(error, NotReadyError):
            outcome = JobOutcome(state="failed" if error else "succeeded", seconds=0.0)
            write_audit(service.audit, job, outcome=outcome, error=error, provenance=provenance, hide=service.hide)


# ------------------------------------------------------------------ jobs
@router.post(
    "/v1/jobs",
    tags=["jobs"],
    status_code=202,
    openapi_extra=_UPLOAD_BODY,
    responses=error_responses(*AUTH_STATUSES, *UPLOAD_STATUSES),
)
async def create_job(request: Request, caller: Annotated[Caller, Depends(current_caller)]) -> JSONResponse:
    """Queue an image or video swap; answers 202 with the job and its ``Location``."""
    service = _service(request)
    form = await _receive(request)
    try:
        roles = await run_in_threadpool(_roles, form, service.settings.limits, _mark_side(service))
        options = options_from_form(form.fields)
        kind = roles["target"].kind
        options.check(kind=kind)
        job = await run_in_threadpool(_queue_job, service, caller, options, roles, kind)
    finally:
        form.cleanup()
    service.job_queued(job.id)
    location = f"/v1/jobs/{job.id}"
    return JSONResponse(job_view(job), status_code=202, headers={"Location": location})


def _queue_job(service, caller: Caller, options: JobOptions, roles: dict[str, Any], kind: str) -> JobRecord:
    from faceweave.service.store import new_job_id

    job_id = new_job_id()
    adopt = service.storage.adopt
    stored: dict[int, str] = {}

    def keep(item: UploadedFile, name: str) -> str:
        stored[id(item)] = adopt(item.path, job_id, name)
        return stored[id(item)]

    try:
        inputs: dict[str, Any] = {
            "sources": [keep(f, f"source-{i}") for i, f in enumerate(roles["sources"])],
            "target": keep(roles["target"], "target"),
            "reference": keep(roles["reference"], "reference") if roles["reference"] else None,
            "map": {str(i): [keep(f, f"map-{i}-{n}") for n, f in enumerate(fs)] for i, fs in roles["map"].items()},
        }
        inputs["files"] = _files_record(roles, stored)
        return service.store.create(
            job_id=job_id,
            owner=caller.owner,
            kind=kind,
            options=options.model_dump(exclude_defaults=True),
            inputs=inputs,
        )
    except BaseException:
        service.storage.remove_job(job_id)
        raise


def _owned(service, job_id: str, caller: Caller) -> JobRecord:
    job = service.store.get(job_id, owner=caller.owner) if len(job_id) <= 64 else None
    if job is None:
        raise NotFoundError(f"no job {job_id[:64]!r}")
    return job


@router.get("/v1/jobs", tags=["jobs"], responses=error_responses(*AUTH_STATUSES, 422))
async def list_jobs(
    request: Request,
    caller: Annotated[Caller, Depends(current_caller)],
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
) -> dict[str, Any]:
    jobs = await run_in_threadpool(_service(request).store.list, owner=caller.owner, limit=limit, offset=offset)
    return {"jobs": [job_view(j) for j in jobs]}


@router.get("/v1/jobs/{job_id}", tags=["jobs"], responses=error_responses(*AUTH_STATUSES, 404, 422))
async def get_job(job_id: str, request: Request, caller: Annotated[Caller, Depends(current_caller)]) -> dict[str, Any]:
    return job_view(await run_in_threadpool(_owned, _service(request), job_id, caller))


@router.get(
    "/v1/jobs/{job_id}/preview",
    tags=["jobs"],
    response_class=Response,
    responses={200: _file_answer("the first swapped frame"), **error_responses(*AUTH_STATUSES, 404, 409, 422)},
)
async def get_preview(job_id: str, request: Request, caller: Annotated[Caller, Depends(current_caller)]) -> Response:
    service = _service(request)
    job = await run_in_threadpool(_owned, service, job_id, caller)
    path = service.storage.resolve(job.preview_path) if job.preview_path else None
    if path is None or not path.is_file():
        raise JobStateError(f"job {job.id} has no preview yet (state {job.state})")
    return _file(path, f"faceweave-{job.id[:8]}-preview")


def _file(path, stem: str) -> RangedFile:
    """``path`` as a download named ``<stem>.<ext>``: ranges, ``If-Range`` and ``HEAD`` work."""
    ext = path.suffix.lstrip(".")
    return RangedFile(
        path,
        stat_result=path.stat(),
        media_type=MEDIA_TYPES.get(ext, "application/octet-stream"),
        filename=f"{stem}.{ext}",
    )


@router.get(
    "/v1/jobs/{job_id}/result",
    tags=["jobs"],
    response_class=Response,
    responses={
        200: _file_answer("the result file"),
        206: _ranges_answer(),
        **error_responses(*AUTH_STATUSES, 404, 409, 416, 422),
    },
)
async def get_result(job_id: str, request: Request, caller: Annotated[Caller, Depends(current_caller)]) -> Response:
    """The result file (also ``HEAD``); honours ``Range: bytes=...`` (206: one range,
    or several as ``multipart/byteranges``; 416 outside the file) and ``If-Range``."""
    service = _service(request)
    job = await run_in_threadpool(_owned, service, job_id, caller)
    path = service.storage.resolve(job.output_path) if job.output_path else None
    if job.state != "succeeded" or path is None or not path.is_file():
        raise JobStateError(f"job {job.id} has no result (state {job.state})")
    return _file(path, f"faceweave-{job.id[:8]}")


# HEAD answers the headers of GET (FastAPI adds no HEAD route by itself); not in the schema
router.add_api_route("/v1/jobs/{job_id}/preview", get_preview, methods=["HEAD"], include_in_schema=False)
router.add_api_route("/v1/jobs/{job_id}/result", get_result, methods=["HEAD"], include_in_schema=False)


@router.delete("/v1/jobs/{job_id}", tags=["jobs"], responses=error_responses(*AUTH_STATUSES, 404, 422))
async def delete_job(
    job_id: str, request: Request, caller: Annotated[Caller, Depends(current_caller)]
) -> dict[str, Any]:
    """Cancel a queued or running job (its files are deleted), or delete a finished one."""
    return await run_in_threadpool(_delete, _service(request), job_id, caller)


def _delete(service, job_id: str, caller: Caller) -> dict[str, Any]:
    from faceweave.service.worker import write_audit

    job = _owned(service, job_id, caller)
    if job.state in ACTIVE and service.store.cancel(job.id, owner=caller.owner, ttl_s=service.config.ttl_s):
        service.pool.cancel(job.id)
        service.storage.remove_job(job.id)
        write_audit(service.audit, job, outcome=None, error=None, provenance=None, state="cancelled")
        return job_view(service.store.get(job.id) or job)
    service.storage.remove_job(job.id)
    service.store.delete(job.id, owner=caller.owner)
    return {**job_view(job), "deleted": True}


# ------------------------------------------------------------------ views
def _iso(value: float | None) -> str | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def job_view(job: JobRecord) -> dict[str, Any]:
    """A job as the API shows it (no storage paths, no worker internals)."""
    base = f"/v1/jobs/{job.id}"
    return {
        "id": job.id,
        "kind": job.kind,
        "state": job.state,
        "progress": round(job.progress or 0.0, 2),
        "frames_done": job.frames_done,
        "frames_total": job.frames_total,
        "eta_s": job.eta_s,
        "error": {"code": job.error_code, "message": job.error_message} if job.error_code else None,
        "options": job.options,
        "result": job.result,
        "attempts": job.attempts,
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "expires_at": _iso(job.expires_at),
        "links": {
            "self": base,
            "preview": f"{base}/preview" if job.preview_path else None,
            "result": f"{base}/result" if job.state == "succeeded" else None,
        },
    }
