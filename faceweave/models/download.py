"""Download model files with resume and sha256 verification (urllib only).

Bytes go into ``NAME.part`` beside the final file; a cut connection leaves
the ``.part`` for the next attempt, which asks the server for the rest with
an HTTP ``Range`` header.  A file whose sha256 (or size) does not match is
deleted and never renamed into place; so is one whose CRC32 differs from the
``NAME.hash`` that FaceFusion's hosts (and a FaceFusion folder served as a
mirror) publish beside ``NAME.onnx``, when there is one.  ``offline=True`` raises before any
network access.
"""

from __future__ import annotations

import dataclasses
import http.client
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from faceweave.errors import ChecksumError, DownloadError, ModelNotFoundError
from faceweave.models.cache import ModelStore, Pin, sha256_file
from faceweave.models.spec import ModelSpec

#: ``progress(bytes_done, bytes_total_or_None)``
ProgressFn = Callable[[int, "int | None"], None]

_CHUNK = 1 << 20
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_USER_AGENT = "faceweave-model-download"


def part_path(target: Path) -> Path:
    """Where the bytes of ``target`` gather until they are verified."""
    return target.with_name(target.name + ".part")


def mirror_url(mirror: str, spec: ModelSpec) -> str:
    """``spec``'s file in a mirror: ``MIRROR/FILE_NAME`` (a flat folder such
    as FaceFusion's ``.assets/models`` served over HTTP).

    Raises:
        InvalidOptionError: ``mirror`` is not an ``http://`` or ``https://`` URL.
    """
    from urllib.parse import urlsplit

    from faceweave.errors import InvalidOptionError

    parts = urlsplit(mirror)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidOptionError(f"--mirror {mirror!r}: give an http:// or https:// URL of a folder of model files")
    return mirror.rstrip("/") + "/" + spec.file_name


def download_model(
    store: ModelStore,
    model: str | ModelSpec,
    *,
    offline: bool = False,
    progress: ProgressFn | None = None,
    retries: int = 2,
    timeout: float = 30.0,
    mirror: str | None = None,
) -> Path:
    """Make the model's file present in ``store`` and return its path.

    A file already present is returned as is (no network).  Otherwise the
    spec's URLs (or, with ``mirror``, only :func:`mirror_url`) are tried in
    order; on a cut connection the same URL is asked again for the rest, up
    to ``retries`` times.  Without a spec-pinned sha256 the downloaded file's
    hash is recorded in the store's pins.

    Raises:
        InvalidOptionError: ``mirror`` is not an HTTP(S) URL.
        ModelNotFoundError: unknown model; or absent and ``offline``, bundled
            in a package that is not installed, or without any URL.
        DownloadError: every URL failed; a partial file is kept for resume.
        ChecksumError: the downloaded bytes do not match (the file is deleted).
        ModelFormatError, ModelSignatureError: the downloaded file is not
            the model the spec describes (the file is deleted).
    """
    spec = store.spec(model) if isinstance(model, str) else model
    present = store.locate(spec)
    if present is not None:
        return present
    if mirror is not None:
        spec = dataclasses.replace(spec, urls=(mirror_url(mirror, spec),))
    _check_downloadable(store, spec, offline=offline)
    store.folder.mkdir(parents=True, exist_ok=True)
    target = store.path_for(spec)
    failures: list[DownloadError] = []
    for index, url in enumerate(spec.urls):
        if index > 0 and spec.sha256 is None:
            # nothing proves two mirrors serve the same bytes: do not splice them
            part_path(target).unlink(missing_ok=True)
        try:
            digest = _fetch_with_retries(
                url, target, sha256=spec.sha256, size=spec.size, progress=progress, retries=retries, timeout=timeout
            )
        except DownloadError as exc:
            failures.append(exc)
            continue
        _check_downloaded(target, spec)
        _check_published_hash(url, target, spec, timeout=timeout)
        if spec.sha256 is None:
            store.pin(spec.name, Pin(sha256=digest, size=target.stat().st_size, source="download"))
        else:
            store.unpin(spec.name)  # the spec's own hash now describes the file
        return target
    detail = "; ".join(str(f) for f in failures)
    if any(isinstance(f, ChecksumError) for f in failures):
        raise ChecksumError(f"model {spec.name}: {detail}")
    raise DownloadError(f"model {spec.name}: {detail}")


def _check_downloadable(store: ModelStore, spec: ModelSpec, *, offline: bool) -> None:
    """Refuse, with what to do instead, a model that cannot be downloaded here."""
    if spec.bundled is not None:
        package = spec.bundled[0]
        raise ModelNotFoundError(
            f"model {spec.name} ships inside the Python package {package!r}, which is not installed "
            f"(pip install {package}); or `faceweave models import {spec.name} PATH`"
        )
    if offline:
        raise ModelNotFoundError(
            f"model {spec.name} is not present in {store.folder} and --offline forbids downloading it; "
            f"use `faceweave models import {spec.name} PATH`"
        )
    if not spec.urls:
        raise ModelNotFoundError(
            f"model {spec.name} has no download URL; use `faceweave models import {spec.name} PATH`"
        )


def _check_downloaded(target: Path, spec: ModelSpec) -> None:
    """Delete and raise unless the downloaded file is ONNX with the spec's signature."""
    from faceweave.errors import ModelError
    from faceweave.models.signature import check_signature, read_signature

    try:
        check_signature(spec.inputs, spec.outputs, read_signature(target), model=f"downloaded {spec.name}")
    except ModelError:
        target.unlink(missing_ok=True)
        raise


def published_hash(url: str, *, timeout: float = 30.0) -> str | None:
    """The CRC32 FaceFusion publishes beside a model URL (``NAME.onnx`` or a
    DeepFaceLive ``NAME.dfm`` -> ``NAME.hash``, 8 hex digits), or ``None``
    when there is none to read."""
    suffix = next((s for s in (".onnx", ".dfm") if url.endswith(s)), None)
    if suffix is None:
        return None
    request = urllib.request.Request(url[: -len(suffix)] + ".hash", headers={"User-Agent": _USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - beside a spec's URL
            text = response.read(64).decode("ascii", "replace").strip().lower()
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        return None
    return text if re.fullmatch(r"[0-9a-f]{8}", text) else None


def _check_published_hash(url: str, target: Path, spec: ModelSpec, *, timeout: float) -> None:
    """Delete and raise when the file's CRC32 differs from the one published beside its URL."""
    from faceweave.models.facefusion import crc32_file

    expected = published_hash(url, timeout=timeout)
    if expected is None:
        return
    actual = crc32_file(target)
    if actual != expected:
        target.unlink(missing_ok=True)
        raise ChecksumError(
            f"model {spec.name} from {url}: CRC32 {actual}, but the server's {Path(spec.file_name).stem}.hash says "
            f"{expected}; the file was deleted"
        )


def _fetch_with_retries(url: str, target: Path, *, retries: int, **kwargs) -> str:
    attempt = 0
    while True:
        try:
            return fetch_file(url, target, **kwargs)
        except _CutShort:
            if attempt >= retries:
                raise
            attempt += 1


class _CutShort(DownloadError):
    """The transfer stopped before the end; the ``.part`` is kept."""


def fetch_file(
    url: str,
    target: Path,
    *,
    sha256: str | None = None,
    size: int | None = None,
    progress: ProgressFn | None = None,
    timeout: float = 30.0,
) -> str:
    """Download ``url`` to ``target`` through ``target.part``; return the sha256.

    Resumes from an existing ``.part`` with a ``Range`` request (a server that
    ignores it starts the file again).

    Raises:
        DownloadError: HTTP or network error, or the transfer ended early
            (the ``.part`` is kept).
        ChecksumError: wrong size or sha256; the ``.part`` is deleted.
    """
    part = part_path(target)
    offset = part.stat().st_size if part.is_file() else 0
    if size is not None and offset > size:
        part.unlink()
        offset = 0
    headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - URLs come from specs
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset and size is not None and offset == size:
            return _finish(part, target, url, sha256)  # the .part was already complete
        if exc.code == 416:
            part.unlink(missing_ok=True)
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise DownloadError(f"{url}: {reason}") from exc
    with response:
        resumed = bool(offset) and response.status == 206
        total = _total(response, offset if resumed else 0)
        if not resumed:
            offset = 0
        if size is not None and total is not None and total != size:
            raise ChecksumError(f"{url}: the server sends {total} bytes, the spec expects {size}")
        expected = size if size is not None else total
        done, cut = _copy(response, part, append=resumed, done=offset, total=expected, progress=progress)
    if expected is not None and done > expected:
        part.unlink(missing_ok=True)
        raise ChecksumError(f"{url}: got {done} bytes, expected {expected}; the file was deleted")
    if (expected is not None and done < expected) or (cut and expected is None):
        of = f" of {expected}" if expected is not None else ""
        raise _CutShort(f"{url}: the transfer stopped at {done}{of} bytes; {part} is kept, run again to resume")
    return _finish(part, target, url, sha256)


def _total(response, offset: int) -> int | None:
    content_range = response.headers.get("Content-Range")
    if content_range:
        match = _CONTENT_RANGE.match(content_range)
        if match and match.group(3) != "*":
            return int(match.group(3))
    length = response.headers.get("Content-Length")
    if length is not None and length.isdigit():
        return offset + int(length)
    return None


def _copy(
    response, part: Path, *, append: bool, done: int, total: int | None, progress: ProgressFn | None
) -> tuple[int, bool]:
    """Copy the body into ``part``; returns (bytes in part, whether it was cut)."""
    cut = False
    with open(part, "ab" if append else "wb") as handle:
        if progress is not None:
            progress(done, total)
        while True:
            try:
                chunk = response.read(_CHUNK)
            except (http.client.IncompleteRead, ConnectionError, TimeoutError, OSError) as exc:
                partial = getattr(exc, "partial", b"")
                if partial:
                    handle.write(partial)
                    done += len(partial)
                cut = True
                break
            if not chunk:
                break
            handle.write(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return done, cut


def _finish(part: Path, target: Path, url: str, sha256: str | None) -> str:
    digest = sha256_file(part)
    if sha256 is not None and digest != sha256:
        part.unlink(missing_ok=True)
        raise ChecksumError(f"{url}: sha256 {digest}, expected {sha256}; the file was deleted")
    os.replace(part, target)
    return digest
