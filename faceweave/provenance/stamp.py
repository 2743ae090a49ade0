"""Stamp what faceweave writes: the invisible watermark and the "AI-generated" label.

:class:`Provenance` is the run's settings as one frozen value (watermark on or
off, its key and strength, run id, tool, version, time); the functions turn it
into marked pixels (:func:`stamp_image`), XMP for :func:`faceweave.io.images.write_image`
(:func:`image_metadata`), container tags (:func:`video_metadata`) and the
arguments that make :class:`faceweave.video.io.VideoWriter` mark every frame
(:func:`writer_stamp`).  The watermark is on by default; turning it off is an
explicit choice that the audit line records (:func:`audit_watermark`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from faceweave.errors import FaceweaveError
from faceweave.provenance.label import Label, to_tags, to_xmp
from faceweave.provenance.payload import FACEWEAVE_TOOL_ID, PAYLOAD_VERSION, Payload

TOOL = "faceweave"
#: what the audit line says when the watermark was turned off
WATERMARK_DISABLED = "disabled by --no-watermark"
#: image formats (Pillow names) whose files carry XMP (see faceweave.io.images.XMP_FORMATS)
_XMP_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff"})


def tool_version() -> str:
    """The installed faceweave version, or ``"unknown"`` in a bare source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(TOOL)
    except PackageNotFoundError:
        return "unknown"


def utc_now() -> str:
    """The current UTC time as ISO 8601 with a ``Z``, to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Provenance:
    """How one run marks its outputs.

    ``run_id`` is the 24-bit id that the watermark payload, the label and the
    audit line share.  ``key`` and ``strength`` go to the watermarker (``None``:
    its defaults).  ``label`` writes the XMP / container label.
    """

    run_id: int
    created: str = field(default_factory=utc_now)
    watermark: bool = True
    label: bool = True
    key: str | bytes | int | None = None
    strength: float | None = None
    tool: str = TOOL
    version: str = field(default_factory=tool_version)

    @classmethod
    def new(cls, **kwargs: Any) -> Provenance:
        """A fresh run: a random run id, now, and ``kwargs`` (``watermark=False`` ...)."""
        return cls(run_id=Payload.new_run_id(), **kwargs)

    @property
    def run_hex(self) -> str:
        """The run id as 6 hex digits, as the label and the audit line write it."""
        return f"{self.run_id:06x}"

    @property
    def payload(self) -> Payload:
        return Payload(run_id=self.run_id, tool_id=FACEWEAVE_TOOL_ID, version=PAYLOAD_VERSION)

    def as_label(self) -> Label:
        return Label(tool=self.tool, version=self.version, created=self.created, run_id=self.run_hex)


def watermarker(provenance: Provenance):
    """The :class:`~faceweave.provenance.watermark.Watermarker` for ``provenance``'s key and strength."""
    from faceweave.provenance.watermark import Watermarker

    kwargs: dict[str, Any] = {}
    if provenance.key is not None:
        kwargs["key"] = provenance.key
    if provenance.strength is not None:
        kwargs["strength"] = provenance.strength
    return Watermarker(**kwargs)


def stamp_image(pixels: np.ndarray, provenance: Provenance | None) -> np.ndarray:
    """``(H, W, 3)`` uint8 RGB with the watermark embedded (unchanged when off or ``None``)."""
    if provenance is None or not provenance.watermark:
        return pixels
    return watermarker(provenance).embed(np.ascontiguousarray(pixels), provenance.payload)


def image_metadata(provenance: Provenance | None, fmt: str | os.PathLike[str]) -> dict[str, bytes]:
    """Keyword arguments for :func:`faceweave.io.images.write_image`: ``{"xmp": packet}``
    for PNG, JPEG, WEBP and TIFF (``fmt`` is an output path, an extension or a
    Pillow format name); ``{}`` for BMP, with the label off, or without provenance."""
    if provenance is None or not provenance.label:
        return {}
    text = os.fspath(fmt)
    ext = Path(text).suffix.lower() or "." + text.lower().lstrip(".")
    ext = {".jpeg": ".jpg", ".tif": ".tiff"}.get(ext, ext)
    if ext not in _XMP_EXTENSIONS:
        return {}
    return {"xmp": to_xmp(provenance.as_label())}


def video_metadata(provenance: Provenance | None) -> dict[str, str]:
    """Container tags that carry the label (``{}`` with the label off or without provenance)."""
    if provenance is None or not provenance.label:
        return {}
    return to_tags(provenance.as_label())


class LazyFrameMarker:
    """Marks video frames with a marker precomputed for their size.

    The watermarker's ``frame_marker(width, height, payload)`` is built for
    the first frame and again only when the size changes; the object lives as
    long as the writer that uses it.
    """

    def __init__(self, provenance: Provenance) -> None:
        self._provenance = provenance
        self._marker: Any = None  # a watermark.FrameMarker for frames of ``_size``
        self._size: tuple[int, int] | None = None

    def mark(self, pixels: np.ndarray) -> np.ndarray:
        """``(H, W, 3)`` uint8 RGB -> the same frame, marked."""
        return self._for(pixels.shape).mark(pixels)

    def mark_luma(self, luma: np.ndarray) -> None:
        """Mark a frame's limited-range ``(H, W)`` uint8 Y plane in place
        (:meth:`faceweave.provenance.watermark.FrameMarker.mark_luma`)."""
        self._for(luma.shape).mark_luma(luma)

    def _for(self, shape: tuple[int, ...]) -> Any:
        size = (int(shape[1]), int(shape[0]))
        marker = self._marker
        if marker is None or size != self._size:
            marker = watermarker(self._provenance).frame_marker(size[0], size[1], self._provenance.payload)
            self._marker, self._size = marker, size
        return marker


def writer_stamp(provenance: Provenance | None) -> dict[str, Any]:
    """Keyword arguments for :class:`faceweave.video.io.VideoWriter`: a
    ``frame_marker`` (when the watermark is on) and the label ``metadata``."""
    if provenance is None:
        return {}
    marker = LazyFrameMarker(provenance) if provenance.watermark else None
    return {"frame_marker": marker, "metadata": video_metadata(provenance)}


def audit_watermark(provenance: Provenance | None) -> dict[str, Any] | str:
    """What the audit line records about the watermark: the payload, or why there is none."""
    if provenance is None:
        return "none"
    if not provenance.watermark:
        return WATERMARK_DISABLED
    p = provenance.payload
    return {"tool_id": f"0x{int(p.tool_id):04X}", "version": int(p.version), "run_id": provenance.run_hex}


def c2pa_folder(environ: Mapping[str, str] | None = None) -> Path:
    """Where the local C2PA signing key and chain live:
    ``$XDG_DATA_HOME/faceweave/c2pa`` (``~/.local/share/faceweave/c2pa``)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "faceweave" / "c2pa"


def attach_manifest(path: str | os.PathLike[str], provenance: Provenance | None) -> bool:
    """Sign a finished output with a C2PA manifest when the optional
    ``faceweave[c2pa]`` extra is installed and the format takes one (PNG,
    JPEG, WEBP, MP4).  Returns whether a manifest was attached.  A signing
    failure is logged, not raised: the output is complete and already carries
    the watermark and the XMP / container label."""
    from faceweave.provenance import c2pa_manifest

    target = Path(path)
    if provenance is None or not provenance.label or target.suffix.lower() not in c2pa_manifest.MIME_TYPES:
        return False
    if not c2pa_manifest.available():
        return False
    signer = c2pa_manifest.C2paSigner(c2pa_folder())
    try:
        signer.sign(target, provenance.as_label())
        return True
    except FaceweaveError as exc:
        logging.getLogger("faceweave").warning("no C2PA manifest on %s: %s", target, exc)
        return False
    finally:
        signer.close()
