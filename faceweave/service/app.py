"""The app factory: :func:`create_app` builds a FastAPI app from settings.

There is no module-level app: the :class:`~faceweave.service.node.Service`
(store, storage, models, worker pool, auth, limits, metrics, audit log) is
created by the app's lifespan handler, hangs off ``app.state.service`` and is
closed when the app stops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from faceweave.service import errors
from faceweave.service.docs import install_docs
from faceweave.service.metrics import Metrics, MetricsMiddleware
from faceweave.service.node import Service
from faceweave.service.settings import ServiceSettings, load_settings
from faceweave.service.verify import install_verify
from faceweave.service.web import install_web
from faceweave.service.webrtc.routes import install_live


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    """A new app for ``settings`` (``None``: :func:`load_settings` from
    ``FACEWEAVE_CONFIG`` and ``FACEWEAVE_*`` variables, so that
    ``uvicorn --factory faceweave.service.app:create_app`` works).

    Raises:
        InvalidOptionError: the settings would expose the service without
            authentication (see :meth:`ServiceSettings.check_bind`).
    """
    from faceweave.service.compat import router as classic_router
    from faceweave.service.routes import router

    settings = settings or load_settings()
    settings.check_bind()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        import anyio.to_thread

        service = await anyio.to_thread.run_sync(lambda: Service(settings, metrics=metrics))
        app.state.service = service
        service.start()
        try:
            yield
        finally:
            await service.live.close_all()  # the peer connections live on this loop
            await anyio.to_thread.run_sync(service.close)

    app = FastAPI(
        title="faceweave",
        version=_version(),
        lifespan=lifespan,
        description="Face swap for photos and videos: synchronous swaps and persistent jobs.",
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,  # install_docs serves them offline
    )
    errors.install(app, hide=(str(settings.storage.expanduser().resolve()), *errors.model_folders(settings.runtime)))
    app.include_router(router)
    app.include_router(classic_router)  # POST /swap, the classic Flask service's
    install_verify(app)
    install_web(app)
    install_live(app)
    install_docs(app)
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type", "Range", "If-Range"],
            expose_headers=["Location", "Content-Range", "Retry-After", "ETag"],
        )
    hsts = settings.hsts_max_age_s if settings.tls_cert is not None else 0  # never over plain HTTP
    app.add_middleware(SecurityHeadersMiddleware, hsts_max_age_s=hsts)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


class SecurityHeadersMiddleware:
    """Adds :data:`~faceweave.service.errors.API_HEADERS` (``nosniff``, a CSP
    that lets nothing run) to every HTTP answer, keeping any the route set
    (the web page's and the docs' own CSP); with ``hsts_max_age_s`` (HTTPS
    only) also ``Strict-Transport-Security``."""

    def __init__(self, app: Any, *, hsts_max_age_s: int = 0) -> None:
        self.app = app
        extra = dict(errors.API_HEADERS)
        if hsts_max_age_s > 0:
            extra["Strict-Transport-Security"] = f"max-age={hsts_max_age_s}"
        self.extra = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in extra.items()]

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in self.extra if name not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _version() -> str:
    from faceweave.provenance.stamp import tool_version

    return tool_version()
