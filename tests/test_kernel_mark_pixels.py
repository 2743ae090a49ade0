"""The watermark on a picture's colours in one pass (``mark_pixels`` in
faceweave/kernels/pixels.py and faceweave/kernels/_pixels.c): the compiled
kernel, both its paths, against the OpenCV chain it replaced
(faceweave/kernels/reference.py: the tile repeated over the picture,
``multiply`` by the perceptual mask to int16, the saturated sum) to the bit,
on grey, RGB and RGBA pictures, and ``FrameMarker.mark`` on a photo."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave import kernels
from faceweave.kernels import pixels, reference
from faceweave.provenance import Payload, Watermarker
from faceweave.provenance import pattern as pat

needs_compiled = pytest.mark.skipif(
    not kernels.compiled(), reason="the compiled kernels were not built (no C compiler at install)"
)
SHAPES = ((), (3,), (4,))


def mark_case(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A picture (grey, RGB or RGBA; some of it at the ends of the range), a
    tile (sometimes large enough to saturate, sometimes larger than the
    picture) and a mask with halves that round to even."""
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(1, 200, 2))
    pixels_ = rng.integers(0, 256, (h, w, *SHAPES[seed % 3]), dtype=np.uint8)
    pixels_[: h // 4] = 255
    pixels_[h - h // 5 :] = 0
    side = int(rng.choice([1, 7, 32, 128, 300]))
    tile = rng.normal(0.0, rng.uniform(1.0, 300.0), (side, side)).astype(np.float32)
    if seed % 5 == 0:
        tile *= np.float32(1e4)  # products beyond int16
    mask = rng.uniform(0.0, 3.0, (h, w)).astype(np.float32)
    mask[rng.random((h, w)) < 0.2] = 0.5  # with a tile of whole numbers, ties
    if seed % 4 == 0:
        tile = np.round(tile)
    return pixels_, tile, mask


@needs_compiled
@pytest.mark.parametrize("wide", [True, False])
@pytest.mark.parametrize("seed", range(30))
def test_mark_pixels_is_the_opencv_chain_to_the_bit(seed, wide):
    picture, tile, mask = mark_case(seed)
    got = pixels.mark_pixels(picture, tile, mask, wide=wide)
    want = reference.mark_pixels(picture, tile, mask)
    assert got.shape == picture.shape and got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)
    if picture.ndim == 3 and picture.shape[2] == 4:
        np.testing.assert_array_equal(got[..., 3], picture[..., 3])  # the alpha kept


@pytest.mark.parametrize("compiled", [True, False])
def test_the_mark_is_added_to_every_channel_saturating_exactly(compiled, monkeypatch):
    """What integer arithmetic gives: the same change on R, G and B, clipped
    to 0..255, with alpha and grey pictures handled alike (a tile as large as
    the picture holding whole deltas, the mask 1)."""
    if not compiled:
        monkeypatch.setattr(pixels, "_pixels", None)
    rng = np.random.default_rng(3)
    rgba = rng.integers(0, 256, (37, 53, 4), dtype=np.uint8)
    rgba[0, :3, :3] = (0, 255, 128)  # both ends of the range
    delta = rng.integers(-300, 301, (37, 53), dtype=np.int16)
    tile = np.zeros((53, 53), np.float32)
    tile[:37] = delta
    ones = np.ones(delta.shape, np.float32)
    want = np.clip(rgba[..., :3].astype(np.int32) + delta[..., None], 0, 255).astype(np.uint8)
    assert np.array_equal(pixels.mark_pixels(np.ascontiguousarray(rgba[..., :3]), tile, ones), want)
    out = pixels.mark_pixels(rgba, tile, ones)
    assert out.shape == rgba.shape and np.array_equal(out[..., :3], want) and np.array_equal(out[..., 3], rgba[..., 3])
    grey = np.ascontiguousarray(rgba[..., 0])
    want_grey = np.clip(grey.astype(np.int32) + delta, 0, 255).astype(np.uint8)
    assert np.array_equal(pixels.mark_pixels(grey, tile, ones), want_grey)


def test_without_the_compiled_kernels_the_chain_runs(monkeypatch):
    picture, tile, mask = mark_case(1)
    want = reference.mark_pixels(picture, tile, mask)
    monkeypatch.setattr(pixels, "_pixels", None)
    np.testing.assert_array_equal(pixels.mark_pixels(picture, tile, mask), want)


def test_a_photo_is_marked_as_the_tiled_pattern_marks_it():
    """``FrameMarker.mark`` on the astronaut, RGB and RGBA: the old chain's
    pixels (the whole pattern tiled), and the mark is there."""
    from skimage import data

    rgb = np.ascontiguousarray(data.astronaut())
    marker = Watermarker().frame_marker(rgb.shape[1], rgb.shape[0], Payload(run_id=7))
    pattern = pat.tiled(marker._tile, rgb.shape[0], rgb.shape[1])
    mask = pat.perceptual_mask(pat.gray(rgb))
    for picture in (rgb, np.dstack([rgb, np.full(rgb.shape[:2], 200, np.uint8)])):
        got = marker.mark(picture)
        np.testing.assert_array_equal(got, reference.mark_pixels(picture, pattern, mask))
        assert np.count_nonzero(got[..., :3] != picture[..., :3]) > rgb.size // 4


@pytest.mark.parametrize(
    ("picture", "tile", "mask"),
    [
        (np.zeros((4, 4, 3), np.float32), np.zeros((2, 2), np.float32), np.zeros((4, 4), np.float32)),
        (np.zeros((4, 4, 2), np.uint8), np.zeros((2, 2), np.float32), np.zeros((4, 4), np.float32)),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 3), np.float32), np.zeros((4, 4), np.float32)),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 2), np.float32), np.zeros((4, 5), np.float32)),
    ],
)
def test_bad_arrays_are_refused(picture, tile, mask):
    with pytest.raises(ValueError):
        pixels.mark_pixels(picture, tile, mask)
