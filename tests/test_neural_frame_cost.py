"""The neural path's own per-frame work, made cheaper, against the
formulations it replaced: FaceFusion's paste-back in one four-channel warp
and one ``blendLinear``; the box mask made once per swapper; and frames
batched into one inference (:meth:`FaceRenderer.render_frames`)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.compositing.facefusion import paste_area, paste_face
from faceweave.swappers.neural.base import box_mask


def paste_face_before(frame: np.ndarray, face: np.ndarray, mask: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``paste_face`` as it was written before (two warps, the mix broadcast in NumPy)."""
    out = frame.copy()
    x1, y1, x2, y2 = paste_area(frame.shape, int(face.shape[0]), matrix)
    if x2 <= x1 or y2 <= y1:
        return out
    inv = np.asarray(cv2.invertAffineTransform(np.asarray(matrix, np.float64)), np.float64)
    inv[:, 2] -= np.array([x1, y1], np.float64)
    size = (x2 - x1, y2 - y1)
    m = cv2.warpAffine(np.ascontiguousarray(mask, np.float32), inv, size, flags=cv2.INTER_LINEAR)
    m = np.clip(m, 0.0, 1.0)[..., None]
    back = cv2.warpAffine(
        np.ascontiguousarray(face, np.float32), inv, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
    region = frame[y1:y2, x1:x2].astype(np.float32)
    out[y1:y2, x1:x2] = np.clip(np.rint(region * (1.0 - m) + back * m), 0, 255).astype(np.uint8)
    return out


def similarity(scale: float, degrees: float, shift: tuple[float, float]) -> np.ndarray:
    """A frame -> crop similarity ``(2, 3)``."""
    a = np.deg2rad(degrees)
    c, s = scale * np.cos(a), scale * np.sin(a)
    return np.array([[c, -s, shift[0]], [s, c, shift[1]]], np.float64)


@pytest.mark.parametrize(
    ("side", "scale", "degrees", "shift", "dtype"),
    [
        (128, 0.3, 0.0, (-60.0, -20.0), np.float32),  # a large face, upright
        (128, 0.37, 17.0, (-70.0, -5.0), np.float32),  # tilted
        (128, 0.5, -40.0, (10.0, 30.0), np.float32),  # tilted, half off the frame's top left
        (256, 1.3, 5.0, (-150.0, -40.0), np.float32),  # a small face: the crop larger than its region
        (128, 0.3, 90.0, (60.0, -70.0), np.uint8),  # a uint8 face, on its side
        (128, 0.3, 0.0, (200.0, 200.0), np.float32),  # the crop off the frame: nothing pasted
    ],
)
def test_paste_face_matches_the_numpy_formulation(side, scale, degrees, shift, dtype):
    rng = np.random.default_rng(side + int(degrees))
    frame = rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)
    face = rng.uniform(0, 255, (side, side, 3)).astype(dtype)
    mask = np.minimum(box_mask(side, blur=0.3), rng.uniform(0.0, 1.2, (side, side)).astype(np.float32))
    matrix = similarity(scale, degrees, shift)
    out = frame.copy()
    paste_face(frame, face, mask, matrix, out=out)
    before = paste_face_before(frame, face, mask, matrix)
    diff = np.abs(out.astype(int) - before.astype(int))
    assert diff.max() <= 1
    assert np.count_nonzero(diff) <= diff.size // 10_000  # the last bit of a coordinate, at most


def test_paste_face_writes_into_the_frame_itself():
    rng = np.random.default_rng(7)
    frame = rng.integers(0, 256, (200, 200, 3), dtype=np.uint8)
    face = rng.uniform(0, 255, (128, 128, 3)).astype(np.float32)
    mask = box_mask(128)
    matrix = similarity(0.8, 10.0, (-20.0, -15.0))
    expected = paste_face_before(frame, face, mask, matrix)
    paste_face(frame, face, mask, matrix, out=frame)
    assert np.abs(frame.astype(int) - expected.astype(int)).max() <= 1
