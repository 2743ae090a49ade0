"""Pure functions building the ``(H, W)`` bool masks the metrics compare.

Mesh-based regions take a :class:`~faceweave.types.Face` (its ``(478, 3)``
mesh in image pixels) and the image shape ``(H, W)``; sizes are fractions of
the face size (the larger side of its box) so that they scale with the face.
"""

from __future__ import annotations

from functools import cache

import cv2
import numpy as np

from faceweave.geometry import topology as topo
from faceweave.types import BBox, Face


@cache
def nose_lower() -> np.ndarray:
    """Mesh indices of the nose below the bridge (tip, wings, nostrils)."""
    from faceweave.mediapipe_import import load_mediapipe

    c = load_mediapipe().solutions.face_mesh_connections

    bridge = {168, 6, 197, 195}
    idx = sorted({i for e in c.FACEMESH_NOSE for i in e} - bridge)
    arr = np.asarray(idx, dtype=np.int32)
    arr.setflags(write=False)
    return arr


def _shape2(shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) < 2 or shape[0] <= 0 or shape[1] <= 0:
        raise ValueError(f"expected an image shape (H, W[, C]), got {shape}")
    return int(shape[0]), int(shape[1])


def _bounds(mask: np.ndarray, margin: int) -> tuple[slice, slice] | None:
    """Slices of ``mask``'s bounding box grown by ``margin``; ``None`` when empty."""
    ys = np.flatnonzero(mask.any(axis=1))
    xs = np.flatnonzero(mask.any(axis=0))
    if ys.size == 0:
        return None
    h, w = mask.shape
    return (
        slice(max(int(ys[0]) - margin, 0), min(int(ys[-1]) + margin + 1, h)),
        slice(max(int(xs[0]) - margin, 0), min(int(xs[-1]) + margin + 1, w)),
    )


def dilate(mask: np.ndarray, radius: float) -> np.ndarray:
    """``(H, W)`` bool: pixels within Euclidean ``radius`` of the ``(H, W)`` bool
    ``mask`` (a disk dilation; cost independent of the radius)."""
    out = np.zeros(mask.shape, bool)
    box = _bounds(mask, int(np.ceil(radius)) + 1)
    if box is None:
        return out
    crop = mask[box]
    if radius <= 0:
        out[box] = crop
        return out
    dist = cv2.distanceTransform((~crop).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    out[box] = dist <= radius
    return out


def erode(mask: np.ndarray, radius: float) -> np.ndarray:
    """``(H, W)`` bool: pixels of ``mask`` farther than ``radius`` from every
    pixel outside it (a disk erosion; the image edge counts as outside)."""
    out = np.zeros(mask.shape, bool)
    box = _bounds(mask, 0)
    if box is None:
        return out
    crop = np.pad(mask[box], 1).astype(np.uint8)
    dist = cv2.distanceTransform(crop, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
    out[box] = dist > radius
    return out


def polygon_mask(shape: tuple[int, ...], points: np.ndarray) -> np.ndarray:
    """``(H, W)`` bool mask of the polygon through ``(N, 2)`` pixel points."""
    h, w = _shape2(shape)
    mask = np.zeros((h, w), np.uint8)
    pts = np.round(np.asarray(points, dtype=np.float64)[:, :2] * 16).astype(np.int32)
    cv2.fillPoly(mask, [pts], (1,), lineType=cv2.LINE_8, shift=4)
    return mask.astype(bool)


def hull_mask(shape: tuple[int, ...], points: np.ndarray) -> np.ndarray:
    """``(H, W)`` bool mask of the convex hull of ``(N, 2)`` pixel points."""
    pts = np.asarray(points, dtype=np.float32)[:, :2]
    return polygon_mask(shape, cv2.convexHull(pts).reshape(-1, 2))


def box_mask(shape: tuple[int, ...], bbox: BBox, *, scale: float = 1.0) -> np.ndarray:
    """``(H, W)`` bool mask of ``bbox`` scaled by ``scale`` about its centre."""
    h, w = _shape2(shape)
    b = bbox.scaled(scale).clipped(w, h)
    mask = np.zeros((h, w), bool)
    x1, y1 = int(np.floor(b.x1)), int(np.floor(b.y1))
    x2, y2 = int(np.ceil(b.x2)), int(np.ceil(b.y2))
    mask[y1:y2, x1:x2] = True
    return mask


def outside_box_mask(shape: tuple[int, ...], bbox: BBox, *, scale: float = 1.6) -> np.ndarray:
    """``(H, W)`` bool mask of every pixel outside ``bbox`` scaled by ``scale``
    (the face and its immediate surroundings left out)."""
    return ~box_mask(shape, bbox, scale=scale)


def face_oval_mask(face: Face, shape: tuple[int, ...]) -> np.ndarray:
    """``(H, W)`` bool mask of the filled face-oval polygon (forehead to chin)."""
    return polygon_mask(shape, face.points2d[topo.face_oval()])


def feature_mask(face: Face, shape: tuple[int, ...], *, margin: float = 0.04) -> np.ndarray:
    """``(H, W)`` bool mask of the eyes, eyebrows, lips and lower nose, each
    grown by ``margin * face.size`` pixels."""
    p = face.points2d
    mask = np.zeros(_shape2(shape), bool)
    parts = [
        polygon_mask(shape, p[topo.right_eye()]),
        polygon_mask(shape, p[topo.left_eye()]),
        hull_mask(shape, p[topo.right_eyebrow()]),
        hull_mask(shape, p[topo.left_eyebrow()]),
        polygon_mask(shape, p[topo.lips_outer()]),
        hull_mask(shape, p[nose_lower()]),
    ]
    for part in parts:
        mask |= part
    return dilate(mask, margin * face.size)


def inner_skin_mask(
    face: Face, shape: tuple[int, ...], *, erode_by: float = 0.06, feature_margin: float = 0.04
) -> np.ndarray:
    """``(H, W)`` bool mask of the face's inner skin (forehead, cheeks, chin):
    the face oval eroded by ``erode_by * face.size`` pixels, minus
    :func:`feature_mask` (eyes, brows, lips, nose tip and nostrils)."""
    inner = erode(face_oval_mask(face, shape), erode_by * face.size)
    return inner & ~feature_mask(face, shape, margin=feature_margin)


def changed_mask(
    result: np.ndarray, target: np.ndarray, *, threshold: float = 6.0, blur_sigma: float = 1.0
) -> np.ndarray:
    """``(H, W)`` bool mask of pixels the swap changed: the per-pixel maximum
    over channels of ``|result - target|`` (both ``(H, W, 3)`` uint8), Gaussian
    blurred with ``blur_sigma``, above ``threshold`` grey levels."""
    if result.shape != target.shape or result.ndim != 3:
        raise ValueError(f"result and target must be equal (H, W, 3); got {result.shape} and {target.shape}")
    diff = np.abs(result.astype(np.int16) - target.astype(np.int16)).max(axis=2).astype(np.float32)
    if blur_sigma > 0:
        diff = cv2.GaussianBlur(diff, (0, 0), blur_sigma)
    return diff > threshold


def largest_component(mask: np.ndarray, *, fill_holes: bool = True) -> np.ndarray:
    """``(H, W)`` bool mask of the largest 8-connected component of ``mask``,
    with its holes filled when ``fill_holes``; all false when ``mask`` is."""
    m = mask.astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(m, connectivity=8)
    if count <= 1:
        return np.zeros(mask.shape, bool)
    best = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    comp = (labels == best).astype(np.uint8)
    if fill_holes:
        contours, _ = cv2.findContours(comp, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
        cv2.drawContours(comp, contours, -1, (1,), thickness=cv2.FILLED)
    return comp.astype(bool)


def region_border(mask: np.ndarray, *, width: int = 1, within: np.ndarray | None = None) -> np.ndarray:
    """``(H, W)`` bool border band of ``mask``: its morphological gradient
    (dilation minus erosion with a ``(2 * width + 1)`` square), restricted to
    the ``within`` mask when given.  The image edge is not a border."""
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    m = mask.astype(np.uint8)
    kernel = np.ones((2 * width + 1, 2 * width + 1), np.uint8)
    border = cv2.morphologyEx(m, cv2.MORPH_GRADIENT, kernel, borderType=cv2.BORDER_REPLICATE).astype(bool)
    if within is not None:
        border &= within
    return border


def seam_border(
    result: np.ndarray,
    target: np.ndarray,
    *,
    threshold: float = 6.0,
    width: int = 1,
    within: np.ndarray | None = None,
) -> np.ndarray:
    """``(H, W)`` bool border of the largest changed region (holes filled) of
    ``result`` against ``target``, see :func:`changed_mask` and
    :func:`region_border`."""
    changed = largest_component(changed_mask(result, target, threshold=threshold))
    return region_border(changed, width=width, within=within)
