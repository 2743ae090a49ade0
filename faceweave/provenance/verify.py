"""Check a file for faceweave's marks: the metadata label and the invisible watermark.

:func:`verify_file` reads the label (XMP for images, container tags for
video) and looks for the watermark (every sampled frame of a video votes for
a payload), and returns a :class:`Verification`.  A file is *marked* when
either is found.  Files that are not images or videos, or that cannot be
decoded, raise :class:`~faceweave.errors.UnreadableFileError` or
:class:`~faceweave.errors.UnsupportedFormatError`.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from faceweave.errors import InvalidOptionError, UnreadableFileError, UnsupportedFormatError
from faceweave.provenance.label import Label, from_tags, from_xmp
from faceweave.provenance.payload import Payload

DEFAULT_FRAMES = 8


class Detector(Protocol):
    """What :func:`verify_file` needs from a watermarker."""

    def detect(self, pixels: np.ndarray) -> Any: ...


@dataclass(frozen=True)
class WatermarkFinding:
    """The watermark verdict.  ``confidence`` is the detector's sync z-score
    (about 4 on unmarked pictures, 10 and more on marked ones): the mean over
    the frames that agree on ``payload``, or the best seen when nothing was
    found; ``frames_checked`` is 1 for an image."""

    found: bool
    payload: Payload | None
    confidence: float
    frames_checked: int
    frames_agreeing: int

    def as_dict(self) -> dict[str, Any]:
        p = self.payload
        return {
            "found": self.found,
            "payload": None
            if p is None
            else {"tool_id": f"0x{int(p.tool_id):04X}", "version": int(p.version), "run_id": f"{int(p.run_id):06x}"},
            "confidence": round(float(self.confidence), 4),
            "frames_checked": self.frames_checked,
            "frames_agreeing": self.frames_agreeing,
        }


@dataclass(frozen=True)
class Verification:
    """What :func:`verify_file` found in one file (``kind``: ``"image"`` or ``"video"``)."""

    path: str
    kind: str
    label: Label | None
    watermark: WatermarkFinding
    #: the C2PA manifest store (``None``: none, or c2pa-python not installed)
    c2pa: dict | None = None

    @property
    def marked(self) -> bool:
        return self.label is not None or self.watermark.found

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "marked": self.marked,
            "label": None if self.label is None else {**self.label.as_dict(), "ai_generated": self.label.ai_generated},
            "watermark": self.watermark.as_dict(),
            "c2pa": self.c2pa is not None,
        }


def verify_file(
    path: str | os.PathLike[str], *, frames: int = DEFAULT_FRAMES, detector: Detector | None = None
) -> Verification:
    """Look for the label and the watermark in an image or a video (told apart by content).

    ``frames``: how many frames of a video are checked, evenly spread.
    ``detector``: the watermarker to read with (default: the default key's).

    Raises:
        UnreadableFileError: missing, empty, truncated or undecodable.
        UnsupportedFormatError: neither an image nor a video.
        InvalidOptionError: ``frames`` is not a positive integer.
    """
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise InvalidOptionError(f"--frames must be a positive integer; got {frames!r}")
    from faceweave.io.images import probe_kind

    kind = probe_kind(path)
    label_text = os.fsdecode(os.fspath(path))
    if kind == "unknown":
        size = Path(path).stat().st_size
        if size == 0:
            raise UnreadableFileError(f"'{label_text}' is empty (0 bytes); not an image or a video")
        raise UnsupportedFormatError(f"'{label_text}' is not an image or a video; nothing to verify")
    detector = detector if detector is not None else _default_detector()
    if kind == "image":
        found = _verify_image(path, label_text, detector)
    else:
        found = _verify_video(path, label_text, detector, frames)
    return replace(found, c2pa=_c2pa_manifest(path))


def _c2pa_manifest(path: str | os.PathLike[str]) -> dict | None:
    """The file's C2PA manifest store when c2pa-python is installed and finds one."""
    from faceweave.provenance import c2pa_manifest

    if not c2pa_manifest.available() or Path(path).suffix.lower() not in c2pa_manifest.MIME_TYPES:
        return None
    try:
        return c2pa_manifest.read_manifest(path)
    except Exception:  # noqa: BLE001 - a damaged manifest is no manifest
        return None


def _default_detector() -> Detector:
    from faceweave.provenance.watermark import Watermarker

    return Watermarker()


def _verify_image(path, label_text: str, detector: Detector) -> Verification:
    from faceweave.io.images import read_image, read_xmp

    image = read_image(path, role="file")  # decoding first: a truncated file is an error, label or not
    label = from_xmp(read_xmp(path)) or _gif_comment_label(path)
    finding = vote([_detect(detector, image.pixels)])
    return Verification(path=label_text, kind="image", label=label, watermark=finding)


def _gif_comment_label(path) -> Label | None:
    """The label a GIF carries in its comment extension (GIF outputs hold
    no XMP; see :func:`faceweave.video.io.sinks.with_gif_comment`)."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(path) as pil:
            if pil.format != "GIF":
                return None
            comment = pil.info.get("comment")
    except (OSError, ValueError):
        return None
    if not comment:
        return None
    text = comment.decode("ascii", "replace") if isinstance(comment, bytes) else str(comment)
    return from_tags({"comment": text})


def _detect(detector: Detector, pixels: np.ndarray) -> Any:
    """One reading; a picture too small to hold a mark reads as "not found"."""
    from faceweave.errors import InputError

    try:
        return detector.detect(np.ascontiguousarray(pixels))
    except InputError:
        return None


def vote(readings: list[Any]) -> WatermarkFinding:
    """Combine watermark readings (objects with ``found``, ``payload``,
    ``confidence``): the payload most frames found wins."""
    found = [r for r in readings if getattr(r, "found", False) and getattr(r, "payload", None) is not None]
    if not found:
        best = max((float(getattr(r, "confidence", 0.0) or 0.0) for r in readings), default=0.0)
        return WatermarkFinding(False, None, best, len(readings), 0)
    counts = Counter(r.payload for r in found)
    payload, agreeing = counts.most_common(1)[0]
    confidence = float(np.mean([float(r.confidence) for r in found if r.payload == payload]))
    return WatermarkFinding(True, payload, confidence, len(readings), agreeing)


def _verify_video(path, label_text: str, detector: Detector, frames: int) -> Verification:
    import av
    import av.error

    try:
        container = av.open(os.fspath(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise UnreadableFileError(f"video '{label_text}' cannot be opened: {_reason(exc)}") from None
    with container:
        label = from_tags(dict(container.metadata))
        if not container.streams.video:
            raise UnsupportedFormatError(f"'{label_text}' has no video stream; nothing to verify")
        pictures = _sample_frames(container, frames, label_text)
    finding = vote([_detect(detector, p) for p in pictures])
    return Verification(path=label_text, kind="video", label=label, watermark=finding)


def sample_video_frames(path: str | os.PathLike[str], count: int) -> list[np.ndarray]:
    """``count`` ``(H, W, 3)`` uint8 RGB frames spread evenly over a video (for screening).

    Raises:
        UnreadableFileError: the video cannot be opened or has no decodable frame.
    """
    import av
    import av.error

    label_text = os.fsdecode(os.fspath(path))
    try:
        container = av.open(os.fspath(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise UnreadableFileError(f"video '{label_text}' cannot be opened: {_reason(exc)}") from None
    with container:
        if not container.streams.video:
            raise UnreadableFileError(f"'{label_text}' has no video stream")
        return _sample_frames(container, count, label_text)


def _sample_frames(container, count: int, label_text: str) -> list[np.ndarray]:
    """``count`` RGB frames spread evenly over the video (decoded in order;
    only the chosen ones are converted)."""
    import av.error

    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    total = stream.frames or _estimate_frames(stream)
    wanted = set(_even_indices(total, count)) if total else None
    picked: list[np.ndarray] = []
    seen: list[Any] = []  # unknown length: keep every k-th frame, thinning as it grows
    try:
        for index, frame in enumerate(container.decode(stream)):
            if wanted is not None:
                if index in wanted:
                    picked.append(frame.to_ndarray(format="rgb24"))
                    if len(picked) == len(wanted):
                        break
            else:
                seen.append(frame.to_ndarray(format="rgb24"))
                if len(seen) > 4 * count:
                    seen = seen[::2]
    except (av.error.FFmpegError, OSError, ValueError):
        pass  # a broken tail: judge on what was decoded
    if wanted is None:
        picked = [seen[i] for i in _even_indices(len(seen), count)] if seen else []
    if not picked:
        raise UnreadableFileError(f"video '{label_text}' has no decodable frame; it is truncated or corrupt")
    return picked


def _estimate_frames(stream) -> int:
    try:
        seconds = float(stream.duration * stream.time_base) if stream.duration else 0.0
        return int(seconds * float(stream.average_rate or 0))
    except (TypeError, ValueError, ZeroDivisionError):
        return 0


def _even_indices(total: int, count: int) -> list[int]:
    """``count`` indices spread evenly over ``range(total)`` (each frame at most once)."""
    n = min(count, total)
    return sorted({int((i + 0.5) * total / n) for i in range(n)})


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or " ".join(str(exc).split()) or type(exc).__name__
