"""The square working crop around a face, and how large the face is in it.

Pure functions: :func:`cut_crop` is the alignment step every swap starts
with (source and target alike); paste-back is its inverse (see
:func:`faceweave.compositing.blend.paste_back`).  A neural swapper cuts its
own crop, straight from the frame onto its template;
:func:`template_crop` makes that crop the working crop of faceweave's
compositing, so the face is resampled once on the way in and once out.
"""

from __future__ import annotations

import cv2
import numpy as np

from faceweave.geometry.align import crop_matrix, transform_points
from faceweave.swappers import AlignedCrop, SwapOutput
from faceweave.swappers.neural.base import TemplateSwap
from faceweave.types import Face

#: crop side over face size: room for the reshaping warp and the blend
CROP_MARGIN = 1.8
#: smallest face size in a working crop, pixels
MIN_WORKING_SIZE = 96


def working_face_size(face: Face, configured: int) -> int:
    """Face size in the working crop: ``configured``, but no more than a
    little above the face's own size (a small face gains nothing from a
    large crop, and costs grow with its area)."""
    return int(round(min(configured, max(MIN_WORKING_SIZE, face.size * 1.25))))


def cut_crop(pixels: np.ndarray, face: Face, *, face_size: int) -> AlignedCrop:
    """The square working crop around ``face`` in which the face measures
    ``face_size`` pixels.  Large faces are halved with ``pyrDown`` first so
    that the downscale does not alias."""
    m, side = crop_matrix(face.bbox, face_size=face_size, margin=CROP_MARGIN)
    scale = m[0, 0]
    src, warp = pixels, m
    if scale < 0.5:
        src, warp = _halved_region(pixels, m, side)
    crop = cv2.warpAffine(src, warp, (side, side), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    mesh = transform_points(face.require_mesh(), m)
    # an axis-aligned scale and shift: the face's head pose is the crop's
    return AlignedCrop(pixels=crop, matrix=m, mesh=mesh, face_size=float(face_size), pose=face.pose)


def _halved_region(pixels: np.ndarray, m: np.ndarray, side: int) -> tuple[np.ndarray, np.ndarray]:
    """A padded region around the crop, halved until the rest of the scale
    ``m[0, 0]`` is above 1/2, and the matrix from that region to the crop."""
    scale = m[0, 0]
    inv = cv2.invertAffineTransform(m)
    x1, y1 = np.floor(inv[:, 2]).astype(int) - 2
    x2, y2 = np.ceil(inv @ np.array([side, side, 1.0])).astype(int) + 2
    h, w = pixels.shape[:2]
    inside = pixels[max(y1, 0) : min(y2, h), max(x1, 0) : min(x2, w)]
    pads = (max(0, -y1), max(0, y2 - h), max(0, -x1), max(0, x2 - w))
    # a region inside the frame is read where it lies (the halving reads it alike)
    region = cv2.copyMakeBorder(inside, *pads, cv2.BORDER_REPLICATE) if any(pads) else inside
    offset = np.array([x1, y1], np.float64)
    src, pre = region, 1.0
    while scale / pre < 0.5 and min(src.shape[:2]) > 8:
        src = cv2.pyrDown(src)
        pre *= 0.5
    m_local = m.copy()
    m_local[:, 2] += m[:, :2] @ offset  # account for the region's origin
    m_local[:, :2] /= pre
    return src, m_local


def template_crop(
    pixels: np.ndarray, face: Face, swap: TemplateSwap, *, face_size: float
) -> tuple[AlignedCrop, SwapOutput]:
    """A neural swapper's template crop (:meth:`NeuralSwapper.swap_frame
    <faceweave.swappers.neural.base.NeuralSwapper.swap_frame>`) as the
    working crop of faceweave's compositing, and the swapper's output in it.

    The crop keeps the template's geometry; where the face measures less
    than ``face_size`` pixels on the template it is cut again from the frame
    (``pixels``), once, at the larger side in which it does, so that the
    compositing reads the target at that resolution; the model's face and
    mask are brought to that side by one resize (bilinear).  Otherwise the
    template crop itself is the working crop (the face rounded once)."""
    m = np.asarray(swap.matrix, np.float64)
    side = int(swap.target.shape[0])
    scale = float(np.sqrt(abs(np.linalg.det(m[:, :2]))))
    grow = face_size / max(face.size * scale, 1e-6)
    target, new_face, coverage = swap.target, swap.face, swap.mask
    if grow > 1.0:
        big = int(round(side * grow))
        k = big / side
        m = m * k
        m[:, 2] += 0.5 * k - 0.5  # pixel centres: cv2.resize's convention
        target = cv2.warpAffine(pixels, m, (big, big), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        new_face = cv2.resize(np.ascontiguousarray(new_face, np.float32), (big, big), interpolation=cv2.INTER_LINEAR)
        coverage = cv2.resize(np.ascontiguousarray(coverage, np.float32), (big, big), interpolation=cv2.INTER_LINEAR)
        side, scale = big, scale * k
    mesh = transform_points(face.require_mesh(), m)
    crop = AlignedCrop(pixels=target, matrix=m, mesh=mesh, face_size=face.size * scale)
    out = SwapOutput(
        face=np.clip(np.rint(new_face), 0, 255).astype(np.uint8),
        background=target,
        coverage=np.clip(coverage, 0.0, 1.0).astype(np.float32),
        mesh=crop.mesh,
        changed=np.zeros((side, side), np.float32),
    )
    return crop, out
