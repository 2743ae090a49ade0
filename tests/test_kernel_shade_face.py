"""The blend's colour chain in one pass (faceweave/kernels/lab.py, ``shade_face``
in faceweave/kernels/_pixels.c): the compiled kernel against its NumPy
formulation to the bit, and both against the OpenCV/NumPy chain it replaced
(``apply_statistics``, ``cvtColor`` Lab -> RGB, rounding, ``copyTo``)
within one level."""

from __future__ import annotations

from functools import partial

import cv2
import numpy as np
import pytest
from tests.thread_fixtures import side_by_side

from faceweave import kernels
from faceweave.compositing.colour import ColourMatch, SkinColour, apply_statistics, statistics_map, to_lab, to_rgb
from faceweave.compositing.composite import colour_map, matched_colour
from faceweave.kernels import lab, pixels, reference

needs_compiled = pytest.mark.skipif(
    not kernels.compiled(), reason="the compiled kernels were not built (no C compiler at install)"
)


def shade_case(seed: int) -> tuple[np.ndarray, ...]:
    """A face crop in CIELAB (its window), offsets, coverage with 0 and 1 plateaus, the crop behind, a window."""
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(8, 90, 2))
    face = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    behind = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    coverage = np.clip(rng.uniform(-0.5, 1.5, (h, w)), 0.0, 1.0).astype(np.float32)
    x0, y0 = int(rng.integers(0, w // 2)), int(rng.integers(0, h // 2))
    x1, y1 = int(rng.integers(x0 + 1, w + 1)), int(rng.integers(y0 + 1, h + 1))
    window = to_lab(face[y0:y1, x0:x1])
    offset = rng.normal(0.0, rng.uniform(0.5, 25.0), window.shape).astype(np.float32)
    return window, offset, coverage, behind, np.array([x0, y0, x1, y1])


def random_map(seed: int) -> lab.LabMap:
    """A skin-colour mapping as the statistics give one: sometimes scaled past the skin's tint, or achromatic."""
    rng = np.random.default_rng(seed + 1000)
    own = (rng.normal([60, 12, 16], [10, 6, 6]).astype(np.float32), rng.uniform(1, 12, 3).astype(np.float32))
    ref = (rng.normal([60, 14, 18], [10, 6, 6]).astype(np.float32), rng.uniform(1, 12, 3).astype(np.float32))
    if seed % 7 == 0:  # a black-and-white target
        ref = (np.array([50, 1, -1], np.float32), np.array([10, 1, 1], np.float32))
    return statistics_map(own, ref, share=float(rng.choice([1.0, 0.5, 0.0, 0.73])))


def old_chain(window, offset, coverage, behind, box, mapping) -> np.ndarray:
    """What blend_face did before the kernel: NumPy's mapping, cvtColor back, rounding, copyTo."""
    x0, y0, x1, y1 = box
    roi = (slice(y0, y1), slice(x0, x1))
    rgb = to_rgb(mapping.apply(window) + offset).astype(np.float32)
    covered = (coverage[roi] > 0.5).view(np.uint8)
    return np.asarray(cv2.copyTo(rgb, covered, behind[roi].astype(np.float32)), np.float32)


@needs_compiled
@pytest.mark.parametrize("seed", range(40))
def test_shade_face_is_its_reference_to_the_bit(seed):
    window, offset, coverage, behind, box = shade_case(seed)
    mapping = random_map(seed)
    got = lab.shade_face(window, offset, coverage, behind, tuple(box), mapping)
    params, degamma = mapping.params(), lab.lab_tables().degamma
    want = reference.shade_face(window, offset, coverage, behind, tuple(box), params, degamma)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(40))
def test_shade_face_is_the_opencv_chain_within_one_level(seed):
    """The sRGB curve from a table rather than OpenCV's spline: at most one
    level apart, and on very few pixels (a few in ten thousand)."""
    case = shade_case(seed)
    mapping = random_map(seed)
    got = lab.shade_face(*case[:4], tuple(case[4]), mapping)
    diff = np.abs(got - old_chain(*case[:4], tuple(case[4]), mapping))
    assert diff.max() <= 1.0
    assert (diff > 0).mean() < 0.002


def test_shade_face_on_many_pixels_differs_from_opencv_on_few():
    rng = np.random.default_rng(5)
    face = rng.integers(0, 256, (300, 300, 3), dtype=np.uint8)
    window = to_lab(face)
    offset = rng.normal(0, 4, window.shape).astype(np.float32)
    coverage, behind = np.ones((300, 300), np.float32), np.zeros_like(face)
    mapping = random_map(3)
    diff = np.abs(
        lab.shade_face(window, offset, coverage, behind, (0, 0, 300, 300), mapping)
        - old_chain(window, offset, coverage, behind, (0, 0, 300, 300), mapping)
    )
    assert diff.max() <= 1.0 and (diff > 0).mean() < 5e-4


def test_where_the_face_does_not_cover_the_crop_behind_stays_exactly():
    window, offset, coverage, behind, box = shade_case(2)
    x0, y0, x1, y1 = box
    got = lab.shade_face(window, offset, coverage, behind, tuple(box), random_map(2))
    away = coverage[y0:y1, x0:x1] <= 0.5
    np.testing.assert_array_equal(got[away], behind[y0:y1, x0:x1][away].astype(np.float32))
    assert np.array_equal(got, np.round(got)) and got.min() >= 0 and got.max() <= 255


def test_the_map_is_apply_statistics_and_matched_colour_to_the_bit():
    """One formulation of the statistics transfer: LabMap.apply is what the colour code uses."""
    rng = np.random.default_rng(9)
    window = to_lab(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8))
    colour = ColourMatch(
        source=SkinColour(np.array([62, 14, 19], np.float32), np.array([6, 3, 4], np.float32)),
        target=SkinColour(np.array([55, 18, 22], np.float32), np.array([8, 4, 5], np.float32)),
    )
    want = apply_statistics(window, colour.source.stats, colour.target.stats, max_gain=1.6)
    np.testing.assert_array_equal(colour_map(colour).apply(window), want)
    mixed = window + np.float32(0.4) * (want - window)
    np.testing.assert_array_equal(matched_colour(window, colour, 0.4), mixed)


@needs_compiled
def test_without_the_compiled_kernel_the_same_values_come_out(monkeypatch):
    window, offset, coverage, behind, box = shade_case(7)
    mapping = random_map(7)
    fast = lab.shade_face(window, offset, coverage, behind, tuple(box), mapping)
    monkeypatch.setattr(pixels, "_pixels", None)
    assert not kernels.compiled()
    np.testing.assert_array_equal(lab.shade_face(window, offset, coverage, behind, tuple(box), mapping), fast)


@needs_compiled
def test_shade_face_refuses_what_does_not_fit():
    window, offset, coverage, behind, box = shade_case(1)
    mapping = random_map(1)
    with pytest.raises(ValueError, match="window"):
        lab.shade_face(window, offset[:-1], coverage, behind, tuple(box), mapping)
    with pytest.raises(ValueError, match="inside"):
        lab.shade_face(window, offset, coverage, behind, (0, 0, coverage.shape[1] + 1, 1), mapping)
    with pytest.raises(ValueError, match="uint8"):
        lab.shade_face(window, offset, coverage, behind.astype(np.float32), tuple(box), mapping)
    from faceweave.kernels import _pixels  # type: ignore[attr-defined]

    out = np.zeros_like(window)
    tables = lab.lab_tables()
    with pytest.raises(ValueError, match="match the crop"):
        _pixels.shade_face(
            window,
            offset,
            coverage[:-1],
            behind,
            out,
            tables.degamma,
            mapping.params(),
            coverage.shape[1],
            coverage.shape[0],
            *box,
            4096,
        )
    with pytest.raises(ValueError, match="inside the crop"):
        _pixels.shade_face(window, offset, coverage, behind, out, tables.degamma, mapping.params(), 2, 2, *box, 4096)


@needs_compiled
def test_shade_face_runs_side_by_side_in_threads():
    cases = [(shade_case(k), random_map(k)) for k in range(4)]
    want = [lab.shade_face(*c[:4], tuple(c[4]), m) for c, m in cases]
    jobs = [partial(lab.shade_face, *c[:4], tuple(c[4]), m) for c, m in cases]
    for g, w in zip(side_by_side(jobs, repeats=30), want, strict=True):
        np.testing.assert_array_equal(g, w)
