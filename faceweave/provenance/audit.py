"""The audit log: one JSON line per run or job, append-only, rotated by size.

Each line says who ran what and when, the sha256 of every input, the resolved
options, the outcome, the watermark payload (or that it was turned off), and
the output.  Lines are appended with one ``write`` on a file opened with
``O_APPEND``, under an exclusive ``flock`` shared by every process that logs
to the same file, so lines from concurrent runs never interleave and
rotation never loses one.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from faceweave.errors import FaceweaveError, InvalidOptionError, OutputError
from faceweave.provenance.stamp import utc_now

#: default size at which the log is rotated, and how many old files are kept
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BACKUPS = 5
_HASH_CHUNK = 1 << 20


def default_audit_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/faceweave/audit.jsonl``, else ``~/.local/state/faceweave/audit.jsonl``."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME") or ""
    base = Path(state) if os.path.isabs(state) else Path(env.get("HOME") or Path.home()) / ".local" / "state"
    return base / "faceweave" / "audit.jsonl"


def sha256_file(path: str | os.PathLike[str]) -> str | None:
    """The file's sha256 in hex, or ``None`` when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(_HASH_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def current_user() -> str:
    """The OS user running the CLI (``"unknown"`` when it cannot be told)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return "unknown"


@dataclass(frozen=True)
class AuditInput:
    """One input file: its role (``source``, ``target``, ``reference``), path and sha256."""

    role: str
    path: str
    sha256: str | None

    @classmethod
    def of(cls, role: str, path: str | os.PathLike[str]) -> AuditInput:
        return cls(role=role, path=os.fspath(path), sha256=sha256_file(path))


@dataclass(frozen=True)
class AuditEntry:
    """One audit line.  ``outcome`` is ``"ok"`` or ``"error"``; ``code`` and
    ``message`` say which error; ``watermark`` is the payload as a dict or a
    sentence such as ``"disabled by --no-watermark"``."""

    command: str
    inputs: tuple[AuditInput, ...]
    options: Mapping[str, Any]
    outcome: str
    watermark: Mapping[str, Any] | str
    output: str | None = None
    code: str | None = None
    message: str | None = None
    user: str = field(default_factory=current_user)
    time: str = field(default_factory=utc_now)
    run_id: str | None = None
    #: the screening policy and what it flagged, when screening was on
    screening: Mapping[str, Any] | None = None

    def to_json(self) -> str:
        """The entry as one JSON line (no newline inside; keys in a stable order)."""
        data = asdict(self)
        data["inputs"] = [asdict(i) for i in self.inputs]
        data["options"] = dict(self.options)
        data["screening"] = None if self.screening is None else dict(self.screening)
        return json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)


class Outcome(TypedDict):
    """How a run ended, as :class:`AuditEntry` records it."""

    outcome: str
    code: str | None
    message: str | None


def outcome_of(exc: BaseException | None) -> Outcome:
    """``outcome``, ``code`` and ``message`` for an :class:`AuditEntry` from what a run raised."""
    if exc is None:
        return {"outcome": "ok", "code": None, "message": None}
    if isinstance(exc, KeyboardInterrupt):
        return {"outcome": "error", "code": "interrupted", "message": "interrupted"}
    code = exc.code if isinstance(exc, FaceweaveError) else "internal_error"
    return {"outcome": "error", "code": code, "message": " ".join(str(exc).split()) or type(exc).__name__}


class AuditLog:
    """An append-only JSON-lines file, rotated to ``path.1`` .. ``path.<backups>``
    when a line would take it past ``max_bytes`` (``backups=0``: truncate instead).

    Raises (on :meth:`append`): :class:`OutputError` when the log cannot be written.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES, backups: int = DEFAULT_BACKUPS
    ) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise InvalidOptionError(f"audit max_bytes must be a positive integer; got {max_bytes!r}")
        if isinstance(backups, bool) or not isinstance(backups, int) or backups < 0:
            raise InvalidOptionError(f"audit backups must be a non-negative integer; got {backups!r}")
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()

    def append(self, entry: AuditEntry) -> None:
        """Add one line (rotating first when it would not fit)."""
        data = (entry.to_json() + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock, self._file_lock():
                self._rotate_if_needed(len(data))
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise OutputError(f"cannot write the audit log '{self.path}': {exc.strerror or exc}") from exc

    def entries(self) -> Iterator[dict[str, Any]]:
        """The lines of the current file (not the rotated ones), parsed; a broken line is skipped."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return
        for line in lines:
            try:
                yield json.loads(line)
            except ValueError:
                continue

    def _rotate_if_needed(self, incoming: int) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0 or size + incoming <= self.max_bytes:
            return
        if self.backups == 0:
            os.truncate(self.path, 0)
            return
        for n in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))

    def _file_lock(self):
        """An exclusive lock on ``<path>.lock`` (shared by all processes), where ``fcntl`` exists."""
        return _FileLock(self.path.with_name(self.path.name + ".lock"))


class _FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> _FileLock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            import fcntl
        except ImportError:  # Windows: the in-process lock only
            return self
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock
            self.fd = None
