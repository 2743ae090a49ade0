"""Receive ``multipart/form-data`` uploads as a stream, with limits.

The request body is parsed chunk by chunk with ``python-multipart``'s
streaming parser; file parts go straight to generated files in the storage
folder while their sha256 is computed.  The byte limit is checked on the
``Content-Length`` header first and again on every chunk, so an oversize
upload is refused as soon as it crosses the limit, never after reading it
whole.  Text fields and parts are counted as they begin, and the body must
arrive within a total and an idle-between-chunks timeout (408), so that
neither many empty parts nor a trickling client holds the server.  After the
body, every file is checked by its content
(:func:`inspect_upload`): images by their header (pixel limit before any
decoding), videos by probing (duration and frame limits).

One module for the upload boundary: the streaming parser's callbacks and
the content checks share the limits and the storage they clean up.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from faceweave.errors import (
    ClientDisconnectedError,
    ImageTooLargeError,
    InputError,
    LimitExceededError,
    RequestTimeoutError,
    TooSmallToMarkError,
    UnreadableFileError,
    UnsupportedFormatError,
    VideoTooLargeError,
)
from faceweave.service.settings import LimitSettings
from faceweave.service.storage import Storage

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

_MAX_HEADER_BYTES = 8 * 1024
#: python-multipart's own limit (it raises on a longer one); RFC 2046 asks for at most 70
_MAX_BOUNDARY_CHARS = 256


@dataclass(frozen=True)
class UploadedFile:
    """One received file part.  ``filename`` is what the client called it, kept
    only for messages and the audit log; ``path`` is a generated name."""

    field: str
    path: Path
    size: int
    sha256: str
    filename: str | None
    kind: str = "unknown"
    #: ``(width, height)`` of an image or of a video's frames, once inspected
    frame: tuple[int, int] | None = None


@dataclass
class UploadedForm:
    """The parts of one request: ``files`` and text ``fields`` by part name."""

    files: dict[str, list[UploadedFile]] = field(default_factory=dict)
    fields: dict[str, list[str]] = field(default_factory=dict)
    bytes_read: int = 0

    def all_files(self) -> list[UploadedFile]:
        return [f for group in self.files.values() for f in group]

    def cleanup(self) -> None:
        """Delete the received files that were not moved elsewhere."""
        for item in self.all_files():
            item.path.unlink(missing_ok=True)


class _Receiver:
    """The parser's callbacks: headers, then data into a file or a field."""

    def __init__(self, storage: Storage, limits: LimitSettings, form: UploadedForm) -> None:
        self.storage, self.limits, self.form = storage, limits, form
        self.header_name = bytearray()
        self.header_value = bytearray()
        self.headers: dict[str, str] = {}
        self.name: str | None = None
        self.filename: str | None = None
        self.file: BinaryIO | None = None
        self.path: Path | None = None
        self.digest = hashlib.sha256()
        self.size = 0
        self.text = bytearray()
        self.ended = False
        self.open_files: list[Path] = []
        self.parts = 0
        self.field_count = 0

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self.part_begin,
            "on_header_field": self.header_field,
            "on_header_value": self.header_value_,
            "on_header_end": self.header_end,
            "on_headers_finished": self.headers_finished,
            "on_part_data": self.part_data,
            "on_part_end": self.part_end,
            "on_end": self.end,
        }

    def part_begin(self) -> None:
        self.parts += 1
        most = self.limits.max_files + self.limits.max_fields
        if self.parts > most:  # many empty parts cost parsing time and memory: refused while parsing
            raise LimitExceededError(f"too many parts in one request; at most {most} (files and text fields)")
        self.headers, self.name, self.filename = {}, None, None
        self.size, self.text, self.digest = 0, bytearray(), hashlib.sha256()

    def header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_name += data[start:end]
        self._check_header()

    def header_value_(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]
        self._check_header()

    def _check_header(self) -> None:
        if len(self.header_name) + len(self.header_value) > _MAX_HEADER_BYTES:
            raise InputError("a multipart header is too long")

    def header_end(self) -> None:
        self.headers[self.header_name.decode("latin-1").strip().lower()] = self.header_value.decode("utf-8", "replace")
        self.header_name, self.header_value = bytearray(), bytearray()

    def headers_finished(self) -> None:
        from python_multipart.multipart import parse_options_header

        # as UTF-8 bytes: the parser reads bytes as latin-1 and gives them back unchanged,
        # while a str with characters beyond latin-1 (a UTF-8 file name) would make it fail
        kind, params = parse_options_header(self.headers.get("content-disposition", "").encode("utf-8"))
        name = params.get(b"name")
        if kind != b"form-data" or not name:
            raise InputError("every multipart part needs 'Content-Disposition: form-data; name=...'")
        self.name = name.decode("utf-8", "replace")
        filename = params.get(b"filename")
        if filename is not None:
            if len(self.form.all_files()) >= self.limits.max_files:
                raise LimitExceededError(f"too many files in one request; at most {self.limits.max_files}")
            self.filename = filename.decode("utf-8", "replace")[:255]
            self.path = self.storage.new_upload()
            self.open_files.append(self.path)
            self.file = open(self.path, "wb")  # noqa: SIM115 - closed in part_end or abort
        else:
            self.field_count += 1
            if self.field_count > self.limits.max_fields:
                raise LimitExceededError(f"too many text fields in one request; at most {self.limits.max_fields}")

    def part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        self.size += len(chunk)
        if self.file is not None:
            self.file.write(chunk)
            self.digest.update(chunk)
        else:
            self.text += chunk
            if len(self.text) > self.limits.max_field_bytes:
                raise LimitExceededError(f"form field '{self.name}' is over {self.limits.max_field_bytes} bytes")

    def part_end(self) -> None:
        if self.file is not None and self.path is not None and self.name is not None:
            self.file.close()
            self.file = None
            item = UploadedFile(
                field=self.name, path=self.path, size=self.size, sha256=self.digest.hexdigest(), filename=self.filename
            )
            self.form.files.setdefault(self.name, []).append(item)
        elif self.name is not None:
            self.form.fields.setdefault(self.name, []).append(self.text.decode("utf-8", "replace"))

    def end(self) -> None:
        self.ended = True

    def abort(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        for path in self.open_files:
            path.unlink(missing_ok=True)


async def receive_form(
    chunks: AsyncIterator[bytes],
    *,
    content_type: str | None,
    content_length: str | None,
    storage: Storage,
    limits: LimitSettings,
) -> UploadedForm:
    """Parse a ``multipart/form-data`` body from ``chunks`` (e.g. ``request.stream()``).

    Raises:
        LimitExceededError: ``Content-Length`` or the bytes received so far are
            over ``limits.max_upload_bytes`` (reading stops at once), too many
            files, or a text field over ``limits.max_field_bytes``.
            Too many text fields (``limits.max_fields``) or parts in all are
            refused as soon as the count is crossed, while parsing.
        RequestTimeoutError: the body did not arrive in time (see :func:`_timed`);
            the partial files are deleted.
        ClientDisconnectedError: the client hung up; the partial files are deleted.
        UnsupportedFormatError: the body is not ``multipart/form-data``.
        InputError: a malformed or truncated body, or an overlong boundary.
    """
    from python_multipart.multipart import MultipartParser

    boundary = _boundary(content_type, content_length, limits)
    limit = limits.max_upload_bytes
    form = UploadedForm()
    receiver = _Receiver(storage, limits, form)
    try:
        parser = MultipartParser(boundary, receiver.callbacks())
        async with aclosing(_timed(chunks, limits)) as stream:
            async for chunk in stream:
                form.bytes_read += len(chunk)
                if form.bytes_read > limit:
                    raise LimitExceededError(f"the upload is over the limit of {limit} bytes")
                if chunk:
                    parser.write(chunk)
        parser.finalize()
        if not receiver.ended:
            raise InputError("the multipart body is truncated (no closing boundary)")
    except BaseException as exc:  # also cancellation: no partial file stays behind
        receiver.abort()
        if type(exc).__module__.startswith("python_multipart"):  # its own parse errors
            raise InputError(f"malformed multipart body: {exc}") from exc
        raise
    return form


def _boundary(content_type: str | None, content_length: str | None, limits: LimitSettings) -> bytes:
    """The multipart boundary of ``content_type``, once the headers pass the checks."""
    from python_multipart.multipart import parse_options_header

    kind, params = parse_options_header(content_type or "")
    boundary = params.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise UnsupportedFormatError("send the files as multipart/form-data (with a boundary)")
    if len(boundary) > _MAX_BOUNDARY_CHARS:
        raise InputError(
            f"the multipart boundary is over {_MAX_BOUNDARY_CHARS} characters (RFC 2046 asks for at most 70)"
        )
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise InputError("the Content-Length header is not a number") from None
        if declared > limits.max_upload_bytes:
            raise LimitExceededError(
                f"the upload is {declared} bytes, over the limit of {limits.max_upload_bytes} bytes"
            )
    return boundary


async def _timed(chunks: AsyncIterator[bytes], limits: LimitSettings) -> AsyncGenerator[bytes, None]:
    """``chunks`` as they come, all within ``limits.upload_timeout_s`` and each
    within ``limits.upload_idle_s`` of the one before.

    Raises:
        RequestTimeoutError: a deadline passed (the wait for the chunk is cancelled).
        ClientDisconnectedError: the client hung up (Starlette's ``ClientDisconnect``).
    """
    import anyio
    from starlette.requests import ClientDisconnect

    iterator = aiter(chunks)
    deadline = anyio.current_time() + limits.upload_timeout_s
    while True:
        left = deadline - anyio.current_time()
        try:
            with anyio.fail_after(min(left, limits.upload_idle_s)):
                chunk = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            if left <= limits.upload_idle_s:
                raise RequestTimeoutError(f"the upload did not arrive within {limits.upload_timeout_s:g} s") from None
            raise RequestTimeoutError(f"the upload stalled: no data for {limits.upload_idle_s:g} s") from None
        except ClientDisconnect:
            raise ClientDisconnectedError("the client closed the connection mid-upload") from None
        yield chunk


def inspect_upload(item: UploadedFile, limits: LimitSettings) -> UploadedFile:
    """``item`` with its ``kind`` ("image" or "video") found from its bytes.

    Raises:
        UnsupportedFormatError: neither an image nor a video (415).
        ImageTooLargeError: over ``limits.max_image_pixels`` (checked on the header).
        LimitExceededError: a video longer than ``limits.max_video_seconds`` or
            with more than ``limits.max_video_frames`` frames.
        UnreadableFileError: empty, corrupt or truncated.
    """
    from faceweave.io import probe_kind

    label = _label(item)
    if item.size == 0:
        raise UnreadableFileError(f"{label} is empty")
    kind = probe_kind(item.path)
    if kind == "image":
        frame = _check_image_header(item.path, label, limits.max_image_pixels)
    elif kind == "video":
        frame = _check_video(item.path, label, limits)
    else:
        raise UnsupportedFormatError(f"{label} is neither an image (JPEG, PNG, WEBP, BMP, TIFF, GIF) nor a video")
    return UploadedFile(
        field=item.field,
        path=item.path,
        size=item.size,
        sha256=item.sha256,
        filename=item.filename,
        kind=kind,
        frame=frame,
    )


def _label(item: UploadedFile) -> str:
    return f"file '{item.field}'"


def _check_image_header(path: Path, label: str, max_pixels: int) -> tuple[int, int]:
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with PILImage.open(path) as pil:
                width, height = pil.size
    except PILImage.DecompressionBombError:
        raise ImageTooLargeError(f"{label} declares more pixels than any image accepted here") from None
    except UnidentifiedImageError:
        raise UnsupportedFormatError(f"{label} is not an image format accepted here") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise UnreadableFileError(f"{label} cannot be read as an image: {exc}") from None
    if width * height > max_pixels:
        raise ImageTooLargeError(
            f"{label} is {width}x{height} = {width * height} pixels, over the limit of {max_pixels}"
        )
    return width, height


def _check_video(path: Path, label: str, limits: LimitSettings) -> tuple[int, int]:
    """Pixels per frame, duration and frames within the limits: from the
    header, or by counting the packets when the header states no length."""
    from faceweave.video.io import probe_video
    from faceweave.video.io.probe import measure_length

    try:
        info = probe_video(path)
        pixels = info.width * info.height
        if pixels > limits.max_image_pixels:
            raise VideoTooLargeError(
                f"{label} is {info.width}x{info.height} = {pixels} pixels per frame, over the limit of"
                f" {limits.max_image_pixels}"
            )
        duration, frames = info.duration, info.frame_count
        if duration is None or frames is None:
            length = measure_length(path, max_frames=limits.max_video_frames, max_seconds=limits.max_video_seconds)
            duration, frames = length.seconds, length.frames
    except InputError as exc:
        if isinstance(exc, VideoTooLargeError):
            raise
        raise type(exc)(f"{label}: {' '.join(str(exc).replace(str(path), 'the upload').split())}") from None
    if duration > limits.max_video_seconds:
        raise VideoTooLargeError(f"{label} is {duration:.1f} s long, over the limit of {limits.max_video_seconds:g} s")
    if frames > limits.max_video_frames:
        raise VideoTooLargeError(f"{label} has {frames} frames, over the limit of {limits.max_video_frames}")
    return info.width, info.height


def check_markable(item: UploadedFile, min_side: int) -> None:
    """Refuse a video target too small for the invisible watermark
    (``min_side`` pixels a side; 0 when marking is off) before any work is
    queued.  A photo that small fails as it is written, with the same error
    (after the faces are looked for, so a faceless one is still "no face")."""
    if item.kind == "video" and item.frame is not None and min(item.frame) < min_side:
        width, height = item.frame
        raise TooSmallToMarkError(
            f"the target video's frames are {width}x{height}: the invisible watermark needs at least {min_side}"
            " pixels on each side"
        )
