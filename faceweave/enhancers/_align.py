"""5-point alignment for the face enhancers.  Pure functions.

Private to :mod:`faceweave.enhancers` until the templates are merged with
``faceweave/geometry/templates.py``.  Templates are normalised ``(x, y)``
in ``[0, 1]`` of the crop side, points in insightface order: eye on the image
left, eye on the image right, nose tip, mouth corner image left, image right
(the published FFHQ / arcface values that FaceFusion uses).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import cv2
import numpy as np

from faceweave.geometry.align import procrustes


def _frozen(rows: list[list[float]]) -> np.ndarray:
    arr = np.array(rows, np.float64)
    arr.setflags(write=False)
    return arr


TEMPLATES: Mapping[str, np.ndarray] = MappingProxyType({
    "ffhq_512": _frozen([
        [0.37691676, 0.46864664], [0.62285697, 0.46912813], [0.50123859, 0.61331904],
        [0.39308822, 0.72541100], [0.61150205, 0.72490465],
    ]),
    "arcface_128": _frozen([
        [0.36167656, 0.40387734], [0.63696719, 0.40235469], [0.50019687, 0.56044219],
        [0.38710391, 0.72160547], [0.61507734, 0.72034453],
    ]),
})


def similarity_matrix(points: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``(2, 3)`` float64 least-squares similarity (rotation, uniform scale,
    translation) taking ``(N, 2)`` ``points`` onto ``(N, 2)`` ``target``."""
    s, r, t = procrustes(np.asarray(points, np.float64)[:, :2], np.asarray(target, np.float64))
    return np.hstack([s * r, t[:, None]])


def template_matrix(kps5: np.ndarray, *, template: str, size: int) -> np.ndarray:
    """``(2, 3)`` frame->crop matrix that puts the ``(5, 2)`` key points on
    ``template`` in a ``size`` x ``size`` crop."""
    return similarity_matrix(kps5, TEMPLATES[template] * size)


def warp_crop(frame: np.ndarray, matrix: np.ndarray, size: int) -> np.ndarray:
    """Cut the ``(size, size, 3)`` crop ``matrix`` (frame->crop) maps to.

    When the crop shrinks the face by more than half, the region under the
    crop is halved with ``pyrDown`` first so that the downscale does not alias.
    """
    m = np.asarray(matrix, np.float64)
    scale = float(np.sqrt(abs(np.linalg.det(m[:, :2]))))
    src, warp = frame, m
    if scale < 0.5:
        inv = cv2.invertAffineTransform(m)
        corners = np.array([[0, 0], [size, 0], [0, size], [size, size]], np.float64) @ inv[:, :2].T + inv[:, 2]
        h, w = frame.shape[:2]
        x1, y1 = np.maximum(np.floor(corners.min(0)).astype(int) - 2, 0)
        x2, y2 = np.minimum(np.ceil(corners.max(0)).astype(int) + 2, (w, h))
        if x2 > x1 and y2 > y1:
            src = frame[y1:y2, x1:x2]
            warp = m.copy()
            warp[:, 2] += m[:, :2] @ np.array([x1, y1], np.float64)
            pre = 1.0
            while scale / pre < 0.5 and min(src.shape[:2]) > 8:
                src = cv2.pyrDown(src)
                pre *= 0.5
            warp[:, :2] /= pre
    return cv2.warpAffine(src, warp, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
