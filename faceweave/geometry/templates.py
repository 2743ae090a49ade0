"""Named 5-point alignment templates and the similarity fit onto them.  Pure functions.

A template holds five points as fractions of the crop side, in insightface
order: eye on the image left, eye on the image right, nose tip, mouth corner
image-left, mouth corner image-right -- the order of :attr:`Face.kps5` and
:func:`faceweave.geometry.topology.kps5_from_mesh`.  The values are the ones
FaceFusion uses (``face_helper.WARP_TEMPLATE_SET``), so that crops fed to
models trained on them match.

The fit is the least-squares similarity (rotation, uniform scale,
translation; no reflection) of Umeyama.  FaceFusion calls
``cv2.estimateAffinePartial2D`` with RANSAC and a 100 px threshold: every one
of five face points is an inlier, and its final refinement minimises the same
squared error over the same 4-parameter model, so both give the same matrix;
the closed form is deterministic and needs no random sampling.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import cv2
import numpy as np

from faceweave.errors import InvalidOptionError
from faceweave.geometry.align import procrustes


def _ro(rows: list[list[float]]) -> np.ndarray:
    arr = np.array(rows, np.float64)
    arr.setflags(write=False)
    return arr


#: ``(5, 2)`` points in ``[0, 1]`` of the crop side, by name (read-only)
TEMPLATES: Mapping[str, np.ndarray] = MappingProxyType(
    {
        "arcface_112_v1": _ro(
            [
                [0.35473214, 0.45658929],
                [0.64526786, 0.45658929],
                [0.50000000, 0.61154464],
                [0.37913393, 0.77687500],
                [0.62086607, 0.77687500],
            ]
        ),
        "arcface_112_v2": _ro(
            [
                [0.34191607, 0.46157411],
                [0.65653393, 0.45983393],
                [0.50022500, 0.64050536],
                [0.37097589, 0.82469196],
                [0.63151696, 0.82325089],
            ]
        ),
        "arcface_128": _ro(
            [
                [0.36167656, 0.40387734],
                [0.63696719, 0.40235469],
                [0.50019687, 0.56044219],
                [0.38710391, 0.72160547],
                [0.61507734, 0.72034453],
            ]
        ),
        "dfl_whole_face": _ro(
            [
                [0.35342266, 0.39285716],
                [0.62797622, 0.39285716],
                [0.48660713, 0.54017860],
                [0.38839287, 0.68750011],
                [0.59821427, 0.68750011],
            ]
        ),
        "ffhq_512": _ro(
            [
                [0.37691676, 0.46864664],
                [0.62285697, 0.46912813],
                [0.50123859, 0.61331904],
                [0.39308822, 0.72541100],
                [0.61150205, 0.72490465],
            ]
        ),
        "styleganex_384": _ro(
            [
                [0.42353745, 0.52289879],
                [0.57725008, 0.52319972],
                [0.50123859, 0.61331904],
                [0.43364461, 0.68337652],
                [0.57015325, 0.68306005],
            ]
        ),
        "mtcnn_512": _ro(
            [
                [0.36562865, 0.46733799],
                [0.63305391, 0.46585885],
                [0.50019127, 0.61942959],
                [0.39032951, 0.77598822],
                [0.61178945, 0.77476328],
            ]
        ),
    }
)


def template_points(template: str, size: int) -> np.ndarray:
    """``(5, 2)`` float64 template points in pixels of a ``size`` x ``size`` crop."""
    if template not in TEMPLATES:
        raise InvalidOptionError(f"unknown alignment template {template!r}; known: {', '.join(sorted(TEMPLATES))}")
    if size <= 0:
        raise InvalidOptionError(f"crop size must be positive; got {size}")
    return TEMPLATES[template] * float(size)


def points5(value) -> np.ndarray:
    """``(5, 2)`` float32 alignment points of a :class:`~faceweave.types.Face`
    (image pixels), an :class:`~faceweave.swappers.base.AlignedCrop` (crop
    pixels, from its mesh), a ``(478, 2+)`` mesh or a ``(5, 2)`` array."""
    from faceweave.geometry.topology import kps5_from_mesh

    mesh = getattr(value, "mesh", None)
    arr = np.asarray(value if mesh is None else mesh, np.float32)
    if arr.ndim == 2 and arr.shape == (5, 2):
        return arr
    if arr.ndim == 2 and arr.shape[0] == 478 and arr.shape[1] >= 2:
        return kps5_from_mesh(arr[:, :2])
    raise ValueError(f"expected 5 points (5, 2) or a face mesh (478, 2+); got shape {arr.shape}")


def estimate_alignment(points: np.ndarray, template: str, size: int) -> np.ndarray:
    """``(2, 3)`` float64 similarity mapping the five ``points`` ``(5, 2)``
    onto ``template`` scaled to a ``size``-pixel square (least squares)."""
    src = np.asarray(points, np.float64)
    if src.shape != (5, 2):
        raise ValueError(f"points: expected shape (5, 2), got {src.shape}")
    s, r, t = procrustes(src, template_points(template, size))
    return np.hstack([s * r, t[:, None]])


def warp_to_template(
    pixels: np.ndarray, points: np.ndarray, template: str, size: int, *, interpolation: int = cv2.INTER_AREA
) -> tuple[np.ndarray, np.ndarray]:
    """Cut the ``(size, size, C)`` crop of ``pixels`` ``(H, W, C)`` in which
    ``points`` land on ``template``; edges replicate (as FaceFusion).
    Returns ``(crop, matrix)`` with ``matrix`` ``(2, 3)`` image -> crop."""
    m = estimate_alignment(points, template, size)
    crop = cv2.warpAffine(pixels, m, (size, size), flags=interpolation, borderMode=cv2.BORDER_REPLICATE)
    return crop, m


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
