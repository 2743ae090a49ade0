"""Blending and paste-back.  Pure functions."""

from __future__ import annotations

import cv2
import numpy as np


def laplacian_blend(front: np.ndarray, back: np.ndarray, mask: np.ndarray, *, levels: int = 5) -> np.ndarray:
    """Multi-band blend of two float32 ``(H, W, C)`` images with a ``(H, W)``
    mask in ``[0, 1]`` (1 = ``front``): each band of the Laplacian pyramid is
    mixed with the mask's Gaussian pyramid at that scale, so low frequencies
    blend over wide regions and fine detail over narrow ones."""
    h, w = mask.shape
    levels = max(1, min(levels, int(np.log2(max(1, min(h, w) // 8))) + 1))
    gm = [mask.astype(np.float32)]
    ga, gb = [front.astype(np.float32)], [back.astype(np.float32)]
    for _ in range(levels - 1):
        gm.append(cv2.pyrDown(gm[-1]))
        ga.append(cv2.pyrDown(ga[-1]))
        gb.append(cv2.pyrDown(gb[-1]))
    out = ga[-1] * gm[-1][..., None] + gb[-1] * (1.0 - gm[-1][..., None])
    for i in range(levels - 2, -1, -1):
        size = (ga[i].shape[1], ga[i].shape[0])
        la = ga[i] - cv2.pyrUp(ga[i + 1], dstsize=size)
        lb = gb[i] - cv2.pyrUp(gb[i + 1], dstsize=size)
        m = gm[i][..., None]
        out = cv2.pyrUp(out, dstsize=size) + la * m + lb * (1.0 - m)
    return out


def _crop_roi(frame_shape: tuple[int, ...], crop_size: tuple[int, int], matrix: np.ndarray) -> tuple[int, int, int, int, np.ndarray]:
    """The frame region ``(x1, y1, x2, y2)`` under a crop, and the crop->ROI matrix."""
    w, h = crop_size
    inv = cv2.invertAffineTransform(matrix)
    corners = np.array([[0, 0], [w, 0], [0, h], [w, h]], np.float64) @ inv[:, :2].T + inv[:, 2]
    fh, fw = frame_shape[:2]
    x1, y1 = np.floor(corners.min(0)).astype(int)
    x2, y2 = np.ceil(corners.max(0)).astype(int)
    x1, y1, x2, y2 = max(x1, 0), max(y1, 0), min(x2, fw), min(y2, fh)
    inv_roi = inv.copy()
    inv_roi[:, 2] -= (x1, y1)
    return x1, y1, x2, y2, inv_roi


def restore_detail(original: np.ndarray, frame: np.ndarray, mask: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Add back, under ``mask`` (crop coordinates), the original frame's fine
    detail that a working crop smaller than the face cannot hold (skin grain,
    sensor noise), so a large swapped face is as sharp as the photo around it.

    The detail is the original minus its Gaussian low-pass at the crop's
    resolution; nothing happens when the crop is not smaller than the face.
    Returns a new frame."""
    scale = float(np.sqrt(abs(np.linalg.det(matrix[:, :2]))))
    if scale >= 0.8:
        return frame
    x1, y1, x2, y2, inv_roi = _crop_roi(frame.shape, (mask.shape[1], mask.shape[0]), matrix)
    if x2 <= x1 or y2 <= y1:
        return frame
    size = (x2 - x1, y2 - y1)
    m = cv2.warpAffine(mask.astype(np.float32), inv_roi, size, flags=cv2.INTER_LINEAR, borderValue=0.0)[..., None]
    roi = original[y1:y2, x1:x2].astype(np.float32)
    detail = roi - cv2.GaussianBlur(roi, (0, 0), 0.5 / scale)
    out = frame.copy()
    out[y1:y2, x1:x2] = np.clip(frame[y1:y2, x1:x2].astype(np.float32) + detail * m + 0.5, 0, 255).astype(np.uint8)
    return out


def paste_back(frame: np.ndarray, crop: np.ndarray, mask: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Put a working crop back into the frame.

    ``matrix`` is the ``(2, 3)`` frame->crop transform used to cut the crop;
    ``mask`` ``(h, w)`` in ``[0, 1]`` says where the crop replaces the frame.
    Only the frame's region under the crop is touched; returns a new frame.
    """
    x1, y1, x2, y2, inv_roi = _crop_roi(frame.shape, (mask.shape[1], mask.shape[0]), matrix)
    out = frame.copy()
    if x2 <= x1 or y2 <= y1:
        return out
    size = (x2 - x1, y2 - y1)
    big = cv2.warpAffine(crop, inv_roi, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    m = cv2.warpAffine(mask.astype(np.float32), inv_roi, size, flags=cv2.INTER_LINEAR, borderValue=0.0)[..., None]
    roi = out[y1:y2, x1:x2].astype(np.float32)
    out[y1:y2, x1:x2] = np.clip(big.astype(np.float32) * m + roi * (1.0 - m) + 0.5, 0, 255).astype(np.uint8)
    return out
