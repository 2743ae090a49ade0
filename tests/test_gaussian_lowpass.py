"""The wide Gaussian low-pass worked out at half resolution
(:func:`faceweave.compositing.resample.gaussian_lowpass`)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage import data

from faceweave.compositing.resample import HALF_RES_SIGMA, gaussian_lowpass


def _face_luma() -> np.ndarray:
    """The astronaut's face, float32 luma (skin, hair, a collar: real texture)."""
    rgb = data.astronaut()[20:260, 140:360].astype(np.float32)
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)


def test_below_the_threshold_it_is_opencvs_blur_exactly():
    luma = _face_luma()
    for sigma in (0.6, 1.2, HALF_RES_SIGMA - 0.01):
        assert np.array_equal(gaussian_lowpass(luma, sigma), cv2.GaussianBlur(luma, (0, 0), sigma))
    tiny = luma[:15, :40]
    assert np.array_equal(gaussian_lowpass(tiny, 5.0), cv2.GaussianBlur(tiny, (0, 0), 5.0))


@pytest.mark.parametrize("sigma, rel", [(3.0, 0.01), (4.25, 0.006), (6.0, 0.004), (9.0, 0.004)])
def test_the_detail_band_matches_the_exact_one(sigma, rel):
    luma = _face_luma()
    exact = luma - cv2.GaussianBlur(luma, (0, 0), sigma)
    approx = luma - gaussian_lowpass(luma, sigma)
    inner = (slice(20, -20), slice(20, -20))  # borders are replicated differently at half size
    err = float(np.sqrt(np.mean((approx - exact)[inner] ** 2)))
    band = float(np.sqrt(np.mean(exact[inner] ** 2)))
    assert err < rel * band
    # the energy of the band, which the texture and grain steps match, within 0.1 %
    assert np.mean(approx[inner] ** 2) == pytest.approx(np.mean(exact[inner] ** 2), rel=1e-3)


def test_it_keeps_shape_dtype_and_channels_on_odd_sizes():
    rgb = data.astronaut()[:101, :77].astype(np.float32)
    out = gaussian_lowpass(rgb, 5.0)
    assert out.shape == rgb.shape and out.dtype == np.float32
    # a constant stays constant (the weights sum to one at every step)
    flat = np.full((33, 47), 7.5, np.float32)
    assert np.allclose(gaussian_lowpass(flat, 8.0), 7.5, atol=1e-4)
    # the channels are blurred alike and apart
    assert np.allclose(out[..., 0], gaussian_lowpass(np.ascontiguousarray(rgb[..., 0]), 5.0), atol=1e-3)


def test_each_pixel_averages_around_itself_with_the_asked_variance():
    """Each output pixel's weights (a row of the operator) are centred on it
    and spread with the variance sigma squared, as the exact Gaussian's: the
    half-size steps add theirs up to it.  Read off ramps: the low-pass of
    ``x`` is the weights' mean, that of ``x**2`` their second moment."""
    for sigma in (4.0, 7.0, 11.0):
        xs = np.tile(np.arange(160, dtype=np.float32), (160, 1))
        centre = (slice(60, 100), slice(60, 100))  # far from the borders
        first = gaussian_lowpass(xs, sigma)[centre]
        second = gaussian_lowpass(xs * xs, sigma)[centre]
        assert np.allclose(first, xs[centre], atol=0.02)
        variance = second - first * first
        assert np.allclose(variance, sigma * sigma, rtol=0.04)
        # rows and columns alike
        assert np.allclose(gaussian_lowpass(np.ascontiguousarray(xs.T), sigma)[centre], xs.T[centre], atol=0.02)
