"""Regions of a face drawn from its mesh: ``(H, W)`` float32 maps in
``[0, 1]`` in the crop's pixels.  Pure geometry; sizes are given in pixels
by the caller (usually fractions of the face size), so results do not depend
on the working size.  ``size`` is ``(W, H)``; ``mesh`` is ``(478, 3)`` (only
``x, y`` are used)."""

from __future__ import annotations

import cv2
import numpy as np

from faceweave.compositing.masks import feather, polygon_mask
from faceweave.geometry import topology as topo

#: fraction by which the swapped region is narrowed at the sides of the face
SIDE_INSET = 0.06


def face_axis(mesh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The top of the forehead and the unit vector down the face (towards
    the chin), both ``(2,)`` float32."""
    top, chin = mesh[topo.FOREHEAD_TOP, :2].astype(np.float32), mesh[topo.CHIN, :2].astype(np.float32)
    return top, (chin - top) / (np.linalg.norm(chin - top) + 1e-6)


def across_face(mesh: np.ndarray) -> np.ndarray:
    """``(2,)`` float32: the unit vector across the face (the face axis turned a quarter)."""
    _, down = face_axis(mesh)
    return np.array([-down[1], down[0]], np.float32)


def _along(size: tuple[int, int], origin: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """``(H, W)`` float32: each pixel's coordinate along ``direction`` from ``origin``."""
    w, h = size
    across_x = (np.arange(w, dtype=np.float32) - np.float32(origin[0])) * np.float32(direction[0])
    across_y = (np.arange(h, dtype=np.float32) - np.float32(origin[1])) * np.float32(direction[1])
    return across_y[:, None] + across_x[None, :]


def _above(size: tuple[int, int], mesh: np.ndarray, points: np.ndarray, *, lowest: bool, soft: float) -> np.ndarray:
    """1 above the lowest (or highest) of ``points`` along the face's own
    vertical axis, 0 below, with a ``soft`` pixel ramp."""
    top, down = face_axis(mesh)
    along = (points.astype(np.float32) - top) @ down
    level = float(along.max() if lowest else along.min())
    t = (_along(size, top, down) - level) / max(soft, 1e-3)
    return np.clip(0.5 - t, 0.0, 1.0).astype(np.float32)


def forehead_fade(size: tuple[int, int], mesh: np.ndarray, *, length: float) -> np.ndarray:
    """0 above the mesh's top (landmark 10), rising smoothly to 1 over
    ``length`` pixels down the face's own vertical axis: the forehead is cut
    where hair usually starts, with no line."""
    top, down = face_axis(mesh)
    t = np.clip(_along(size, top, down) / max(length, 1e-3), 0.0, 1.0)
    return (t * t * (3.0 - 2.0 * t)).astype(np.float32)


def below_nose(size: tuple[int, int], mesh: np.ndarray, *, soft: float) -> np.ndarray:
    """The moustache, mouth, beard and chin: 1 below the base of the nose
    along the face's own vertical axis and within the mouth's width widened
    by half on each side, 0 elsewhere, with a ``soft`` pixel ramp.  (Hair
    hanging past the cheeks and jaw is outside it.)"""
    _, down = face_axis(mesh)
    base = mesh[topo.NOSE_BASE, :2].astype(np.float32)
    across = np.array([-down[1], down[0]], np.float32)
    left, right = mesh[topo.MOUTH_CORNER_RIGHT, :2], mesh[topo.MOUTH_CORNER_LEFT, :2]
    centre = (left + right) / 2.0
    half_width = float(np.linalg.norm(right - left)) * 0.5 * 2.0
    soft = max(soft, 1e-3)
    t = _along(size, base, down) / soft + 0.5
    u = (half_width - np.abs(_along(size, centre, across))) / soft + 0.5
    return (np.clip(t, 0.0, 1.0) * np.clip(u, 0.0, 1.0)).astype(np.float32)


def above_eyes(size: tuple[int, int], mesh: np.ndarray, *, soft: float) -> np.ndarray:
    """1 above the lowest point of the eyes along the face's own vertical
    axis, 0 below, with a ``soft`` pixel ramp."""
    return _above(size, mesh, mesh[np.concatenate([topo.right_eye(), topo.left_eye()]), :2], lowest=True, soft=soft)


def above_brows(size: tuple[int, int], mesh: np.ndarray, *, soft: float) -> np.ndarray:
    """1 above the highest point of the eyebrows along the face's own
    vertical axis, 0 below, with a ``soft`` pixel ramp."""
    brows = np.concatenate([topo.right_eyebrow(), topo.left_eyebrow()])
    return _above(size, mesh, mesh[brows, :2], lowest=False, soft=soft)


def inner_face(size: tuple[int, int], mesh: np.ndarray, face_size: float) -> np.ndarray:
    """The face outline narrowed by :data:`SIDE_INSET` towards its vertical
    axis (the sides of a face are where other things show), soft-edged."""
    oval = mesh[topo.face_oval(), :2].astype(np.float32)
    centre = oval.mean(axis=0)
    across = across_face(mesh)
    rel = oval - centre
    along_across = rel @ across
    narrowed = oval - np.outer(along_across * SIDE_INSET, across)
    return feather(polygon_mask(size, narrowed), erode=0, blur=0.01 * face_size)


def face_rim(size: tuple[int, int], mesh: np.ndarray, face_size: float, *, inner_scale: float = 0.75) -> np.ndarray:
    """Where hair falls over a face: the outer band (outside the face outline
    shrunk by ``inner_scale`` about its centre) and the forehead above the
    brows (bangs); 1 there, 0 elsewhere, soft-edged."""
    oval = mesh[topo.face_oval(), :2].astype(np.float32)
    centre = oval.mean(axis=0)
    inner = polygon_mask(size, centre + (oval - centre) * inner_scale)
    rim = 1.0 - feather(inner, erode=0, blur=0.03 * face_size)
    return np.maximum(rim, above_brows(size, mesh, soft=0.03 * face_size)).astype(np.float32)


def outside_face(size: tuple[int, int], mesh: np.ndarray) -> np.ndarray:
    """``{0, 1}`` uint8: 1 outside the mesh's face outline (where things
    that cover a face come in from)."""
    return 1 - polygon_mask(size, mesh[topo.face_oval()]).astype(np.uint8)


def skin_region(size: tuple[int, int], mesh: np.ndarray, face_size: float) -> np.ndarray:
    """Reliable bare skin of a face: inside the outline, away from its edge,
    eyes, brows, lips and the top of the forehead.  ``{0, 1}`` float32."""
    outline = mesh[topo.face_oval(), :2].astype(np.float32)
    centre = outline.mean(axis=0)
    radius = np.linalg.norm(outline - centre, axis=1, keepdims=True)
    # the outline moved inwards by 6 % of the face size (a cheap erosion)
    inset = centre + (outline - centre) * np.clip(1.0 - 0.06 * face_size / np.maximum(radius, 1e-6), 0.0, 1.0)
    oval = polygon_mask(size, inset)
    features = feature_mask(size, mesh, grow=0.04 * face_size)
    top = forehead_fade(size, mesh, length=0.25 * face_size) > 0.99
    return (oval * (1.0 - features) * top).astype(np.float32)


def mouth_mask(size: tuple[int, int], mesh: np.ndarray, *, grow: float) -> np.ndarray:
    """1 except inside the mouth opening (inner lip line, grown by ``grow``
    pixels and softened), where the target's teeth and tongue are kept."""
    inner = polygon_mask(size, mesh[topo.lips_inner()])
    if grow >= 1:
        k = int(round(grow)) * 2 + 1
        inner = cv2.dilate(inner, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
        inner = cv2.GaussianBlur(inner, (0, 0), grow / 2.0)
    return 1.0 - np.clip(inner, 0.0, 1.0)


def lips_zone(size: tuple[int, int], mesh: np.ndarray, *, grow: float, soft: float) -> np.ndarray:
    """``(H, W)`` float32 in ``[0, 1]``: the lips (outer lip line) and the
    skin around them to ``grow`` pixels, softened by ``soft`` pixels."""
    w, h = size
    points = mesh[topo.lips_outer(), :2]
    reach = int(np.ceil(grow + 3.0 * soft)) + 2
    x0, y0 = (max(int(v), 0) for v in np.floor(points.min(axis=0)) - reach)
    x1, y1 = (int(v) for v in np.ceil(points.max(axis=0)) + reach + 1)
    x1, y1 = min(x1, w), min(y1, h)
    out = np.zeros((h, w), np.float32)
    if x1 <= x0 or y1 <= y0:
        return out
    # the work is done in the box around the lips that the zone can reach
    grown = _grown(polygon_mask((x1 - x0, y1 - y0), points - (x0, y0)), grow)
    zone = cv2.GaussianBlur(grown, (0, 0), soft) if soft > 0 else grown
    out[y0:y1, x0:x1] = np.clip(zone, 0.0, 1.0)
    return out


def fold_zone(size: tuple[int, int], mesh: np.ndarray, *, width: float, soft: float) -> np.ndarray:
    """``(H, W)`` float32 in ``[0, 1]``: a band ``width`` pixels wide along
    each nasolabial fold (:data:`topo.RIGHT_FOLD`, :data:`topo.LEFT_FOLD`:
    from the wing of the nose to beside the mouth's corner), softened by
    ``soft`` pixels: where a face's expression shows as creases."""
    w, h = size
    out = np.zeros((h, w), np.float32)
    thickness = max(1, int(round(width)))
    for chain in (topo.RIGHT_FOLD, topo.LEFT_FOLD):
        points = np.round(mesh[chain, :2] * 16).astype(np.int32)
        cv2.polylines(out, [points], False, (1.0,), thickness=thickness, lineType=cv2.LINE_AA, shift=4)
    return cv2.GaussianBlur(out, (0, 0), soft) if soft > 0 else out


def feature_mask(size: tuple[int, int], mesh: np.ndarray, *, grow: float) -> np.ndarray:
    """1 over the eyes, eyebrows and lips (grown by ``grow`` pixels): the
    parts of a face that are not skin-coloured."""
    m = np.maximum(eye_mask(size, mesh), brow_mask(size, mesh))
    return _grown(np.maximum(m, polygon_mask(size, mesh[topo.lips_outer()])), grow)


def eye_mask(size: tuple[int, int], mesh: np.ndarray, *, grow: float = 0.0) -> np.ndarray:
    """1 inside both eyes' outlines (grown by ``grow`` pixels), 0 elsewhere."""
    m = np.maximum(polygon_mask(size, mesh[topo.right_eye()]), polygon_mask(size, mesh[topo.left_eye()]))
    return _grown(m, grow)


def brow_mask(size: tuple[int, int], mesh: np.ndarray) -> np.ndarray:
    """1 inside the convex hull of each eyebrow, 0 elsewhere."""
    w, h = size
    m = np.zeros((h, w), np.float32)
    for idx in (topo.right_eyebrow(), topo.left_eyebrow()):
        hull = cv2.convexHull(np.ascontiguousarray(mesh[idx][:, :2], np.float32))
        m = np.maximum(m, polygon_mask(size, hull.reshape(-1, 2)))
    return m


def _grown(mask: np.ndarray, grow: float) -> np.ndarray:
    """``mask`` dilated by a disk of radius ``round(grow)`` pixels (unchanged for 0)."""
    k = int(round(grow)) * 2 + 1
    if k == 1:
        return mask
    return np.asarray(cv2.dilate(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))))
