"""The web page of the service: ``GET /`` and ``GET /static/<file>``, and
``POST /v1/faces`` that lists the faces of a target so the page can let the
user tick which to swap.

The page is plain HTML, CSS and JavaScript shipped as package data
(``faceweave/service/static``), with no build step and nothing fetched from
elsewhere; it calls the same ``/v1`` API as any client.  :func:`install_web`
adds the router to an app built by :func:`~faceweave.service.app.create_app`.

``POST /v1/faces`` takes ``multipart/form-data`` with one file part
``target`` (a photo, or a video: then the first frame with faces within
:data:`VIDEO_SCAN_S` seconds of ``trim``'s start, sampled at
:data:`VIDEO_SCAN_FPS`) and optional fields ``order`` (as the job option,
default ``large-small``), ``min_face_size`` and ``trim``.  It answers::

    {"kind": "image"|"video", "width": W, "height": H, "order": ..., "min_face_size": ...,
     "frame_time": seconds or null, "frame": "data:image/jpeg;base64,..." or null,
     "faces": [{"index", "box": [x1, y1, x2, y2], "size", "score", "yaw", "pitch", "roll"}]}

``index`` is the face's position in the job option ``face_index`` (the
order of ``select_faces``: faces under ``min_face_size`` dropped, the rest in
``order``); ``box`` is in pixels of the full-size image or frame; ``frame``
(videos only) is that frame as a JPEG at most :data:`FRAME_MAX_SIDE` pixels
wide or high.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from importlib import resources
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool

from faceweave.errors import (
    InvalidOptionError,
    NotFoundError,
    NotReadyError,
    UnsupportedFormatError,
)
from faceweave.option_schema import api_leaves
from faceweave.service.deps import CallerDep, ServiceDep
from faceweave.service.errors import AUTH_STATUSES, UPLOAD_STATUSES, error_responses
from faceweave.service.openapi import BINARY, multipart_body
from faceweave.service.uploads import UploadedFile, inspect_upload, receive_form
from faceweave.types import Face

#: the files under ``static/`` that ``GET /static/<name>`` serves, with their media types
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "live.html": "text/html; charset=utf-8",
    "live.js": "text/javascript; charset=utf-8",
}
#: the page loads only its own files; images and previews may be blob: or data: URLs
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; script-src 'self'; "
    "style-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
VIDEO_SCAN_S = 10.0
VIDEO_SCAN_FPS = 2.0
FRAME_MAX_SIDE = 1280
#: the face detector and landmarker options of the job spec, which /v1/faces takes too
#: (so the faces it lists are those a job with the same options finds, in the same order)
_ANALYSIS_FIELDS = frozenset(leaf.name for leaf in api_leaves() if leaf.path[0] == "analysis")
_FIELDS = frozenset(
    {
        "face_detector",
        "face_detector_size",
        "face_detector_score",
        "face_detector_angles",
        "face_detector_margin",
        "face_landmarker",
        "face_landmarker_score",
    }
)
_FIELDS = frozenset({"order", "min_face_size", "trim"}) | _ANALYSIS_FIELDS

web_router = APIRouter()


def install_web(app: FastAPI) -> None:
    """Serve the web page and ``POST /v1/faces`` from ``app``."""
    app.include_router(web_router)


def static_file(name: str) -> tuple[bytes, str]:
    """The bytes and media type of one of :data:`STATIC_FILES`.

    Raises:
        NotFoundError: ``name`` is not one of them (no path is ever built from it).
    """
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        raise NotFoundError(f"no static file {name[:64]!r}")
    data = resources.files("faceweave.service").joinpath("static", name).read_bytes()
    return data, media_type


def static_response(name: str) -> Response:
    data, media_type = static_file(name)
    return Response(
        data,
        media_type=media_type,
        headers={
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "Referrer-Policy": "no-referrer",
        },
    )


@web_router.get("/", include_in_schema=False)
async def index_page() -> Response:
    return static_response("index.html")


@web_router.get("/static/{name}", include_in_schema=False)
async def static_asset(name: str) -> Response:
    return static_response(name)


# ------------------------------------------------------------------ faces
def face_rows(faces: Sequence[Face], *, order: str, min_face_size: int = 0) -> list[dict[str, Any]]:
    """The faces as the page shows them, in ``face_index`` order: faces
    smaller than ``min_face_size`` are left out and the rest ordered by
    ``order`` (as :func:`faceweave.selection.select_faces` does)."""
    from faceweave.selection import order_faces

    kept = [f for f in faces if f.size >= min_face_size]
    return [
        {"index": rank, **kept[i].summary(), "size": round(kept[i].size, 1)}
        for rank, i in enumerate(order_faces(kept, order))
    ]


def _form_options(fields: dict[str, list[str]]) -> dict[str, Any]:
    """``order``, ``min_face_size`` and the trim start, checked like the job options."""
    from faceweave.options import FACE_ORDERS
    from faceweave.video.io import parse_trim

    unknown = sorted(set(fields) - _FIELDS)
    if unknown:
        takes = ", ".join(sorted(_FIELDS))
        raise InvalidOptionError(f"unknown field '{unknown[0][:60]}'; POST /v1/faces takes {takes}")
    values = {name: values[-1].strip() for name, values in fields.items() if values and values[-1].strip()}
    order = values.get("order", "large-small")
    if order not in FACE_ORDERS:
        raise InvalidOptionError(f"unknown face order '{order[:40]}'; use one of {', '.join(FACE_ORDERS)}")
    text = values.get("min_face_size", "0")
    if not (text.isascii() and text.isdigit() and len(text) <= 9):  # int() refuses "²" and 5000 digits
        raise InvalidOptionError(f"min_face_size must be a whole number of pixels, not '{text[:40]}'")
    start = parse_trim(values["trim"])[0] if "trim" in values else 0.0
    return {"order": order, "min_face_size": int(text), "start": start, "analysis": _analysis_options(fields)}


def _analysis_options(fields: dict[str, list[str]]):
    """The :class:`~faceweave.options.AnalysisOptions` of the analysis fields,
    read and checked as the job options read them."""
    from pydantic import ValidationError

    from faceweave.service.jobspec import options_from_form

    given = {name: values for name, values in fields.items() if name in _ANALYSIS_FIELDS}
    job = options_from_form(given)
    try:
        return job.analysis_options()
    except ValidationError as exc:
        raise InvalidOptionError("; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())) from None


@web_router.post(
    "/v1/faces",
    tags=["swap"],
    openapi_extra=multipart_body(
        ["target"],
        {
            "target": BINARY,
            "order": {"type": "string"},
            "min_face_size": {"type": "integer"},
            "trim": {"type": "string"},
            "face_detector": {"type": "string"},
            "face_detector_size": {"type": "integer"},
            "face_detector_score": {"type": "number"},
            "face_detector_angles": {"type": "string", "description": "e.g. 0,90"},
            "face_detector_margin": {"type": "string", "description": "top,right,bottom,left percent"},
            "face_landmarker": {"type": "string"},
            "face_landmarker_score": {"type": "number"},
        },
    ),
    responses=error_responses(*AUTH_STATUSES, *UPLOAD_STATUSES, 503),
)
async def list_faces(request: Request, caller: CallerDep, service: ServiceDep) -> dict[str, Any]:
    """The faces in a target photo (or a video's first frame with faces), in ``face_index`` order."""
    service.check_ready()
    limits = service.settings.limits
    form = await receive_form(
        request.stream(),
        content_type=request.headers.get("content-type"),
        content_length=request.headers.get("content-length"),
        storage=service.storage,
        limits=limits,
    )
    try:
        extra = sorted(set(form.files) - {"target"})
        if extra or len(form.files.get("target", [])) != 1:
            raise InvalidOptionError("send exactly one file part, 'target'")
        options = _form_options(form.fields)
        target = await run_in_threadpool(inspect_upload, form.files["target"][0], limits)
        return await run_in_threadpool(_analyse, service, target, options)
    finally:
        form.cleanup()


def _analyse(service, target: UploadedFile, options: dict[str, Any]) -> dict[str, Any]:
    rows_of = {"order": options["order"], "min_face_size": options["min_face_size"]}
    if service.slots.size == 0:
        raise NotReadyError(
            "face detection is not available on this node: it keeps no models for requests (sync_slots = 0)",
            retry_after=60.0,
        )
    with service.slots.borrow(service.settings.sync_wait_s) as models:
        analyser = models.analyser_of(options["analysis"], service.config.runtime)
        if target.kind == "image":
            from faceweave.io import read_image

            picture = read_image(target.path, max_pixels=service.config.max_pixels, role="target image")
            faces = analyser.analyse(picture.pixels)
            return {
                "kind": "image",
                "width": picture.width,
                "height": picture.height,
                **rows_of,
                "frame_time": None,
                "frame": None,
                "faces": face_rows(faces, **rows_of),
            }
        if target.kind != "video":
            raise UnsupportedFormatError(f"file 'target' must be a photo or a video, not a {target.kind}")
        return _first_video_faces(analyser, target, options, rows_of, service.config.max_pixels)


def _first_video_faces(
    analyser, target: UploadedFile, options: dict[str, Any], rows_of: dict[str, Any], max_pixels: int
) -> dict[str, Any]:
    from faceweave.video.io import VideoReader, probe_video

    start = options["start"]
    duration = probe_video(target.path).duration
    if duration is not None and start >= duration:
        raise InvalidOptionError(f"trim starts at {start:g} s, after the end of the video ({duration:.2f} s)")
    first = None
    with VideoReader(
        target.path, start=start, end=start + VIDEO_SCAN_S, fps=VIDEO_SCAN_FPS, max_pixels=max_pixels
    ) as reader:
        for frame in reader:
            if first is None:
                first = frame
            faces = face_rows(analyser.analyse(frame.pixels), **rows_of)
            if faces:
                return _video_answer(frame, faces, rows_of)
    if first is None:
        raise InvalidOptionError(f"the video has no frame to analyse from {start:g} s on")
    return _video_answer(first, [], rows_of)


def _video_answer(frame, faces: list[dict[str, Any]], rows_of: dict[str, Any]) -> dict[str, Any]:
    height, width = frame.pixels.shape[:2]
    return {
        "kind": "video",
        "width": width,
        "height": height,
        **rows_of,
        "frame_time": round(frame.time, 3),
        "frame": jpeg_data_url(frame.pixels),
        "faces": faces,
    }


def jpeg_data_url(pixels, *, max_side: int = FRAME_MAX_SIDE, quality: int = 85) -> str:
    """An RGB ``(H, W, 3)`` uint8 image as a ``data:image/jpeg;base64,...`` URL,
    shrunk (INTER_AREA) so that neither side is over ``max_side``."""
    import cv2

    height, width = pixels.shape[:2]
    factor = min(1.0, max_side / max(height, width))
    if factor < 1.0:
        pixels = cv2.resize(
            pixels, (max(1, round(width * factor)), max(1, round(height * factor))), interpolation=cv2.INTER_AREA
        )
    ok, data = cv2.imencode(".jpg", cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:  # pragma: no cover - cv2 encodes any uint8 RGB image
        raise InvalidOptionError("cannot encode the frame as JPEG")
    return "data:image/jpeg;base64," + base64.b64encode(data.tobytes()).decode("ascii")
