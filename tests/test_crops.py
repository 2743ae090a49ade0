"""The working crop (faceweave.crops.cut_crop): a large face is halved with
pyrDown before its warp, from a region read where it lies in the frame, or
padded by its edges where it reaches past them."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.crops import _halved_region
from faceweave.geometry.align import crop_matrix
from faceweave.types import BBox


def padded_then_halved(pixels: np.ndarray, m: np.ndarray, side: int) -> tuple[np.ndarray, np.ndarray]:
    """The region always copied with its edges replicated, then halved: what
    ``_halved_region`` did before it read a region inside the frame in place."""
    inv = cv2.invertAffineTransform(m)
    x1, y1 = np.floor(inv[:, 2]).astype(int) - 2
    x2, y2 = np.ceil(inv @ np.array([side, side, 1.0])).astype(int) + 2
    h, w = pixels.shape[:2]
    inside = pixels[max(y1, 0) : min(y2, h), max(x1, 0) : min(x2, w)]
    region = cv2.copyMakeBorder(inside, max(0, -y1), max(0, y2 - h), max(0, -x1), max(0, x2 - w), cv2.BORDER_REPLICATE)
    src, pre = region, 1.0
    while m[0, 0] / pre < 0.5 and min(src.shape[:2]) > 8:
        src = cv2.pyrDown(src)
        pre *= 0.5
    local = m.copy()
    local[:, 2] += m[:, :2] @ np.array([x1, y1], np.float64)
    local[:, :2] /= pre
    return src, local


@pytest.mark.parametrize(
    "box",
    [
        (800.0, 700.0, 1400.0, 1300.0),  # well inside: read in place
        (-40.0, 900.0, 500.0, 1500.0),  # past the left edge: padded
        (1500.0, 1700.0, 2000.0, 2190.0),  # past the bottom right corner
    ],
)
def test_a_large_face_is_halved_from_the_same_region_in_place_or_padded(box):
    pixels = np.random.default_rng(3).integers(0, 256, (2200, 2100, 3), dtype=np.uint8)
    m, side = crop_matrix(BBox(*box), face_size=192, margin=1.8)
    assert m[0, 0] < 0.5  # the halving path
    got, got_m = _halved_region(pixels, m, side)
    want, want_m = padded_then_halved(pixels, m, side)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_m, want_m)
