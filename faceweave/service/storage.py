"""Where uploads and job files live: the :class:`Storage` protocol, the
local (or NAS) folder :class:`LocalStorage`, and :func:`open_storage`, which
picks it or :class:`~faceweave.service.s3storage.S3Storage` from the settings.

Every name here is generated (random hex ids, fixed role names); a file
name sent by a user is never part of a path.  Stored files are named by a
path relative to the storage (a *key*); the layout is::

    uploads/<hex>.part           uploads being received (always local)
    jobs/<job id>/<role>-<n>     a job's inputs
    jobs/<job id>/result-<attempt>.<ext>, preview-<attempt>.png
    jobs/<job id>/parts-<attempt>/   a segmented video's parts

Runners work on local files: :meth:`Storage.resolve` gives a local path for a
key (an object store downloads it first), they write under
:meth:`Storage.job_dir`, and :meth:`Storage.publish` makes a finished file
visible under its key (a no-op for a local folder, where it is in place).
Inside :meth:`Storage.workspace` the local copies are kept; an object store
deletes them when the last user of the job's copies leaves.

A new attempt discards what earlier ones left (:meth:`Storage.discard_attempts`):
a killed worker's temporary result, preview and parts.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from faceweave.errors import InvalidOptionError, OutputError, StorageUnavailableError

if TYPE_CHECKING:
    from faceweave.service.settings import ServiceSettings

JOB_ID = re.compile(r"^[0-9a-f]{32}$")
#: a job file of one attempt (result, preview, parts), or its temporary name (``.result-2.mp4.<hex>.tmp.mp4``)
ATTEMPT_FILE = re.compile(r"^\.?(?:result|preview|parts)-(\d+)(?:[./]|$)")
#: the generated names of a job's files (``source-0``, ``map-1-0``, ``target``)
STORAGE_NAME = re.compile(r"^[a-z]+(-[0-9]+)*$")


class Storage(Protocol):
    """What the service needs of a storage (see the module's docstring)."""

    #: the local folder: uploads being received, scratch files, working copies
    root: Path
    scratch: Path

    def new_upload(self) -> Path: ...

    def scratch_path(self, suffix: str) -> Path: ...

    def job_dir(self, job_id: str) -> Path: ...

    def adopt(self, upload: Path, job_id: str, name: str) -> str: ...

    def relative(self, path: Path) -> str: ...

    def resolve(self, relative: str) -> Path: ...

    def publish(self, path: Path) -> str: ...

    def delete(self, relative: str) -> None: ...

    def remove_tree(self, relative: str) -> None: ...

    def discard_attempts(self, job_id: str, *, before: int) -> int: ...

    def remove_job(self, job_id: str) -> None: ...

    def workspace(self, job_id: str) -> contextlib.AbstractContextManager[None]: ...

    def download_url(self, relative: str, *, filename: str, media_type: str, expires_s: float) -> str | None: ...

    def sweep(self, *, older_than_s: float, now: float | None = None) -> int: ...

    def job_ids(self, *, idle_s: float, now: float | None = None) -> Iterator[str]: ...

    def check(self) -> None: ...

    def close(self) -> None: ...


def open_storage(settings: ServiceSettings) -> Storage:
    """The storage the settings name: ``s3://`` (``settings.s3.url``) or the local folder.

    Raises:
        InvalidOptionError: ``s3://`` storage without boto3 installed.
        OutputError: the local folder cannot be created.
    """
    if settings.s3.url is None:
        return LocalStorage(settings.storage)
    from faceweave.service.s3storage import S3Storage

    return S3Storage(settings.s3, local=settings.storage)


class LocalStorage:
    """The storage folder (local disk or a NAS mount); created when missing.
    Safe to share between threads and processes."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().resolve()
        self.uploads = self.root / "uploads"
        self.jobs = self.root / "jobs"
        self.scratch = self.root / "scratch"
        try:
            for folder in (self.uploads, self.jobs, self.scratch):
                folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot create the storage folder '{self.root}': {exc.strerror or exc}") from exc

    def new_upload(self) -> Path:
        """A fresh, empty file for an incoming upload."""
        path = self.uploads / f"{secrets.token_hex(16)}.part"
        path.touch(exist_ok=False)
        return path

    def scratch_path(self, suffix: str) -> Path:
        """A fresh name (no file yet) for a short-lived file, e.g. a synchronous result."""
        return self.scratch / f"{secrets.token_hex(16)}{suffix}"

    def job_dir(self, job_id: str) -> Path:
        if not JOB_ID.match(job_id):
            raise InvalidOptionError(f"not a job id: {job_id[:40]!r}")
        return self.jobs / job_id

    def adopt(self, upload: Path, job_id: str, name: str) -> str:
        """Move an upload into the job's folder as ``name`` (a generated role
        name such as ``source-0``); returns its path relative to the root."""
        if not STORAGE_NAME.match(name):
            raise InvalidOptionError(f"not a storage name: {name!r}")
        folder = self.job_dir(job_id)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / name
        os.replace(upload, target)
        return self.relative(target)

    def relative(self, path: Path) -> str:
        return Path(path).resolve().relative_to(self.root).as_posix()

    def resolve(self, relative: str) -> Path:
        """An absolute path for a stored relative path; refuses to leave the root."""
        path = (self.root / relative).resolve()
        if path != self.root and self.root not in path.parents:
            raise InvalidOptionError(f"stored path {relative!r} is outside the storage folder")
        return path

    def publish(self, path: Path) -> str:
        """Make the finished file ``path`` (under :meth:`job_dir`) visible; returns its key.
        Here it is in place already."""
        return self.relative(path)

    def delete(self, relative: str) -> None:
        """Delete one stored file (missing is fine)."""
        self.resolve(relative).unlink(missing_ok=True)

    def remove_tree(self, relative: str) -> None:
        """Delete a stored folder and everything in it (missing is fine)."""
        shutil.rmtree(self.resolve(relative), ignore_errors=True)

    @contextmanager
    def workspace(self, job_id: str) -> Iterator[None]:
        """While a runner works on a job (nothing to keep or clean here)."""
        yield

    def download_url(self, relative: str, *, filename: str, media_type: str, expires_s: float) -> str | None:
        """A URL a client may fetch the file from directly; ``None``: the API answers it."""
        return None

    def discard_attempts(self, job_id: str, *, before: int) -> int:
        """Delete the results, previews, parts and temporary files of the
        job's attempts numbered under ``before`` (a dead worker's leftovers);
        inputs stay.  Returns how many entries were removed."""
        folder = self.job_dir(job_id)
        removed = 0
        for path in folder.iterdir() if folder.is_dir() else ():
            match = ATTEMPT_FILE.match(path.name)
            if match is None or int(match[1]) >= before:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed += 1
        return removed

    def remove_job(self, job_id: str) -> None:
        """Delete a job's folder and everything in it (missing is fine)."""
        shutil.rmtree(self.job_dir(job_id), ignore_errors=True)

    def sweep(self, *, older_than_s: float, now: float | None = None) -> int:
        """Delete abandoned uploads and scratch files older than ``older_than_s``; returns how many."""
        now = time.time() if now is None else now
        removed = 0
        for folder in (self.uploads, self.scratch):
            for path in folder.iterdir():
                try:
                    if path.stat().st_mtime < now - older_than_s:
                        path.unlink()
                        removed += 1
                except OSError:
                    continue
        return removed

    def job_ids(self, *, idle_s: float, now: float | None = None) -> Iterator[str]:
        """The ids of the job folders whose newest entry (the folder included) is older than ``idle_s``."""
        now = time.time() if now is None else now
        for folder in self.jobs.iterdir():
            if not JOB_ID.match(folder.name):
                continue
            try:
                newest = max([folder.stat().st_mtime, *(entry.stat().st_mtime for entry in folder.iterdir())])
            except OSError:  # removed meanwhile
                continue
            if newest < now - idle_s:
                yield folder.name

    def check(self) -> None:
        """Raises :class:`~faceweave.errors.StorageUnavailableError` when the folder is gone (an unmounted NAS)."""
        if not (self.jobs.is_dir() and self.uploads.is_dir()):
            raise StorageUnavailableError(
                "the job storage folder is not there; nothing was stored or changed, try again later", retry_after=10.0
            )

    def close(self) -> None:
        """Nothing to release for a folder."""
