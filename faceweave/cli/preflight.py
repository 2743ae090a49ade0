"""Checks that ``serve`` and ``worker`` run before they start a server or a
Celery worker, so that a bad setting is one clear line instead of a
traceback from inside uvicorn or Celery, or a worker that retries forever.

Each check raises a :class:`~faceweave.errors.FaceweaveError` subclass and
creates nothing.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from faceweave.errors import InvalidOptionError

if TYPE_CHECKING:
    from faceweave.options import RuntimeOptions
    from faceweave.service.settings import S3Settings

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


def check_object_storage(settings: S3Settings) -> None:
    """Reach the bucket of ``s3://`` storage once (nothing to do for a folder).

    Raises:
        InvalidOptionError: boto3 is not installed.
        ServiceError: no credentials, the endpoint unreachable, the bucket missing or access denied.
    """
    if settings.url is not None:
        from faceweave.service.s3storage import check_bucket

        check_bucket(settings)


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


#: what distributed mode imports (the ``distributed`` extra), by what needs it
_DISTRIBUTED_MODULES = (("celery", "the broker"), ("kombu", "the broker"))


def check_distributed_installed(broker: str | None, *, role: str) -> None:
    """That the ``distributed`` extra is installed when ``broker`` is set
    (``role``: who needs it, for the message): Celery and kombu, and the
    redis client for a ``redis://`` broker.

    Raises:
        InvalidOptionError: one of them is missing, naming the extra to install.
    """
    if not broker:
        return
    needed = [name for name, _ in _DISTRIBUTED_MODULES]
    if broker.startswith(("redis://", "rediss://")):
        needed.append("redis")
    missing = [name for name in needed if not _installed(name)]
    if missing:
        raise InvalidOptionError(
            f"{role} needs the distributed extra ({', '.join(missing)} not installed):"
            " pip install 'faceweave[distributed]'"
        )


def _installed(name: str) -> bool:
    """Whether ``name`` imports here (already imported, or found on the path)."""
    if name in sys.modules:
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None


def check_port_free(host: str, port: int, *, flag: str = "--port") -> None:
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
                    f"{flag} {port}: the port is already in use on {host}; stop the other server or choose another port"
                ) from exc
            if exc.errno == errno.EACCES:
                raise InvalidOptionError(
                    f"{flag} {port}: not allowed to listen on it (ports below 1024 need privileges)"
                ) from exc
            raise InvalidOptionError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --host and {flag}"
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


def check_tls(cert: Path | None, key: Path | None) -> None:
    """Raise :class:`InvalidOptionError` unless ``cert`` and ``key`` are a
    readable PEM certificate (chain) and its unencrypted private key, as
    uvicorn loads them (nothing to check when neither is given)."""
    import ssl

    if cert is None or key is None:
        return
    cert_text = _read_pem(cert, "--tls-cert")
    key_text = _read_pem(key, "--tls-key")
    if "-----BEGIN CERTIFICATE-----" not in cert_text:
        raise InvalidOptionError(f"--tls-cert {cert}: not a PEM certificate (-----BEGIN CERTIFICATE-----)")
    if "PRIVATE KEY-----" not in key_text:
        raise InvalidOptionError(f"--tls-key {key}: not a PEM private key (-----BEGIN PRIVATE KEY-----)")

    def no_password() -> bytes:  # an encrypted key would make OpenSSL prompt on the terminal
        raise InvalidOptionError(f"--tls-key {key}: the key is encrypted; give it without a passphrase")

    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password=no_password)
    except ssl.SSLError as exc:
        reason = exc.reason or " ".join(str(exc).split())
        if "KEY_VALUES_MISMATCH" in str(reason):
            raise InvalidOptionError(f"--tls-key {key} is not the private key of the certificate {cert}") from exc
        raise InvalidOptionError(f"cannot use --tls-cert {cert} with --tls-key {key}: {reason}") from exc


def _read_pem(path: Path, flag: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii", errors="replace")
    except FileNotFoundError as exc:
        raise InvalidOptionError(f"{flag} {path}: no such file") from exc
    except IsADirectoryError as exc:
        raise InvalidOptionError(f"{flag} {path}: is a folder; give a PEM file") from exc
    except OSError as exc:
        raise InvalidOptionError(f"{flag} {path}: cannot read it ({exc.strerror or exc})") from exc


def check_device(runtime: RuntimeOptions) -> None:
    """The accelerator the settings ask for answers: its ONNX Runtime
    provider starts a one-node model on ``device_id`` (so a missing driver,
    an onnxruntime build without the provider, or an absent device is one
    line at start, and a scheduler can place the worker elsewhere).  Nothing
    to check for the CPU, or with ``provider_fallback`` (the CPU is then
    used, with a warning, when the device is missing).

    Raises: :class:`ProviderError`."""
    if runtime.execution_provider == "cpu" or runtime.provider_fallback:
        return
    from faceweave.runtime.backend import OnnxBackend
    from faceweave.sessions import ModelSessions

    provider = ModelSessions(runtime).provider
    OnnxBackend(threads=1).load(_identity_model(), provider, label="the device check").close()


def _identity_model() -> bytes:
    """A one-node ONNX model (``y = x``, float ``[1]``), made in memory."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "device_check", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()
