"""An RGB frame as planar YUV 4:2:0 (``rgb_to_i420`` in
faceweave/kernels/pixels.py and faceweave/kernels/_pixels.c) against
OpenCV's formulation in faceweave/kernels/reference.py, to the bit: the
sixteen-pixel SSSE3 path, the pixel-pair path and their seam, both colour
matrices, small and odd-looking sizes, extreme levels; and its refusals."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave import kernels
from faceweave.kernels import pixels, reference
from faceweave.video.io.sinks import rgb_to_i420, yuv_matrix

needs_compiled = pytest.mark.skipif(
    not kernels.compiled(), reason="the compiled kernels were not built (no C compiler at install)"
)


def frame(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    out[: h // 2, : w // 3] = rng.choice([0, 255], (h // 2, w // 3, 3))  # the extremes, side by side
    return out


@needs_compiled
@pytest.mark.parametrize("size", [(2, 2), (2, 16), (4, 18), (6, 30), (8, 34), (10, 48), (720, 1280), (480, 854)])
@pytest.mark.parametrize("bt709", [True, False])
@pytest.mark.parametrize("wide", [True, False])
def test_rgb_to_i420_is_opencv_s_transform_to_the_bit(size, bt709, wide):
    h, w = size
    for seed in range(2):
        pixels_in = frame(h, w, seed)
        m = yuv_matrix(h, bt709=bt709)
        got = pixels.rgb_to_i420(pixels_in, m, wide=wide)
        assert got.shape == (h * 3 // 2, w) and got.dtype == np.uint8
        np.testing.assert_array_equal(got, reference.rgb_to_i420(pixels_in, m))


def test_the_writer_s_conversion_runs_it_and_without_the_kernels_gives_the_same(monkeypatch):
    pixels_in = frame(64, 96, 3)
    compiled_out = rgb_to_i420(pixels_in, bt709=True)
    monkeypatch.setattr(pixels, "_pixels", None)
    np.testing.assert_array_equal(rgb_to_i420(pixels_in, bt709=True), compiled_out)
    np.testing.assert_array_equal(compiled_out, reference.rgb_to_i420(pixels_in, yuv_matrix(64, bt709=True)))


@pytest.mark.parametrize(
    ("pixels_in", "matrix", "fragment"),
    [
        (np.zeros((4, 5, 3), np.uint8), yuv_matrix(4), "both sides must be even"),
        (np.zeros((3, 4, 3), np.uint8), yuv_matrix(4), "both sides must be even"),
        (np.zeros((4, 4, 4), np.uint8), yuv_matrix(4), "C-contiguous \\(H, W, 3\\) uint8"),
        (np.zeros((4, 4, 3), np.float32), yuv_matrix(4), "C-contiguous \\(H, W, 3\\) uint8"),
        (np.zeros((4, 8, 3), np.uint8)[:, ::2], yuv_matrix(4), "C-contiguous"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((3, 3), np.float32), "matrix must be \\(3, 4\\)"),
        (np.zeros((4, 4, 3), np.uint8), np.full((3, 4), 40.0, np.float32), "weights under 32"),
    ],
)
def test_bad_frames_and_matrices_are_refused(pixels_in, matrix, fragment):
    with pytest.raises(ValueError, match=fragment):
        pixels.rgb_to_i420(pixels_in, matrix)
