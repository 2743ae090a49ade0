"""FaceFusion's pre/post-processing of its mask models
(``facefusion/face_masker.py``), as pure functions on faceweave's RGB crops.

FaceFusion's frames are BGR: XSeg gets the crop as it is there (BGR), the
parser gets it turned to RGB.  Resizing is OpenCV's bilinear, as there.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from faceweave.errors import ModelSignatureError
from faceweave.maskers.base import REGIONS


def occluder_input(crop: np.ndarray, size: int) -> np.ndarray:
    """``(S, S, 3)`` uint8 RGB crop -> ``(1, size, size, 3)`` float32: resized
    (bilinear, on the uint8 pixels), BGR, scaled to ``[0, 1]``, NHWC."""
    resized = cv2.resize(np.ascontiguousarray(crop), (size, size))
    return np.ascontiguousarray(resized[None, :, :, ::-1], dtype=np.float32) / np.float32(255.0)


def occluder_output(values: np.ndarray, side: int) -> np.ndarray:
    """An occluder's first output ``(1, h, w, 1)`` (or ``(1, h, w)``) ->
    ``(side, side)`` float32: clipped to ``[0, 1]``, resized (bilinear)."""
    x = np.asarray(values, np.float32)
    if x.ndim == 4 and x.shape[-1] == 1:
        x = x[..., 0]
    if x.ndim != 3:
        raise ModelSignatureError(f"an occluder's output should have shape [1, H, W, 1]; got {list(x.shape)}")
    return np.asarray(cv2.resize(np.clip(x[0], 0.0, 1.0), (side, side)), np.float32)


def parser_input(face: np.ndarray, size: int, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """``(S, S, 3)`` RGB face (uint8 or float in ``[0, 255]``) ->
    ``(1, 3, size, size)`` float32: resized (bilinear), scaled to ``[0, 1]``,
    ``(x - mean) / std`` per channel, NCHW."""
    src = np.ascontiguousarray(face if face.dtype == np.uint8 else np.asarray(face, np.float32))
    x = np.asarray(cv2.resize(src, (size, size)), np.float32) / np.float32(255.0)
    x = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=np.float32)


def region_classes(regions: Sequence[str]) -> list[int]:
    """The parser classes of the region names (:data:`~faceweave.maskers.base.REGIONS`)."""
    return [REGIONS[name] for name in regions]


def select_regions(logits: np.ndarray, regions: Sequence[str]) -> np.ndarray:
    """``(C, h, w)`` class scores -> ``(h, w)`` float32: 1 where the best
    class is one of ``regions``."""
    x = np.asarray(logits)
    if x.ndim != 3:
        raise ModelSignatureError(f"a face parser's scores should have shape [C, H, W]; got {list(x.shape)}")
    return np.isin(x.argmax(0), region_classes(regions)).astype(np.float32)


def parser_output(values: np.ndarray, regions: Sequence[str], side: int) -> np.ndarray:
    """A parser's first output ``(1, C, h, w)`` -> ``(side, side)`` float32:
    the chosen regions (:func:`select_regions`) resized (bilinear)."""
    x = np.asarray(values)
    if x.ndim != 4:
        raise ModelSignatureError(f"a face parser's output should have shape [1, C, H, W]; got {list(x.shape)}")
    return np.asarray(cv2.resize(select_regions(x[0], regions), (side, side)), np.float32)
