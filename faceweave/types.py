"""Typed, frozen values passed between stages.

Conventions: images are ``uint8`` RGB arrays of shape ``(H, W, 3)``; points are
``float32`` arrays in image pixel coordinates ``(x, y)``.  Arrays stored in
these values are made read-only so that a stage cannot change another stage's
data by accident.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from faceweave.errors import InputError, MeshlessFaceError

if TYPE_CHECKING:
    from faceweave.provenance.stamp import Provenance

#: number of points of mediapipe's face mesh with iris refinement
MESH_POINTS = 478


def _frozen_array(value: np.ndarray, *, shape: tuple[int | None, ...], name: str, dtype=np.float32) -> np.ndarray:
    arr = np.array(value, dtype=dtype, copy=True)
    if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape, strict=False)):
        raise ValueError(f"{name}: expected shape {shape}, got {arr.shape}")
    arr.setflags(write=False)
    return arr


def checked_array(value: np.ndarray, *, shape: tuple[int | None, ...], dtype: type, name: str) -> np.ndarray:
    """A read-only view of ``value`` after checking its dtype and shape
    (``None`` in ``shape``: any size; a read-only array is kept as it is).
    No copy and no conversion: the per-face images of a swap are large and
    already of the right kind, so a wrong one is a bug to report, not to
    correct."""
    if not isinstance(value, np.ndarray) or value.dtype != dtype:
        got = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
        raise ValueError(f"{name}: expected a {np.dtype(dtype)} array, got {got}")
    if value.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, value.shape, strict=False)):
        raise ValueError(f"{name}: expected shape {shape}, got {value.shape}")
    if not value.flags.writeable:
        return value
    view = value.view()
    view.setflags(write=False)
    return view


@dataclass(frozen=True)
class BBox:
    """Axis-aligned box in pixels, ``x1 <= x2``, ``y1 <= y2``."""

    x1: float
    y1: float
    x2: float
    y2: float

    def __post_init__(self) -> None:
        if not (self.x2 >= self.x1 and self.y2 >= self.y1):
            raise ValueError(f"invalid box {self}")

    @property
    def width(self) -> float:
        return self.x2 - self.x1

    @property
    def height(self) -> float:
        return self.y2 - self.y1

    @property
    def area(self) -> float:
        return self.width * self.height

    @property
    def center(self) -> tuple[float, float]:
        return ((self.x1 + self.x2) / 2.0, (self.y1 + self.y2) / 2.0)

    def scaled(self, factor: float) -> BBox:
        """The box grown (or shrunk) by ``factor`` about its centre."""
        cx, cy = self.center
        hw, hh = self.width * factor / 2.0, self.height * factor / 2.0
        return BBox(cx - hw, cy - hh, cx + hw, cy + hh)

    def clipped(self, width: int, height: int) -> BBox:
        return BBox(
            min(max(self.x1, 0.0), width),
            min(max(self.y1, 0.0), height),
            min(max(self.x2, 0.0), width),
            min(max(self.y2, 0.0), height),
        )

    def iou(self, other: BBox) -> float:
        ix = max(0.0, min(self.x2, other.x2) - max(self.x1, other.x1))
        iy = max(0.0, min(self.y2, other.y2) - max(self.y1, other.y1))
        inter = ix * iy
        union = self.area + other.area - inter
        return inter / union if union > 0 else 0.0

    def as_list(self) -> list[float]:
        return [round(self.x1, 1), round(self.y1, 1), round(self.x2, 1), round(self.y2, 1)]


@dataclass(frozen=True)
class Pose:
    """Head pose in degrees. Yaw > 0: the face turns to the image's right;
    pitch > 0: the face looks up; roll > 0: the head tilts clockwise in the image."""

    yaw: float
    pitch: float
    roll: float

    def distance(self, other: Pose) -> float:
        """Degrees between the two poses, all three angles."""
        return float(
            np.sqrt((self.yaw - other.yaw) ** 2 + (self.pitch - other.pitch) ** 2 + (self.roll - other.roll) ** 2)
        )

    def view_distance(self, other: Pose) -> float:
        """Degrees between the two views of the head: yaw and pitch only.
        Roll tilts the head in the picture's plane and shows the same parts
        of the face, so it says nothing about which source photo fits a
        target (the pipeline's source choice and ``SwappedFace.pose_gap``)."""
        return float(np.hypot(self.yaw - other.yaw, self.pitch - other.pitch))


@dataclass(frozen=True)
class Detection:
    """One face detector hit: box, confidence, key points ``(K, 2)`` (BlazeFace: 6 coarse ones; an ONNX
    detector: the five alignment points)."""

    bbox: BBox
    score: float
    keypoints: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "keypoints", _frozen_array(self.keypoints, shape=(None, 2), name="keypoints"))


@dataclass(frozen=True, eq=False)
class Face:
    """A face found in an image.

    Attributes:
        bbox: face box in image pixels: the mesh's with mediapipe's detector,
            the detector's own with one of FaceFusion's (as FaceFusion's).
        score: detector confidence in ``[0, 1]``.
        mesh: ``(478, 3)`` float32 mediapipe face mesh; x, y in image pixels,
            z relative depth in pixels (smaller is nearer the camera); ``None``
            for a face that FaceFusion's detector kept but the mesh could not
            be fitted to (only its :attr:`landmarks5` / :attr:`landmarks68`
            describe it: the neural swappers swap it, the mesh swapper skips
            it).
        pose: head pose in degrees (from the five points, roughly, without a mesh).
        embedding: ``(128,)`` float32 dlib identity embedding, or ``None`` when
            it was not computed.
        landmarks5: ``(5, 2)`` alignment points from a chosen face detector
            or landmarker (``None``: they follow from the mesh).
        landmarks68: ``(68, 2)`` points from a chosen 68-point landmarker, or ``None``.
    """

    bbox: BBox
    score: float
    mesh: np.ndarray | None
    pose: Pose
    embedding: np.ndarray | None = None
    landmarks5: np.ndarray | None = None
    landmarks68: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.mesh is not None:
            object.__setattr__(self, "mesh", _frozen_array(self.mesh, shape=(MESH_POINTS, 3), name="mesh"))
        elif self.landmarks5 is None:
            raise InputError("a face without a mesh needs its five points (landmarks5)")
        if self.embedding is not None:
            object.__setattr__(self, "embedding", _frozen_array(self.embedding, shape=(128,), name="embedding"))
        for name, count in (("landmarks5", 5), ("landmarks68", 68)):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _frozen_array(getattr(self, name), shape=(count, 2), name=name))

    def require_mesh(self) -> np.ndarray:
        """The ``(478, 3)`` mesh.

        Raises:
            MeshlessFaceError: the face has none (see :attr:`mesh`).
        """
        if self.mesh is None:
            box = [round(v) for v in self.bbox.as_list()]
            raise MeshlessFaceError(f"the face at {box} has no face mesh (none could be fitted to it)")
        return self.mesh

    @property
    def points2d(self) -> np.ndarray:
        """``(478, 2)`` mesh points in image pixels (:class:`MeshlessFaceError` without a mesh)."""
        return self.require_mesh()[:, :2]

    @property
    def kps5(self) -> np.ndarray:
        """``(5, 2)`` alignment points in insightface order: eye on the image
        left, eye on the image right, nose tip, mouth corner image-left,
        mouth corner image-right: :attr:`landmarks5` when a detector or
        landmarker gave them, else from the mesh."""
        if self.landmarks5 is not None:
            return self.landmarks5
        from faceweave.geometry.topology import kps5_from_mesh

        return kps5_from_mesh(self.require_mesh()[:, :2])

    @property
    def size(self) -> float:
        """Face size in pixels: the larger side of the box."""
        return max(self.bbox.width, self.bbox.height)

    def with_embedding(self, embedding: np.ndarray) -> Face:
        return replace(self, embedding=embedding)

    def summary(self) -> dict:
        return {
            "box": self.bbox.as_list(),
            "score": round(self.score, 3),
            "yaw": round(self.pose.yaw, 1),
            "pitch": round(self.pose.pitch, 1),
            "roll": round(self.pose.roll, 1),
        }


@dataclass(frozen=True, eq=False)
class Image:
    """A decoded picture: ``pixels`` ``(H, W, 3)`` uint8 RGB, optional
    ``alpha`` ``(H, W)`` uint8, and where it came from."""

    pixels: np.ndarray
    alpha: np.ndarray | None = None
    path: str | None = None
    format: str | None = None

    def __post_init__(self) -> None:
        px = self.pixels
        if px.dtype != np.uint8 or px.ndim != 3 or px.shape[2] != 3:
            raise InputError(f"image pixels must be uint8 (H, W, 3); got {px.dtype} {px.shape}")
        if self.alpha is not None and self.alpha.shape != px.shape[:2]:
            raise InputError(f"alpha must be (H, W) = {px.shape[:2]}; got {self.alpha.shape}")

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def label(self) -> str:
        return self.path or "<array>"


@dataclass(frozen=True)
class SwappedFace:
    """What happened to one target face: the source photo it got (its
    ``source_index`` in the list, its ``path``) and how far apart the two
    heads' views were (``pose_gap``, degrees); ``source_index`` ``None``:
    the face was kept (swapper ``none``) and only the processors ran on it."""

    target_index: int
    bbox: BBox
    source_index: int | None
    source_path: str | None
    pose_gap: float


@dataclass(frozen=True)
class PhotoSwap:
    """A photo's faces swapped and the steps after the swap run: ``pixels``
    (uint8 RGB, not yet marked), its ``alpha`` (the target's, lowered by a
    background remover; ``None`` for none) and each swapped face."""

    pixels: np.ndarray
    alpha: np.ndarray | None
    swapped: tuple[SwappedFace, ...]


@dataclass(frozen=True)
class SkippedFace:
    """A selected target face that was not swapped, and why (``reason``: one
    sentence; e.g. a face kept without a mesh, which the mesh swapper needs)."""

    target_index: int
    bbox: BBox
    reason: str


@dataclass(frozen=True, eq=False)
class SwapResult:
    """Result of :meth:`faceweave.FaceSwapper.swap`.

    ``image`` is ``(H, W, 3)`` uint8 RGB, with the invisible watermark of
    ``provenance`` already in its pixels (unless ``provenance.watermark`` is
    off); ``alpha`` the target's alpha channel (unchanged) or ``None``;
    ``faces`` the faces found in the target; ``swapped`` which of them were
    swapped and with which source photo; ``timings_ms`` per-stage
    milliseconds; ``provenance`` how the result is marked (run id, watermark
    on or off), which :meth:`save` writes as the "AI-generated" label;
    ``skipped`` the selected faces that could not be swapped, each with why.
    """

    image: np.ndarray
    alpha: np.ndarray | None
    faces: tuple[Face, ...]
    swapped: tuple[SwappedFace, ...]
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    provenance: Provenance | None = None
    skipped: tuple[SkippedFace, ...] = ()

    def save(self, path: str | os.PathLike[str], *, quality: int = 95) -> Path:
        """Write the image (and its alpha) to ``path`` with the label of
        :attr:`provenance` in its XMP (PNG, JPEG, WEBP, TIFF; BMP cannot hold
        it), as :func:`faceweave.io.write_image` does; returns the path.

        Raises:
            InvalidOptionError: unknown extension or bad ``quality``.
            OutputError: the file could not be written.
        """
        from faceweave.io import write_image
        from faceweave.provenance.stamp import image_metadata

        return write_image(path, self.image, alpha=self.alpha, quality=quality, **image_metadata(self.provenance, path))
