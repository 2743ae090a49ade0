"""Generic mask operations in the working crop: float32 ``(H, W)`` arrays in
``[0, 1]``, combined by minimum.  Pure functions; the regions of a face drawn
from its mesh are in :mod:`faceweave.compositing.regions`."""

from __future__ import annotations

import functools

import cv2
import numpy as np


def combine(*masks: np.ndarray | None) -> np.ndarray:
    """Pixel-wise minimum of the given masks (``None`` entries are skipped)."""
    present = [m for m in masks if m is not None]
    if not present:
        raise ValueError("combine() needs at least one mask")
    out = present[0]
    for m in present[1:]:
        out = np.minimum(out, m)
    return out.astype(np.float32)


def _erode(mask: np.ndarray, radius: int) -> np.ndarray:
    if radius <= 0:
        return mask
    k = radius * 2 + 1
    return np.asarray(cv2.erode(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))))


def feather(mask: np.ndarray, *, erode: float, blur: float) -> np.ndarray:
    """Erode by ``erode`` pixels, then Gaussian-blur with sigma ``blur``.

    A fractional ``erode`` blends the erosions by the two whole radii around
    it, so the result changes smoothly with the size of the crop instead of
    in steps of a pixel (at a small working size a 1.4 px erosion would
    otherwise be 1 px, and a 1.6 px one 2 px)."""
    m: np.ndarray = mask.astype(np.float32)
    if erode > 0:
        low = int(np.floor(erode))
        frac = float(erode - low)
        m = _erode(m, low)
        if frac > 1e-3:
            m = m + frac * (_erode(m, 1) - m)
    if blur > 0:
        m = np.asarray(cv2.GaussianBlur(m, (0, 0), blur))
    return np.clip(m, 0.0, 1.0)


def box_mask(size: tuple[int, int], *, inset: float, blur: float) -> np.ndarray:
    """Feathered box: 0 at the crop border, rising smoothly over ``blur`` of
    the half side after an ``inset`` margin (both fractions of the side) to 1.
    Read-only: made once per size and feather (every video frame asks for
    the same two)."""
    return _box_mask(int(size[0]), int(size[1]), float(inset), float(blur))


@functools.lru_cache(maxsize=64)
def _box_mask(w: int, h: int, inset: float, blur: float) -> np.ndarray:
    def ramp(n: int) -> np.ndarray:
        x = np.arange(n, dtype=np.float32) + 0.5
        edge = np.minimum(x, n - x) / n  # distance to the nearest border, fraction of the side
        if blur <= 0:
            return (edge >= inset).astype(np.float32)
        t = np.clip((edge - inset) / (blur / 2.0), 0.0, 1.0)
        return t * t * (3.0 - 2.0 * t)

    mask = np.outer(ramp(h), ramp(w)).astype(np.float32)
    mask.setflags(write=False)
    return mask


def polygon_mask(size: tuple[int, int], points: np.ndarray) -> np.ndarray:
    """Filled polygon as a ``{0, 1}`` float mask."""
    w, h = size
    m = np.zeros((h, w), np.uint8)
    cv2.fillPoly(m, [np.round(np.asarray(points)[:, :2] * 16).astype(np.int32)], (1,), lineType=cv2.LINE_AA, shift=4)
    return m.astype(np.float32)


def edge_connected(covered: np.ndarray, edge: np.ndarray) -> np.ndarray:
    """``{0, 1}`` uint8: the parts of ``covered`` (``{0, 1}``) that touch
    ``edge`` (``{0, 1}``), 8-connected (``edge`` itself counts as covered,
    so parts joined only through it are kept too; it is not in the result)."""
    inner = ((covered > 0) & (edge == 0)).astype(np.uint8)
    count, labels = cv2.connectedComponents(inner, connectivity=8)
    return edge_reaching(labels, count, edge)[labels].astype(np.uint8)


def edge_reaching(labels: np.ndarray, count: int, edge: np.ndarray) -> np.ndarray:
    """``(count,)`` bool: which of the ``count`` 8-connected parts labelled in
    ``labels`` (``cv2.connectedComponents`` of a mask outside ``edge``;
    label 0: the rest) touch ``edge``.  A part joins the edge, through the
    edge, exactly when one of its pixels is an 8-neighbour of an edge pixel
    (any other covered neighbour is in the part itself), so one labelling
    and one dilation do what labelling the part and the edge together
    would."""
    near = cv2.dilate((edge > 0).astype(np.uint8), np.ones((3, 3), np.uint8))
    reaching = np.bincount(labels[(near > 0) & (labels > 0)], minlength=count) > 0
    reaching[0] = False
    return reaching


def thin_dark(lightness: np.ndarray, *, width: float, contrast: float = 14.0) -> np.ndarray:
    """Soft ``[0, 1]`` mask of thin dark structures narrower than ``width``
    pixels (glasses frames, hair strands) on a CIELAB lightness image: the
    morphological black-hat, ramped from ``contrast / 2`` to ``contrast``
    lightness units."""
    k = max(3, int(round(width)) | 1)
    closed = cv2.morphologyEx(
        lightness.astype(np.float32), cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    )
    hat = closed - lightness
    return np.clip((hat - contrast / 2.0) / (contrast / 2.0), 0.0, 1.0).astype(np.float32)
