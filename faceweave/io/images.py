"""Read and write still images.

Files are decoded by their content, never by their extension, and checked at
the boundary: a pixel limit before any pixel data is decoded, truncated files
refused, videos and other files rejected with a message that says what is
accepted.  Decoded images are ``uint8`` RGB ``(H, W, 3)`` with an optional
``(H, W)`` alpha channel, both read-only.

One module for the image boundary (sniffing, header checks, decoding
every accepted format, writing with metadata): its parts share the checks.
"""

from __future__ import annotations

import io
import os
import struct
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO, Literal

import numpy as np
from PIL import Image as PILImage
from PIL import ImageOps, UnidentifiedImageError

from faceweave.errors import (
    ImageTooLargeError,
    InputError,
    InvalidOptionError,
    OutputError,
    UnreadableFileError,
    UnsupportedFormatError,
)
from faceweave.io.atomic import atomic_output
from faceweave.types import Image

Kind = Literal["image", "video", "unknown"]

#: Pillow's format name -> the name faceweave reports (MPO: multi-picture JPEG from cameras)
READ_FORMATS = MappingProxyType(
    {"JPEG": "JPEG", "MPO": "JPEG", "PNG": "PNG", "WEBP": "WEBP", "BMP": "BMP", "TIFF": "TIFF", "GIF": "GIF"}
)
ACCEPTED_INPUT = "JPEG, PNG, WEBP, BMP, TIFF or GIF"
#: the Pillow plugins tried when opening (the JPEG plugin also opens MPO)
_OPENERS = ("JPEG", "PNG", "WEBP", "BMP", "TIFF", "GIF")
#: output extension (lower case) -> Pillow format
WRITE_FORMATS = MappingProxyType(
    {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WEBP", ".bmp": "BMP", ".tif": "TIFF", ".tiff": "TIFF"}
)
_KEEPS_ALPHA = frozenset({"PNG", "WEBP", "TIFF"})
#: output formats that can hold an XMP packet (``write_image(xmp=...)``)
XMP_FORMATS = frozenset({"PNG", "JPEG", "WEBP", "TIFF"})
_HAS_QUALITY = frozenset({"JPEG", "WEBP"})

#: zlib's level for PNG output (lossless at every level): Pillow's default 6
#: took 474 ms of CPU for a 1080p photo and 1.1 s for a 1638x2048 one, 3
#: takes 2.5-2.9 times less for files 0-12 % larger (the video's PNG frames
#: use 3 too, :class:`~faceweave.video.io.sinks.PngSink`)
PNG_COMPRESS_LEVEL = 3
#: exceptions Pillow raises on broken data
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, struct.error)
_HEAD_BYTES = 512

_IMAGE_MAGIC = (
    (b"\xff\xd8\xff", "JPEG"),
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
)
_VIDEO_MAGIC = (
    (b"\x1a\x45\xdf\xa3", "Matroska/WebM"),
    (b"FLV\x01", "FLV"),
    (b"\x30\x26\xb2\x75\x8e\x66\xcf\x11", "ASF/WMV"),
    (b"\x00\x00\x01\xba", "MPEG"),
    (b"\x00\x00\x01\xb3", "MPEG"),
)
#: ISO-BMFF brands of still images (HEIF, AVIF) and of audio; other brands are video
_STILL_BRANDS = frozenset({b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"mif1", b"msf1", b"avif", b"avis"})
_AUDIO_BRANDS = frozenset({b"M4A ", b"M4B ", b"M4P "})
_BMP_HEADER_SIZES = frozenset({12, 40, 52, 56, 64, 108, 124})


# ----------------------------------------------------------------- sniffing


def _sniff(head: bytes) -> tuple[Kind, str | None]:
    """Classify a file by its first bytes: ``(kind, container name or None)``."""
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in _STILL_BRANDS:
            return "image", "HEIF/AVIF"
        return ("unknown", None) if brand in _AUDIO_BRANDS else ("video", "MP4/MOV")
    if head[4:8] in (b"moov", b"mdat", b"wide"):
        return "video", "QuickTime MOV"
    if head[:4] == b"RIFF":
        riff: dict[bytes, tuple[Kind, str | None]] = {b"WEBP": ("image", "WEBP"), b"AVI ": ("video", "AVI")}
        return riff.get(head[8:12], ("unknown", None))
    if len(head) >= 377 and head[0] == head[188] == head[376] == 0x47:
        return "video", "MPEG-TS"
    if _is_bmp(head):
        return "image", "BMP"
    tables: tuple[tuple[Any, Kind], ...] = ((_IMAGE_MAGIC, "image"), (_VIDEO_MAGIC, "video"))
    for table, kind in tables:
        for magic, name in table:
            if head.startswith(magic):
                return kind, name
    return "unknown", None


def _is_bmp(head: bytes) -> bool:
    return head[:2] == b"BM" and len(head) >= 18 and struct.unpack_from("<I", head, 14)[0] in _BMP_HEADER_SIZES


def probe_kind(path: str | os.PathLike[str]) -> Kind:
    """Whether ``path`` holds an image, a video, or something else, by magic bytes.

    An empty file is ``"unknown"``.  ``"image"`` means an image container, not
    necessarily one :func:`read_image` accepts (HEIF, for instance).

    Raises:
        UnreadableFileError: the file is missing, a directory, or unreadable.
    """
    label = os.fsdecode(os.fspath(path))
    with _open_source(Path(path), f"file '{label}'") as fh:
        return _sniff(fh.read(_HEAD_BYTES))[0]


# ------------------------------------------------------------------ reading


def read_image(source: str | os.PathLike[str] | bytes, *, max_pixels: int = 40_000_000, role: str = "image") -> Image:
    """Decode an image file (or its bytes) into RGB ``(H, W, 3)`` uint8 and alpha.

    The format comes from the content (JPEG, PNG, WEBP, BMP, TIFF, GIF); EXIF
    orientation is applied; grey, palette, CMYK and 16-bit images become 8-bit
    RGB; alpha is ``(H, W)`` uint8, or ``None`` when absent or fully opaque.
    Animated files give their first frame.  ``role`` names the image in
    messages, e.g. ``"source image"``.

    Raises:
        UnreadableFileError: missing, a directory, unreadable, empty, truncated or corrupt.
        UnsupportedFormatError: a video, or not an accepted image format.
        ImageTooLargeError: more than ``max_pixels`` pixels (checked before decoding).
        InvalidOptionError: ``max_pixels`` is not a positive integer.
    """
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, int) or max_pixels < 1:
        raise InvalidOptionError(f"max_pixels must be a positive integer; got {max_pixels!r}")
    opened: Path | bytes | bytearray | memoryview
    if isinstance(source, (bytes, bytearray, memoryview)):
        opened, label = source, None
    else:
        opened, label = Path(source), os.fsdecode(os.fspath(source))
    what = f"{role} (in-memory bytes)" if label is None else f"{role} '{label}'"
    with _open_source(opened, what) as fh:
        head = fh.read(_HEAD_BYTES)
        fh.seek(0)
        _check_head(head, what)
        with _open_lazy(fh, head, what) as pil:
            fmt = _check_header(pil, what, max_pixels)
            _decode(pil, what, fmt)
            pixels, alpha = _to_rgb_alpha(pil, what)
    return Image(pixels=pixels, alpha=alpha, path=label, format=fmt)


@contextmanager
def _open_source(source: Path | bytes | bytearray | memoryview, what: str) -> Iterator[BinaryIO]:
    """Open a path (or wrap bytes) for binary reading, with one-line errors."""
    if not isinstance(source, Path):
        yield io.BytesIO(bytes(source))
        return
    if source.is_dir():
        raise UnreadableFileError(f"{what} is a directory; expected an image file ({ACCEPTED_INPUT})")
    try:
        fh = source.open("rb")
    except FileNotFoundError:
        raise UnreadableFileError(f"{what} does not exist; check the path") from None
    except PermissionError:
        raise UnreadableFileError(f"{what} cannot be read: permission denied") from None
    except OSError as exc:
        raise UnreadableFileError(f"{what} cannot be read: {exc.strerror or _one_line(exc)}") from None
    with fh:
        yield fh


def _check_head(head: bytes, what: str) -> None:
    """Refuse empty files and videos before Pillow looks at them."""
    if not head:
        raise UnreadableFileError(f"{what} is empty (0 bytes); expected an image file ({ACCEPTED_INPUT})")
    kind, name = _sniff(head)
    if kind == "video":
        raise UnsupportedFormatError(f"{what} is a video ({name}); an image is expected here ({ACCEPTED_INPUT})")


def _open_lazy(fh: BinaryIO, head: bytes, what: str) -> PILImage.Image:
    """Read the header only (Pillow's open is lazy); pixel data is not decoded yet.

    Pillow's decompression-bomb warning is silenced for this call only: our own
    ``max_pixels`` check decides.  Its hard limit (an error) becomes ours.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)
            return PILImage.open(fh, formats=_OPENERS)
    except PILImage.DecompressionBombError:
        limit = 2 * (PILImage.MAX_IMAGE_PIXELS or 0)
        raise ImageTooLargeError(
            f"{what} is larger than the decoder's hard limit of {limit} pixels; it cannot be read"
        ) from None
    except UnidentifiedImageError:
        raise _unidentified(head, what) from None
    except _DECODE_ERRORS as exc:
        raise UnreadableFileError(
            f"{what} has a corrupt header ({_one_line(exc)}); expected a valid {ACCEPTED_INPUT} file"
        ) from exc


def _unidentified(head: bytes, what: str) -> InputError:
    """The error for a file Pillow could not identify, from its magic bytes."""
    kind, name = _sniff(head)
    if kind == "image" and name in READ_FORMATS.values():
        return UnreadableFileError(f"{what} looks like {name} but is corrupt; expected a valid {name} file")
    found = f" (it is {name})" if name else ""
    return UnsupportedFormatError(f"{what} is not an accepted image{found}; accepted formats: {ACCEPTED_INPUT}")


def _check_header(pil: PILImage.Image, what: str, max_pixels: int) -> str:
    """Check the format and the pixel count from the header; return the format name."""
    fmt = READ_FORMATS.get(pil.format or "")
    if fmt is None:
        raise UnsupportedFormatError(f"{what} is {pil.format}; accepted formats: {ACCEPTED_INPUT}")
    width, height = pil.size
    if width * height > max_pixels:
        raise ImageTooLargeError(
            f"{what} is {width}x{height} = {width * height} pixels, over the limit of {max_pixels} pixels;"
            f" raise the pixel limit (max_pixels, --max-pixels) to accept it"
        )
    return fmt


def _decode(pil: PILImage.Image, what: str, fmt: str) -> None:
    """Decode all pixel data (truncated data raises), then apply EXIF orientation in place."""
    try:
        pil.load()
        ImageOps.exif_transpose(pil, in_place=True)
    except _DECODE_ERRORS as exc:
        raise UnreadableFileError(
            f"{what} is truncated or corrupt ({_one_line(exc)}); expected a complete {fmt} file"
        ) from exc


def _to_rgb_alpha(pil: PILImage.Image, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Any Pillow mode -> ``(H, W, 3)`` uint8 RGB and ``(H, W)`` uint8 alpha or ``None``."""
    if pil.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        gray = _gray_to_uint8(np.asarray(pil))
        return _read_only(np.repeat(gray[..., None], 3, axis=2)), None
    try:
        if pil.mode in ("RGBA", "RGBa", "LA", "La", "PA") or "transparency" in pil.info:
            rgba = np.asarray(pil.convert("RGBA"))
            return _read_only(rgba[..., :3]), _alpha_or_none(rgba[..., 3])
        return _read_only(np.asarray(pil if pil.mode == "RGB" else pil.convert("RGB"))), None
    except ValueError as exc:
        raise UnsupportedFormatError(
            f"{what} has pixel mode {pil.mode}, which cannot be converted to RGB ({_one_line(exc)})"
        ) from exc


def _gray_to_uint8(values: np.ndarray) -> np.ndarray:
    """``(H, W)`` 16-bit, 32-bit integer or float grey -> ``(H, W)`` uint8.

    16-bit data is scaled (65535 -> 255).  32-bit integers are taken as 16-bit
    data when any value exceeds 255, else as 8-bit.  Floats are taken as
    ``[0, 1]`` when no value exceeds 1, else as ``[0, 255]``; out-of-range
    values are clipped.
    """
    if values.dtype.kind == "f":
        v = np.nan_to_num(values.astype(np.float64))
        scale = 255.0 if v.max(initial=0.0) <= 1.0 else 1.0
        return np.clip(np.rint(v * scale), 0, 255).astype(np.uint8)
    v = values.astype(np.int64)
    if values.dtype.itemsize == 2 or v.max(initial=0) > 255:
        v = (np.clip(v, 0, 65535) + 128) // 257
    return np.clip(v, 0, 255).astype(np.uint8)


def _alpha_or_none(alpha: np.ndarray) -> np.ndarray | None:
    """``(H, W)`` alpha, or ``None`` when every pixel is opaque."""
    return None if alpha.size == 0 or int(alpha.min()) == 255 else _read_only(alpha)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _read_only(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a C-contiguous read-only uint8 array (copied only when needed)."""
    out = np.ascontiguousarray(arr, dtype=np.uint8)
    out.setflags(write=False)
    return out


def image_from_array(array: np.ndarray, *, path: str | None = None) -> Image:
    """Wrap a uint8 array as an :class:`Image`: ``(H, W, 3)`` RGB, ``(H, W)`` grey
    or ``(H, W, 4)`` RGBA.  The data are copied and made read-only; a fully
    opaque alpha becomes ``None``.

    Raises:
        InputError: wrong dtype or shape (the message shows both).
    """
    arr = np.array(array, copy=True)  # never freeze or share the caller's array
    shape_ok = (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] in (3, 4))) and min(arr.shape[:2], default=0) > 0
    if arr.dtype != np.uint8 or not shape_ok:
        where = f" for '{path}'" if path else ""
        raise InputError(
            f"expected a uint8 array of shape (H, W, 3) RGB, (H, W) grey or (H, W, 4) RGBA{where};"
            f" got {arr.dtype} {arr.shape}"
        )
    if arr.ndim == 2:
        return Image(pixels=_read_only(np.repeat(arr[..., None], 3, axis=2)), path=path)
    alpha = _alpha_or_none(arr[..., 3]) if arr.shape[2] == 4 else None
    return Image(pixels=_read_only(arr[..., :3]), alpha=alpha, path=path)


# ------------------------------------------------------------------ writing


def write_image(
    path: str | os.PathLike[str],
    pixels: np.ndarray,
    *,
    alpha: np.ndarray | None = None,
    quality: int = 95,
    xmp: bytes | None = None,
) -> Path:
    """Write ``(H, W, 3)`` uint8 RGB (and ``(H, W)`` uint8 alpha) atomically.

    The format comes from the extension: .png, .jpg/.jpeg, .webp, .bmp,
    .tif/.tiff.  Alpha is kept for PNG, WEBP and TIFF and dropped for JPEG and
    BMP.  ``quality`` (1..100) applies to JPEG and WEBP; PNG is written at
    zlib level :data:`PNG_COMPRESS_LEVEL`.  ``xmp`` (a complete
    XMP packet) is stored as PNG ``iTXt XML:com.adobe.xmp``, JPEG APP1, the
    WEBP ``XMP`` chunk or TIFF tag 700; BMP cannot hold it (see
    :data:`XMP_FORMATS`).  The parent folder is created.  The file appears
    under its name only once complete.

    Returns:
        the written path.

    Raises:
        InvalidOptionError: unknown extension, bad ``quality``, or ``xmp`` for a
            format that cannot hold it (before any work).
        InputError: ``pixels`` or ``alpha`` of the wrong dtype or shape.
        OutputError: the file could not be written.
    """
    target = Path(path)
    fmt = _output_format(target)
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise InvalidOptionError(f"quality must be an integer from 1 to 100; got {quality!r}")
    if xmp is not None and fmt not in XMP_FORMATS:
        raise InvalidOptionError(f"cannot write '{target}' with XMP metadata: {fmt} cannot hold it")
    pil = _to_pil(pixels, alpha if fmt in _KEEPS_ALPHA else None)
    options: dict = {"quality": quality} if fmt in _HAS_QUALITY else {}
    if fmt == "PNG":
        options["compress_level"] = PNG_COMPRESS_LEVEL
    if xmp is not None:
        options.update(_xmp_options(fmt, bytes(xmp)))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(target, ".tmp") as temp:
            pil.save(temp, format=fmt, **options)
    except OSError as exc:
        raise OutputError(f"cannot write image '{target}': {_write_reason(exc, target)}") from exc
    return target


def _write_reason(exc: OSError, target: Path) -> str:
    """Why ``target`` could not be written, in words (a file in the way of its folder is named)."""
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        blocker = next((p for p in target.parents if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            return f"'{blocker}' is a file, not a folder; give an output path in a folder"
    return exc.strerror or _one_line(exc)


def _xmp_options(fmt: str, xmp: bytes) -> dict:
    """Pillow save arguments that store an XMP packet in ``fmt``."""
    if fmt == "PNG":
        from PIL.PngImagePlugin import PngInfo

        info = PngInfo()
        info.add_itxt("XML:com.adobe.xmp", xmp.decode("utf-8"), zip=False)
        return {"pnginfo": info}
    if fmt == "TIFF":
        from PIL.TiffImagePlugin import ImageFileDirectory_v2

        ifd = ImageFileDirectory_v2()
        ifd[700] = xmp  # XMLPacket
        ifd.tagtype[700] = 1  # BYTE
        return {"tiffinfo": ifd}
    return {"xmp": xmp}  # JPEG (APP1), WEBP (XMP chunk)


def read_xmp(path: str | os.PathLike[str]) -> bytes | None:
    """The XMP packet stored in an image file, or ``None`` when it has none.

    Only the header is read (no pixel data is decoded).

    Raises:
        UnreadableFileError, UnsupportedFormatError: as :func:`read_image`.
    """
    label = os.fsdecode(os.fspath(path))
    what = f"image '{label}'"
    with _open_source(Path(path), what) as fh:
        head = fh.read(_HEAD_BYTES)
        fh.seek(0)
        _check_head(head, what)
        with _open_lazy(fh, head, what) as pil:
            xmp = pil.info.get("xmp")
            if xmp is None and pil.format == "TIFF":
                xmp = getattr(pil, "tag_v2", {}).get(700)
    if isinstance(xmp, str):
        xmp = xmp.encode("utf-8")
    return bytes(xmp) if xmp else None


def _output_format(target: Path) -> str:
    fmt = WRITE_FORMATS.get(target.suffix.lower())
    if fmt is None:
        accepted = ", ".join(WRITE_FORMATS)
        raise InvalidOptionError(
            f"cannot write '{target}': unknown image extension '{target.suffix}'; accepted: {accepted}"
        )
    return fmt


def _to_pil(pixels: np.ndarray, alpha: np.ndarray | None) -> PILImage.Image:
    """``(H, W, 3)`` RGB and optional ``(H, W)`` alpha -> a Pillow RGB or RGBA image."""
    px = np.asarray(pixels)
    if px.dtype != np.uint8 or px.ndim != 3 or px.shape[2] != 3:
        raise InputError(f"pixels must be uint8 (H, W, 3) RGB; got {px.dtype} {px.shape}")
    if alpha is None:
        return PILImage.fromarray(np.ascontiguousarray(px))
    a = np.asarray(alpha)
    if a.dtype != np.uint8 or a.shape != px.shape[:2]:
        raise InputError(f"alpha must be uint8 (H, W) = {px.shape[:2]}; got {a.dtype} {a.shape}")
    return PILImage.fromarray(np.ascontiguousarray(np.dstack([px, a])))
