"""Face crops for INT8 calibration and for measuring what an export costs.

Crops come from real photos: :func:`collect_crops` finds the largest face of
each photo in a folder (:class:`faceweave.analysis.FaceAnalyser`), splits the
photos deterministically into a calibration group and a held-back group
(one photo in ``(calibration + held_back) / held_back``, in sorted path
order, is held back), and cuts square
crops around each face at the model's input size.  Small sets are stretched
with fixed jitters (scale, shift, mirror); when a folder yields fewer than
two faces, ``skimage.data.astronaut()`` is added as another face.
:func:`to_feeds` turns crops into model inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from faceweave.errors import ExportError, InputError, InvalidOptionError
from faceweave.export.onnxfile import TensorSpec

PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")
#: crop side / larger side of the face box
FACE_MARGIN = 1.6
#: (scale, shift x, shift y as a fraction of the crop, mirror) cycled over to stretch small sets
JITTERS: tuple[tuple[float, float, float, bool], ...] = (
    (1.0, 0.0, 0.0, False),
    (1.0, 0.0, 0.0, True),
    (0.85, 0.05, 0.0, False),
    (1.2, -0.05, 0.05, True),
    (0.9, 0.0, -0.06, False),
    (1.1, 0.06, 0.04, True),
    (1.0, -0.04, -0.04, False),
    (0.8, 0.0, 0.03, True),
)
HELD_BACK_EVERY = 4


@dataclass(frozen=True, eq=False)
class Face:
    """One face to crop: where it came from, the ``(H, W, 3)`` uint8 RGB photo and its box ``(x1, y1, x2, y2)``.

    Compared by identity (the photo is an array)."""

    source: str
    pixels: np.ndarray
    box: tuple[float, float, float, float]


@dataclass(frozen=True)
class CropSet:
    """Calibration and held-back crops, ``(N, H, W, 3)`` and ``(M, H, W, 3)`` uint8 RGB.

    ``sources`` name the photos used (calibration first); ``notes`` say what
    was substituted (astronaut, jitters)."""

    calibration: np.ndarray
    held_back: np.ndarray
    sources: tuple[str, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImageLayout:
    """How an ``(H, W, 3)`` uint8 RGB crop becomes one model input row:
    ``((pixel * scale) - mean) / std``, channels first for ``NCHW``."""

    layout: Literal["NCHW", "NHWC"]
    height: int
    width: int
    scale: float = 1.0 / 255.0
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    bgr: bool = False


def image_layout(shape: Sequence[int], *, dtype: np.dtype | type = np.float32) -> ImageLayout | None:
    """The layout of a rank-4 image input with 3 channels (``None`` for other inputs).

    uint8 inputs take raw pixels (scale 1)."""
    if len(shape) != 4:
        return None
    scale = 1.0 if np.dtype(dtype) == np.uint8 else 1.0 / 255.0
    if shape[1] == 3:
        return ImageLayout("NCHW", int(shape[2]), int(shape[3]), scale=scale)
    if shape[3] == 3:
        return ImageLayout("NHWC", int(shape[1]), int(shape[2]), scale=scale)
    return None


def crop_face(
    face: Face,
    size: tuple[int, int],
    *,
    scale: float = 1.0,
    shift: tuple[float, float] = (0.0, 0.0),
    mirror: bool = False,
    margin: float = FACE_MARGIN,
) -> np.ndarray:
    """``(h, w, 3)`` uint8 crop centred on the face box, the box's larger side
    ``min(h, w) / margin * scale`` pixels, moved by ``shift`` (fractions of
    the crop) and mirrored on request.  Pure."""
    import cv2

    h, w = size
    x1, y1, x2, y2 = face.box
    side = max(x2 - x1, y2 - y1, 1e-6)
    s = min(h, w) / (side * margin) * scale
    cx, cy = (x1 + x2) / 2.0, (y1 + y2) / 2.0
    m = np.array([[s, 0.0, w / 2.0 - cx * s + shift[0] * w], [0.0, s, h / 2.0 - cy * s + shift[1] * h]], np.float64)
    crop = cv2.warpAffine(
        np.ascontiguousarray(face.pixels),
        m,
        (w, h),
        flags=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REFLECT101,
    )
    return np.ascontiguousarray(crop[:, ::-1]) if mirror else crop


def find_faces(folder: Path, *, limit: int) -> list[Face]:
    """The largest face of each photo under ``folder`` (recursive, sorted by
    path), at most ``limit`` faces.  Photos without a face, and files that
    are not photos, are skipped."""
    from faceweave.analysis import FaceAnalyser
    from faceweave.io import read_image

    if not folder.is_dir():
        raise InputError(f"--calibration {folder}: not a folder of photos")
    photos = sorted(p for p in folder.rglob("*") if p.suffix.lower() in PHOTO_SUFFIXES and p.is_file())
    faces: list[Face] = []
    with FaceAnalyser() as analyser:
        for photo in photos:
            if len(faces) >= limit:
                break
            try:
                pixels = read_image(photo).pixels
            except InputError:
                continue
            found = analyser.analyse(pixels, small_faces=False)
            if found:
                best = max(found, key=lambda f: f.bbox.area)
                b = best.bbox
                faces.append(Face(str(photo.relative_to(folder)), pixels, (b.x1, b.y1, b.x2, b.y2)))
    return faces


def astronaut_face() -> Face:
    """The face in ``skimage.data.astronaut()`` (public domain), found by the analyser."""
    from faceweave.analysis import FaceAnalyser

    try:
        from skimage.data import astronaut
    except ImportError as exc:
        raise ExportError(
            "no calibration faces: give --calibration DIR with face photos (scikit-image is not installed)"
        ) from exc
    pixels = np.ascontiguousarray(astronaut())
    with FaceAnalyser() as analyser:
        found = analyser.analyse(pixels, small_faces=False)
    if not found:  # pragma: no cover - the stock photo has one clear face
        raise ExportError("no calibration faces found")
    b = max(found, key=lambda f: f.bbox.area).bbox
    return Face("skimage:astronaut", pixels, (b.x1, b.y1, b.x2, b.y2))


def split_faces(faces: Sequence[Face], *, every: int = HELD_BACK_EVERY) -> tuple[list[Face], list[Face]]:
    """``(calibration, held_back)``: every ``every``-th face (and at least one)
    is held back when there are two or more; a single face serves both."""
    if not faces:
        raise ExportError("no calibration faces")
    if len(faces) == 1:
        return [faces[0]], [faces[0]]
    every = max(2, every)
    held = [f for i, f in enumerate(faces) if i % every == every - 1] or [faces[-1]]
    kept = [f for f in faces if f not in held]
    return kept, held


def make_crops(faces: Sequence[Face], size: tuple[int, int], count: int, *, first_jitter: int = 0) -> np.ndarray:
    """``(count, h, w, 3)`` uint8 crops cycling over ``faces``, then over :data:`JITTERS`."""
    crops = []
    for k in range(count):
        face = faces[k % len(faces)]
        scale, dx, dy, mirror = JITTERS[(first_jitter + k // len(faces)) % len(JITTERS)]
        crops.append(crop_face(face, size, scale=scale, shift=(dx, dy), mirror=mirror))
    return np.stack(crops) if crops else np.zeros((0, size[0], size[1], 3), np.uint8)


def collect_crops(folder: Path | None, size: tuple[int, int], *, calibration: int = 16, held_back: int = 4) -> CropSet:
    """Calibration and held-back crops at ``size`` ``(h, w)`` from the photos in
    ``folder`` (the astronaut alone when ``None``)."""
    if calibration <= 0 or held_back <= 0:
        raise InvalidOptionError("calibration and held-back counts must be positive")
    notes: list[str] = []
    faces = find_faces(folder, limit=calibration + held_back) if folder is not None else []
    if len(faces) < 2:
        faces.append(astronaut_face())
        notes.append("added skimage astronaut face" + (f" ({folder} gave {len(faces) - 1} face(s))" if folder else ""))
    kept, held = split_faces(faces, every=round((calibration + held_back) / held_back))
    if len(kept) < calibration or len(held) < held_back:
        notes.append("stretched a small set with fixed jitters (scale, shift, mirror)")
    shared = kept == held
    cal = make_crops(kept, size, calibration)
    hb = make_crops(held, size, held_back, first_jitter=len(JITTERS) // 2 if shared else 0)
    return CropSet(
        cal, hb, tuple(f.source for f in kept) + tuple(f.source for f in held if f not in kept), tuple(notes)
    )


def to_feeds(
    crops: np.ndarray, inputs: Sequence[TensorSpec], shapes: dict[str, tuple[int, ...]], *, seed: int = 0
) -> list[dict[str, np.ndarray]]:
    """One feed dict per model run: the first image input takes the crops in
    batches of its first dimension (the last batch filled by cycling), other
    inputs take seeded standard-normal values.  ``crops`` is ``(N, H, W, 3)``
    uint8 and must match the image input's height and width."""
    rng = np.random.default_rng(seed)
    found = ((s, image_layout(shapes[s.name], dtype=s.dtype)) for s in inputs)
    image, layout = next(((s, lay) for s, lay in found if lay is not None), (None, None))
    n = len(crops)
    batch = shapes[image.name][0] if image is not None else 1
    runs = max(1, -(-n // batch)) if image is not None else max(1, n)
    feeds: list[dict[str, np.ndarray]] = []
    for r in range(runs):
        feed: dict[str, np.ndarray] = {}
        for spec in inputs:
            shape = shapes[spec.name]
            if spec is image and layout is not None:
                rows = crops[[(r * batch + i) % n for i in range(batch)]]
                feed[spec.name] = pixels_to_input(rows, layout).astype(spec.dtype)
            else:
                feed[spec.name] = rng.standard_normal(shape).astype(spec.dtype)
        feeds.append(feed)
    return feeds


def pixels_to_input(crops: np.ndarray, layout: ImageLayout) -> np.ndarray:
    """``(B, H, W, 3)`` uint8 RGB -> ``(B, 3, H, W)`` or ``(B, H, W, 3)`` float32 model input."""
    if crops.shape[1:3] != (layout.height, layout.width):
        raise ExportError(f"crops are {crops.shape[1:3]}, the input wants {(layout.height, layout.width)}")
    x = crops[..., ::-1] if layout.bgr else crops
    x = (x.astype(np.float32) * layout.scale - np.asarray(layout.mean, np.float32)) / np.asarray(layout.std, np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2) if layout.layout == "NCHW" else x)
