"""What the JSON routes answer, as pydantic models: they generate the OpenAPI
schema and shape the bodies (no storage paths, no worker internals).

The job routes serialise with ``response_model_exclude_unset``: every field
of a view is set when it is built, so only the keys a stored result never had
are left out (an image result has no ``frames``, a whole video no ``segments``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from faceweave.service.jobdata import ImageResult, JobState, SwappedFace, VideoResult
from faceweave.service.store import JobRecord


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    status: Literal["ready"] = "ready"
    workers: int = Field(description="embedded job workers of this node")
    sync_slots: int = Field(description="model slots for POST /v1/swap")


class JobErrorView(BaseModel):
    code: str = Field(description="stable machine-readable code, e.g. 'no_face'")
    message: str | None = Field(description="one line for a person")


class JobLinks(BaseModel):
    self: str
    preview: str | None = Field(description="the first swapped frame, once there is one")
    result: str | None = Field(description="the result file, once the job succeeded")


def iso(value: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC with milliseconds (``...Z``)."""
    if value is None:
        return None
    return datetime.fromtimestamp(value, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JobView(BaseModel):
    """A job as the API shows it."""

    id: str
    kind: str = Field(description="image or video")
    state: JobState
    progress: float = Field(description="percent done")
    frames_done: int
    frames_total: int | None
    eta_s: float | None = Field(description="seconds left, estimated")
    error: JobErrorView | None
    options: dict[str, Any] = Field(description="the options given (see JobOptions)")
    result: ImageResult | VideoResult | None
    attempts: int
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    expires_at: str | None = Field(description="when the result and the job are deleted")
    links: JobLinks
    #: with object storage: a presigned URL of the result, for a CDN or the client to fetch directly
    result_url: str | None = Field(None, description="object storage: the result's presigned download URL")
    #: only in the answer of a DELETE that deleted a finished job
    deleted: bool | None = None

    @classmethod
    def of(cls, job: JobRecord) -> JobView:
        base = f"/v1/jobs/{job.id}"
        return cls(
            id=job.id,
            kind=job.kind,
            state=job.state,
            progress=round(job.progress or 0.0, 2),
            frames_done=job.frames_done,
            frames_total=job.frames_total,
            eta_s=job.eta_s,
            error=JobErrorView(code=job.error_code, message=job.error_message) if job.error_code else None,
            options=job.options,
            result=job.result,
            attempts=job.attempts,
            created_at=iso(job.created_at),
            started_at=iso(job.started_at),
            finished_at=iso(job.finished_at),
            expires_at=iso(job.expires_at),
            links=JobLinks(
                self=base,
                preview=f"{base}/preview" if job.preview_path else None,
                result=f"{base}/result" if job.state == JobState.SUCCEEDED else None,
            ),
        )


class JobList(BaseModel):
    jobs: list[JobView] = Field(description="newest first")


class SwapAnswer(BaseModel):
    """``POST /v1/swap?format=json``: the swapped image in base64 and what was done."""

    width: int
    height: int
    faces_found: int
    faces_swapped: int
    swapped: list[SwappedFace]
    run_id: str | None
    format: str = Field(description="the image's extension: png, jpg or webp")
    media_type: str
    image: str = Field(description="the image file, base64", json_schema_extra={"contentEncoding": "base64"})
