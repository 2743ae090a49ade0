"""Local file storage for uploads and job files, under one root folder.

Every name here is generated (random hex ids, fixed role names); a file
name sent by a user is never part of a path.  The layout is::

    <root>/uploads/<hex>.part           uploads being received
    <root>/jobs/<job id>/<role>-<n>     a job's inputs
    <root>/jobs/<job id>/result-<attempt>.<ext>, preview-<attempt>.png
    <root>/jobs/<job id>/parts-<attempt>/   a segmented video's parts

A new attempt discards what earlier ones left (:meth:`Storage.discard_attempts`):
a killed worker's temporary result, preview and parts.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from pathlib import Path

from faceweave.errors import InvalidOptionError, OutputError

_JOB_ID = re.compile(r"^[0-9a-f]{32}$")
#: a job file of one attempt (result, preview, parts), or its temporary name (``.result-2.mp4.<hex>.tmp.mp4``)
_ATTEMPT_FILE = re.compile(r"^\.?(?:result|preview|parts)-(\d+)(?:[./]|$)")


class Storage:
    """The storage folder; created when missing.  Safe to share between threads."""

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
        if not _JOB_ID.match(job_id):
            raise InvalidOptionError(f"not a job id: {job_id[:40]!r}")
        return self.jobs / job_id

    def adopt(self, upload: Path, job_id: str, name: str) -> str:
        """Move an upload into the job's folder as ``name`` (a generated role
        name such as ``source-0``); returns its path relative to the root."""
        if not re.match(r"^[a-z]+(-[0-9]+)*$", name):
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

    def discard_attempts(self, job_id: str, *, before: int) -> int:
        """Delete the results, previews, parts and temporary files of the
        job's attempts numbered under ``before`` (a dead worker's leftovers);
        inputs stay.  Returns how many entries were removed."""
        folder = self.job_dir(job_id)
        removed = 0
        for path in folder.iterdir() if folder.is_dir() else ():
            match = _ATTEMPT_FILE.match(path.name)
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
