"""The watermark's last chain on a video frame's Y plane in one pass
(``mark_luma`` in faceweave/kernels/pixels.py and faceweave/kernels/_pixels.c):
the compiled kernel against its NumPy formulation to the bit, and both
against the OpenCV chain it replaced (``resize`` INTER_LINEAR of the
perceptual mask, ``multiply`` to int16, ``add`` to uint8) within one level,
and the same on real frames."""

from __future__ import annotations

from functools import partial

import cv2
import numpy as np
import pytest
from tests.thread_fixtures import side_by_side

from faceweave import kernels
from faceweave.kernels import pixels, reference
from faceweave.provenance import Payload, Watermarker
from faceweave.provenance import pattern as pat

needs_compiled = pytest.mark.skipif(
    not kernels.compiled(), reason="the compiled kernels were not built (no C compiler at install)"
)


def mark_case(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A Y plane, a pattern in Y levels (some large enough to saturate) and a smaller mask."""
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(5, 260, 2))
    mh, mw = max(1, h // int(rng.integers(1, 9))), max(1, w // int(rng.integers(1, 9)))
    luma = rng.integers(0, 256, (h, w), dtype=np.uint8)
    pattern = rng.normal(0.0, rng.uniform(1.0, 80.0), (h, w)).astype(np.float32)
    mask = rng.uniform(0.0, 3.0, (mh, mw)).astype(np.float32)
    return luma, pattern, mask


def opencv_chain(luma: np.ndarray, pattern: np.ndarray, mask: np.ndarray) -> np.ndarray:
    full = cv2.resize(mask, (luma.shape[1], luma.shape[0]), interpolation=cv2.INTER_LINEAR)
    out = luma.copy()
    cv2.add(out, cv2.multiply(pattern, full, dtype=cv2.CV_16S), dst=out, dtype=cv2.CV_8U)
    return out


def marked(fn, luma: np.ndarray, pattern: np.ndarray, mask: np.ndarray) -> np.ndarray:
    out = luma.copy()
    fn(out, pattern, mask)
    return out


@needs_compiled
@pytest.mark.parametrize("seed", range(40))
def test_mark_luma_is_its_reference_to_the_bit(seed):
    case = mark_case(seed)
    np.testing.assert_array_equal(marked(pixels.mark_luma, *case), marked(reference.mark_luma, *case))


@pytest.mark.parametrize("seed", range(40))
def test_mark_luma_is_the_opencv_chain_within_one_level(seed):
    case = mark_case(seed)
    got = marked(pixels.mark_luma, *case).astype(np.int16)
    want = opencv_chain(*case).astype(np.int16)
    assert np.abs(got - want).max() <= 1
    assert np.count_nonzero(got != want) <= max(2, got.size // 10_000)


def test_on_real_frames_the_mark_is_opencvs():
    """The marker's Y planes (a photo turned to Y at three sizes): the kernel's mark is the old chain's."""
    from skimage import data

    rgb = data.astronaut()
    for width, height in ((1280, 720), (640, 360), (853, 480)):
        luma = cv2.cvtColor(cv2.resize(rgb, (width, height)), cv2.COLOR_RGB2YUV)[..., 0].copy()
        marker = Watermarker().frame_marker(width, height, Payload(run_id=7))
        got = luma.copy()
        marker.mark_luma(got)
        want = opencv_chain(luma, marker._luma_pattern, pat.coarse_mask(luma, marker._luma_masking))
        assert np.count_nonzero(got != want) <= luma.size // 100_000
        assert np.count_nonzero(got != luma) > luma.size // 4  # the mark is there


def test_the_coarse_mask_upscaled_is_the_perceptual_mask():
    from skimage import data

    luma = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2GRAY)
    up = cv2.resize(pat.coarse_mask(luma), luma.shape[::-1], interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(up, pat.perceptual_mask(luma))


@needs_compiled
def test_without_the_compiled_kernel_the_same_values_come_out(monkeypatch):
    case = mark_case(3)
    fast = marked(pixels.mark_luma, *case)
    monkeypatch.setattr(pixels, "_pixels", None)
    assert not kernels.compiled()
    np.testing.assert_array_equal(marked(pixels.mark_luma, *case), fast)


def test_mark_luma_refuses_what_does_not_fit():
    luma, pattern, mask = mark_case(1)
    with pytest.raises(ValueError, match="luma's shape"):
        pixels.mark_luma(luma, pattern[:-1], mask)
    with pytest.raises(ValueError, match="uint8"):
        pixels.mark_luma(luma.astype(np.float32), pattern, mask)
    with pytest.raises(ValueError, match="contiguous"):
        pixels.mark_luma(np.asfortranarray(luma[:, :4]), pattern[:, :4], mask)


@needs_compiled
def test_mark_luma_runs_side_by_side_in_threads():
    cases = [mark_case(k) for k in range(4)]
    want = [marked(pixels.mark_luma, *c) for c in cases]
    jobs = [partial(marked, pixels.mark_luma, *c) for c in cases]
    for g, w in zip(side_by_side(jobs, repeats=30), want, strict=True):
        np.testing.assert_array_equal(g, w)
