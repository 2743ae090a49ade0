"""The HTTP endpoints: ``/v1`` swaps and jobs, health, readiness and metrics.

Uploads are ``multipart/form-data`` with file parts ``source`` (one or more
photos), ``target`` (a photo, or a video for jobs), optional ``reference``
(a photo of the person to replace) and, for videos, ``map.<INDEX>`` (a photo
for person INDEX, as ``faceweave swap --map``); options as described in
:mod:`faceweave.service.jobspec`.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from faceweave.errors import JobStateError, NotFoundError, UnsupportedFormatError
from faceweave.service.auth import Caller
from faceweave.service.deps import CallerDep, ServiceDep
from faceweave.service.errors import AUTH_STATUSES, UPLOAD_STATUSES, error_responses
from faceweave.service.jobdata import ACTIVE, JobState
from faceweave.service.jobs import write_audit
from faceweave.service.jobspec import IMAGE_FORMATS, MEDIA_TYPES, options_from_form
from faceweave.service.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from faceweave.service.node import Service
from faceweave.service.openapi import BINARY, multipart_body
from faceweave.service.ranges import RangedFile
from faceweave.service.store import JobRecord
from faceweave.service.submit import discard_files, mark_side, queue_job, sort_roles, swap_now
from faceweave.service.uploads import UploadedForm, receive_form
from faceweave.service.views import Health, JobList, JobView, Readiness, SwapAnswer

router = APIRouter()
#: the largest ``offset`` of ``GET /v1/jobs`` (the database's integers are 64-bit)
MAX_OFFSET = 1_000_000_000

_UPLOAD_BODY = multipart_body(
    ["target"],
    {
        "source": {"type": "array", "items": BINARY},
        "target": BINARY,
        "reference": BINARY,
        "options": {"type": "string", "description": "JSON object of options (see JobOptions)"},
    },
)


def _file_answer(description: str) -> dict[str, Any]:
    """An OpenAPI response: a file in any of the output formats."""
    binary = {"schema": {"type": "string", "format": "binary"}}
    return {"description": description, "content": {media: binary for media in sorted(set(MEDIA_TYPES.values()))}}


def _ranges_answer() -> dict[str, Any]:
    """The OpenAPI 206: one range in the file's format, or several as ``multipart/byteranges``."""
    answer = _file_answer("part of the result file (several ranges: multipart/byteranges)")
    answer["content"]["multipart/byteranges"] = {"schema": {"type": "string", "format": "binary"}}
    return answer


_SWAP_ANSWER: dict[str, Any] = {
    "description": "the swapped image, or with ?format=json (or Accept: application/json) JSON with it in base64",
    "model": SwapAnswer,
    "content": {MEDIA_TYPES[ext]: {"schema": {"type": "string", "format": "binary"}} for ext in IMAGE_FORMATS},
}


# ------------------------------------------------------------------ health
@router.get("/healthz", tags=["health"], responses=error_responses(503))
async def healthz(service: ServiceDep) -> Health:
    service.check_alive()
    return Health()


@router.get("/readyz", tags=["health"], responses=error_responses(503))
async def readyz(service: ServiceDep) -> Readiness:
    service.check_ready()
    await run_in_threadpool(service.check_storage)
    return Readiness(workers=service.pool.size, sync_slots=service.slots.size)


@router.get("/metrics", tags=["health"], response_class=PlainTextResponse)
async def metrics(service: ServiceDep) -> Response:
    counts = await run_in_threadpool(service.store.counts)
    oldest = await run_in_threadpool(service.store.oldest_queued)
    service.live.observe()
    return Response(service.metrics.render(counts, oldest_queued=oldest), media_type=METRICS_CONTENT_TYPE)


# ------------------------------------------------------------------ uploads
async def _receive(request: Request, service: Service) -> UploadedForm:
    return await receive_form(
        request.stream(),
        content_type=request.headers.get("content-type"),
        content_length=request.headers.get("content-length"),
        storage=service.storage,
        limits=service.settings.limits,
    )


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
    caller: CallerDep,
    service: ServiceDep,
    format: Annotated[Literal["json", "image"] | None, Query(description="json: base64 image in JSON")] = None,
) -> Response:
    """Swap faces in one photo and answer with the image (or JSON with base64)."""
    service.check_ready()
    form = await _receive(request, service)
    try:
        roles = await run_in_threadpool(sort_roles, form, service.settings.limits, mark_side(service))
        options = options_from_form(form.fields)
        if roles.target.kind != "image":
            raise UnsupportedFormatError("POST /v1/swap takes a photo target; submit videos to POST /v1/jobs")
        options.check(kind="image")
        swapped = await run_in_threadpool(swap_now, service, caller, options, roles)
    finally:
        form.cleanup()
    media_type = MEDIA_TYPES[swapped.format]
    wants_json = format == "json" or (format is None and "application/json" in request.headers.get("accept", ""))
    if wants_json:
        answer = SwapAnswer(
            **swapped.result.model_dump(exclude={"work_s"}, exclude_unset=True),
            format=swapped.format,
            media_type=media_type,
            image=base64.b64encode(swapped.data).decode("ascii"),
        )
        return JSONResponse(answer.model_dump(mode="json"))
    return Response(
        swapped.data,
        media_type=media_type,
        headers={
            "X-Faceweave-Faces-Swapped": str(swapped.result.faces_swapped),
            "X-Faceweave-Run-Id": str(swapped.result.run_id),
        },
    )


# ------------------------------------------------------------------ jobs
@router.post(
    "/v1/jobs",
    tags=["jobs"],
    status_code=202,
    openapi_extra=_UPLOAD_BODY,
    response_model_exclude_unset=True,
    responses=error_responses(*AUTH_STATUSES, *UPLOAD_STATUSES, 503),
)
async def create_job(request: Request, response: Response, caller: CallerDep, service: ServiceDep) -> JobView:
    """Queue an image or video swap; answers 202 with the job and its ``Location``
    (503 ``storage_unavailable`` while the job storage does not answer: no job is made)."""
    await run_in_threadpool(service.check_storage)  # before the client sends the whole body
    form = await _receive(request, service)
    try:
        roles = await run_in_threadpool(sort_roles, form, service.settings.limits, mark_side(service))
        options = options_from_form(form.fields)
        kind = roles.target.kind
        options.check(kind=kind)
        job = await run_in_threadpool(queue_job, service, caller, options, roles, kind)
    finally:
        form.cleanup()
    service.job_queued(job.id)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return JobView.of(job)


def _owned(service: Service, job_id: str, caller: Caller) -> JobRecord:
    job = service.store.get(job_id, owner=caller.owner) if len(job_id) <= 64 else None
    if job is None:
        raise NotFoundError(f"no job {job_id[:64]!r}")
    return job


@router.get(
    "/v1/jobs", tags=["jobs"], response_model_exclude_unset=True, responses=error_responses(*AUTH_STATUSES, 422)
)
async def list_jobs(
    caller: CallerDep,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> JobList:
    jobs = await run_in_threadpool(service.store.list, owner=caller.owner, limit=limit, offset=offset)
    return JobList(jobs=[JobView.of(j) for j in jobs])


@router.get(
    "/v1/jobs/{job_id}",
    tags=["jobs"],
    response_model_exclude_unset=True,
    responses=error_responses(*AUTH_STATUSES, 404, 422),
)
async def get_job(job_id: str, caller: CallerDep, service: ServiceDep) -> JobView:
    job = await run_in_threadpool(_owned, service, job_id, caller)
    view = JobView.of(job)
    url = _result_url(service, job) if job.state == JobState.SUCCEEDED and job.output_path else None
    return view.model_copy(update={"result_url": url}) if url else view


def _download_name(job: JobRecord, key: str, *, preview: bool = False) -> tuple[str, str]:
    """The file name a download of ``key`` is given, and its media type."""
    ext = Path(key).suffix.lstrip(".")
    stem = f"faceweave-{job.id[:8]}{'-preview' if preview else ''}"
    return f"{stem}.{ext}", MEDIA_TYPES.get(ext, "application/octet-stream")


def _url(service: Service, job: JobRecord, key: str, *, preview: bool = False) -> str | None:
    """A presigned URL of ``key`` with object storage (expiring no later than the job), else ``None``."""
    filename, media_type = _download_name(job, key, preview=preview)
    left = (job.expires_at - time.time()) if job.expires_at else service.config.ttl_s
    return service.storage.download_url(key, filename=filename, media_type=media_type, expires_s=max(1.0, left))


def _result_url(service: Service, job: JobRecord) -> str | None:
    return _url(service, job, job.output_path) if job.output_path else None


@router.get(
    "/v1/jobs/{job_id}/preview",
    tags=["jobs"],
    response_class=Response,
    responses={
        200: _file_answer("the first swapped frame"),
        307: {"description": "object storage: the preview's presigned download URL (Location)"},
        **error_responses(*AUTH_STATUSES, 404, 409, 422),
    },
)
async def get_preview(job_id: str, caller: CallerDep, service: ServiceDep) -> Response:
    job = await run_in_threadpool(_owned, service, job_id, caller)
    url = await run_in_threadpool(_url, service, job, job.preview_path, preview=True) if job.preview_path else None
    if url is not None:  # object storage: the client fetches it from there
        return RedirectResponse(url, status_code=307)
    path = service.storage.resolve(job.preview_path) if job.preview_path else None
    if path is None or not path.is_file():
        raise JobStateError(f"job {job.id} has no preview yet (state {job.state})")
    return _file(path, f"faceweave-{job.id[:8]}-preview")


def _file(path: Path, stem: str) -> RangedFile:
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
        307: {"description": "object storage: the result's presigned download URL (Location)"},
        **error_responses(*AUTH_STATUSES, 404, 409, 416, 422),
    },
)
async def get_result(job_id: str, caller: CallerDep, service: ServiceDep) -> Response:
    """The result file (also ``HEAD``); honours ``Range: bytes=...`` (206: one range,
    or several as ``multipart/byteranges``; 416 outside the file) and ``If-Range``.
    With object storage: a 307 redirect to a presigned URL of it."""
    job = await run_in_threadpool(_owned, service, job_id, caller)
    if job.state == JobState.SUCCEEDED and job.output_path:
        url = await run_in_threadpool(_result_url, service, job)
        if url is not None:
            return RedirectResponse(url, status_code=307)
    path = service.storage.resolve(job.output_path) if job.output_path else None
    if job.state != JobState.SUCCEEDED or path is None or not path.is_file():
        raise JobStateError(f"job {job.id} has no result (state {job.state})")
    return _file(path, f"faceweave-{job.id[:8]}")


# HEAD answers the headers of GET (FastAPI adds no HEAD route by itself); not in the schema
router.add_api_route("/v1/jobs/{job_id}/preview", get_preview, methods=["HEAD"], include_in_schema=False)
router.add_api_route("/v1/jobs/{job_id}/result", get_result, methods=["HEAD"], include_in_schema=False)


@router.delete(
    "/v1/jobs/{job_id}",
    tags=["jobs"],
    response_model_exclude_unset=True,
    responses=error_responses(*AUTH_STATUSES, 404, 422, 503),
)
async def delete_job(job_id: str, caller: CallerDep, service: ServiceDep) -> JobView:
    """Cancel a queued or running job (its files are deleted), or delete a finished one
    (503 ``storage_unavailable`` while the job storage does not answer: nothing changes)."""
    return await run_in_threadpool(_delete, service, job_id, caller)


def _delete(service: Service, job_id: str, caller: Caller) -> JobView:
    job = _owned(service, job_id, caller)
    service.check_storage()
    if job.state in ACTIVE and service.store.cancel(job.id, owner=caller.owner, ttl_s=service.config.ttl_s):
        service.pool.cancel(job.id)
        discard_files(service, job.id)  # what the storage cannot delete now goes when the job expires
        write_audit(service.audit, job, outcome=None, error=None, provenance=None, state=JobState.CANCELLED)
        return JobView.of(service.store.get(job.id) or job)
    if service.store.delete(job.id, owner=caller.owner):  # the row first: files without a row are swept
        discard_files(service, job.id)
    return JobView.of(job).model_copy(update={"deleted": True})
