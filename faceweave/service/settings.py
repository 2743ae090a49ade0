"""The service's configuration: one typed, frozen settings object.

Values come from, in increasing precedence: the defaults here, a TOML or JSON
file (``--config FILE`` or ``FACEWEAVE_CONFIG``), environment variables
``FACEWEAVE_<NAME>`` (nested fields with a double underscore, e.g.
``FACEWEAVE_AUTH__JWT_ISSUER``; lists and objects as JSON), and command-line
flags.  :func:`load_settings` merges them and validates once; the file and
the variables are read by pydantic-settings' sources (TOML/JSON file
sources, an environment source over a given mapping).

Authentication (``auth.mode``):

* ``"auto"`` (default): with API keys or a JWT key configured every ``/v1``
  request must authenticate; with none configured the service runs for one
  local user (``"local"``) and refuses to listen on anything but a loopback
  address.
* ``"required"``: like auto, but starting without any credentials configured
  is an error.
* ``"none"``: no authentication, on any address; every caller is ``"local"``.
  Only for a trusted network.

Long because every setting is declared here with its bounds and
description, in one typed tree.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    JsonConfigSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

from faceweave import names
from faceweave.errors import InvalidOptionError, UnreadableFileError
from faceweave.options import VIDEO_WORKING_SIZE, RuntimeOptions

ENV_PREFIX = "FACEWEAVE_"
LOCAL_USER = "local"
#: the longest user name or token subject (the owner column holds 200 characters, with a 4-character prefix)
MAX_NAME = 196


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ApiKey(_Settings):
    """One API key: its owner and the key, given in clear (``key``) or as
    the hex sha256 of the key (``sha256``, better in files)."""

    user: str = Field(min_length=1, max_length=MAX_NAME)
    key: str | None = Field(None, min_length=16, description="the key itself (hashed when loaded)")
    sha256: str | None = Field(None, pattern=r"^[0-9a-fA-F]{64}$")

    @model_validator(mode="after")
    def _one_of(self) -> ApiKey:
        if (self.key is None) == (self.sha256 is None):
            raise ValueError("give an API key as exactly one of 'key' or 'sha256'")
        return self

    @property
    def digest(self) -> bytes:
        """The sha256 of the key, 32 bytes."""
        if self.sha256 is not None:
            return bytes.fromhex(self.sha256)
        return hashlib.sha256(str(self.key).encode("utf-8")).digest()


class AuthSettings(_Settings):
    mode: Literal["auto", "required", "none"] = "auto"
    api_keys: tuple[ApiKey, ...] = ()
    jwt_algorithms: tuple[Literal["HS256", "HS384", "HS512", "RS256", "RS384", "RS512"], ...] = ("HS256", "RS256")
    jwt_secret: str | None = Field(None, min_length=32, description="shared secret for HS* tokens")
    jwt_public_key: str | None = Field(None, description="PEM public key, or a path to one, for RS* tokens")
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_leeway_s: float = Field(30.0, ge=0.0, le=600.0)
    jwt_user_claim: str = "sub"
    jwt_subject_owners: dict[str, str] = Field(
        default_factory=dict,
        description="token subject -> API-key user: such a token owns that user's jobs"
        " (key:<user>) instead of its own (jwt:<subject>)",
    )

    @model_validator(mode="after")
    def _known_owners(self) -> AuthSettings:
        users = {k.user for k in self.api_keys}
        unknown = sorted(set(self.jwt_subject_owners.values()) - users)
        if unknown:
            raise ValueError(f"jwt_subject_owners maps to {unknown[0][:60]!r}, which is no API key's user")
        return self

    @property
    def jwt_enabled(self) -> bool:
        return self.jwt_secret is not None or self.jwt_public_key is not None

    @property
    def configured(self) -> bool:
        """Whether any credential is configured."""
        return bool(self.api_keys) or self.jwt_enabled

    @property
    def required(self) -> bool:
        """Whether ``/v1`` requests must authenticate."""
        return self.mode == "required" or (self.mode == "auto" and self.configured)

    def public_key_pem(self) -> str | None:
        """The RS* public key as PEM text (read from the file when a path was given)."""
        value = self.jwt_public_key
        if value is None or "-----BEGIN" in value:
            return value
        try:
            return Path(value).read_text(encoding="ascii")
        except OSError as exc:
            raise UnreadableFileError(f"cannot read the JWT public key file '{value}': {exc.strerror or exc}") from exc


class LimitSettings(_Settings):
    max_upload_bytes: int = Field(200 * 1024 * 1024, ge=1024, description="whole request body")
    max_image_pixels: int = Field(40_000_000, ge=1)
    max_video_seconds: float = Field(600.0, gt=0)
    max_video_frames: int = Field(36_000, ge=1)
    max_files: int = Field(16, ge=2)
    max_fields: int = Field(
        128,
        ge=1,
        description="text fields of one upload (the API's options are 74 names, each may come as a field of its"
        " own); with max_files also the most parts, refused with 413 as soon as the count is crossed",
    )
    max_field_bytes: int = Field(64 * 1024, ge=256)
    upload_timeout_s: float = Field(
        600.0, gt=0, description="the whole request body must arrive within this many seconds (408 otherwise)"
    )
    upload_idle_s: float = Field(
        30.0, gt=0, description="the most seconds between two chunks of a request body (408 otherwise)"
    )
    rate_per_second: float = Field(20.0, ge=0.0, description="per caller; 0 turns the limit off")
    rate_burst: int = Field(40, ge=1)
    auth_failures: int = Field(
        10,
        ge=0,
        description="failed authentications allowed per client address and per credential within"
        " auth_failure_window_s; more answer 429 until the oldest ages out (0 turns the limit off)",
    )
    auth_failure_window_s: float = Field(60.0, gt=0, description="the window of auth_failures, in seconds")
    max_connections: int = Field(
        128, ge=1, description="uvicorn's limit_concurrency: connections and tasks at once; past it, 503"
    )
    keep_alive_s: int = Field(5, ge=1, le=600, description="uvicorn's timeout_keep_alive: idle keep-alive connections")
    graceful_shutdown_s: int = Field(
        30, ge=1, description="uvicorn's timeout_graceful_shutdown: how long Ctrl-C waits for open requests"
    )
    max_header_bytes: int = Field(
        16 * 1024, ge=1024, description="uvicorn's h11_max_incomplete_event_size: request line and headers"
    )


#: an ICE server URL as aiortc and the browsers take it (RFC 7064, 7065): ``stun:`` or ``stuns:`` HOST[:PORT],
#: ``turn:`` HOST[:PORT][?transport=udp|tcp], ``turns:`` HOST[:PORT][?transport=tcp]; a host is a name or IPv4
ICE_URL = re.compile(
    r"(?P<scheme>stuns?|turns?):(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)"
    r"(?::(?P<port>\d{1,5}))?(?:\?transport=(?P<transport>[a-z]+))?"
)


def check_ice_url(url: str) -> str:
    """``url`` when it is an ICE server URL aiortc and the browsers both take.

    Raises:
        ValueError: it is not (the message says what is accepted).
    """
    match = ICE_URL.fullmatch(url)
    accepted = "stun:HOST[:PORT], turn:HOST[:PORT][?transport=udp|tcp] or turns:HOST[:PORT] (HOST a name or IPv4)"
    if match is None:
        raise ValueError(f"'{url[:80]}' is not an ICE server URL: use {accepted}")
    scheme, port, transport = match["scheme"], match["port"], match["transport"]
    if port is not None and not 0 < int(port) < 65536:
        raise ValueError(f"'{url[:80]}': the port must be 1-65535")
    if scheme.startswith("stun") and transport is not None:
        raise ValueError(f"'{url[:80]}': a STUN URL takes no ?transport= (RFC 7064)")
    if transport not in (None, "udp", "tcp") or (scheme == "turns" and transport == "udp"):
        raise ValueError(f"'{url[:80]}': the transport must be udp or tcp (turns: tcp only, TLS over TCP)")
    return url


class IceServer(_Settings):
    """One STUN or TURN server, as ``RTCIceServer`` has it (a plain URL is
    ``{urls = [URL]}``).  A TURN server without ``username`` and
    ``credential`` gets time-limited ones from ``live.turn_secret``."""

    urls: tuple[str, ...] = Field(min_length=1, max_length=8, description="stun:, stuns:, turn: or turns: URLs")
    username: str | None = Field(None, min_length=1, max_length=512, description="the TURN user (long-term)")
    credential: str | None = Field(None, min_length=1, max_length=512, description="the TURN password")
    use: Literal["both", "browser", "server"] = Field(
        "both", description="who gathers candidates with it: the browser (the page), the server (aiortc) or both"
    )

    @field_validator("urls")
    @classmethod
    def _urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_ice_url(url) for url in value)

    @model_validator(mode="after")
    def _pair(self) -> IceServer:
        if (self.username is None) != (self.credential is None):
            raise ValueError("give a TURN server both username and credential, or neither (live.turn_secret)")
        return self

    @property
    def turn(self) -> bool:
        """Whether any of its URLs is a TURN server's."""
        return any(url.startswith("turn") for url in self.urls)


class LiveSettings(_Settings):
    """Live sessions over WebRTC (``POST /v1/live``, the page ``/live``)."""

    sessions: int = Field(
        2, ge=0, le=64, description="live sessions this node carries at once (0: POST /v1/live answers 503)"
    )
    connect_timeout_s: float = Field(
        20.0, gt=0, description="a session whose browser sends no video frame within this many seconds is ended"
    )
    max_seconds: float = Field(3600.0, gt=0, description="the longest a live session runs before it is ended")
    frame_timeout_s: float = Field(
        5.0,
        gt=0,
        description="a session whose browser has sent frames and then sends none for this many seconds is ended"
        " (a stalled peer gives its place back)",
    )
    sessions_per_caller: int | None = Field(
        None,
        ge=1,
        le=64,
        description="live places (sessions and reservations) one caller holds at once, the next answered 429;"
        " default 1 when the service requires authentication, else live.sessions (every caller is 'local')",
    )
    reservation_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="how long POST /v1/live/reservations holds a place (and its TURN credentials' session id)"
        " for the POST /v1/live that names it",
    )
    retry_after_s: float = Field(
        10.0, gt=0, le=3600, description="the Retry-After of a live place refused (503 at_capacity, 429 per caller)"
    )
    node: str | None = Field(
        None,
        min_length=1,
        max_length=253,
        description="this node's name, whose hash starts every live session id it makes (so another node can"
        " tell a request routed to the wrong node: 421); default the host name (a pod's name on Kubernetes)",
    )
    ice_servers: tuple[IceServer, ...] = Field(
        (),
        max_length=8,
        description="STUN and TURN servers for the server's side (aiortc: the first STUN and the first TURN URL"
        " of those it uses) and the page (POST /v1/live/reservations); none: host candidates only",
    )
    ice_transport_policy: Literal["all", "relay"] = Field(
        "all", description="relay: both sides use TURN relay candidates only (hides the addresses; needs TURN)"
    )
    turn_secret: str | None = Field(
        None,
        min_length=16,
        description="coturn's static-auth-secret (use-auth-secret): TURN servers without a username get"
        " time-limited credentials made from it (the TURN REST scheme); the secret never leaves the server",
    )
    turn_ttl_s: float = Field(
        14400.0, ge=60, le=7 * 86400, description="how long the time-limited TURN credentials are valid"
    )
    swapper: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="the swapper live sessions run: 'mesh' (classical, the default) or a neural model in the"
        " models folder (e.g. inswapper_128, on the service's runtime provider); the node's sessions share one"
        " loaded copy of a neural model",
    )
    batch_window_ms: float = Field(
        4.0,
        ge=0.0,
        le=50.0,
        description="with a neural swapper, how long one session's face waits at most for the faces of the"
        " node's other running sessions, to go through the model in one inference (a session running alone"
        " never waits; 0: every face in its own call)",
    )

    @field_validator("swapper")
    @classmethod
    def _live_swapper(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value == names.NO_SWAPPER or value not in names.SWAPPERS:
            live = tuple(n for n in names.SWAPPERS if n != names.NO_SWAPPER)
            raise ValueError(names.unknown("live swapper", value, live, listed="available:"))
        return value

    @field_validator("ice_servers", mode="before")
    @classmethod
    def _plain_urls(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [{"urls": [item]} if isinstance(item, str) else item for item in value]
        return value

    @model_validator(mode="after")
    def _turn_credentials(self) -> LiveSettings:
        for server in self.ice_servers:
            if server.turn and server.username is None and self.turn_secret is None:
                raise ValueError(
                    f"the TURN server {server.urls[0][:80]} needs a username and credential, or live.turn_secret"
                    " (coturn's static-auth-secret) for time-limited credentials"
                )
        if self.turn_secret is not None and self.turn_ttl_s < self.max_seconds:
            raise ValueError(
                f"live.turn_ttl_s ({self.turn_ttl_s:g}) must be at least live.max_seconds ({self.max_seconds:g}):"
                " TURN refuses a session's refresh once its credentials expire"
            )
        for side in ("browser", "server"):
            if self.ice_transport_policy == "relay" and not any(
                s.turn and s.use in ("both", side) for s in self.ice_servers
            ):
                raise ValueError(
                    f"live.ice_transport_policy = 'relay' needs a TURN server the {side} uses in live.ice_servers"
                    f" (use = 'both' or '{side}')"
                )
        return self


#: ``s3://BUCKET`` or ``s3://BUCKET/PREFIX`` (S3's bucket-name rules, a prefix without empty parts)
S3_URL = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9!_.*'()-]+)*/?$"


class S3Settings(_Settings):
    """Object storage (``storage = "s3://BUCKET/PREFIX"``).  What is not set
    here comes from the environment and files as AWS tools read them
    (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
    ``AWS_PROFILE``, ``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``,
    ``~/.aws/config``, ...)."""

    url: str | None = Field(None, description="s3://BUCKET/PREFIX; set by storage = 's3://...'")
    endpoint_url: str | None = Field(
        None, pattern=r"^https?://", description="an S3-compatible server (MinIO, Ceph, ...); default AWS"
    )
    public_endpoint_url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="the endpoint clients reach (a CDN or the server's public name), for presigned download URLs;"
        " default endpoint_url",
    )
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    addressing_style: Literal["auto", "path", "virtual"] = "auto"
    part_size_mb: int = Field(16, ge=5, le=5120, description="multipart upload part size (S3's least is 5)")
    url_expiry_s: float = Field(
        3600.0, ge=1.0, le=7 * 24 * 3600.0, description="presigned download URLs; never past the job's expiry"
    )
    connect_timeout_s: float = Field(5.0, gt=0)
    # -- outages (issue 33, F19) ----------------------------------------------
    probe_timeout_s: float = Field(
        2.0, gt=0, le=30.0, description="/readyz asks the bucket (HEAD) with this timeout and one attempt"
    )
    probe_cache_s: float = Field(
        5.0,
        ge=0,
        le=300.0,
        description="how long /readyz keeps the bucket probe's verdict (an outage met by any"
        " request counts as a fresh one)",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(S3_URL, value):
            raise ValueError(
                f"{value[:80]!r} is not s3://BUCKET/PREFIX (a bucket is 3-63 lower-case letters, digits, dots"
                " and hyphens)"
            )
        return value

    @property
    def bucket(self) -> str:
        return (self.url or "s3://").removeprefix("s3://").partition("/")[0]

    @property
    def prefix(self) -> str:
        """The key prefix, without slashes at either end ("" for the whole bucket)."""
        return (self.url or "s3://").removeprefix("s3://").partition("/")[2].strip("/")


class ServiceSettings(BaseSettings):
    """Everything ``faceweave serve`` can be told.  ``storage`` is a folder,
    or ``s3://BUCKET/PREFIX``: then ``s3.url`` holds it and ``storage`` is the
    local folder (``local_storage``, default ``<state>/service``) for uploads
    being received, working copies, the default job store and audit log.

    Made by :func:`load_settings` from its sources; built directly
    (``ServiceSettings(port=...)``) it reads only what it is given."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="forbid",
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        case_sensitive=False,
        validate_default=False,  # as the other settings models: defaults are trusted
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only the values given: :func:`load_settings` names the file and the environment."""
        return (init_settings,)

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    storage: Path = Field(default_factory=lambda: _state_dir() / "service")
    local_storage: Path | None = Field(None, description="with s3:// storage: the local folder (see storage)")
    s3: S3Settings = S3Settings()
    tls_cert: Path | None = Field(None, description="PEM certificate (chain): serve HTTPS; needs tls_key")
    tls_key: Path | None = Field(None, description="PEM private key of tls_cert")
    tls_redirect_port: int | None = Field(
        None, ge=1, le=65535, description="with TLS: also listen on this port (plain HTTP) and redirect to HTTPS (308)"
    )
    # -- the HTTPS redirect and HSTS (issue 33, F16-F17) --------------------
    public_host: str | None = Field(
        None,
        pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$",
        description="HOST or HOST:PORT clients reach the HTTPS listener at: the host of the tls_redirect_port"
        " redirect's Location (default: the request's Host when it names `host`; needed with a wildcard host)",
    )
    hsts_max_age_s: int = Field(
        31_536_000,
        ge=0,
        le=63_072_000,
        description="with TLS: Strict-Transport-Security max-age on every HTTPS answer (0: no header); never"
        " sent when serving plain HTTP",
    )
    # ------------------------------------------------------------------------
    database: str | None = Field(None, description="SQLAlchemy URL; default sqlite:///<storage>/jobs.db")
    workers: int = Field(1, ge=0, le=64, description="embedded job workers (0: this node runs no jobs)")
    sync_slots: int = Field(1, ge=0, le=64, description="models kept for POST /v1/swap (0: that endpoint answers 503)")
    sync_wait_s: float = Field(30.0, gt=0, description="how long POST /v1/swap waits for a free slot")
    lease_s: float = Field(60.0, ge=1.0, description="a running job's lease; renewed while it runs")
    max_attempts: int = Field(3, ge=1)
    progress_interval_s: float = Field(0.5, gt=0)
    poll_interval_s: float = Field(0.5, gt=0)
    results_ttl_s: float = Field(24 * 3600.0, gt=0)
    sweep_interval_s: float = Field(60.0, gt=0)
    # -- orphaned job files (issue 33, F18) -----------------------------------
    orphan_grace_s: float = Field(
        3600.0,
        ge=60.0,
        description="the sweeper deletes a jobs/<id>/ folder or its objects when no job row has that id and its"
        " newest file is older than this (a process killed between storing a job's inputs and creating its row);"
        " longer than the slowest input upload. The storage (folder or bucket prefix) belongs to one job database",
    )
    # ------------------------------------------------------------------------
    video_working_size: int = Field(VIDEO_WORKING_SIZE, ge=96, le=1024)
    broker: str | None = Field(
        None, description="Celery broker URL (redis://...): distributed mode; this node queues jobs there and runs none"
    )
    segment_frames: int = Field(
        0,
        ge=0,
        description="distributed mode: a video job with more frames is split into segments of about this many "
        "(0: never)",
    )
    segments: int = Field(
        8, ge=1, le=256, description="distributed mode: the most segments one video job is split into"
    )
    device_monitor: Literal["auto", "nvidia", "ascend", "cambricon", "host", "none"] = Field(
        "auto",
        description="embedded workers: the device monitor whose faceweave_device_* series /metrics exports (none: off)",
    )
    watermark: bool = True
    audit_log: Path | None = Field(None, description="default <storage>/audit.jsonl")
    cors_origins: tuple[str, ...] = ()
    auth: AuthSettings = AuthSettings()
    limits: LimitSettings = LimitSettings()
    live: LiveSettings = LiveSettings()
    #: where neural models run (FACEWEAVE_RUNTIME__EXECUTION_PROVIDER=cuda, ...__DEVICE_ID=1, ...__MODELS_DIR=...)
    runtime: RuntimeOptions = RuntimeOptions()

    @model_validator(mode="before")
    @classmethod
    def _object_storage(cls, data: Any) -> Any:
        """``storage = "s3://..."`` goes to ``s3.url``; ``storage`` becomes the local folder."""
        if not isinstance(data, dict) or not str(data.get("storage", "")).startswith("s3://"):
            return data
        data = dict(data)
        s3 = data.get("s3")
        data["s3"] = {**(s3.model_dump(exclude_unset=True) if isinstance(s3, BaseModel) else s3 or {})}
        data["s3"]["url"] = data.pop("storage")
        if data.get("local_storage") is not None:
            data["storage"] = data["local_storage"]
        return data

    @model_validator(mode="after")
    def _tls_pair(self) -> ServiceSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("give both tls_cert and tls_key (or neither)")
        if self.tls_redirect_port is not None and (self.tls_cert is None or self.tls_redirect_port == self.port):
            raise ValueError("tls_redirect_port needs tls_cert and tls_key, and a port other than the HTTPS port")
        if self.tls_redirect_port is not None and self.public_host is None and _is_wildcard(self.host):
            raise ValueError(
                f"tls_redirect_port on host {self.host} (every address) needs public_host: the name clients reach"
                " the HTTPS port by, for the redirect's Location"
            )
        return self

    @property
    def storage_url(self) -> str:
        """Where uploads and results are kept, for messages: the bucket or the folder."""
        return self.s3.url or str(self.storage)

    @field_validator("storage", "audit_log", "local_storage", "tls_cert", "tls_key", mode="after")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser()

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL; ``postgresql://`` (and ``postgres://``) use the psycopg 3 driver."""
        if self.database is None:
            return f"sqlite:///{(self.storage / 'jobs.db').resolve()}"
        for plain in ("postgresql://", "postgres://"):
            if self.database.startswith(plain):
                return "postgresql+psycopg://" + self.database[len(plain) :]
        return self.database

    @property
    def distributed(self) -> bool:
        """Whether jobs go through the Celery broker instead of the embedded pool."""
        return self.broker is not None

    @property
    def audit_path(self) -> Path:
        return self.audit_log or self.storage / "audit.jsonl"

    def check_bind(self) -> None:
        """Raise :class:`InvalidOptionError` when the service would be open to
        the network without authentication (``auth.mode`` auto, no credentials,
        a host that is not a loopback address)."""
        if self.auth.mode == "required" and not self.auth.configured:
            raise InvalidOptionError("auth.mode 'required' needs API keys or a JWT secret / public key")
        if self.auth.mode == "auto" and not self.auth.configured and not is_loopback(self.host):
            raise InvalidOptionError(
                f"refusing to listen on {self.host} without authentication: configure API keys or JWT,"
                " or set auth.mode = 'none' explicitly for a trusted network"
            )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    """Whether ``host`` binds every address (``0.0.0.0``, ``::``, empty)."""
    try:
        return not host or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _state_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or ""
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "faceweave"


def load_settings(
    config: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ServiceSettings:
    """Defaults < ``config`` file < ``FACEWEAVE_*`` variables < ``overrides``
    (flags; ``None`` values are skipped).  Dotted override keys set nested
    fields (``{"auth.mode": "none"}``).  The file and the variables are read
    by pydantic-settings' sources (:func:`config_file_values`,
    :class:`EnvironmentSource`).

    Raises:
        UnreadableFileError: the config file is missing or not valid TOML/JSON.
        InvalidOptionError: a value is invalid or a name unknown (the message names it).
    """
    env = os.environ if environ is None else environ
    path = config if config is not None else env.get(ENV_PREFIX + "CONFIG")
    layers: list[Mapping[str, Any]] = [config_file_values(Path(path))] if path else []
    try:
        layers.append(EnvironmentSource(ServiceSettings, env)())
    except SettingsError as exc:  # a list or table setting that is not JSON
        raise _environment_error(exc, env) from exc
    layers += [_nested(key.split("."), value) for key, value in (overrides or {}).items() if value is not None]
    data: dict[str, Any] = {}
    for layer in layers:
        _merge(data, layer)
    try:
        return ServiceSettings.model_validate(data)
    except ValidationError as exc:
        raise _setting_error(exc) from exc


def _environment_error(exc: SettingsError, environ: Mapping[str, str]) -> InvalidOptionError:
    """A ``FACEWEAVE_*`` variable of a list or table setting that is not JSON, named."""
    found = re.search(r'field "(\w+)"', str(exc))
    field = found.group(1) if found else "settings"
    stem = (ENV_PREFIX + field).upper()
    names = sorted(n for n in environ if n.upper() == stem or n.upper().startswith(stem + "__"))
    culprits = [n for n in names if _undecodable(n, environ[n])] or names
    named = ", ".join(culprits) or stem
    return InvalidOptionError(f'invalid setting {field}: {named} must be JSON (a list or a table), as ["a", "b"]')


def _undecodable(name: str, value: str) -> bool:
    """Whether the variable ``name`` alone fails the environment source."""
    try:
        EnvironmentSource(ServiceSettings, {name: value})()
    except SettingsError:
        return True
    return False


def _setting_error(exc: ValidationError) -> InvalidOptionError:
    """The first problem of ``exc`` in one line that names the setting."""
    first = exc.errors()[0]
    loc = tuple(first.get("loc", ()))
    where = ".".join(str(p) for p in loc) or "settings"
    if first.get("type") == "extra_forbidden":
        known = _known_names(loc[:-1])
        section = f" in {'.'.join(map(str, loc[:-1]))}" if loc[:-1] else ""
        hint = f"; known settings{section}: {', '.join(known)}" if known else ""
        return InvalidOptionError(f"unknown setting {where}{hint}")
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    return InvalidOptionError(f"invalid setting {where}: {message}")


def _known_names(loc: tuple) -> list[str]:
    """The field names of the settings section at ``loc`` (``()`` is the top level)."""
    from pydantic import BaseModel

    model: type[BaseModel] = ServiceSettings
    for part in loc:
        field = model.model_fields.get(str(part))
        section = field.annotation if field is not None else None
        if not (isinstance(section, type) and issubclass(section, BaseModel)):
            return []
        model = section
    return sorted(model.model_fields)


class EnvironmentSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (the
    process's environment, or a test's): ``FACEWEAVE_<NAME>`` variables
    that name a setting, ``__`` between levels, lists and tables as JSON;
    a variable that names no setting (``FACEWEAVE_MODELS`` belongs to the
    model cache) is left alone."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self.environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(self.environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)


def config_file_values(path: Path) -> dict[str, Any]:
    """The settings of a TOML file (JSON for ``.json``), read by
    pydantic-settings' file sources; :class:`UnreadableFileError` for a file
    that cannot be read or is not a table of settings."""
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise UnreadableFileError(f"cannot read the config file '{path}': {exc.strerror or exc}") from exc
    try:
        if path.suffix.lower() == ".json":
            return dict(JsonConfigSettingsSource(ServiceSettings, json_file=path)())
        return dict(TomlConfigSettingsSource(ServiceSettings, toml_file=path)())
    except (TypeError, AttributeError) as exc:  # a JSON list or value: no table to read settings from
        raise UnreadableFileError(f"config file '{path}' must hold a table of settings") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnreadableFileError(f"config file '{path}' is not valid {path.suffix or 'TOML'}: {exc}") from exc


def _nested(parts: list[str], value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        out = {part: out}
    return out


def _merge(into: dict[str, Any], new: Mapping[str, Any]) -> None:
    for key, value in new.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, Mapping) else value
