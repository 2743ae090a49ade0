"""Masks, colour transfer, blending and paste-back: pure functions on
synthetic images, plus the mouth mask on a real open-mouth face (slow)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.compositing import colour, masks, regions, skin
from faceweave.compositing.blend import laplacian_blend, match_detail, paste_back, per_channel, warp_frame
from faceweave.geometry import topology as topo
from faceweave.geometry.align import crop_matrix
from faceweave.types import BBox


def detail_band(image: np.ndarray, sigma: float = 0.8) -> np.ndarray:
    """``(H, W)`` mean over channels of an image minus its Gaussian low-pass
    (the band :func:`match_detail` measures)."""
    x = image.astype(np.float32)
    return (x - cv2.GaussianBlur(x, (0, 0), sigma)).mean(axis=2)


# ----------------------------------------------------------------------- masks


def test_combine_is_the_pixelwise_minimum_and_skips_none():
    rng = np.random.default_rng(0)
    a, b, c = (rng.uniform(0, 1, (8, 9)).astype(np.float32) for _ in range(3))

    out = masks.combine(a, None, b, c)

    assert out.dtype == np.float32 and out.shape == (8, 9)
    np.testing.assert_array_equal(out, np.minimum(np.minimum(a, b), c))
    np.testing.assert_array_equal(masks.combine(a), a)


@pytest.mark.parametrize("given", [(), (None,), (None, None)])
def test_combine_rejects_no_masks(given):
    with pytest.raises(ValueError, match="at least one mask"):
        masks.combine(*given)


@pytest.mark.parametrize(
    "size, inset, blur",
    [
        ((64, 64), 0.02, 0.25),
        ((80, 50), 0.0, 0.04),
        ((33, 47), 0.1, 0.3),
        ((40, 40), 0.05, 0.0),  # hard edge
    ],
)
def test_box_mask_is_zero_at_the_border_one_inside_and_symmetric(size, inset, blur):
    w, h = size
    m = masks.box_mask(size, inset=inset, blur=blur)

    assert m.shape == (h, w) and m.dtype == np.float32
    assert m.min() >= 0.0 and m.max() <= 1.0
    assert m[h // 2, w // 2] == pytest.approx(1.0)
    np.testing.assert_allclose(m, m[::-1, :], atol=1e-6)
    np.testing.assert_allclose(m, m[:, ::-1], atol=1e-6)
    assert m[0, :].max() <= 0.5 and m[:, 0].max() <= 0.5  # a border pixel's centre is half a pixel in
    if inset > 0:
        assert m[0, :].max() == 0.0 and m[:, 0].max() == 0.0
    assert np.all(np.diff(m[h // 2, : w // 2]) >= 0)  # rising towards the centre


def test_polygon_mask_fills_the_polygon():
    square = np.array([[10, 10], [30, 10], [30, 20], [10, 20]], np.float32)

    m = masks.polygon_mask((40, 30), square)

    assert m.shape == (30, 40) and m.dtype == np.float32
    assert set(np.unique(m).tolist()) <= {0.0, 1.0}
    assert m[15, 20] == 1.0 and m[5, 5] == 0.0 and m[25, 35] == 0.0
    assert abs(m.sum() - 20 * 10) <= 2 * (20 + 10) + 4  # area, up to a pixel along the edge


@pytest.mark.parametrize("stats_dtype", [np.float32, np.float64])
def test_skin_distance_equals_the_whole_array_formula(stats_dtype):
    rng = np.random.default_rng(5)
    lab = np.dstack([rng.uniform(0, 100, (23, 31)), rng.uniform(-40, 40, (23, 31)), rng.uniform(-40, 40, (23, 31))])
    lab = lab.astype(np.float32)
    centre, spread = np.array([61.0, 12.5, 14.0], stats_dtype), np.array([9.0, 3.5, 4.25], stats_dtype)

    d = np.abs(lab - centre) / spread
    expected = np.maximum(d[..., 0] / 1.6, np.hypot(d[..., 1], d[..., 2])).astype(np.float32)

    assert np.array_equal(skin.skin_distance(lab, centre, spread), expected)


def test_skin_likelihood_is_one_at_the_skin_colour_and_zero_far_away():
    centre = np.array([60.0, 15.0, 20.0], np.float32)
    spread = np.array([8.0, 3.0, 3.0], np.float32)
    lab = np.array(
        [
            [centre, centre + [5.0, 1.0, -1.0], centre + [0.0, 40.0, 0.0], [20.0, -30.0, -40.0]],
        ],
        np.float32,
    )

    lik = skin.skin_likelihood(lab, centre, spread)

    assert lik.shape == (1, 4) and lik.dtype == np.float32
    assert lik[0, 0] == pytest.approx(1.0)
    assert lik[0, 1] == pytest.approx(1.0)  # within the tolerance
    assert lik[0, 2] == 0.0 and lik[0, 3] == 0.0


def test_skin_likelihood_is_looser_on_lightness_than_on_chroma():
    centre = np.array([60.0, 15.0, 20.0], np.float32)
    spread = np.array([4.0, 4.0, 4.0], np.float32)
    shift = 4.0 * 4.0 * 1.2  # 1.2 tolerances of spread
    lab = np.array([[centre + [shift, 0, 0], centre + [0, shift, 0]]], np.float32)
    light, chroma = skin.skin_likelihood(lab, centre, spread, tolerance=4.0)[0]
    assert light > chroma


@pytest.mark.parametrize(
    "dark_columns, expect_found",
    [
        ((30, 32), True),  # 2 px line, narrower than the 9 px width
        ((30, 34), True),  # 4 px line
        ((10, 40), False),  # 30 px dark area
    ],
)
def test_thin_dark_finds_thin_lines_not_wide_areas(dark_columns, expect_found):
    lightness = np.full((64, 64), 70.0, np.float32)
    a, b = dark_columns
    lightness[:, a:b] = 30.0

    found = masks.thin_dark(lightness, width=9)

    assert found.shape == (64, 64) and found.dtype == np.float32
    inside = found[8:-8, a:b]
    if expect_found:
        assert inside.min() == pytest.approx(1.0)
    else:
        assert found.max() == 0.0
    assert found[:, : max(a - 6, 1)].max() == 0.0  # bright skin away from it is left alone


def test_thin_dark_ignores_faint_lines():
    lightness = np.full((32, 32), 70.0, np.float32)
    lightness[:, 15:17] = 65.0  # 5 units darker, below contrast / 2
    assert masks.thin_dark(lightness, width=7, contrast=14.0).max() == 0.0


def test_feather_erodes_then_blurs():
    m = np.zeros((40, 40), np.float32)
    m[10:30, 10:30] = 1.0
    out = masks.feather(m, erode=3, blur=0)
    assert out[10:13, 20].max() == 0.0 and out[13:27, 13:27].min() == 1.0
    soft = masks.feather(m, erode=0, blur=2)
    assert 0.0 < soft[10, 20] < 1.0 and soft[20, 20] == pytest.approx(1.0, abs=1e-3)


@pytest.fixture(scope="module")
def open_mouth(faces_dir):
    """``(pixels, mesh)`` of a real face smiling with an open mouth."""
    from faceweave.analysis import FaceAnalyser
    from faceweave.io import read_image

    image = read_image(faces_dir / "single" / "happy_man.png")
    with FaceAnalyser() as analyser:
        faces = analyser.analyse(image.pixels)
    assert len(faces) == 1
    return image.pixels, np.array(faces[0].mesh)


@pytest.mark.slow
@pytest.mark.parametrize("grow", [0.0, 4.0])
def test_mouth_mask_is_zero_inside_the_open_mouth(open_mouth, grow):
    pixels, mesh = open_mouth
    h, w = pixels.shape[:2]
    inner = masks.polygon_mask((w, h), mesh[topo.lips_inner()])
    core = cv2.erode(inner, np.ones((5, 5), np.uint8)) > 0.5  # well inside the opening
    assert core.sum() > 200  # the mouth is open

    m = regions.mouth_mask((w, h), mesh, grow=grow)

    assert m.shape == (h, w) and m.min() >= 0.0 and m.max() <= 1.0
    assert m[core].max() == pytest.approx(0.0, abs=1e-3)
    nose, brow = mesh[topo.NOSE_TIP, :2], mesh[topo.NOSE_BRIDGE_TOP, :2]
    for x, y in (nose, brow):
        assert m[int(round(y)), int(round(x))] == 1.0
    assert (m < 0.5).sum() >= core.sum()


# ----------------------------------------------------------------------- colour


def test_lab_round_trip_is_within_one_level():
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (200, 200, 3), dtype=np.uint8)
    rgb[0, :8] = [
        [0, 0, 0],
        [255, 255, 255],
        [255, 0, 0],
        [0, 255, 0],
        [0, 0, 255],
        [255, 255, 0],
        [0, 255, 255],
        [128, 128, 128],
    ]

    lab = colour.to_lab(rgb)
    back = colour.to_rgb(lab)

    assert lab.dtype == np.float32 and back.dtype == np.uint8
    assert lab[..., 0].min() >= 0.0 and lab[..., 0].max() <= 100.0 + 1e-3
    assert np.abs(back.astype(int) - rgb).max() <= 1


def lab_image(seed: int, mean, std, shape=(60, 70)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(0.0, 1.0, (*shape, 3)) * np.asarray(std) + np.asarray(mean)).astype(np.float32)


def test_apply_statistics_makes_masked_means_and_lightness_spread_equal_the_reference():
    lab = lab_image(2, [55.0, 10.0, 12.0], [6.0, 2.0, 3.0])
    ref = lab_image(3, [65.0, 18.0, 20.0], [8.0, 2.5, 2.0])
    src_mask = np.zeros(lab.shape[:2], np.float32)
    src_mask[10:50, 10:40] = 1.0
    ref_mask = np.zeros(ref.shape[:2], np.float32)
    ref_mask[5:30, 20:65] = 1.0
    lab[~(src_mask > 0)] = 0.0  # the outside must not count
    ref[~(ref_mask > 0)] = 100.0

    out = colour.apply_statistics(lab, colour.masked_stats(lab, src_mask), colour.masked_stats(ref, ref_mask))

    mu_o, sd_o = colour.masked_stats(out, src_mask)
    mu_s, sd_s = colour.masked_stats(lab, src_mask)
    mu_r, sd_r = colour.masked_stats(ref, ref_mask)
    np.testing.assert_allclose(mu_o[0], mu_r[0], atol=1e-3)
    np.testing.assert_allclose(sd_o[0], sd_r[0], rtol=1e-3)  # lightness spread matched
    # chroma is scaled about neutral grey by the ratio of the means, except
    # the pixels more than a spread beyond the mean (shifted instead)
    np.testing.assert_allclose(mu_o[1:], mu_r[1:], rtol=0.02)
    scaled = sd_s[1:] * mu_r[1:] / mu_s[1:]
    assert np.all(sd_o[1:] <= scaled * 1.001) and np.all(sd_o[1:] > scaled * 0.9)


@pytest.mark.parametrize(
    "own_std, ref_std, max_gain, expected_gain",
    [
        (2.0, 3.0, 1.6, 1.5),  # within the limit
        (1.0, 10.0, 1.6, 1.6),  # clipped up
        (10.0, 1.0, 1.6, 1 / 1.6),  # clipped down
        (1.0, 10.0, 4.0, 4.0),
        (0.0, 1.0, 2.0, 2.0),  # a flat channel does not divide by zero
    ],
)
def test_apply_statistics_limits_the_lightness_gain(own_std, ref_std, max_gain, expected_gain):
    own = (np.array([50.0, 10.0, 10.0], np.float32), np.full(3, own_std, np.float32))
    ref = (np.array([60.0, 10.0, 10.0], np.float32), np.full(3, ref_std, np.float32))
    lab = np.array([[[50.0, 10.0, 10.0], [51.0, 11.0, 9.0]]], np.float32)

    out = colour.apply_statistics(lab, own, ref, max_gain=max_gain)

    np.testing.assert_allclose(out[0, 0], ref[0], atol=1e-5)  # the mean goes to the reference mean
    assert out[0, 1, 0] - out[0, 0, 0] == pytest.approx(expected_gain, rel=1e-5)
    np.testing.assert_allclose(out[0, 1, 1:], [11.0, 9.0], atol=1e-5)  # equal chroma means: chroma unchanged


@pytest.mark.parametrize(
    "own_mean, ref_mean, expected_scale",
    [
        (10.0, 15.0, 1.5),  # scaled about neutral grey
        (10.0, 100.0, 2.5),  # limited
        (10.0, -5.0, 1.0),  # opposite sides of grey: plain shift
        (0.5, 8.0, 1.0),  # no tint to scale: plain shift
    ],
)
def test_apply_statistics_scales_chroma_about_neutral(own_mean, ref_mean, expected_scale):
    own = (np.array([50.0, own_mean, own_mean], np.float32), np.ones(3, np.float32))
    ref = (np.array([50.0, ref_mean, ref_mean], np.float32), np.ones(3, np.float32))
    lab = np.array([[[50.0, own_mean, own_mean], [50.0, 0.0, 0.0]]], np.float32)

    out = colour.apply_statistics(lab, own, ref)

    np.testing.assert_allclose(out[0, 0, 1:], [ref_mean, ref_mean], atol=1e-4)  # the mean goes to the reference
    shift = ref_mean - expected_scale * own_mean
    np.testing.assert_allclose(out[0, 1, 1:], [shift, shift], atol=1e-4)  # grey moves only by what is left


def test_neutral_grey_stays_neutral_when_the_skin_tint_is_scaled():
    own = (np.array([50.0, 20.0, 20.0], np.float32), np.ones(3, np.float32))
    ref = (np.array([60.0, 8.0, 10.0], np.float32), np.ones(3, np.float32))
    grey = np.array([[[80.0, 0.0, 0.0]]], np.float32)

    out = colour.apply_statistics(grey, own, ref)

    np.testing.assert_allclose(out[0, 0, 1:], [0.0, 0.0], atol=1e-4)


def test_a_tint_stronger_than_the_skin_is_shifted_not_scaled():
    """Light-brown brows or pink lips on a warmer target: below the skin's
    own tint the chroma is scaled about grey, beyond it shifted, so features
    do not turn orange or red."""
    own = (np.array([50.0, 10.0, 10.0], np.float32), np.ones(3, np.float32))  # skin tint 10 +- 1
    ref = (np.array([50.0, 15.0, 15.0], np.float32), np.ones(3, np.float32))
    lab = np.array([[[50.0, 5.0, 5.0], [50.0, 11.0, 11.0], [50.0, 22.0, 22.0]]], np.float32)

    out = colour.apply_statistics(lab, own, ref)

    np.testing.assert_allclose(out[0, 0, 1:], [7.5, 7.5], atol=1e-4)  # scaled x1.5 below the skin
    np.testing.assert_allclose(out[0, 1, 1:], [16.5, 16.5], atol=1e-4)  # the skin's range: scaled
    # beyond the skin's range (10 + 1 spread = 11, which goes to 16.5): +11 more, not x1.5 = 33
    np.testing.assert_allclose(out[0, 2, 1:], [27.5, 27.5], atol=1e-4)


@pytest.mark.parametrize("sigma", [3.0, 20.0])  # direct, and at reduced resolution
def test_masked_blur_ignores_pixels_outside_the_mask(sigma):
    rng = np.random.default_rng(4)
    mask = np.zeros((120, 100), np.float32)
    mask[20:90, 15:70] = 1.0
    inside = np.full((120, 100, 3), [40.0, 5.0, -3.0], np.float32)
    a = inside.copy()
    b = inside.copy()
    a[mask == 0] = rng.uniform(-100, 100, (int((mask == 0).sum()), 3))
    b[mask == 0] = 0.0

    blur_a = colour.masked_blur(a, mask, sigma)
    blur_b = colour.masked_blur(b, mask, sigma)

    sel = mask > 0
    np.testing.assert_allclose(blur_a[sel], blur_b[sel], atol=1e-3)
    np.testing.assert_allclose(blur_a[sel], inside[sel], atol=1e-3)


def test_transfer_shading_with_amount_zero_is_the_identity():
    lab = lab_image(5, [55.0, 10.0, 12.0], [6.0, 2.0, 3.0])
    ref = lab_image(6, [65.0, 18.0, 20.0], [8.0, 2.5, 2.0])
    mask = np.ones(lab.shape[:2], np.float32)
    np.testing.assert_array_equal(colour.transfer_shading(lab, mask, ref, mask, sigma=8.0, amount=0.0), lab)


def test_transfer_shading_gives_a_flat_image_the_references_low_pass():
    h, w = 96, 128
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    ref = np.dstack([40.0 + 0.3 * xx + 0.1 * yy, 10.0 + 0.05 * yy, -5.0 + 0.02 * xx]).astype(np.float32)
    ref += np.random.default_rng(7).normal(0.0, 3.0, ref.shape).astype(np.float32)  # fine detail, blurred away
    flat = np.full_like(ref, [60.0, 12.0, 14.0])
    mask = np.ones((h, w), np.float32)
    sigma = 6.0

    out = colour.transfer_shading(flat, mask, ref, mask, sigma=sigma, amount=1.0)

    np.testing.assert_allclose(out, colour.masked_blur(ref, mask, sigma), atol=1e-3)
    low_pass = cv2.GaussianBlur(ref, (0, 0), sigma)
    core = (slice(20, -20), slice(20, -20))
    assert np.abs(out[core] - low_pass[core]).max() < 0.5
    assert (out[core] - ref[core]).std() > 2.0  # the fine detail was not taken


# ------------------------------------------------------------------------ blend


@pytest.mark.parametrize("levels", [1, 3, 5])
@pytest.mark.parametrize("value, expect", [(1.0, "front"), (0.0, "back")])
def test_laplacian_blend_with_a_constant_mask_gives_one_image(levels, value, expect):
    rng = np.random.default_rng(8)
    front = rng.uniform(0, 255, (96, 80, 3)).astype(np.float32)
    back = rng.uniform(0, 255, (96, 80, 3)).astype(np.float32)
    mask = np.full((96, 80), value, np.float32)

    out = laplacian_blend(front, back, mask, levels=levels)

    assert out.shape == front.shape
    np.testing.assert_allclose(out, front if expect == "front" else back, atol=1e-2)


def test_laplacian_blend_switches_sides_across_a_step_mask():
    front = np.full((64, 128, 3), 200.0, np.float32)
    back = np.full((64, 128, 3), 20.0, np.float32)
    mask = np.zeros((64, 128), np.float32)
    mask[:, :64] = 1.0

    out = laplacian_blend(front, back, mask, levels=4)

    assert np.abs(out[:, :16] - 200.0).max() < 1.0
    assert np.abs(out[:, -16:] - 20.0).max() < 1.0
    assert np.all(np.diff(out[32, :, 0]) <= 1e-3)  # a smooth, monotone transition


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_per_channel_gives_what_broadcasting_the_mask_gives(channels, dtype):
    rng = np.random.default_rng(3)
    image = rng.uniform(-50, 255, (37, 29, channels)).astype(dtype)
    mask = rng.uniform(0, 1, (41, 29)).astype(dtype)[2:39]  # a view, not contiguous in memory order

    spread = per_channel(mask, channels)

    assert spread.shape == (37, 29, channels) and spread.dtype == dtype
    assert np.array_equal(image * spread, image * mask[..., None])
    assert np.array_equal(image + spread, image + mask[..., None])


def test_per_channel_spreads_a_boolean_mask():
    mask = np.array([[True, False], [False, True]])

    spread = per_channel(mask, 3)

    assert spread.shape == (2, 2, 3) and spread.dtype == np.bool_
    assert np.array_equal(spread, np.broadcast_to(mask[..., None], (2, 2, 3)))


def _laplacian_blend_broadcast(front, back, mask, levels):
    """The multi-band blend as it was written before :func:`per_channel`."""
    back = back.astype(np.float32)
    gm, gd = [mask.astype(np.float32)], [front.astype(np.float32) - back]
    for _ in range(levels - 1):
        gm.append(cv2.pyrDown(gm[-1]))
        gd.append(cv2.pyrDown(gd[-1]))
    out = gd[-1] * gm[-1][..., None]
    for i in range(levels - 2, -1, -1):
        size = (gd[i].shape[1], gd[i].shape[0])
        band = gd[i] - cv2.pyrUp(gd[i + 1], dstsize=size)
        out = cv2.pyrUp(out, dstsize=size) + band * gm[i][..., None]
    return out + back


@pytest.mark.parametrize("levels", [1, 3, 5])
def test_laplacian_blend_equals_the_blend_with_broadcast_masks(levels):
    rng = np.random.default_rng(11)
    front = rng.uniform(0, 255, (150, 131, 3)).astype(np.float32)
    back = rng.uniform(0, 255, (150, 131, 3)).astype(np.float32)
    mask = cv2.GaussianBlur((rng.uniform(0, 1, (150, 131)) > 0.5).astype(np.float32), (0, 0), 6.0)

    assert np.array_equal(
        laplacian_blend(front, back, mask, levels=levels), _laplacian_blend_broadcast(front, back, mask, levels)
    )


@pytest.mark.parametrize("angle", [0.0, 25.0])
def test_paste_back_changes_nothing_outside_the_crops_footprint(angle):
    rng = np.random.default_rng(9)
    frame = rng.integers(0, 256, (200, 240, 3), dtype=np.uint8)
    frame.setflags(write=False)
    m = cv2.getRotationMatrix2D((120.0, 100.0), angle, 1.25)  # frame -> crop
    m[:, 2] += (64.0 - 120.0, 64.0 - 100.0)
    side = 128
    crop = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
    mask = np.ones((side, side), np.float32)

    out = paste_back(frame, crop, mask, m)

    footprint = np.zeros(frame.shape[:2], np.uint8)
    inv = cv2.invertAffineTransform(m)
    corners = np.array([[0, 0], [side, 0], [side, side], [0, side]], np.float64) @ inv[:, :2].T + inv[:, 2]
    cv2.fillConvexPoly(footprint, np.round(corners).astype(np.int32), 1)
    outside = cv2.dilate(footprint, np.ones((5, 5), np.uint8)) == 0
    assert outside.sum() > 10_000
    np.testing.assert_array_equal(out[outside], frame[outside])
    assert (out[footprint > 0] != frame[footprint > 0]).any()
    assert out is not frame and out.dtype == np.uint8


@pytest.mark.parametrize("scale, angle", [(1.0, 0.0), (0.5, 0.0), (0.5, 90.0)])
def test_warp_frame_moves_the_frame_by_the_crops_offsets_at_the_frames_resolution(scale, angle):
    """Offsets of (+2, 0) crop pixels over a crop at ``scale`` of the frame,
    turned by ``angle``: the frame under that part of the crop shows the
    frame 2 / scale pixels further along the crop's x axis."""
    rng = np.random.default_rng(3)
    frame = np.ascontiguousarray(
        np.repeat(np.arange(240, dtype=np.uint8)[None, :], 200, axis=0)[..., None].repeat(3, 2)
    )
    frame[:, :, 1] = rng.integers(0, 256, (200, 240), dtype=np.uint8)  # texture that must stay exact elsewhere
    m = cv2.getRotationMatrix2D((120.0, 100.0), angle, scale)  # frame -> crop
    m[:, 2] += (32.0 - 120.0, 32.0 - 100.0)
    offsets = np.zeros((64, 64, 2), np.float32)
    offsets[24:40, 24:40, 0] = 2.0
    out = frame.copy()

    warp_frame(frame, offsets, m, out=out)

    step = 2.0 / scale
    direction = np.linalg.inv(m[:, :2]) @ np.array([1.0, 0.0]) * scale  # the crop's x axis in the frame
    assert int(out[100, 120, 0]) == pytest.approx(120 + step * direction[0], abs=1.0)
    moved = np.abs(out.astype(int) - frame.astype(int)).max(axis=2) > 0
    ys, xs = np.nonzero(moved)
    reach = 16 / scale
    assert np.abs(xs - 120).max() <= reach and np.abs(ys - 100).max() <= reach  # only under the moved part
    assert moved.sum() > 0


def test_warp_frame_without_offsets_changes_nothing():
    frame = np.random.default_rng(4).integers(0, 256, (80, 90, 3), dtype=np.uint8)
    out = frame.copy()
    warp_frame(frame, np.zeros((32, 32, 2), np.float32), np.array([[0.5, 0, 0], [0, 0.5, 0]]), out=out)
    np.testing.assert_array_equal(out, frame)


def test_paste_back_with_a_zero_mask_changes_nothing():
    rng = np.random.default_rng(10)
    frame = rng.integers(0, 256, (100, 100, 3), dtype=np.uint8)
    m, side = crop_matrix(BBox(30, 30, 70, 70), face_size=64, margin=1.8)
    crop = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
    out = paste_back(frame, crop, np.zeros((side, side), np.float32), m)
    np.testing.assert_array_equal(out, frame)


def test_paste_back_of_a_crop_outside_the_frame_changes_nothing():
    frame = np.full((50, 50, 3), 7, np.uint8)
    m, side = crop_matrix(BBox(500, 500, 540, 540), face_size=64, margin=1.8)
    out = paste_back(frame, np.zeros((side, side, 3), np.uint8), np.ones((side, side), np.float32), m)
    np.testing.assert_array_equal(out, frame)


# A 160 px frame, the crop of a face box in its middle, and a soft mask that
# covers the inner part of the crop.
DETAIL_SIZE = 160
DETAIL_MATRIX, DETAIL_SIDE = crop_matrix(BBox(40, 40, 120, 120), face_size=80, margin=1.8)


def detail_mask() -> np.ndarray:
    mask = np.zeros((DETAIL_SIDE, DETAIL_SIDE), np.float32)
    mask[30:-30, 30:-30] = 1.0
    return cv2.GaussianBlur(mask, (0, 0), 3)


def detail_frames(noise: float, seed: int) -> np.ndarray:
    yy, xx = np.mgrid[0:DETAIL_SIZE, 0:DETAIL_SIZE].astype(np.float32)
    smooth = np.dstack([100 + 0.3 * xx, 120 + 0.2 * yy, 90 + 0 * xx])
    grain = np.random.default_rng(seed).normal(0.0, noise, (DETAIL_SIZE, DETAIL_SIZE, 1)) if noise else 0.0
    return np.clip(smooth + grain + 0.5, 0, 255).astype(np.uint8)


def mask_in_frame() -> np.ndarray:
    inv = cv2.invertAffineTransform(DETAIL_MATRIX)
    return cv2.warpAffine(detail_mask(), inv, (DETAIL_SIZE, DETAIL_SIZE)) > 0.5


def band_energy(image: np.ndarray) -> float:
    return float(np.mean(detail_band(image)[mask_in_frame()] ** 2))


@pytest.mark.parametrize("noise", [0.0, 8.0])
def test_match_detail_leaves_the_frame_when_original_equals_frame(noise):
    frame = detail_frames(noise, seed=1)
    out = match_detail(frame, frame, detail_mask(), DETAIL_MATRIX)
    np.testing.assert_array_equal(out, frame)


def test_match_detail_adds_the_originals_grain_to_a_smooth_frame():
    original, frame = detail_frames(8.0, seed=2), detail_frames(0.0, seed=0)
    assert band_energy(frame) < 0.05 * band_energy(original)

    out = match_detail(original, frame, detail_mask(), DETAIL_MATRIX)

    assert band_energy(out) == pytest.approx(band_energy(original), rel=0.15)
    outside = ~cv2.dilate(mask_in_frame().astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool)
    inv = cv2.invertAffineTransform(DETAIL_MATRIX)
    untouched = cv2.warpAffine(detail_mask(), inv, (DETAIL_SIZE, DETAIL_SIZE)) <= 0.0
    np.testing.assert_array_equal(out[outside & untouched], frame[outside & untouched])


def test_match_detail_attenuates_a_noisier_frame_without_inverting_its_grain():
    original, frame = detail_frames(4.0, seed=3), detail_frames(8.0, seed=4)

    out = match_detail(original, frame, detail_mask(), DETAIL_MATRIX)

    assert band_energy(out) == pytest.approx(band_energy(original), rel=0.2)
    sel = mask_in_frame()
    assert np.corrcoef(detail_band(frame)[sel], detail_band(out)[sel])[0, 1] > 0.5


def test_apply_statistics_takes_the_colour_out_on_a_black_and_white_reference():
    own = (np.array([60.0, 15.0, 18.0], np.float32), np.array([8.0, 4.0, 5.0], np.float32))
    ref = (np.array([55.0, 0.2, -0.1], np.float32), np.array([9.0, 0.3, 0.4], np.float32))
    red_lips = np.array([[[50.0, 45.0, 25.0]]], np.float32)

    out = colour.apply_statistics(red_lips, own, ref)

    assert np.abs(out[0, 0, 1:]).max() < 3.0  # nearly grey, as the photo


def _texture(seed: int, size: int = 96) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = cv2.resize(rng.uniform(0, 255, (24, 24, 3)).astype(np.float32), (size, size), interpolation=cv2.INTER_CUBIC)
    return np.clip(base + rng.normal(0, 20, base.shape), 0, 255).astype(np.float32)


def test_match_blur_softens_a_sharp_face_to_a_defocused_photo():
    from faceweave.compositing.blend import _luma, _sharpness, match_blur

    sharp = _texture(1)
    photo = cv2.GaussianBlur(_texture(2), (0, 0), 2.5)
    mask = np.ones(sharp.shape[:2], np.float32)
    sel = mask > 0.5
    out = match_blur(photo, sharp, mask, sel)
    assert _sharpness(_luma(out), sel) < 0.5 * _sharpness(_luma(sharp), sel)
    assert _sharpness(_luma(out), sel) < 1.6 * _sharpness(_luma(photo), sel)


def test_match_blur_leaves_a_face_alone_when_the_photo_is_as_sharp():
    from faceweave.compositing.blend import match_blur

    new, photo = _texture(3), _texture(4)
    mask = np.ones(new.shape[:2], np.float32)
    assert np.array_equal(match_blur(photo, new, mask, mask > 0.5), new)


def test_match_blur_sharpens_a_soft_face_in_a_sharp_photo_only_under_the_mask_and_only_when_asked():
    from faceweave.compositing.blend import _luma, _sharpness, match_blur

    soft = cv2.GaussianBlur(_texture(5), (0, 0), 2.0)
    photo = _texture(6)
    mask = np.zeros(soft.shape[:2], np.float32)
    mask[:, :60] = 1.0
    sel = mask > 0.5
    out = match_blur(photo, soft, mask, sel, sharpen=True)
    assert _sharpness(_luma(out), sel) > 1.25 * _sharpness(_luma(soft), sel)
    np.testing.assert_array_equal(out[:, 60:], soft[:, 60:])  # nothing outside the mask
    # video frames are not sharpened (the amount would change from frame to frame)
    assert np.array_equal(match_blur(photo, soft, mask, sel), soft)


def test_edge_connected_keeps_the_parts_that_touch_the_edge():
    covered = np.zeros((20, 20), np.uint8)
    covered[5:8, 2:10] = 1  # touches the edge column through its left end
    covered[12:14, 12:14] = 1  # an island
    covered[15, 15] = 1  # a diagonal neighbour of the edge row below
    edge = np.zeros((20, 20), np.uint8)
    edge[:, :2] = 1
    edge[16:, :] = 1
    out = masks.edge_connected(covered, edge)
    assert out.dtype == np.uint8
    assert out[5:8, 2:10].all() and out[15, 15] == 1
    assert not out[12:14, 12:14].any()
    assert not out[edge > 0].any()  # the edge itself is not in the result


@pytest.mark.parametrize(("orig_noise", "frame_noise"), [(8.0, 0.0), (0.0, 8.0), (4.0, 4.0)])
def test_planned_detail_measured_here_is_match_detail_and_reused_applies_the_same_step(orig_noise, frame_noise):
    """A video face's detail plan (blend.DetailPlan): measured on a frame it
    gives exactly what match_detail gives; reused on that frame it gives it
    again without measuring (within a level); a plan of no blur and no grain step changes
    nothing."""
    from faceweave.compositing.blend import DetailPlan, match_detail_planned

    original, frame = detail_frames(orig_noise, seed=2), detail_frames(frame_noise, seed=0)
    whole = detail_mask()
    expected = match_detail(original, frame, detail_mask(), DETAIL_MATRIX, blur_mask=whole)
    measured = frame.copy()
    plan = match_detail_planned(original, measured, detail_mask(), DETAIL_MATRIX, blur_mask=whole, plan=None)
    assert plan is not None and np.array_equal(measured, expected)
    reused = frame.copy()
    again = match_detail_planned(original, reused, detail_mask(), DETAIL_MATRIX, blur_mask=whole, plan=plan)
    # a plan that softens nothing runs the compiled grain step, whose
    # low-pass sums in its own order: within a level, nearly always the same
    assert again is plan
    diff = np.abs(reused.astype(int) - expected)
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-3
    still = frame.copy()
    nothing = DetailPlan(blur=0.0, grain=0.0, add_grain=False)
    match_detail_planned(original, still, detail_mask(), DETAIL_MATRIX, blur_mask=whole, plan=nothing)
    assert np.array_equal(still, frame)


@pytest.mark.parametrize("seed", range(8))
def test_the_detail_mask_warped_alone_is_the_one_warped_beside_the_whole_face_s(seed):
    """A reused detail plan that softens nothing warps the detail mask alone
    (the whole face's mask is for the blur): the same window and values as
    when both are warped together."""
    from faceweave.compositing.blend import _detail_window

    rng = np.random.default_rng(seed)
    detail = (detail_mask() * rng.uniform(0.3, 1.0, (DETAIL_SIDE, DETAIL_SIDE))).astype(np.float32)
    whole = cv2.GaussianBlur(detail_mask(), (0, 0), 2.0)
    scale, angle = rng.uniform(0.4, 2.5), rng.uniform(-0.5, 0.5)
    turn = scale * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    matrix = np.hstack([turn, rng.uniform(-60.0, 20.0, (2, 1))])
    both = _detail_window((DETAIL_SIZE, DETAIL_SIZE, 3), detail, whole, matrix)
    alone = _detail_window((DETAIL_SIZE, DETAIL_SIZE, 3), detail, None, matrix)
    assert (both is None) == (alone is None)
    if both is not None and alone is not None:
        assert both[0] == alone[0] and np.array_equal(both[1], alone[1]) and alone[2] is None


def test_a_box_mask_is_made_once_per_size_and_read_only():
    first = masks.box_mask((120, 90), inset=0.02, blur=0.25)
    assert masks.box_mask((120, 90), inset=0.02, blur=0.25) is first
    assert not first.flags.writeable
    with pytest.raises(ValueError):
        first[0, 0] = 1.0
    other = masks.box_mask((120, 90), inset=0.0, blur=0.04)
    assert other is not first and other.shape == (90, 120)
    np.testing.assert_array_equal(first, masks._box_mask.__wrapped__(120, 90, 0.02, 0.25))


def test_the_paste_mask_grows_the_blend_mask_as_a_float_dilation_would():
    from faceweave.compositing.composite import paste_mask

    rng = np.random.default_rng(4)
    mask_h = cv2.GaussianBlur((rng.uniform(0, 1, (80, 80)) > 0.97).astype(np.float32), (0, 0), 3.0)
    face_size = 60.0
    got = paste_mask(mask_h, face_size, boxed=False, changed=None, hands=None, full=(160, 160))
    grow = int(round(0.05 * face_size)) * 2 + 1
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (grow, grow))
    touched = cv2.dilate((mask_h > 0.002).astype(np.float32), kernel)
    from faceweave.compositing.resample import upsample

    want = np.clip(upsample(masks.feather(touched, erode=0, blur=0.015 * face_size), (160, 160)), 0.0, 1.0)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("add_grain", [True, False])
def test_a_reused_detail_plan_runs_the_compiled_grain_step_within_a_level_of_the_numpy_steps(monkeypatch, add_grain):
    """match_detail_planned with a plan that softens nothing goes through
    kernels.detail_grain; with that path turned off, the NumPy and OpenCV
    steps give the same frame within a level."""
    from faceweave.compositing import blend
    from faceweave.compositing.blend import DetailPlan, match_detail_planned

    original, frame = detail_frames(6.0, seed=2), detail_frames(2.0, seed=0)
    plan = DetailPlan(blur=0.0, grain=0.7, add_grain=add_grain)
    fused = frame.copy()
    calls = []
    real = blend._fused_grain
    monkeypatch.setattr(blend, "_fused_grain", lambda *a: calls.append(1) or real(*a))
    assert (
        match_detail_planned(original, fused, detail_mask(), DETAIL_MATRIX, blur_mask=detail_mask(), plan=plan) is plan
    )
    assert calls and not np.array_equal(fused, frame)
    monkeypatch.setattr(blend, "_fused_grain", lambda *a: False)
    steps = frame.copy()
    assert (
        match_detail_planned(original, steps, detail_mask(), DETAIL_MATRIX, blur_mask=detail_mask(), plan=plan) is plan
    )
    diff = np.abs(fused.astype(int) - steps)
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-3


def _edge_connected_by_joining(covered: np.ndarray, edge: np.ndarray) -> np.ndarray:
    """masks.edge_connected as it was first written: the parts and the edge
    labelled together, the labels that hold an edge pixel kept."""
    joined = np.maximum(covered, edge).astype(np.uint8)
    _, labels = cv2.connectedComponents(joined, connectivity=8)
    touching = np.unique(labels[edge > 0])
    return (np.isin(labels, touching[touching > 0]) & (edge == 0)).astype(np.uint8)


@pytest.mark.parametrize("seed", range(40))
def test_edge_connected_by_one_labelling_is_the_joined_labelling(seed):
    """One labelling of the parts and a dilation of the edge find the parts
    that the edge and the parts labelled together find (also where the
    covered mask reaches into the edge, or the edge is in pieces)."""
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(8, 90, 2))
    noise = cv2.GaussianBlur(rng.random((h, w)).astype(np.float32), (0, 0), float(rng.uniform(0.5, 3.0)))
    covered = (noise > np.quantile(noise, rng.uniform(0.3, 0.8))).astype(np.uint8)
    edge = np.zeros((h, w), np.uint8)
    edge[: int(rng.integers(0, h // 3 + 1))] = 1
    edge[:, w - int(rng.integers(0, w // 3 + 1)) :] = 1
    edge[rng.random((h, w)) < 0.01] = 1  # specks: an edge in pieces
    np.testing.assert_array_equal(masks.edge_connected(covered, edge), _edge_connected_by_joining(covered, edge))


@pytest.mark.parametrize("seed", range(30))
def test_without_islands_clears_the_islands_the_joined_labelling_finds(seed):
    from tests.test_kernels import face_mesh

    from faceweave.compositing import occlusion
    from faceweave.compositing.regions import outside_face

    rng = np.random.default_rng(seed)
    size = int(rng.integers(60, 200))
    mesh = face_mesh(size, yaw=float(rng.uniform(-0.6, 0.6)), seed=seed)
    noise = cv2.GaussianBlur(rng.random((size, size)).astype(np.float32), (0, 0), float(rng.uniform(0.5, 4.0)))
    skin = np.clip((noise - noise.mean()) * rng.uniform(5, 40) + 0.5 + rng.uniform(-0.3, 0.3), 0, 1).astype(np.float32)
    face_size = size * 0.56
    # the islands as the joined labelling found them
    edge = outside_face((size, size), mesh)
    covered = ((skin < 0.5) & (edge == 0)).astype(np.uint8)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(covered, connectivity=8)
    small = stats[:, cv2.CC_STAT_AREA] < occlusion.ISLAND_MAX * face_size * face_size
    small[0] = False
    islands = small[labels] & (_edge_connected_by_joining(covered, edge) == 0)
    got = occlusion.without_islands(skin, mesh, face_size)
    if not islands.any():
        assert got is skin
        return
    k = max(3, int(round(0.02 * face_size)) * 2 + 1)
    grown = cv2.dilate(islands.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    np.testing.assert_array_equal(got, np.maximum(skin, grown.astype(np.float32)))
