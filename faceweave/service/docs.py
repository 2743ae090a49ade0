"""The API's documentation pages, served by the app itself: ``GET /docs``
(Swagger UI), ``GET /redoc`` (ReDoc) and their files under ``/docs/assets/``.

Nothing is fetched from elsewhere, so the pages work offline: Swagger UI and
ReDoc come from the static folder of the ``fastapi-offline`` wheel (MIT;
Swagger UI is Apache-2.0, ReDoc MIT), the pages and Swagger UI's start-up
script from ``faceweave/service/static``.  Each page's Content-Security-Policy
allows scripts from this origin only, never inline; ReDoc styles itself with
inline ``<style>`` elements and runs its search in a ``blob:`` worker, so its
policy allows those two as well.  :func:`install_docs` adds the routes to an
app made with ``docs_url=None, redoc_url=None`` (FastAPI's own pages load
their files from public CDNs).
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse

from faceweave.errors import NotFoundError

_JS, _CSS = "text/javascript; charset=utf-8", "text/css; charset=utf-8"
#: ``/docs/assets/<name>``: (package, file inside it, media type); no path is built from a request
ASSETS: dict[str, tuple[str, str, str]] = {
    "swagger-ui-bundle.js": ("fastapi_offline", "static/swagger-ui-bundle.js", _JS),
    "swagger-ui.css": ("fastapi_offline", "static/swagger-ui.css", _CSS),
    "redoc.standalone.js": ("fastapi_offline", "static/redoc.standalone.js", _JS),
    "favicon.png": ("fastapi_offline", "static/favicon.png", "image/png"),
    "docs.js": ("faceweave.service", "static/docs.js", _JS),
    "docs.css": ("faceweave.service", "static/docs.css", _CSS),
}
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
#: the CSP of ``/docs`` (Swagger UI)
SWAGGER_POLICY = _POLICY
#: the CSP of ``/redoc``: ReDoc also needs inline ``<style>`` and a ``blob:`` worker
REDOC_POLICY = _POLICY.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'") + "; worker-src blob:"

docs_router = APIRouter(include_in_schema=False)


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs``, ``/redoc`` and their assets from ``app``."""
    app.include_router(docs_router)


def _answer(package: str, name: str, media_type: str, policy: str) -> FileResponse:
    path = resources.files(package).joinpath(name)  # a file of the installed package
    return FileResponse(
        str(path),
        media_type=media_type,
        headers={
            "Cache-Control": "no-cache",
            "Content-Security-Policy": policy,
            "Referrer-Policy": "no-referrer",
        },
    )


@docs_router.get("/docs")
async def swagger_page() -> FileResponse:
    return _answer("faceweave.service", "static/docs.html", "text/html; charset=utf-8", SWAGGER_POLICY)


@docs_router.get("/redoc")
async def redoc_page() -> FileResponse:
    return _answer("faceweave.service", "static/redoc.html", "text/html; charset=utf-8", REDOC_POLICY)


@docs_router.get("/docs/assets/{name}")
async def docs_asset(name: str) -> FileResponse:
    """One of :data:`ASSETS`.

    Raises:
        NotFoundError: ``name`` is not one of them.
    """
    found = ASSETS.get(name)
    if found is None:
        raise NotFoundError(f"no documentation file {name[:64]!r}")
    package, path, media_type = found
    return _answer(package, path, media_type, SWAGGER_POLICY)
