"""The live routes, authenticated and rate-limited like the rest of ``/v1``:

- ``POST /v1/live/reservations``: a place held for ``live.reservation_s``
  for the session it names, and the ICE servers and transport policy the
  page sets its peer connection up with (TURN with time-limited credentials
  made for that session only).  Answers 201 ``{"id", "ice_servers",
  "ice_transport_policy", "expires_at", "reserved_s", "links"}``.
- ``POST /v1/live`` (``multipart/form-data``): file part ``source`` (one or
  more photos) and fields ``sdp`` (the browser's offer, with a video track),
  ``type`` (``offer``) and ``reservation`` (optional: the id a reservation
  answered, which the session then has).  Answers 201 ``{"id", "type":
  "answer", "sdp", "links"}``; 503 ``at_capacity`` when the node's
  ``live.sessions`` are all taken and 429 ``live_sessions_per_caller`` when
  the caller holds ``live.sessions_per_caller`` places (both with
  ``Retry-After``), 404 for a reservation the caller does not hold (used, or
  its time up), 422 ``no_video_track`` for an offer without a camera, 422
  ``invalid_option`` for one the server cannot answer, 422 ``no_face`` for a
  source photo without a face.
- ``GET /v1/live/config``: the node's places, and the ICE servers that need
  no credentials made (STUN; TURN with a long-term user of its own); the
  time-limited TURN credentials come only with a reservation.
- ``GET /v1/live/{id}``: its state (``running`` or ``ended`` with the reason)
  and figures (frames received, swapped and dropped, fps, latency).
- ``POST /v1/live/{id}/source``: new source photo(s) from the next frame;
  one without a face answers 422 and the previous source is kept.
- ``DELETE /v1/live/{id}``: end it.
- ``GET /live``: the Live page (:mod:`faceweave.service.web` serves its files).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool

from faceweave.errors import InvalidOptionError, UnsupportedFormatError
from faceweave.provenance.audit import AuditInput
from faceweave.service.deps import CallerDep, ServiceDep
from faceweave.service.errors import AUTH_STATUSES, UPLOAD_STATUSES, error_responses
from faceweave.service.node import Service
from faceweave.service.openapi import BINARY, multipart_body
from faceweave.service.uploads import UploadedFile, UploadedForm, inspect_upload, receive_form
from faceweave.service.webrtc.hub import EndedSession
from faceweave.service.webrtc.ice import IceConfig, ice_servers_for
from faceweave.service.webrtc.offer import parse_offer

live_router = APIRouter()
_SOURCE_BODY = {"source": {"type": "array", "items": BINARY}}


def install_live(app: FastAPI) -> None:
    """Serve ``/v1/live`` and the page ``/live`` from ``app``."""
    app.include_router(live_router)


@live_router.get("/live", include_in_schema=False)
async def live_page() -> Response:
    from faceweave.service.web import static_response

    return static_response("live.html")


async def _receive(request: Request, service: Service) -> UploadedForm:
    return await receive_form(
        request.stream(),
        content_type=request.headers.get("content-type"),
        content_length=request.headers.get("content-length"),
        storage=service.storage,
        limits=service.settings.limits,
    )


def _source_photos(form: UploadedForm, service: Service) -> list[UploadedFile]:
    """The checked source photos of ``form`` (on a worker thread).

    Raises:
        InvalidOptionError: no part ``source``, or another file part.
        UnsupportedFormatError: a source that is not a photo.
    """
    extra = sorted(set(form.files) - {"source"})
    if extra:
        raise InvalidOptionError(f"unknown file part '{extra[0][:60]}'; send the photos as 'source'")
    photos = [inspect_upload(f, service.settings.limits) for f in form.files.get("source", [])]
    if not photos:
        raise InvalidOptionError("send the source photo (the face to put in) as the file part 'source'")
    for photo in photos:
        if photo.kind != "image":
            raise UnsupportedFormatError(f"file 'source' must be a photo, not a {photo.kind}")
    return photos


def _audited(photos: list[UploadedFile]) -> list[AuditInput]:
    """The photos as an audit line names them (the client's file name, never a stored path)."""
    return [AuditInput(role="source", path=p.filename or "upload", sha256=p.sha256) for p in photos]


def _view(session_id: str, found: Any) -> dict[str, Any]:
    ended = isinstance(found, EndedSession)
    stats = found.stats if ended else found.view()
    return {
        "id": session_id,
        "state": "ended" if ended else "running",
        "reason": found.reason if ended else None,
        "sources": None if ended else len(found.live.sources),
        **asdict(stats),
    }


@live_router.post(
    "/v1/live",
    tags=["live"],
    status_code=201,
    openapi_extra=multipart_body(
        ["source", "sdp"],
        {**_SOURCE_BODY, "sdp": {"type": "string"}, "type": {"type": "string"}, "reservation": {"type": "string"}},
    ),
    responses=error_responses(*AUTH_STATUSES, *UPLOAD_STATUSES, 404, 421, 503),
)
async def open_live(request: Request, caller: CallerDep, service: ServiceDep) -> dict[str, Any]:
    """Start a live session: the browser's camera in, swapped video back on the same connection."""
    form = await _receive(request, service)
    try:
        photos = await run_in_threadpool(_source_photos, form, service)
        offer = parse_offer(form.fields)
        session, answer = await service.live.open(caller.owner, offer, [p.path for p in photos], _audited(photos))
    except BaseException:  # a reservation whose offer was refused before it was used gives its place back now
        for named in form.fields.get("reservation", []):
            service.live.places.cancel(named.strip(), caller.owner)
        raise
    finally:
        form.cleanup()
    base = f"/v1/live/{session.id}"
    return {"id": session.id, "type": "answer", "sdp": answer, "links": {"self": base, "source": base + "/source"}}


@live_router.post(
    "/v1/live/reservations", tags=["live"], status_code=201, responses=error_responses(*AUTH_STATUSES, 503)
)
async def reserve_live(caller: CallerDep, service: ServiceDep) -> dict[str, Any]:
    """Hold a place for a session (``live.reservation_s``) and get what the page
    sets its peer connection up with: the ICE servers (TURN with time-limited
    credentials made for this session, never the shared secret) and the transport policy."""
    reservation = service.live.reserve(caller.owner)
    config = ice_servers_for(service.settings.live, "browser", reservation.session_id)
    return {
        "id": reservation.session_id,
        **_ice_json(config),
        "reserved_s": service.settings.live.reservation_s,
        "links": {"offer": "/v1/live"},
    }


@live_router.get("/v1/live/config", tags=["live"], responses=error_responses(*AUTH_STATUSES))
async def live_config(caller: CallerDep, service: ServiceDep) -> dict[str, Any]:
    """The node's places and the ICE servers that need no credentials made
    (STUN, TURN with a user of its own); TURN with time-limited credentials
    comes with a reservation (``POST /v1/live/reservations``)."""
    return {
        **_ice_json(ice_servers_for(service.settings.live, "browser", None)),
        "sessions": service.live.capacity,
        "links": {"reserve": "/v1/live/reservations"},
    }


def _ice_json(config: IceConfig) -> dict[str, Any]:
    return {
        "ice_servers": [server.as_json() for server in config.servers],
        "ice_transport_policy": config.transport_policy,
        "expires_at": config.expires_at,
    }


@live_router.get("/v1/live/{session_id}", tags=["live"], responses=error_responses(*AUTH_STATUSES, 404, 421, 422))
async def get_live(session_id: str, caller: CallerDep, service: ServiceDep) -> dict[str, Any]:
    """A live session's state and figures."""
    return _view(session_id, service.live.session(session_id, caller.owner))


@live_router.post(
    "/v1/live/{session_id}/source",
    tags=["live"],
    openapi_extra=multipart_body(["source"], _SOURCE_BODY),
    responses=error_responses(*AUTH_STATUSES, *UPLOAD_STATUSES, 404, 421),
)
async def change_source(session_id: str, request: Request, caller: CallerDep, service: ServiceDep) -> dict[str, Any]:
    """New source photo(s) from the next frame; one without a face keeps the previous source (422)."""
    session = service.live.running(session_id, caller.owner)
    form = await _receive(request, service)
    try:
        if form.fields:
            raise InvalidOptionError(f"unknown field '{sorted(form.fields)[0][:60]}'; send only the file part 'source'")
        photos = await run_in_threadpool(_source_photos, form, service)
        await run_in_threadpool(session.set_sources, [p.path for p in photos], _audited(photos))
    finally:
        form.cleanup()
    return _view(session_id, session)


@live_router.delete("/v1/live/{session_id}", tags=["live"], responses=error_responses(*AUTH_STATUSES, 404, 421, 422))
async def close_live(session_id: str, caller: CallerDep, service: ServiceDep) -> dict[str, Any]:
    """End a live session; answers its last figures."""
    session = service.live.running(session_id, caller.owner)
    await session.close("stopped by the caller")
    return _view(session_id, service.live.session(session_id, caller.owner))
