"""FaceFusion's compositing of a neural swapper's face (``compositing=
"facefusion"``): the masks it pastes under and its paste-back.  Pure functions.

The new face stays where the model made it, on the model's template crop
(:class:`~faceweave.swappers.neural.base.TemplateSwap`); it is mixed into
the frame under the minimum of the masks -- FaceFusion's static box mask
(the swapper's blur and padding) and, when the mask options ask for them,
the occluder models' masks (faceweave's segmentation and hands, FaceFusion's
XSeg occluder), the face parser's region mask and FaceFusion's face mask
areas (convex hulls of the target's 68 landmarks), smoothed as FaceFusion
smooths its occlusion, region and area masks -- through one inverse warp of
the crop and the mask.  No
colour transfer, no multi-band blend, no grain: the face is the model's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cv2
import numpy as np

from faceweave import names

#: sigma (crop pixels) of the smoothing of an occlusion or region mask
#: before it is stretched from ``[0.5, 1]`` to ``[0, 1]`` (FaceFusion's)
OCCLUSION_SIGMA = 5.0


def smooth_occlusion(mask: np.ndarray) -> np.ndarray:
    """An occlusion (or region) mask ``(S, S)`` in ``[0, 1]`` (1: face shows)
    smoothed as FaceFusion does: blurred, then only what stays above one
    half is kept, stretched back to ``[0, 1]``."""
    blurred = cv2.GaussianBlur(np.clip(np.asarray(mask, np.float32), 0.0, 1.0), (0, 0), OCCLUSION_SIGMA)
    return ((np.clip(blurred, 0.5, 1.0) - 0.5) * 2.0).astype(np.float32)


def _points(*spans: tuple[int, int]) -> tuple[int, ...]:
    return tuple(i for start, stop in spans for i in range(start, stop))


#: FaceFusion's face mask areas: which of the 68 landmarks (iBUG layout: jaw
#: 0-16, brows 17-26, nose 27-35, eyes 36-47, mouth 48-67) each one's hull spans
FACE_MASK_AREAS: Mapping[str, tuple[int, ...]] = names.registered(
    "face mask area",
    names.FACE_MASK_AREAS,
    {
        "upper-face": _points((0, 3), (14, 17), (17, 27), (31, 36)),
        "lower-face": _points((3, 14), (31, 36)),
        "mouth": _points((48, 68)),
    },
)


def area_mask(side: int, points68: np.ndarray, areas: Sequence[str]) -> np.ndarray:
    """FaceFusion's area mask ``(side, side)`` float32 in ``[0, 1]``: the
    convex hull of the 68 landmarks ``points68`` (crop pixels) of every area
    in ``areas`` (:data:`FACE_MASK_AREAS`), the points cut to whole pixels,
    filled with 1 and smoothed as an occlusion mask (:func:`smooth_occlusion`)."""
    chosen = sorted({i for area in areas for i in FACE_MASK_AREAS[area]})
    hull = cv2.convexHull(np.asarray(points68, np.float64)[chosen].astype(np.int32))
    mask = np.zeros((side, side), np.float32)
    cv2.fillConvexPoly(mask, hull, (1.0,))
    return smooth_occlusion(mask)


def crop_points(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Frame points ``(N, 2)`` in the crop of ``matrix`` (frame -> crop)."""
    m = np.asarray(matrix, np.float64)
    return np.asarray(points, np.float64) @ m[:, :2].T + m[:, 2]


def occlusion_mask(
    person: np.ndarray | None, hands: np.ndarray | None, occluder: np.ndarray | None = None
) -> np.ndarray | None:
    """Where the face may show, from the occluder models run on the template
    crop: on the person (``person``: 1 = person), not on a hand (``hands``:
    1 = hand) and where FaceFusion's occluder model sees the face
    (``occluder``: 1 = face, raw), their minimum smoothed once as FaceFusion
    smooths its occlusion mask (:func:`smooth_occlusion`); ``None`` when no
    model ran."""
    parts = [np.asarray(person, np.float32)] if person is not None else []
    if hands is not None:
        parts.append(1.0 - np.asarray(hands, np.float32))
    if occluder is not None:
        parts.append(np.asarray(occluder, np.float32))
    if not parts:
        return None
    return smooth_occlusion(np.minimum.reduce(parts))


def paste_mask(box: np.ndarray, others: Sequence[np.ndarray | None] = ()) -> np.ndarray:
    """The minimum of the box mask and the other masks given (``None``
    entries skipped), clipped to ``[0, 1]``."""
    masks = [np.asarray(box, np.float32)] + [np.asarray(m, np.float32) for m in others if m is not None]
    return np.clip(np.minimum.reduce(masks), 0.0, 1.0).astype(np.float32)


def paste_area(frame_shape: tuple[int, ...], side: int, matrix: np.ndarray) -> tuple[int, int, int, int]:
    """``(x1, y1, x2, y2)``: the part of the frame the ``side`` x ``side``
    crop of ``matrix`` (frame -> crop) covers, clipped to the frame."""
    inv = cv2.invertAffineTransform(np.asarray(matrix, np.float64))
    corners = np.array([[0, 0], [side, 0], [side, side], [0, side]], np.float64) @ inv[:, :2].T + inv[:, 2]
    h, w = frame_shape[:2]
    x1, y1 = np.clip(np.floor(corners.min(axis=0)).astype(int), 0, [w, h])
    x2, y2 = np.clip(np.ceil(corners.max(axis=0)).astype(int), 0, [w, h])
    return int(x1), int(y1), int(x2), int(y2)


#: the weights of :func:`paste_face`'s blend are scaled by this power of two
#: so that ``cv2.blendLinear``'s ``1e-5`` in its divisor is lost in rounding:
#: the blend is then ``frame * (1 - mask) + face * mask`` to the last bit
BLEND_SCALE = 1024.0


#: the bytes of the four-channel float warp :func:`paste_face` works on at a
#: time: strips of rows this large stay in the cache (a 720p face's whole
#: footprint at once, some 6 MB, took twice the CPU)
STRIP_BYTES = 1 << 20


def paste_face(frame: np.ndarray, face: np.ndarray, mask: np.ndarray, matrix: np.ndarray, *, out: np.ndarray) -> None:
    """Mix the crop ``face`` ``(S, S, 3)`` (float in ``[0, 255]``, or uint8,
    warped back in its own type as FaceFusion's enhancers' faces are) into
    ``frame`` under ``mask`` ``(S, S)``, both taken back to the frame by one
    inverse warp of ``matrix`` (frame -> crop; bilinear, the face's edges
    replicated, the mask's zero), in floating point and cut to whole levels
    once, truncating as FaceFusion's ``paste_back`` does (``astype``, not
    rounding).  Only the frame's region under the crop is written, into
    ``out`` (``frame`` itself or a copy of it).

    A float face and the mask go back in one four-channel warp (OpenCV's
    fast case, about twice as fast as three channels and one), of the crop
    bordered by one pixel: the face's edge repeated, the mask's zero, which
    is what the two warps' borders give; the mix is one ``cv2.blendLinear``;
    both run on strips of rows of :data:`STRIP_BYTES`."""
    side = int(face.shape[0])
    x1, y1, x2, y2 = paste_area(frame.shape, side, matrix)
    if x2 <= x1 or y2 <= y1:
        return
    inv = np.asarray(cv2.invertAffineTransform(np.asarray(matrix, np.float64)), np.float64)
    if face.dtype == np.uint8:
        _paste_uint8(frame, face, mask, inv, (x1, y1, x2, y2), out=out)
        return
    inv[:, 2] -= inv[:, :2] @ np.ones(2)  # the crop's border of one pixel
    rgba = bordered_rgba(face, mask)
    rows = max(1, STRIP_BYTES // ((x2 - x1) * 16))
    for top in range(y1, y2, rows):
        bottom = min(top + rows, y2)
        strip = inv.copy()
        strip[:, 2] -= (x1, top)
        back = cv2.warpAffine(
            rgba, strip, (x2 - x1, bottom - top), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        out[top:bottom, x1:x2] = _mixed(frame[top:bottom, x1:x2], back)


def _mixed(region: np.ndarray, back: np.ndarray) -> np.ndarray:
    """``region`` ``(h, w, 3)`` uint8 under the warped face and mask ``back``
    ``(h, w, 4)`` float32: ``region * (1 - m) + face * m`` saturated and
    truncated to whole levels, as FaceFusion's ``paste_back`` (``astype``)."""
    weight = np.clip(np.asarray(cv2.extractChannel(back, 3), np.float32), 0.0, 1.0) * np.float32(BLEND_SCALE)
    face = cv2.cvtColor(back, cv2.COLOR_RGBA2RGB)
    mixed = cv2.blendLinear(region.astype(np.float32), face, np.float32(BLEND_SCALE) - weight, weight)
    return np.clip(np.asarray(mixed, np.float32), 0, 255).astype(np.uint8)


def bordered_rgba(face: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``(S + 2, S + 2, 4)`` float32: the face ``(S, S, 3)`` and the mask
    ``(S, S)`` as one image with a border of one pixel, the face's edge
    repeated and the mask's zero."""
    channels = [np.ascontiguousarray(c, np.float32) for c in cv2.split(np.asarray(face, np.float32))]
    rgba = cv2.copyMakeBorder(cv2.merge([*channels, np.asarray(mask, np.float32)]), 1, 1, 1, 1, cv2.BORDER_REPLICATE)
    rgba[[0, -1], :, 3] = 0.0
    rgba[:, [0, -1], 3] = 0.0
    return np.asarray(rgba, np.float32)


def _paste_uint8(
    frame: np.ndarray,
    face: np.ndarray,
    mask: np.ndarray,
    inv: np.ndarray,
    area: tuple[int, int, int, int],
    *,
    out: np.ndarray,
) -> None:
    """:func:`paste_face` of a uint8 ``face`` (an enhancer's): the face
    warped back as uint8, the mask as float32, as FaceFusion does."""
    x1, y1, x2, y2 = area
    inv = inv.copy()
    inv[:, 2] -= np.array([x1, y1], np.float64)
    size = (x2 - x1, y2 - y1)
    m = cv2.warpAffine(np.ascontiguousarray(mask, np.float32), inv, size, flags=cv2.INTER_LINEAR)
    m = np.clip(m, 0.0, 1.0)[..., None]
    back = cv2.warpAffine(
        np.ascontiguousarray(face, np.uint8), inv, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
    region = frame[y1:y2, x1:x2].astype(np.float32)
    mixed = region * (1.0 - m) + back * m
    out[y1:y2, x1:x2] = np.clip(mixed, 0, 255).astype(np.uint8)


def paste_blended(
    frame: np.ndarray, face: np.ndarray, mask: np.ndarray, matrix: np.ndarray, blend: float, *, out: np.ndarray
) -> None:
    """FaceFusion's paste of an enhanced face: :func:`paste_face` into a copy
    of ``frame``, then ``frame`` and that copy mixed by ``blend`` in ``[0, 1]``
    (``cv2.addWeighted``, rounded), written into ``out`` over the paste area
    only (elsewhere the mix is ``frame`` itself)."""
    x1, y1, x2, y2 = paste_area(frame.shape, int(face.shape[0]), matrix)
    if x2 <= x1 or y2 <= y1:
        return
    pasted = frame.copy()
    paste_face(frame, face, mask, matrix, out=pasted)
    region = np.s_[y1:y2, x1:x2]
    out[region] = cv2.addWeighted(frame[region], 1.0 - blend, pasted[region], blend, 0.0)


def move_mask(mask: np.ndarray, source: np.ndarray, target: np.ndarray, side: int) -> np.ndarray:
    """A mask ``(s, s)`` of the crop of ``source`` (frame -> crop) moved onto
    the ``side`` x ``side`` crop of ``target`` (frame -> crop): one bilinear
    warp, 1 (nothing known in front) outside the source crop; the mask
    itself when both crops are the same."""
    src = np.asarray(source, np.float64)
    dst = np.asarray(target, np.float64)
    if side == mask.shape[0] and np.allclose(src, dst):
        return np.asarray(mask, np.float32)
    inv = cv2.invertAffineTransform(src)
    m = np.hstack([dst[:, :2] @ inv[:, :2], (dst[:, :2] @ inv[:, 2] + dst[:, 2])[:, None]])
    moved = cv2.warpAffine(
        np.ascontiguousarray(mask, np.float32), m, (side, side), flags=cv2.INTER_LINEAR, borderValue=(1.0,)
    )
    return np.clip(moved, 0.0, 1.0).astype(np.float32)
