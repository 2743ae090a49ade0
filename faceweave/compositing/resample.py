"""Maps made at half resolution and brought back.  Masks and shading are
smooth, so they are built on a crop halved in each direction and resized;
colour and the multi-band blend stay at full resolution.  A wide Gaussian
low-pass (:func:`gaussian_lowpass`) is worked out the same way."""

from __future__ import annotations

import cv2
import numpy as np


def half(image: np.ndarray) -> np.ndarray:
    """``image`` ``(H, W, ...)`` area-averaged to ``(H // 2, W // 2, ...)``:
    each pixel the mean of a 2 x 2 block (an odd last row or column is
    left out, as :func:`half_mesh` places the points; OpenCV's area
    resampling by an exact factor of two is also many times faster than by
    a factor slightly off it)."""
    h, w = image.shape[0] // 2, image.shape[1] // 2
    even = image[: 2 * h, : 2 * w]
    return np.asarray(cv2.resize(even, (w, h), interpolation=cv2.INTER_AREA))


#: from this sigma (pixels) on, :func:`gaussian_lowpass` works at half resolution
HALF_RES_SIGMA = 3.0


def gaussian_lowpass(image: np.ndarray, sigma: float) -> np.ndarray:
    """``cv2.GaussianBlur(image, (0, 0), sigma)`` of a float32 ``(H, W)`` or
    ``(H, W, C)`` image, worked out at half resolution (again and again) from
    :data:`HALF_RES_SIGMA` on: area-halved (a 2 x 2 mean, variance 1/4 pixel
    squared), blurred there at ``sqrt((sigma**2 - 1) / 4)`` and doubled back
    bilinearly (variance 3/4), which adds up to the same variance.  A quarter
    of the pixels under a kernel half as long: at sigma 4.25 (the skin
    texture band of a 700 px face) about a sixth of the time, and the band
    ``image - low-pass`` of a face differs from the exact one by 0.2 % RMS
    (0.6 % at sigma 3).  Below the threshold, and on images under 16 pixels
    a side, it is ``cv2.GaussianBlur`` itself."""
    h, w = image.shape[:2]
    if sigma < HALF_RES_SIGMA or min(h, w) < 16:
        return np.asarray(cv2.GaussianBlur(image, (0, 0), sigma))
    small = cv2.resize(image, ((w + 1) // 2, (h + 1) // 2), interpolation=cv2.INTER_AREA)
    blurred = gaussian_lowpass(small, float(np.sqrt((sigma * sigma - 1.0) / 4.0)))
    return np.asarray(cv2.resize(blurred, (w, h), interpolation=cv2.INTER_LINEAR))


def half_mesh(mesh: np.ndarray) -> np.ndarray:
    """A ``(N, 3)`` mesh in crop pixels moved to the :func:`half` crop's
    pixels (pixel centres kept aligned); depth is left as it is."""
    out = mesh.copy()
    out[:, :2] = (out[:, :2] + 0.5) / 2.0 - 0.5
    return out


def upsample(half_map: np.ndarray, full: tuple[int, int]) -> np.ndarray:
    """A map made at half resolution resized (bilinear) to ``full = (W, H)``."""
    return np.asarray(cv2.resize(half_map, full, interpolation=cv2.INTER_LINEAR))


def upsampled_window(half_map: np.ndarray, full: tuple[int, int], box: tuple[int, int, int, int]) -> np.ndarray:
    """The window ``box = (x0, y0, x1, y1)`` of :func:`upsample` ``(half_map,
    full)``, without resizing the rest."""
    x0, y0, x1, y1 = box
    sx, sy = half_map.shape[1] / full[0], half_map.shape[0] / full[1]
    # window pixel (u, v) is crop pixel (x0 + u, y0 + v), which resize samples at (x + 0.5) * s - 0.5
    m = np.array([[sx, 0.0, (x0 + 0.5) * sx - 0.5], [0.0, sy, (y0 + 0.5) * sy - 0.5]], np.float64)
    return np.asarray(
        cv2.warpAffine(
            half_map,
            m,
            (x1 - x0, y1 - y0),
            flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
            borderMode=cv2.BORDER_REPLICATE,
        )
    )
