"""Debug overlay: what the analyser found, drawn on a copy of the image."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from faceweave.errors import InputError
from faceweave.types import Face

#: RGB colours cycled over faces
_PALETTE = (
    (0, 220, 90),
    (255, 170, 0),
    (0, 160, 255),
    (255, 60, 200),
    (230, 230, 0),
    (0, 230, 230),
    (170, 90, 255),
    (255, 90, 70),
)
#: RGB colours of the 5 alignment points: eyes, nose tip, mouth corners
_KPS_COLOURS = ((255, 40, 40), (255, 40, 40), (255, 230, 0), (40, 120, 255), (40, 120, 255))
_UNSELECTED = (150, 150, 150)
_FONT = cv2.FONT_HERSHEY_SIMPLEX


def draw_faces(
    pixels: np.ndarray,
    faces: Sequence[Face],
    *,
    order: Sequence[int] | None = None,
    mesh: bool = True,
) -> np.ndarray:
    """A new ``(H, W, 3)`` uint8 RGB image with each face drawn over ``pixels``.

    Each face gets its box, a label ``#k score`` where ``k`` is its position in
    ``order`` (its index in ``faces`` when ``order`` is ``None``), its pose as
    ``yaw/pitch/roll`` in degrees, the mesh points as small dots (when
    ``mesh``) and the 5 alignment points (``Face.kps5``) as larger dots.
    Faces left out of ``order`` are drawn in grey without a number.  Line
    width and text size grow with the image size.  ``pixels`` is not changed.
    """
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise InputError(f"draw_faces: expected uint8 (H, W, 3) pixels, got {pixels.dtype} {pixels.shape}")
    canvas = np.ascontiguousarray(pixels).copy()
    height, width = canvas.shape[:2]
    thickness = max(1, round(min(height, width) / 400))
    font_scale = max(0.35, min(height, width) / 1200)
    position = _positions(len(faces), order)
    for index, face in enumerate(faces):
        rank = position.get(index)
        colour = _PALETTE[index % len(_PALETTE)] if rank is not None else _UNSELECTED
        if mesh:
            _draw_mesh(canvas, face, colour)
        _draw_box(canvas, face, colour, thickness)
        _draw_kps(canvas, face, thickness)
        _draw_labels(canvas, face, rank, colour, thickness, font_scale)
    return canvas


def _positions(count: int, order: Sequence[int] | None) -> dict[int, int]:
    """Face index -> its position in ``order``."""
    if order is None:
        return {i: i for i in range(count)}
    return {int(face_index): rank for rank, face_index in enumerate(order)}


def _point(x: float, y: float) -> tuple[int, int]:
    return int(round(x)), int(round(y))


def _draw_box(canvas: np.ndarray, face: Face, colour, thickness: int) -> None:
    box = face.bbox
    cv2.rectangle(canvas, _point(box.x1, box.y1), _point(box.x2, box.y2), colour, thickness, cv2.LINE_AA)


def _draw_mesh(canvas: np.ndarray, face: Face, colour) -> None:
    """The mesh's points (none for a face kept without a mesh: its box and
    five points show it)."""
    if face.mesh is None:
        return
    radius = round(face.size / 250)
    if radius == 0:  # small face: one pixel per point
        xy = np.rint(face.points2d).astype(np.int64)
        h, w = canvas.shape[:2]
        inside = (xy[:, 0] >= 0) & (xy[:, 0] < w) & (xy[:, 1] >= 0) & (xy[:, 1] < h)
        canvas[xy[inside, 1], xy[inside, 0]] = colour
        return
    for x, y in face.points2d:
        cv2.circle(canvas, _point(x, y), radius, colour, -1, cv2.LINE_AA)


def _draw_kps(canvas: np.ndarray, face: Face, thickness: int) -> None:
    radius = max(2, round(face.size / 60), 2 * thickness)
    for (x, y), colour in zip(face.kps5, _KPS_COLOURS, strict=False):
        cv2.circle(canvas, _point(x, y), radius + thickness, (255, 255, 255), -1, cv2.LINE_AA)
        cv2.circle(canvas, _point(x, y), radius, colour, -1, cv2.LINE_AA)


def _draw_labels(canvas: np.ndarray, face: Face, rank: int | None, colour, thickness: int, scale: float) -> None:
    box = face.bbox
    pose = face.pose
    title = f"{'#' + str(rank) + ' ' if rank is not None else ''}{face.score:.2f}"
    angles = f"y{round(pose.yaw):+d} p{round(pose.pitch):+d} r{round(pose.roll):+d}"
    (_, title_h), _ = cv2.getTextSize(title, _FONT, scale, thickness)
    pad = 2 * thickness + 1
    # above the box when there is room, else inside its top
    top = box.y1 - pad if box.y1 - title_h - 2 * pad >= 0 else box.y1 + title_h + 2 * pad
    _text(canvas, title, _point(box.x1, top), colour, thickness, scale)
    below = box.y2 + title_h + 2 * pad
    if below > canvas.shape[0]:
        below = box.y2 - pad
    _text(canvas, angles, _point(box.x1, below), colour, thickness, scale)


def _text(canvas: np.ndarray, text: str, origin: tuple[int, int], colour, thickness: int, scale: float) -> None:
    """``text`` with its baseline at ``origin``, on a dark backing box, kept inside the image."""
    (w, h), baseline = cv2.getTextSize(text, _FONT, scale, thickness)
    pad = thickness + 1
    x = min(max(origin[0], pad), max(pad, canvas.shape[1] - w - pad))
    y = min(max(origin[1], h + pad), max(h + pad, canvas.shape[0] - baseline - pad))
    x1, y1, x2, y2 = x - pad, y - h - pad, x + w + pad, y + baseline + pad
    region = canvas[max(y1, 0) : max(y2, 0), max(x1, 0) : max(x2, 0)]
    region[...] = (region * 0.35).astype(np.uint8)
    cv2.putText(canvas, text, (x, y), _FONT, scale, colour, thickness, cv2.LINE_AA)
