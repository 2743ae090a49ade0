"""A coloured light on the target (``colour.chroma_spread``,
``composite.coloured_light``): known inputs, known outputs; and on a real
face, a target lit in two colours gives the new face that pattern."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.compositing.colour import apply_statistics, chroma_spread, masked_blur, to_lab
from faceweave.compositing.composite import (
    COLOUR_LIGHT_MARGIN,
    COLOUR_LIGHT_SPAN,
    MAX_CONTRAST_GAIN,
    SHADING_SIGMA,
    colour_plan,
    coloured_light,
)
from faceweave.compositing.regions import skin_region
from faceweave.compositing.resample import half, half_mesh
from faceweave.compositing.values import HalfCrop


def _ramps(a_step: float, b_step: float, size: int = 100) -> np.ndarray:
    """float32 CIELAB ``(size, size, 3)``: L* 60, a* rising by ``a_step`` per
    column, b* by ``b_step`` per row."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    return np.dstack([np.full_like(xx, 60.0), a_step * xx, b_step * yy]).astype(np.float32)


def test_chroma_spread_is_the_length_of_the_a_and_b_percentile_ranges():
    region = np.ones((100, 100), np.float32)
    # a* 0 .. 19.8 over the columns, b* 0 .. 9.9 over the rows: the 5 to 95
    # percentile ranges are 0.9 * 99 steps of each (a fine blur keeps a ramp)
    want = float(np.hypot(0.2 * 0.9 * 99, 0.1 * 0.9 * 99))
    assert chroma_spread(_ramps(0.2, 0.1), region, sigma=1.0) == pytest.approx(want, abs=0.1)
    assert chroma_spread(_ramps(0.0, 0.0), region, sigma=1.0) == pytest.approx(0.0, abs=1e-4)


@pytest.mark.parametrize("sigma", [4.0, 8.0, 12.0])
def test_chroma_spread_on_its_shrunk_grid_agrees_with_the_full_resolution_measure(sigma):
    lab = _ramps(0.2, 0.1)
    lab[30:50, 30:50, 1:] += 6.0  # a patch, so that not only ramps are measured
    region = np.zeros((100, 100), np.float32)
    region[15:85, 20:90] = 1.0
    full = masked_blur(lab, region, sigma)[region > 0.5][:, 1:]
    low, high = np.percentile(full, [5, 95], axis=0)
    assert chroma_spread(lab, region, sigma=sigma) == pytest.approx(float(np.linalg.norm(high - low)), abs=0.5)


def test_chroma_spread_looks_only_at_the_region():
    lab = _ramps(0.0, 0.0)
    lab[..., 1] = 10.0
    lab[:, :40, 1] = 50.0  # a red patch beside the region: not blurred into it
    region = np.zeros((100, 100), np.float32)
    region[:, 40:] = 1.0
    assert chroma_spread(lab, region, sigma=3.0) == pytest.approx(0.0, abs=1e-3)
    assert chroma_spread(lab, np.ones_like(region), sigma=3.0) > 30.0
    few = np.zeros((100, 100), np.float32)
    few[0, :10] = 1.0  # fewer than 16 pixels: nothing to measure
    assert chroma_spread(lab, few, sigma=1.0) == 0.0


@pytest.mark.parametrize(
    ("target_step", "face_step", "want"),
    [
        (0.02, 0.0, (0.9 * 99 * 0.02 - COLOUR_LIGHT_MARGIN) / COLOUR_LIGHT_SPAN),  # more: part of the way
        (0.01, 0.0, 0.0),  # less than the margin more: none
        (0.3, 0.0, 1.0),  # far more: all of it
        (0.0, 0.2, 0.0),  # the new face varies more: none
        (0.1, 0.1, 0.0),  # as much: none
    ],
)
def test_coloured_light_is_the_target_s_excess_spread_in_span_units(target_step, face_step, want):
    region = np.ones((100, 100), np.float32)
    behind, face = _ramps(target_step, 0.0), _ramps(face_step, 0.0)
    assert coloured_light(face, behind, region, sigma=1.0) == pytest.approx(want, abs=0.02)


# ---------------------------------------------------------------- on a real face
@pytest.fixture(scope="module")
def astronaut_crop(astronaut):
    from faceweave.analysis import FaceAnalyser
    from faceweave.crops import cut_crop
    from faceweave.options import SwapOptions

    with FaceAnalyser(SwapOptions().analysis) as analyser:
        face = max(analyser.analyse(np.array(astronaut)), key=lambda f: f.bbox.area)
    return cut_crop(np.array(astronaut), face, face_size=256)


def _lit(view: HalfCrop, strength: float) -> HalfCrop:
    """The view with the target lit magenta from image-left and yellow from
    image-right: a* and b* ramps of ``strength`` across the face."""
    x = np.linspace(-1.0, 1.0, view.size[0], dtype=np.float32)[None, :]
    behind = view.behind_lab.copy()
    behind[..., 1] -= strength * x
    behind[..., 2] += strength * x
    return HalfCrop(face_lab=view.face_lab, behind_lab=behind, mesh=view.mesh, face_size=view.face_size)


def _taken(view: HalfCrop, skin: np.ndarray) -> float:
    """The share of the target's low-frequency a*b* difference from the new
    face that the colour plan gives the new face, over the skin."""
    plan, _ = colour_plan(view, skin, shading=0.5, colour=None)
    stats = plan.match.source.stats, plan.match.target.stats
    matched = apply_statistics(view.face_lab, *stats, max_gain=MAX_CONTRAST_GAIN)
    shaded = matched + plan.regional + plan.amount * plan.shading
    sigma = SHADING_SIGMA * view.face_size
    sel = skin > 0.5
    want = (masked_blur(view.behind_lab, skin, sigma) - masked_blur(matched, skin, sigma))[sel][:, 1:]
    got = (masked_blur(shaded, skin, sigma) - masked_blur(matched, skin, sigma))[sel][:, 1:]
    return float((got * want).sum() / (want * want).sum())


@pytest.mark.slow
def test_a_target_lit_in_two_colours_gives_the_new_face_that_pattern(astronaut_crop):
    """The new face is the target's own face; the target has a magenta light
    on one side and a yellow one on the other.  Under a strong coloured light
    the new face's skin takes nearly all of the pattern; under a faint one
    about the usual share (half of the shading, the tint's part of the rest)."""
    crop = astronaut_crop
    view = HalfCrop(
        face_lab=to_lab(half(crop.pixels)),
        behind_lab=to_lab(half(crop.pixels)),
        mesh=half_mesh(crop.mesh),
        face_size=crop.face_size / 2,
    )
    skin = skin_region(view.size, view.mesh, view.face_size)
    strong, faint = _lit(view, 14.0), _lit(view, 1.0)
    sigma = SHADING_SIGMA * view.face_size
    assert coloured_light(view.face_lab, strong.behind_lab, skin, sigma=sigma) == 1.0
    assert coloured_light(view.face_lab, faint.behind_lab, skin, sigma=sigma) < 0.3
    assert _taken(strong, skin) > 0.9
    assert _taken(faint, skin) < 0.85
