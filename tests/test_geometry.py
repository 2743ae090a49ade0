"""Geometry: similarity fits, crop matrices, warps, mesh topology and shape
transfer.  Pure functions on synthetic data; the shape-transfer and key-point
checks also run on meshes of real faces (marked slow)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.evaluate.metrics import expression_ratios
from faceweave.geometry import topology as topo
from faceweave.geometry.align import apply_similarity, crop_matrix, procrustes, transform_points
from faceweave.geometry.shape import transfer_shape
from faceweave.geometry.warp import (
    ellipse_ring,
    falloff_at,
    grid_to_pixels,
    hull_falloff,
    piecewise_affine_maps,
    piecewise_remap,
    radial_falloff,
    rasterize_triangles,
    tps_displacement,
    triangle_affines,
    triangle_facing,
)
from faceweave.types import BBox


def rotation(dim: int, seed: int) -> np.ndarray:
    """A proper ``(dim, dim)`` rotation (det +1) drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    if dim == 2:
        a = rng.uniform(-np.pi, np.pi)
        return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    r, _ = cv2.Rodrigues(rng.uniform(-1.5, 1.5, 3))
    return r


# ------------------------------------------------------------------ procrustes


@pytest.mark.parametrize(
    "dim, scale, seed",
    [
        (2, 1.0, 0),
        (2, 0.3, 1),
        (2, 4.5, 2),
        (3, 1.0, 3),
        (3, 0.25, 4),
        (3, 7.0, 5),
    ],
)
def test_procrustes_recovers_a_known_similarity(dim, scale, seed):
    rng = np.random.default_rng(100 + seed)
    src = rng.normal(0.0, 10.0, (40, dim))
    r = rotation(dim, seed)
    t = rng.uniform(-50.0, 50.0, dim)
    dst = scale * src @ r.T + t

    s_fit, r_fit, t_fit = procrustes(src, dst)

    assert s_fit == pytest.approx(scale, rel=1e-9)
    np.testing.assert_allclose(r_fit, r, atol=1e-9)
    np.testing.assert_allclose(t_fit, t, atol=1e-7)
    assert np.linalg.det(r_fit) == pytest.approx(1.0)


@pytest.mark.parametrize("dim", [2, 3])
def test_procrustes_of_a_reflection_is_still_a_rotation(dim):
    rng = np.random.default_rng(dim)
    src = rng.normal(0.0, 1.0, (30, dim))
    flip = np.eye(dim)
    flip[0, 0] = -1.0
    dst = 2.0 * src @ (rotation(dim, 7) @ flip).T

    s, r, _ = procrustes(src, dst)

    assert np.linalg.det(r) == pytest.approx(1.0)
    np.testing.assert_allclose(r @ r.T, np.eye(dim), atol=1e-9)
    assert 0.0 < s < 2.0  # a reflection cannot be matched fully by a rotation


def test_procrustes_is_a_least_squares_fit_under_noise():
    rng = np.random.default_rng(11)
    src = rng.normal(0.0, 10.0, (200, 3))
    r = rotation(3, 12)
    dst = 1.5 * src @ r.T + np.array([3.0, -2.0, 9.0]) + rng.normal(0.0, 0.05, (200, 3))

    s, r_fit, t = procrustes(src, dst)

    assert s == pytest.approx(1.5, rel=1e-3)
    np.testing.assert_allclose(r_fit, r, atol=1e-3)
    residual = apply_similarity(src, s, r_fit, t) - dst
    assert np.sqrt((residual**2).sum(axis=1).mean()) < 0.1


def test_apply_similarity_matches_the_formula_and_inverts_procrustes():
    rng = np.random.default_rng(3)
    pts = rng.normal(0.0, 5.0, (25, 3))
    r, t = rotation(3, 9), np.array([1.0, 2.0, 3.0])

    out = apply_similarity(pts, 2.0, r, t)

    assert out.dtype == np.float32 and out.shape == pts.shape
    np.testing.assert_allclose(out, 2.0 * (r @ pts.T).T + t, atol=1e-4)
    np.testing.assert_allclose(apply_similarity(pts, *procrustes(pts, out)), out, atol=1e-3)


# ------------------------------------------------------------ crops and points


@pytest.mark.parametrize(
    "box, face_size, margin",
    [
        (BBox(100, 50, 300, 250), 256, 1.8),  # square
        (BBox(10, 20, 110, 220), 256, 1.8),  # tall: the height is the larger side
        (BBox(400, 300, 700, 420), 128, 2.0),  # wide
        (BBox(0, 0, 40, 30), 200, 1.5),  # small box, upscaled
        (BBox(1000.5, 2000.25, 2500.5, 3600.25), 96, 1.0),  # large box, downscaled
    ],
)
def test_crop_matrix_centres_the_box_at_the_asked_size(box, face_size, margin):
    m, side = crop_matrix(box, face_size=face_size, margin=margin)

    assert m.shape == (2, 3)
    assert side == round(face_size * margin)
    centre = m[:, :2] @ np.array(box.center) + m[:, 2]
    np.testing.assert_allclose(centre, [side / 2.0, side / 2.0], atol=1e-9)
    corners = np.array([[box.x1, box.y1], [box.x2, box.y2]]) @ m[:, :2].T + m[:, 2]
    width, height = corners[1] - corners[0]
    assert max(width, height) == pytest.approx(face_size)
    assert m[0, 1] == 0.0 and m[1, 0] == 0.0 and m[0, 0] == m[1, 1] > 0.0


def test_transform_points_round_trips_through_the_inverse_matrix():
    m, _ = crop_matrix(BBox(30, 40, 130, 160), face_size=256, margin=1.8)
    pts = np.array([[0.0, 0.0], [55.0, 66.0], [300.0, 10.0]])

    back = transform_points(transform_points(pts, m), cv2.invertAffineTransform(m))

    np.testing.assert_allclose(back, pts, atol=1e-3)


@pytest.mark.parametrize(
    "scale, angle, scale_z, expected_z_factor",
    [
        (2.0, 0.0, True, 2.0),
        (0.5, 30.0, True, 0.5),
        (3.0, -75.0, True, 3.0),
        (3.0, 40.0, False, 1.0),
    ],
)
def test_transform_points_moves_xy_and_scales_z(scale, angle, scale_z, expected_z_factor):
    m = cv2.getRotationMatrix2D((10.0, 20.0), angle, scale)
    pts = np.array([[0.0, 0.0, 5.0], [10.0, 20.0, -2.0], [33.0, -4.0, 0.5]])

    out = transform_points(pts, m, scale_z=scale_z)

    assert out.dtype == np.float32 and out.shape == (3, 3)
    np.testing.assert_allclose(out[:, :2], pts[:, :2] @ m[:, :2].T + m[:, 2], atol=1e-4)
    np.testing.assert_allclose(out[:, 2], pts[:, 2] * expected_z_factor, rtol=1e-5)


def test_transform_points_accepts_2d_points():
    m = np.array([[2.0, 0.0, 1.0], [0.0, 2.0, -1.0]])
    out = transform_points(np.array([[1.0, 1.0], [0.0, 3.0]]), m)
    np.testing.assert_allclose(out, [[3.0, 1.0], [1.0, 5.0]])


# ----------------------------------------------------------------------- warps

SIZE = (256, 240)  # (w, h)
ANCHORS = np.array([[100, 100], [160, 110], [128, 170], [190, 150], [70, 150]], np.float32)
SHIFTS = np.array([[5, -3], [-4, 2], [0, 6], [3, 3], [-2, -5]], np.float32)
RING = ellipse_ring((128.0, 125.0), (115.0, 108.0), 24)


def test_hull_falloff_is_one_inside_and_zero_beyond_its_reach():
    square = np.array([[40, 40], [80, 40], [80, 80], [40, 80]], np.float32)
    xs = np.arange(0, 160, 4, dtype=np.float32)
    ys = np.arange(0, 120, 4, dtype=np.float32)
    w = hull_falloff(square, xs, ys, reach=20.0)
    assert w.shape == (len(ys), len(xs)) and w.dtype == np.float32
    at = lambda x, y: float(w[int(y // 4), int(x // 4)])  # noqa: E731
    assert at(60, 60) == 1.0 and at(44, 76) == 1.0
    assert at(108, 60) == 0.0 and at(60, 8) == 0.0  # 28 and 32 pixels out
    assert 0.0 < at(92, 60) < 1.0  # 12 pixels out
    row = w[15, 20:]  # y = 60, from x = 80 outwards
    assert np.all(np.diff(row) <= 1e-6)
    with pytest.raises(ValueError):
        hull_falloff(square, xs, ys, reach=0.0)


def test_ellipse_ring_lies_on_the_ellipse():
    ring = ellipse_ring((10.0, 20.0), (30.0, 15.0), 12)
    assert ring.shape == (12, 2)
    np.testing.assert_allclose(((ring[:, 0] - 10) / 30) ** 2 + ((ring[:, 1] - 20) / 15) ** 2, 1.0, atol=1e-5)


def sample(field: np.ndarray, points: np.ndarray) -> np.ndarray:
    p = np.round(points).astype(int)
    p[:, 0] = p[:, 0].clip(0, field.shape[1] - 1)
    p[:, 1] = p[:, 1].clip(0, field.shape[0] - 1)
    return field[p[:, 1], p[:, 0]]


def test_tps_displacement_is_zero_at_the_pins_and_moves_the_anchors():
    dst = np.concatenate([ANCHORS, RING])
    src = np.concatenate([ANCHORS + SHIFTS, RING])

    dx, dy = tps_displacement(dst, src, SIZE, step=1)

    assert dx.shape == dy.shape == (SIZE[1], SIZE[0]) and dx.dtype == np.float32
    np.testing.assert_allclose(np.stack([sample(dx, ANCHORS), sample(dy, ANCHORS)], axis=1), SHIFTS, atol=0.15)
    assert np.abs(sample(dx, RING)).max() < 0.1 and np.abs(sample(dy, RING)).max() < 0.1


def test_tps_displacement_on_the_default_grid_is_close_at_the_anchors():
    dst = np.concatenate([ANCHORS, RING])
    src = np.concatenate([ANCHORS + SHIFTS, RING])

    dx, dy = tps_displacement(dst, src, SIZE)

    got = np.stack([sample(dx, ANCHORS), sample(dy, ANCHORS)], axis=1)
    assert np.abs(got - SHIFTS).max() < 0.75  # within a pixel for shifts of up to 6 px


@pytest.mark.parametrize("step", [1, 8])
def test_tps_displacement_reproduces_an_affine_field_everywhere(step):
    dst = np.concatenate([ANCHORS, RING])
    src = dst * 1.1 + np.array([2.0, -1.0], np.float32)  # displacement 0.1 * p + (2, -1)

    dx, dy = tps_displacement(dst, src, SIZE, step=step)

    yy, xx = np.mgrid[0 : SIZE[1], 0 : SIZE[0]].astype(np.float32)
    np.testing.assert_allclose(dx, 0.1 * xx + 2.0, atol=0.02)
    np.testing.assert_allclose(dy, 0.1 * yy - 1.0, atol=0.02)


@pytest.mark.parametrize(
    "point, expected",
    [
        ((100, 80), 1.0),  # centre
        ((130, 80), 1.0),  # inside the inner ellipse (r = 0.75 of the x radius)
        ((100, 100), 1.0),  # r = 0.8 of the y radius, on the inner ellipse
        ((140, 80), 0.0),  # on the ellipse
        ((100, 105), 0.0),  # on the ellipse (y radius)
        ((150, 80), 0.0),  # outside
        ((0, 0), 0.0),  # far outside
    ],
)
def test_radial_falloff_is_one_inside_and_zero_outside(point, expected):
    weight = radial_falloff((200, 160), (100.0, 80.0), (40.0, 25.0), inner=0.8)
    assert weight.shape == (160, 200) and weight.dtype == np.float32
    assert weight[point[1], point[0]] == pytest.approx(expected, abs=1e-6)


def test_radial_falloff_decreases_between_the_ellipses():
    weight = radial_falloff((200, 160), (100.0, 80.0), (40.0, 25.0), inner=0.5)
    row = weight[80, 120:141]  # from r = 0.5 to r = 1 along x
    assert row[0] == pytest.approx(1.0) and row[-1] == pytest.approx(0.0)
    assert np.all(np.diff(row) <= 0) and 0.0 < row[10] < 1.0


TWO_TRIANGLES_2D = np.array([[10, 10], [50, 10], [10, 50], [20, 20], [60, 20], [20, 60]], np.float32)
TWO_TRIANGLES = np.array([[0, 1, 2], [3, 4, 5]], np.int32)


def test_grid_to_pixels_interpolates_a_linear_field_exactly_and_falloff_at_samples_radial_falloff():
    step, size = 12, (100, 70)
    gh, gw = size[1] // step + 2, size[0] // step + 2
    gy, gx = np.mgrid[0:gh, 0:gw].astype(np.float32) * step
    field = np.dstack([0.5 * gx + 3.0, -0.25 * gy + 1.0, gx * 0 + 7.0])

    dense = grid_to_pixels(field, size, step)

    assert dense.shape == (70, 100, 3)
    ys, xs = np.mgrid[0:70, 0:100].astype(np.float32)
    # OpenCV places samples to 1/32 of a grid cell: 6 units per cell here
    np.testing.assert_allclose(dense[..., 0], 0.5 * xs + 3.0, atol=6.0 / 64 + 1e-3)
    np.testing.assert_allclose(dense[..., 1], -0.25 * ys + 1.0, atol=3.0 / 64 + 1e-3)
    np.testing.assert_allclose(dense[..., 2], 7.0, atol=1e-4)
    full = radial_falloff((200, 160), (100.0, 80.0), (40.0, 25.0), inner=0.8)
    sampled = falloff_at(np.arange(0, 200, 8), np.arange(0, 160, 8), (100.0, 80.0), (40.0, 25.0), inner=0.8)
    np.testing.assert_allclose(sampled, full[::8, ::8], atol=1e-6)


@pytest.mark.parametrize(
    "depth, winner",
    [
        ((1.0, 5.0), 0),  # triangle 0 nearer
        ((5.0, 1.0), 1),  # triangle 1 nearer
        ((-3.0, -2.0), 0),
    ],
)
def test_rasterize_triangles_nearer_triangle_wins(depth, winner):
    ids = rasterize_triangles(TWO_TRIANGLES_2D, TWO_TRIANGLES, np.array(depth), (80, 70))

    assert ids.shape == (70, 80) and ids.dtype == np.int32
    assert ids[25, 25] == winner  # covered by both
    assert ids[12, 12] == 0  # only triangle 0
    assert ids[50, 30] == 1  # only triangle 1
    assert ids[5, 5] == -1 and ids[65, 75] == -1  # none


def test_triangle_affines_map_each_corner_exactly():
    rng = np.random.default_rng(4)
    dst = rng.uniform(0, 100, (20, 3, 2))
    src = rng.uniform(0, 100, (20, 3, 2))

    affines = triangle_affines(dst, src)

    assert affines.shape == (20, 2, 3)
    mapped = np.einsum("tij,tkj->tki", affines[:, :, :2], dst) + affines[:, None, :, 2]
    np.testing.assert_allclose(mapped, src, atol=1e-3)


def test_triangle_affines_survive_a_degenerate_triangle():
    dst = np.array([[[0, 0], [1, 1], [2, 2]]], np.float64)  # collinear
    affines = triangle_affines(dst, dst + 3.0)
    assert np.isfinite(affines).all()


def test_piecewise_affine_maps_apply_each_triangles_map_and_mark_the_outside():
    ids = np.full((4, 5), -1, np.int32)
    ids[1, 1], ids[2, 3] = 0, 1
    affines = np.array([[[1, 0, 10], [0, 1, 20]], [[2, 0, 0], [0, 2, 0]]], np.float32)

    map_x, map_y = piecewise_affine_maps(ids, affines)

    assert (map_x[1, 1], map_y[1, 1]) == (11.0, 21.0)
    assert (map_x[2, 3], map_y[2, 3]) == (6.0, 4.0)
    outside = ids < 0
    assert (map_x[outside] == -1).all() and (map_y[outside] == -1).all()


def test_piecewise_affine_maps_of_a_window_match_the_whole_maps():
    rng = np.random.default_rng(7)
    ids = rng.integers(-1, 3, (30, 40)).astype(np.int32)
    affines = rng.uniform(-2, 2, (3, 2, 3)).astype(np.float32)

    whole_x, whole_y = piecewise_affine_maps(ids, affines)
    part_x, part_y = piecewise_affine_maps(ids[5:20, 8:33], affines, origin=(8, 5))

    np.testing.assert_array_equal(part_x, whole_x[5:20, 8:33])
    np.testing.assert_array_equal(part_y, whole_y[5:20, 8:33])


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_piecewise_remap_equals_remap_through_the_whole_maps(dtype):
    rng = np.random.default_rng(8)
    points = np.array([[20.0, 15.0], [70.0, 22.0], [40.0, 60.0], [75.0, 58.0]])
    triangles = np.array([[0, 1, 2], [1, 3, 2]])
    ids = rasterize_triangles(points, triangles, np.array([1.0, 2.0]), (96, 80))
    source = points[triangles] * 0.9 + rng.uniform(-3, 3, (2, 3, 2))
    affines = triangle_affines(points[triangles], source)
    image = (rng.uniform(0, 255, (80, 96, 3))).astype(dtype)
    grey = (rng.uniform(0, 1, (80, 96))).astype(np.float32)

    got = piecewise_remap([image, grey], ids, affines)

    map_x, map_y = piecewise_affine_maps(ids, affines)
    for mapped, original in zip(got, [image, grey], strict=True):
        expected = cv2.remap(original, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        assert mapped.shape == expected.shape and mapped.dtype == expected.dtype
        np.testing.assert_allclose(mapped.astype(np.float64), expected.astype(np.float64), atol=1e-4)
    assert (got[0][ids < 0] == image[0, 0]).all()  # no triangle: what a map to -1 samples


def test_piecewise_remap_without_triangles_gives_the_first_pixel_everywhere():
    image = np.arange(12, dtype=np.uint8).reshape(2, 2, 3) + 7
    (out,) = piecewise_remap([image], np.full((2, 2), -1, np.int32), np.zeros((1, 2, 3), np.float32))
    assert (out == image[0, 0]).all()


@pytest.mark.parametrize(
    "triangle, expected",
    [
        ([[0, 0, 0], [1, 0, 0], [0, 1, 0]], 1.0),  # positive area in image coordinates: faces the camera
        ([[0, 0, 0], [0, 1, 0], [1, 0, 0]], -1.0),  # reversed winding: turned away
        ([[0, 0, 0], [1, 0, 0], [0, 0, 1]], 0.0),  # in a plane through the camera axis: edge-on
        ([[0, 0, 0], [1, 0, 1], [0, 1, 0]], np.sqrt(0.5)),  # tilted by 45 degrees
    ],
)
def test_triangle_facing_signs(triangle, expected):
    facing = triangle_facing(np.array(triangle, np.float64), np.array([[0, 1, 2]]))
    assert facing.shape == (1,)
    assert facing[0] == pytest.approx(expected, abs=1e-6)


def test_triangle_facing_on_the_reference_mesh():
    mesh = topo.reference_mesh()
    tris = topo.triangles()
    assert (triangle_facing(mesh, tris) > 0).mean() > 0.98
    # the same mesh seen from behind (rotated 180 degrees about the vertical axis)
    behind = mesh * np.array([-1.0, 1.0, -1.0], np.float32)
    assert (triangle_facing(behind, tris) < 0).mean() > 0.98


# -------------------------------------------------------------------- topology


def test_tessellation_and_triangles_index_the_mesh():
    tess, tris, fills = topo.tessellation(), topo.triangles(), topo.eye_fills()

    assert tess.ndim == 2 and tess.shape[1] == 3 and 800 < len(tess) < 950
    assert tess.min() >= 0 and tess.max() < 468
    assert tris.shape == (len(tess) + len(fills), 3)
    assert tris.min() >= 0 and tris.max() < 478  # the eye fills reach the iris centres
    assert len({tuple(sorted(t)) for t in tris.tolist()}) == len(tris)  # no duplicates
    assert {tuple(sorted(t)) for t in tris[: len(tess)].tolist()} == {tuple(t) for t in tess.tolist()}
    assert not tess.flags.writeable and not tris.flags.writeable


def test_mirror_is_an_involution_with_the_midline_fixed():
    mirror = topo.mirror()
    ref = topo.reference_mesh()

    assert mirror.shape == (478,)
    np.testing.assert_array_equal(mirror[mirror], np.arange(478))
    fixed = np.flatnonzero(mirror == np.arange(478))
    assert 24 <= len(fixed) <= 32  # 28 in mediapipe 0.10
    assert {topo.NOSE_TIP, topo.FOREHEAD_TOP, topo.CHIN, topo.UPPER_LIP_INNER} <= set(fixed.tolist())
    np.testing.assert_allclose(ref[mirror, 0], -ref[:, 0], atol=1e-5)


def is_cyclic_shift(a: list[int], b: list[int]) -> bool:
    """Whether loop ``a`` is loop ``b`` started elsewhere, in either direction."""
    if sorted(a) != sorted(b):
        return False
    k = b.index(a[0])
    rolled = b[k:] + b[:k]
    return a == rolled or a == [rolled[0]] + rolled[1:][::-1]


@pytest.mark.parametrize(
    "loop, partner",
    [
        (topo.right_eye, topo.left_eye),
        (topo.left_eye, topo.right_eye),
        (topo.lips_inner, topo.lips_inner),
        (topo.lips_outer, topo.lips_outer),
        (topo.face_oval, topo.face_oval),
    ],
)
def test_mirror_maps_loops_onto_their_partners(loop, partner):
    assert is_cyclic_shift(topo.mirror()[loop()].tolist(), partner().tolist())


def test_mirror_swaps_the_irises_and_the_named_points():
    mirror = topo.mirror()
    np.testing.assert_array_equal(np.sort(mirror[topo.RIGHT_IRIS]), topo.LEFT_IRIS)
    assert mirror[topo.MOUTH_CORNER_RIGHT] == topo.MOUTH_CORNER_LEFT
    assert mirror[topo.RIGHT_EYE_OUTER] == topo.LEFT_EYE_OUTER


def test_lips_block_holds_both_lip_loops_and_nothing_of_the_eyes():
    block = set(topo.lips_block().tolist())
    assert set(topo.lips_inner().tolist()) <= block
    assert set(topo.lips_outer().tolist()) <= block
    assert len(block) > len(set(topo.lips_inner().tolist()) | set(topo.lips_outer().tolist()))
    assert not block & (set(topo.right_eye().tolist()) | set(topo.left_eye().tolist()))
    assert topo.NOSE_TIP not in block and topo.CHIN not in block


def test_eye_fills_fan_each_eyelid_loop_to_its_iris_centre():
    right = set(topo.right_eye().tolist()) | {int(topo.RIGHT_IRIS[0])}
    left = set(topo.left_eye().tolist()) | {int(topo.LEFT_IRIS[0])}
    fills = topo.eye_fills()
    assert len(fills) == len(topo.right_eye()) + len(topo.left_eye())
    for tri in fills.tolist():
        assert set(tri) <= right or set(tri) <= left
        assert int(topo.RIGHT_IRIS[0]) in tri or int(topo.LEFT_IRIS[0]) in tri
    used = set(fills.ravel().tolist())
    assert used == right | left  # every lid point takes part


def test_stable_points_exclude_the_moving_parts():
    stable = set(topo.stable_points().tolist())
    moving = set(topo.lips_block().tolist()) | set(topo.right_eye().tolist()) | set(topo.left_eye().tolist())
    moving |= set(topo.RIGHT_IRIS.tolist()) | set(topo.LEFT_IRIS.tolist())
    assert not stable & moving
    assert stable == set(range(468)) - moving
    assert {topo.NOSE_TIP, topo.NOSE_BRIDGE_TOP, topo.FOREHEAD_TOP} <= stable


def test_kps5_from_mesh_picks_the_named_points():
    mesh = np.arange(478 * 3, dtype=np.float32).reshape(478, 3)
    kps = topo.kps5_from_mesh(mesh)
    expected = mesh[
        [topo.RIGHT_IRIS[0], topo.LEFT_IRIS[0], topo.NOSE_TIP, topo.MOUTH_CORNER_RIGHT, topo.MOUTH_CORNER_LEFT], :2
    ]
    np.testing.assert_array_equal(kps, expected)
    assert kps.dtype == np.float32


# ------------------------------------------------------------- shape transfer


def wobbled(mesh: np.ndarray, seed: int) -> np.ndarray:
    """The reference mesh with a different face shape, scaled and moved."""
    rng = np.random.default_rng(seed)
    return (mesh * rng.uniform(0.9, 1.1, 3) + rng.normal(0, 0.02, mesh.shape)) * 80.0 + np.array([200.0, 150.0, 0.0])


def test_transfer_shape_with_amount_zero_returns_the_target():
    target, source = wobbled(topo.reference_mesh(), 1), wobbled(topo.reference_mesh(), 2)
    out = transfer_shape(target, source, amount=0.0)
    assert out.shape == (478, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, target, atol=1e-4)


def test_transfer_shape_of_a_face_onto_itself_changes_nothing():
    target = wobbled(topo.reference_mesh(), 3)
    np.testing.assert_allclose(transfer_shape(target, target), target, atol=1e-3)


@pytest.fixture(scope="module")
def real_meshes(faces_dir) -> dict[str, np.ndarray]:
    """``(478, 3)`` meshes of three different people: an open-mouth smile, a
    frontal older man and the astronaut."""
    from faceweave.analysis import FaceAnalyser
    from faceweave.io import read_image

    files = {
        "happy": "single/happy_man.png",
        "biden": "single/biden2.jpg",
        "collins": "single/astronaut_eileen_collins.png",
    }
    with FaceAnalyser() as analyser:
        out = {}
        for name, rel in files.items():
            faces = analyser.analyse(read_image(faces_dir / rel).pixels)
            assert len(faces) == 1, rel
            out[name] = np.array(faces[0].mesh)
    return out


PAIRS = [("happy", "biden"), ("biden", "happy"), ("collins", "happy"), ("happy", "collins")]


@pytest.mark.slow
@pytest.mark.parametrize("target, source", PAIRS)
def test_transfer_shape_keeps_the_targets_expression(real_meshes, target, source):
    new = transfer_shape(real_meshes[target], real_meshes[source])
    np.testing.assert_allclose(
        expression_ratios(new).as_tuple(), expression_ratios(real_meshes[target]).as_tuple(), atol=0.005
    )


@pytest.mark.slow
@pytest.mark.parametrize("target, source", PAIRS)
def test_transfer_shape_takes_the_fitted_source_on_the_stable_points(real_meshes, target, source):
    t, s = real_meshes[target], real_meshes[source]
    stable = topo.stable_points()
    fitted = apply_similarity(s, *procrustes(s[stable], t[stable]))
    eyes = float(np.linalg.norm(t[topo.RIGHT_IRIS[0], :2] - t[topo.LEFT_IRIS[0], :2]))

    new = transfer_shape(t, s, surround=0.0)

    assert np.linalg.norm(new[stable] - fitted[stable], axis=1).max() < 0.01 * eyes
    # and the shape did change: two people's faces differ by a few % of the eye distance
    assert np.linalg.norm(t[stable] - fitted[stable], axis=1).mean() > 0.01 * eyes
    # with the skin around the lips and eyes following them, the outline of
    # the face is still the source's (the jaw beside a wide-open mouth moves
    # by about 1 % of the eye distance)
    outline = topo.face_oval()
    spread = transfer_shape(t, s)
    assert np.linalg.norm(spread[outline] - fitted[outline], axis=1).max() < 0.03 * eyes


@pytest.mark.slow
@pytest.mark.parametrize("target, source", PAIRS)
def test_the_skin_around_the_mouth_follows_the_targets_lips(real_meshes, target, source):
    """Beside each mouth corner the new skin moves with the corner (a smile
    pulls the cheeks with it), instead of staying where the source's resting
    face has it; far from the mouth nothing moves."""
    t, s = real_meshes[target], real_meshes[source]
    rigid, spread = transfer_shape(t, s, surround=0.0), transfer_shape(t, s)
    eyes = float(np.linalg.norm(t[topo.RIGHT_IRIS[0], :2] - t[topo.LEFT_IRIS[0], :2]))
    fitted = apply_similarity(s, *procrustes(s[topo.stable_points()], t[topo.stable_points()]))
    # mesh points just outside the mouth corners (image left, image right)
    checked = 0
    for corner, beside in ((topo.MOUTH_CORNER_RIGHT, 57), (topo.MOUTH_CORNER_LEFT, 287)):
        corner_moved = rigid[corner, :2] - fitted[corner, :2]
        followed = spread[beside, :2] - rigid[beside, :2]
        if np.linalg.norm(corner_moved) > 0.03 * eyes:  # the target's corner is elsewhere than the source's
            # the skin beside the corner moved the same way as the corner, by at least a third of it
            assert float(followed @ corner_moved) / float(corner_moved @ corner_moved) > 0.33
            checked += 1
    assert checked >= 1  # every pair differs at one corner at least (measured: 3 % to 10 % of the eye distance)
    np.testing.assert_allclose(spread[topo.FOREHEAD_TOP], rigid[topo.FOREHEAD_TOP], atol=0.005 * eyes)
    # the lips and eyes themselves are the same either way
    np.testing.assert_allclose(spread[topo.lips_block()], rigid[topo.lips_block()], atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("factor", [0.8, 1.15])
def test_transfer_shape_stretches_only_the_mouth_width(real_meshes, factor):
    from faceweave.geometry.expression import ExpressionCorrection

    t, s = real_meshes["happy"], real_meshes["biden"]
    plain, wide = transfer_shape(t, s), transfer_shape(t, s, correction=ExpressionCorrection(mouth_width=factor))
    a, b = expression_ratios(plain), expression_ratios(wide)
    assert b.mouth_width == pytest.approx(a.mouth_width * factor, rel=1e-3)
    assert b.mouth_open == pytest.approx(a.mouth_open, abs=1e-3)
    assert b.eye_open == pytest.approx(a.eye_open, abs=1e-6)
    others = np.setdiff1d(np.arange(478), topo.lips_block())
    np.testing.assert_allclose(wide[others], plain[others], atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["happy", "biden"])  # an open smile, a closed mouth
def test_corrections_of_mouth_opening_and_eyes(real_meshes, target):
    from faceweave.geometry.expression import ExpressionCorrection, apply_correction

    mesh = real_meshes[target]
    before = expression_ratios(mesh)
    opened = expression_ratios(apply_correction(mesh, ExpressionCorrection(mouth_open=0.05)))
    assert opened.mouth_open == pytest.approx(before.mouth_open + 0.05, abs=2e-3)
    assert opened.mouth_width == pytest.approx(before.mouth_width, abs=1e-3)  # the corners stay
    # a mouth cannot close past shut
    shut = expression_ratios(apply_correction(mesh, ExpressionCorrection(mouth_open=-1.0)))
    assert shut.mouth_open == pytest.approx(0.0, abs=0.01)
    eyes = expression_ratios(apply_correction(mesh, ExpressionCorrection(eye_open=1.2)))
    # the lid gaps (measured point to point, not only across the eye) open by nearly the factor
    assert before.eye_open * 1.12 < eyes.eye_open <= before.eye_open * 1.2 + 1e-6
    assert eyes.mouth_open == before.mouth_open and eyes.mouth_width == before.mouth_width
    np.testing.assert_array_equal(apply_correction(mesh, ExpressionCorrection()), np.asarray(mesh, np.float32))


def test_next_correction_moves_towards_what_is_wanted_and_stops_within_tolerance():
    from faceweave.geometry.expression import EYE_OPEN_LIMITS, ExpressionCorrection, ExpressionRatios, next_correction

    want = ExpressionRatios(mouth_open=0.10, mouth_width=0.90, eye_open=0.11)
    none = ExpressionCorrection()
    assert next_correction(none, want, want, tolerance=0.01, gain=1.7) is None
    seen = ExpressionRatios(mouth_open=0.05, mouth_width=1.00, eye_open=0.102)
    step = next_correction(none, want, seen, tolerance=0.005, gain=1.7)
    assert step.mouth_width == pytest.approx((0.9 / 1.0) ** 1.7)  # read too wide: narrowed
    assert step.mouth_open == pytest.approx(1.7 * 0.05)  # read too shut: opened
    assert step.eye_open == pytest.approx((0.11 / 0.102) ** 1.7)  # read too narrow: opened
    # corrections build on the current one and stay within their limits
    again = next_correction(step, want, seen, tolerance=0.005, gain=1.7)
    assert again.mouth_width == 0.75 and again.mouth_open == pytest.approx(0.15)  # 0.84 ** 2 = 0.70, limited
    assert again.eye_open == EYE_OPEN_LIMITS[1] == 1.15  # 1.14 ** 2 = 1.29: the lids open no further
    narrow = next_correction(none, want, ExpressionRatios(0.10, 0.90, 0.20), tolerance=0.005, gain=1.7)
    assert narrow.eye_open == EYE_OPEN_LIMITS[0] == 0.85
    # the eyes can be left alone; a closed eye is not divided by
    only_mouth = next_correction(none, want, seen, tolerance=0.01, gain=1.7, eyes=False)
    assert only_mouth.eye_open == 1.0
    closed = ExpressionRatios(mouth_open=0.10, mouth_width=0.90, eye_open=0.0)  # seen shut: left alone
    assert next_correction(none, want, closed, tolerance=0.01, gain=1.7) is None


@pytest.mark.slow
@pytest.mark.parametrize("target, source", PAIRS)
def test_transfer_shape_keeps_the_targets_head_pose(real_meshes, target, source):
    from faceweave.analysis.pose import head_pose

    before, after = head_pose(real_meshes[target]), head_pose(transfer_shape(real_meshes[target], real_meshes[source]))
    assert before.distance(after) < 0.5


@pytest.mark.slow
def test_kps5_from_a_real_frontal_mesh_are_in_insightface_order(real_meshes):
    kps = topo.kps5_from_mesh(real_meshes["biden"])
    eye_l, eye_r, nose, mouth_l, mouth_r = kps
    assert eye_l[0] < nose[0] < eye_r[0]  # image-left eye first
    assert mouth_l[0] < nose[0] < mouth_r[0]
    assert max(eye_l[1], eye_r[1]) < nose[1] < min(mouth_l[1], mouth_r[1])  # y grows downwards


def test_oval_rings_count_edges_from_the_face_outline():
    rings = topo.oval_rings()
    assert rings.shape == (478,)
    assert (rings[topo.face_oval()] == 0).all()
    assert (rings[:468] > 0).sum() == 468 - len(topo.face_oval())
    # every surface vertex is reached, and a neighbour is at most one ring further
    assert rings[:468].max() < 100
    for a, b in topo.tessellation_edges():
        assert abs(int(rings[a]) - int(rings[b])) <= 1
    assert rings[topo.NOSE_TIP] > 5
    assert (rings[topo.RIGHT_IRIS] > 1000).all()  # the irises are not on the surface


def test_lip_anchors_hang_each_lip_point_from_its_own_lips_edge():
    from faceweave.geometry.shape import _lip_anchors

    weights = _lip_anchors()
    block = topo.lips_block().tolist()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-6)
    inner = set(topo.lips_inner().tolist())
    assert set(np.flatnonzero(weights.sum(axis=0)).tolist()) <= inner
    # the inner line hangs from itself, the middle of each outer lip from the
    # middle of its own lip's edge (upper 0 -> 13, lower 17 -> 14)
    for v in inner:
        assert weights[block.index(v), v] == pytest.approx(1.0)
    assert weights[block.index(0), topo.UPPER_LIP_INNER] == pytest.approx(1.0)
    assert weights[block.index(17), topo.LOWER_LIP_INNER] == pytest.approx(1.0)


def _across_mouth(mesh: np.ndarray, a: int, b: int) -> float:
    """Distance of points a and b across the line of the mouth corners."""
    left, right = mesh[topo.MOUTH_CORNER_RIGHT, :2], mesh[topo.MOUTH_CORNER_LEFT, :2]
    u = (right - left) / np.linalg.norm(right - left)
    return float((mesh[a, :2] - mesh[b, :2]) @ np.array([-u[1], u[0]]))


@pytest.mark.slow
@pytest.mark.parametrize("target, source", PAIRS)
def test_transfer_shape_gives_the_lips_the_sources_thickness(real_meshes, target, source):
    """The new lips are as thick as the source's (fitted) lips, around the
    target's own mouth line; with no lip shape they keep the target's."""
    from faceweave.geometry import shape

    t, s = real_meshes[target], real_meshes[source]
    stable = topo.stable_points()
    fitted = apply_similarity(s, *procrustes(s[stable], t[stable]))
    new = transfer_shape(t, s, surround=0.0)
    eyes = float(np.linalg.norm(t[topo.RIGHT_IRIS[0], :2] - t[topo.LEFT_IRIS[0], :2]))
    for outer, inner in ((0, topo.UPPER_LIP_INNER), (17, topo.LOWER_LIP_INNER)):
        assert _across_mouth(new, outer, inner) == pytest.approx(_across_mouth(fitted, outer, inner), abs=0.01 * eyes)
    old = shape.LIP_SHAPE
    try:
        shape.LIP_SHAPE = 0.0
        kept = transfer_shape(t, s, surround=0.0)
    finally:
        shape.LIP_SHAPE = old
    k = np.linalg.norm(fitted[topo.RIGHT_IRIS[0], :2] - fitted[topo.LEFT_IRIS[0], :2]) / eyes
    assert _across_mouth(kept, 0, topo.UPPER_LIP_INNER) == pytest.approx(
        k * _across_mouth(t, 0, topo.UPPER_LIP_INNER), abs=0.01 * eyes
    )


@pytest.mark.slow
@pytest.mark.parametrize("target, source", PAIRS)
def test_transfer_shape_gives_the_eyes_the_sources_width(real_meshes, target, source):
    """Each new eye is as wide as the source's fitted eye, and as open as the
    target's (relative to the eye distance: see the expression test)."""
    t, s = real_meshes[target], real_meshes[source]
    stable = topo.stable_points()
    fitted = apply_similarity(s, *procrustes(s[stable], t[stable]))
    new = transfer_shape(t, s, surround=0.0)
    eyes = float(np.linalg.norm(t[topo.RIGHT_IRIS[0], :2] - t[topo.LEFT_IRIS[0], :2]))
    for a, b in ((topo.RIGHT_EYE_OUTER, topo.RIGHT_EYE_INNER), (topo.LEFT_EYE_OUTER, topo.LEFT_EYE_INNER)):

        def width(m: np.ndarray, a: int = a, b: int = b) -> float:
            return float(np.linalg.norm(m[a, :2] - m[b, :2]))

        assert width(new) == pytest.approx(width(fitted), abs=0.01 * eyes)


def test_lid_arcs_split_each_eye_loop_at_its_corners():
    from faceweave.geometry.shape import _lid_arcs

    for loop, corners, lids in (
        (topo.right_eye(), (topo.RIGHT_EYE_OUTER, topo.RIGHT_EYE_INNER), (topo.RIGHT_EYE_UPPER, topo.RIGHT_EYE_LOWER)),
        (topo.left_eye(), (topo.LEFT_EYE_OUTER, topo.LEFT_EYE_INNER), (topo.LEFT_EYE_UPPER, topo.LEFT_EYE_LOWER)),
    ):
        upper, lower = _lid_arcs(loop, corners, lids)
        assert lids[0] in loop[upper] and lids[1] in loop[lower]
        assert len(upper) + len(lower) == len(loop) - 2
        assert not set(loop[upper]) & set(loop[lower])
        assert not set(corners) & (set(loop[upper]) | set(loop[lower]))
        # on the frontal reference face the upper lid lies above the lower one (y grows downwards)
        ref = topo.reference_mesh()
        assert ref[loop[upper], 1].mean() < ref[loop[lower], 1].mean()


@pytest.mark.slow
@pytest.mark.parametrize("target, source", PAIRS)
def test_a_shut_target_eye_keeps_its_own_lids(real_meshes, target, source):
    """A closed (or closing) target eye is not given the source's open lid
    outline, which would show the source's open eye squeezed into a slit."""
    from faceweave.geometry import shape
    from faceweave.geometry.expression import ExpressionCorrection, apply_correction

    t = apply_correction(real_meshes[target], ExpressionCorrection(eye_open=0.2))
    loop = topo.right_eye()
    assert shape.eye_openness(t, loop, (topo.RIGHT_EYE_OUTER, topo.RIGHT_EYE_INNER)) < shape.EYE_SHUT
    new = transfer_shape(t, real_meshes[source], surround=0.0)
    old = shape.EYE_SHAPE
    try:
        shape.EYE_SHAPE = 0.0
        kept = transfer_shape(t, real_meshes[source], surround=0.0)
    finally:
        shape.EYE_SHAPE = old
    np.testing.assert_allclose(new[loop], kept[loop], atol=1e-4)
