"""``faceweave serve``: run the HTTP service (API, job store, embedded workers)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from faceweave.cli import console, preflight

_HostFlag = Annotated[
    str | None,
    typer.Option(
        "--host",
        metavar="ADDR",
        help="Address to listen on (default 127.0.0.1; other addresses need authentication configured).",
    ),
]

_PortFlag = Annotated[int | None, typer.Option("--port", metavar="PORT", help="Port (default 8000).")]

_ConfigFlag = Annotated[
    Path | None,
    typer.Option("--config", metavar="FILE", help="Settings file, TOML or JSON (also FACEWEAVE_CONFIG)."),
]

_DatabaseFlag = Annotated[
    str | None,
    typer.Option(
        "--database", metavar="URL", help="Job store, an SQLAlchemy URL (default sqlite:///<storage>/jobs.db)."
    ),
]

_StorageFlag = Annotated[
    str | None,
    typer.Option(
        "--storage",
        metavar="DIR|URL",
        help="Folder for uploads, results and the audit log, or s3://BUCKET/PREFIX (object storage).",
    ),
]

_TlsCertFlag = Annotated[
    Path | None,
    typer.Option("--tls-cert", metavar="FILE", help="PEM certificate (chain): serve HTTPS (with --tls-key)."),
]

_TlsKeyFlag = Annotated[Path | None, typer.Option("--tls-key", metavar="FILE", help="PEM private key of --tls-cert.")]

_TlsRedirectPortFlag = Annotated[
    int | None,
    typer.Option(
        "--tls-redirect-port", metavar="PORT", help="With TLS: also answer plain HTTP here, redirecting to HTTPS."
    ),
]

_WorkersFlag = Annotated[
    int | None, typer.Option("--workers", metavar="N", min=0, help="Embedded job workers (default 1).")
]

_BrokerFlag = Annotated[
    str | None,
    typer.Option(
        "--broker",
        metavar="URL",
        help="Celery broker (redis://HOST:6379/0): distributed mode, jobs run on `faceweave worker` nodes.",
    ),
]

_DeviceMonitorFlag = Annotated[
    str | None,
    typer.Option(
        "--device-monitor",
        metavar="KIND",
        help="Device metrics of the embedded workers on /metrics: auto (default), nvidia, ascend, cambricon,"
        " host or none.",
    ),
]

_LogLevelFlag = Annotated[
    str, typer.Option("--log-level", metavar="LEVEL", help="Server log level: debug, info, warning, error.")
]

_VerboseFlag = Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")]


def serve_command(
    host: _HostFlag = None,
    port: _PortFlag = None,
    config: _ConfigFlag = None,
    database: _DatabaseFlag = None,
    storage: _StorageFlag = None,
    workers: _WorkersFlag = None,
    broker: _BrokerFlag = None,
    tls_cert: _TlsCertFlag = None,
    tls_key: _TlsKeyFlag = None,
    tls_redirect_port: _TlsRedirectPortFlag = None,
    device_monitor: _DeviceMonitorFlag = None,
    log_level: _LogLevelFlag = "info",
    verbose: _VerboseFlag = False,
) -> None:
    """Serve the faceweave API (/v1, /docs, /healthz, /readyz, /metrics) until Ctrl-C.

    Settings come from defaults < --config FILE < FACEWEAVE_* variables < these flags.
    """

    built: dict = {}

    def body(term: console.Terminal) -> int:
        from faceweave.service.app import create_app
        from faceweave.service.settings import load_settings

        settings = load_settings(
            config,
            overrides={
                "host": host,
                "port": port,
                "database": database,
                "storage": storage,
                "workers": workers,
                "broker": broker,
                "tls_cert": tls_cert,
                "tls_key": tls_key,
                "tls_redirect_port": tls_redirect_port,
                "device_monitor": device_monitor,
            },
        )
        preflight.check_log_level(log_level)
        preflight.check_distributed_installed(settings.broker, role="serve --broker (distributed mode)")
        if settings.workers:  # embedded workers run the models here
            preflight.check_device(settings.runtime)
        preflight.check_storage(settings.storage)
        preflight.check_object_storage(settings.s3)
        preflight.check_database(settings.database_url)
        preflight.check_port_free(settings.host, settings.port)
        if settings.tls_redirect_port is not None:
            preflight.check_port_free(settings.host, settings.tls_redirect_port)
        preflight.check_tls(settings.tls_cert, settings.tls_key)
        built["app"], built["settings"] = create_app(settings), settings
        auth = "API keys/JWT" if settings.auth.required else "none (single local user)"
        scheme = "https" if settings.tls_cert else "http"
        term.note(
            f"faceweave serving on {scheme}://{settings.host}:{settings.port}"
            f" (auth: {auth}; storage: {settings.storage_url})"
        )
        return console.EXIT_OK

    code = console.run(verbose, body)
    if code != console.EXIT_OK:
        raise typer.Exit(code)
    # the server runs outside the quiet session so that its log reaches stderr
    import uvicorn

    console.quiet_native_logging_env()
    settings = built["settings"]
    with _https_redirect(settings, log_level=log_level):
        uvicorn.run(built["app"], **uvicorn_options(settings, log_level=log_level, access_log=verbose))


@contextmanager
def _https_redirect(settings, *, log_level: str) -> Iterator[None]:
    """With ``tls_redirect_port``: a plain-HTTP listener that redirects to
    HTTPS, on its own thread (the main server keeps the signal handlers)
    and stopped when the main server stops."""
    if settings.tls_redirect_port is None:
        yield
        return
    import threading

    import uvicorn

    from faceweave.service.redirect import HttpsRedirect, RedirectRule

    app = HttpsRedirect(RedirectRule.from_settings(settings))
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.tls_redirect_port,
        http="h11",  # raw_path is the request target as sent (httptools would reduce an absolute one to its path)
        lifespan="off",
        log_level=log_level.lower(),
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="faceweave-https-redirect", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def uvicorn_options(settings, *, log_level: str, access_log: bool) -> dict[str, Any]:
    """``uvicorn.run``'s keyword arguments for ``settings`` (a :class:`ServiceSettings`):
    address, TLS, and the connection limits and timeouts of ``settings.limits``."""
    limits = settings.limits
    tls = {"ssl_certfile": str(settings.tls_cert), "ssl_keyfile": str(settings.tls_key)} if settings.tls_cert else {}
    return {
        **tls,
        "host": settings.host,
        "port": settings.port,
        "log_level": log_level.lower(),
        "access_log": access_log,
        "limit_concurrency": limits.max_connections,
        "timeout_keep_alive": limits.keep_alive_s,
        "timeout_graceful_shutdown": limits.graceful_shutdown_s,
        "h11_max_incomplete_event_size": limits.max_header_bytes,
    }
