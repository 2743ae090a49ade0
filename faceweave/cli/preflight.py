"""Checks that ``serve`` and ``worker`` run before they start a server or a
Celery worker, so that a bad setting is one clear line instead of a
traceback from inside uvicorn or Celery, or a worker that retries forever.

Each check raises a :class:`~faceweave.errors.FaceweaveError` subclass and
creates nothing.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from faceweave.errors import InvalidOptionError

LOG_LEVELS = ("debug", "info", "warning", "error")
#: seconds ``worker`` waits for its broker before giving up
BROKER_TIMEOUT_S = 5.0


def check_log_level(level: str) -> str:
    """``level`` in lower case, or :class:`InvalidOptionError`."""
    if level.lower() not in LOG_LEVELS:
        raise InvalidOptionError(f"--log-level must be {', '.join(LOG_LEVELS[:-1])} or {LOG_LEVELS[-1]}; got {level!r}")
    return level.lower()


def check_storage(path: Path, *, flag: str = "--storage") -> None:
    """Raise unless ``path`` is a folder, or can be created as one, that we may write."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise InvalidOptionError(f"{flag} {path}: is a file; give a folder for uploads, results and the job store")
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        raise InvalidOptionError(f"{flag} {path}: '{existing}' is a file, not a folder; give a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InvalidOptionError(f"{flag} {path}: folder '{existing}' is not writable; give a folder you can write")


def check_database(url: str) -> None:
    """Raise unless SQLAlchemy knows the kind of database ``url`` names (no connection is made)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    accepted = "use sqlite:///PATH or postgresql://USER:PASS@HOST/DB"
    try:
        make_url(url).get_dialect()
    except NoSuchModuleError as exc:  # a subclass of ArgumentError
        scheme = url.partition(":")[0]
        raise InvalidOptionError(f"--database {url!r}: unknown kind of database '{scheme}'; {accepted}") from exc
    except (ArgumentError, ValueError) as exc:
        raise InvalidOptionError(f"--database {url!r} is not a database URL; {accepted}") from exc
    except ImportError as exc:
        raise InvalidOptionError(
            f"--database {url!r}: its driver is not installed ({exc.name or exc}); {accepted}"
        ) from exc


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`InvalidOptionError` when ``host:port`` cannot be listened on
    (in use, or not an address of this machine).  Port 0 (any free port) passes."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidOptionError(f"--host {host!r} is not an address or a known host name") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise InvalidOptionError(
                    f"--port {port}: the port is already in use on {host}; stop the other server or choose another port"
                ) from exc
            if exc.errno == errno.EACCES:
                raise InvalidOptionError(
                    f"--port {port}: not allowed to listen on it (ports below 1024 need privileges)"
                ) from exc
            raise InvalidOptionError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --host and --port"
            ) from exc


def check_broker(url: str, *, timeout_s: float = BROKER_TIMEOUT_S) -> None:
    """Connect to the Celery broker once, waiting at most about ``timeout_s``.

    Raises:
        InvalidOptionError: the URL names no transport Kombu knows.
        ServiceError: the broker does not answer.
    """
    from kombu import Connection
    from kombu.utils.url import maybe_sanitize_url

    from faceweave.errors import ServiceError

    accepted = "use redis://HOST:6379/0 (or amqp://USER:PASS@HOST:5672//)"
    try:
        connection = Connection(url, connect_timeout=timeout_s)
        _ = connection.transport  # resolves the transport named by the scheme
    except (KeyError, ValueError, ImportError) as exc:
        raise InvalidOptionError(f"--broker {url!r} is not a broker URL Celery knows; {accepted}") from exc
    with connection:
        try:
            connection.connect()
        except Exception as exc:  # noqa: BLE001 - every transport raises its own kind
            reason = " ".join(str(exc).split()) or type(exc).__name__
            where = maybe_sanitize_url(url)  # the password, if any, is masked
            raise ServiceError(
                f"cannot reach the broker {where} ({reason}); start it or check --broker / FACEWEAVE_BROKER"
            ) from exc
