"""The compiled kernels (faceweave/kernels/_raster.c, _pixels.c) against their NumPy
formulations (faceweave/kernels/reference.py), to the bit, and the new
rasterizer against the OpenCV loop it replaced."""

from __future__ import annotations

import shutil
import sysconfig
from functools import partial
from pathlib import Path

import cv2
import numpy as np
import pytest
from tests.thread_fixtures import side_by_side

from faceweave import kernels
from faceweave.geometry import topology as topo
from faceweave.geometry.warp import RASTER_REACH, piecewise_affine_maps, rasterize_triangles
from faceweave.kernels import pixels, raster, reference

needs_compiled = pytest.mark.skipif(
    not kernels.compiled(), reason="the compiled kernels were not built (no C compiler at install)"
)


def face_mesh(size: int = 346, yaw: float = 0.3, seed: int = 0) -> np.ndarray:
    """mediapipe's reference face turned by ``yaw`` and placed in a ``size`` crop, with a little noise."""
    ref = np.asarray(topo.reference_mesh(), np.float64)
    c, s = np.cos(yaw), np.sin(yaw)
    turned = ref @ np.array([[c, 0, -s], [0, 1, 0], [s, 0, c]]).T
    points = turned * (size * 0.28) + (size / 2, size / 2, 0)
    return points + np.random.default_rng(seed).normal(0, 0.3, points.shape)


def random_case(seed: int, size: tuple[int, int] = (61, 47)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w, h = size
    points = rng.uniform(-15, max(w, h) + 15, (40, 2))
    points[rng.integers(0, 40, 3)] = points[rng.integers(0, 40, 3)]  # repeated points: degenerate triangles
    triangles = rng.integers(0, 40, (60, 3))
    order = rng.permutation(60)[: rng.integers(1, 61)]
    return points, triangles, order


def cv2_loop(points: np.ndarray, triangles: np.ndarray, depth: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The rasterizer this one replaced: one ``cv2.fillConvexPoly`` per triangle, 4 bits of sub-pixel."""
    w, h = size
    ids = np.full((h, w), -1, np.int32)
    pts = np.round(points[:, :2] * 16.0).astype(np.int32)
    order = np.argsort(-depth)
    for poly, t in zip(pts[triangles[order]], order.tolist(), strict=False):
        cv2.fillConvexPoly(ids, poly, t, cv2.LINE_8, 4)
    return ids


def test_the_kernels_are_built_wherever_a_c_compiler_is():
    if shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC") else "cc") is None:
        pytest.skip("no C compiler here: the NumPy formulations run")
    assert kernels.compiled(), "a C compiler is here but faceweave/kernels/_raster.c or _pixels.c was not built"
    assert Path(raster.__file__).with_name("_raster.c").is_file()


@needs_compiled
@pytest.mark.parametrize("seed", range(40))
def test_rasterize_is_its_reference_to_the_bit_on_random_triangles(seed):
    points, triangles, order = random_case(seed)
    got = raster.rasterize(points, triangles, order, (61, 47), reach=RASTER_REACH)
    want = reference.rasterize(points, triangles.astype(np.int64), order.astype(np.int64), (61, 47), reach=RASTER_REACH)
    assert got.dtype == np.int32 and got.shape == (47, 61)
    np.testing.assert_array_equal(got, want)


@needs_compiled
@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("reach", [0.0, 0.5, 2.0])
def test_rasterize_is_its_reference_where_edges_meet_pixel_centres(seed, reach):
    """The kernel fills each row's run between its edges, found from each
    edge's crossing and settled by its test: corners on whole and half
    pixels (edges through pixel centres, ties with the limit), level and
    upright edges (a test the same along the row), slivers and tiny
    triangles give the per-pixel test's cover to the bit."""
    rng = np.random.default_rng(500 + seed)
    points = rng.integers(-6, 70, (40, 2)).astype(np.float64) / rng.choice([1.0, 2.0, 4.0])
    points[:8, 1] = points[0, 1]  # a level line of corners
    points[8:16, 0] = points[8, 0]  # an upright one
    points[16:20] = points[20:24] + rng.uniform(-0.3, 0.3, (4, 2))  # slivers and tiny triangles
    triangles = rng.integers(0, 40, (80, 3))
    order = rng.permutation(80)
    got = raster.rasterize(points, triangles, order, (61, 47), reach=reach)
    want = reference.rasterize(points, triangles.astype(np.int64), order.astype(np.int64), (61, 47), reach=reach)
    np.testing.assert_array_equal(got, want)
    assert (got >= 0).any()


@needs_compiled
@pytest.mark.parametrize("reach", [0.0, 0.5, 2.0])
def test_rasterize_is_its_reference_on_a_turned_face(reach):
    mesh = face_mesh()
    tris = topo.triangles().astype(np.int64)
    order = np.argsort(-mesh[tris, 2].mean(axis=1), kind="stable")
    got = raster.rasterize(mesh, tris, order, (346, 346), reach=reach)
    np.testing.assert_array_equal(got, reference.rasterize(mesh[:, :2].copy(), tris, order, (346, 346), reach=reach))


def test_rasterize_covers_what_the_opencv_loop_covered():
    """Half a pixel of reach fills what fillConvexPoly's edges filled: the
    face's cover differs on a few pixels of its outline (the triangles
    inside share their edges, where either side's affine gives the same
    place)."""
    for seed, yaw in enumerate((0.0, 0.4, -0.7)):
        mesh = face_mesh(yaw=yaw, seed=seed)
        tris = topo.triangles()
        depth = mesh[tris, 2].mean(axis=1)
        new, old = rasterize_triangles(mesh, tris, depth, (346, 346)), cv2_loop(mesh, tris, depth, (346, 346))
        cover = max(int((old >= 0).sum()), 1)
        assert ((new >= 0) != (old >= 0)).sum() / cover < 0.01
        assert (new[old >= 0] == old[old >= 0]).mean() > 0.97


def test_nearer_triangles_win_and_winding_does_not_matter():
    points = np.array([[2.0, 2.0], [20.0, 2.0], [2.0, 20.0], [20.0, 20.0]])
    triangles = np.array([[0, 1, 2], [3, 2, 1]])  # one clockwise, one not (in image coordinates)
    far_first = rasterize_triangles(points, triangles, np.array([1.0, 0.0]), (24, 24))
    near_first = rasterize_triangles(points, triangles, np.array([0.0, 1.0]), (24, 24))
    assert far_first[11, 11] == 1 and near_first[11, 11] == 0  # the diagonal: the nearer one
    assert far_first[5, 5] == 0 and far_first[18, 18] == 1
    assert far_first[0, 0] == -1 and (far_first[2:19, 2] == 0).all()  # the edge itself is drawn


def test_triangles_off_the_map_or_not_finite_draw_nothing():
    points = np.array([[-50.0, -50.0], [-40.0, -50.0], [-50.0, -40.0], [np.nan, 3.0], [5.0, 5.0], [9.0, 2.0]])
    ids = raster.rasterize(points, np.array([[0, 1, 2], [3, 4, 5]]), np.array([0, 1]), (16, 16), reach=0.5)
    assert (ids == -1).all()


@needs_compiled
@pytest.mark.parametrize("seed", range(10))
def test_affine_maps_are_their_reference_to_the_bit(seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(-1, 30, (23, 37)).astype(np.int32)
    affines = rng.normal(0, 3, (30, 2, 3)).astype(np.float32)
    got = raster.affine_maps(ids, affines, origin=(5, 11))
    want = reference.affine_maps(ids, affines, origin=(5, 11))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_array_equal(g, w)


def test_piecewise_maps_of_a_window_are_those_of_the_whole():
    rng = np.random.default_rng(3)
    ids = rng.integers(-1, 8, (30, 40)).astype(np.int32)
    affines = rng.normal(0, 2, (8, 2, 3)).astype(np.float32)
    whole = piecewise_affine_maps(ids, affines)
    part = piecewise_affine_maps(ids[4:20, 6:31], affines, origin=(6, 4))
    for w, p in zip(whole, part, strict=True):
        np.testing.assert_array_equal(w[4:20, 6:31], p)
    assert (whole[0][ids < 0] == -1).all() and (whole[1][ids < 0] == -1).all()


@needs_compiled
def test_bad_sizes_and_indices_are_refused_not_read_past():
    from faceweave.kernels import _raster  # type: ignore[attr-defined]

    points, tris, order = np.zeros((3, 2)), np.array([[0, 1, 2]], np.int64), np.zeros(1, np.int64)
    with pytest.raises(ValueError, match="height x width"):
        _raster.rasterize(points, tris, order, np.empty((4, 4), np.int32), 5, 4, 0.5)
    with pytest.raises(ValueError, match="not a point index"):
        _raster.rasterize(points, np.array([[0, 1, 7]], np.int64), order, np.empty((4, 4), np.int32), 4, 4, 0.5)
    with pytest.raises(ValueError, match="not a triangle index"):
        _raster.rasterize(points, tris, np.array([3], np.int64), np.empty((4, 4), np.int32), 4, 4, 0.5)
    maps = np.empty((2, 2), np.float32), np.empty((2, 2), np.float32)
    with pytest.raises(ValueError, match="affines"):
        _raster.affine_maps(np.full((2, 2), 4, np.int32), np.zeros((1, 2, 3), np.float32), *maps, 2, 2, 0, 0)
    with pytest.raises(TypeError):
        ids, affines = np.zeros((2, 2), np.int32), np.zeros((1, 2, 3), np.float32)
        _raster.affine_maps(ids, affines, b"read-only", maps[1], 2, 2, 0, 0)


@needs_compiled
def test_the_kernels_run_side_by_side_in_threads():
    """Each thread's result is its own (the loop runs without the lock, on the thread's buffers)."""
    meshes = [face_mesh(yaw=y, seed=k) for k, y in enumerate((0.0, 0.3, -0.3, 0.6))]
    tris = topo.triangles()
    want = [rasterize_triangles(m, tris, m[tris, 2].mean(axis=1), (346, 346)) for m in meshes]
    jobs = [partial(rasterize_triangles, m, tris, m[tris, 2].mean(axis=1), (346, 346)) for m in meshes]
    for g, w in zip(side_by_side(jobs, repeats=20), want, strict=True):
        np.testing.assert_array_equal(g, w)


def paste_case(seed: int, channels: int = 3, *, upright: bool = False) -> tuple[np.ndarray, ...]:
    """A crop, its soft mask (0 and 1 plateaus, a ramp between), a frame, and
    a window -> box warp that scales, turns and reaches past the frame's edges
    (``upright``: scales each axis, by a negative scale too, and shifts only,
    as the working crop's matrix does)."""
    rng = np.random.default_rng(seed)
    ch, cw = (int(v) for v in rng.integers(20, 90, 2))
    crop = rng.integers(0, 256, (ch, cw, channels), dtype=np.uint8)
    yy, xx = np.mgrid[:ch, :cw]
    r = np.hypot((xx - cw / 2) / (cw / 2), (yy - ch / 2) / (ch / 2))
    mask = np.clip((1.0 - r) * rng.uniform(1.0, 4.0), 0, 1).astype(np.float32)
    fh, fw = (int(v) for v in rng.integers(40, 140, 2))
    frame = rng.integers(0, 256, (fh, fw, channels), dtype=np.uint8)
    bx, by = int(rng.integers(0, cw // 3)), int(rng.integers(0, ch // 3))
    bw, bh = int(rng.integers(2, cw - bx + 1)), int(rng.integers(2, ch - by + 1))
    x1, y1 = int(rng.integers(0, fw // 2)), int(rng.integers(0, fh // 2))
    x2, y2 = int(rng.integers(x1 + 1, fw + 1)), int(rng.integers(y1 + 1, fh + 1))
    scale, angle = rng.uniform(0.4, 2.5), rng.uniform(-0.6, 0.6)
    rot = scale * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    if upright:
        rot = np.diag(rng.uniform(0.4, 2.5, 2) * rng.choice((1.0, 1.0, -1.0), 2))
    matrix = np.hstack([rot, rng.uniform(-10, 10, (2, 1))])
    if upright:  # a flipped window lands on the box
        matrix[:, 2] += np.where(np.diag(rot) < 0, np.array([bw, bh]) * np.abs(np.diag(rot)), 0.0)
    return crop, mask, frame, np.array([bx, by, bw, bh]), np.array([x1, y1, x2, y2]), matrix


def assert_paste_is_opencvs(crop, mask, frame, window, box, matrix) -> np.ndarray:
    """The kernel's paste of a case against OpenCV's warp and blend, to the bit; the kernel's frame."""
    got, want = frame.copy(), frame.copy()
    kernels.paste_warped(got, crop, mask, tuple(window), tuple(box), matrix)
    reference.paste_warped(want, crop, mask, tuple(window), tuple(box), matrix)
    np.testing.assert_array_equal(got, want)
    return got


@needs_compiled
@pytest.mark.parametrize("seed", range(60))
def test_paste_warped_is_opencvs_warp_and_blend_to_the_bit(seed):
    channels = (3, 1, 4)[seed % 3]
    assert_paste_is_opencvs(*paste_case(seed, channels))


@needs_compiled
@pytest.mark.parametrize("seed", range(40))
def test_paste_warped_upright_is_opencvs_warp_and_blend_to_the_bit(seed):
    """A matrix that only scales and shifts takes the kernel's row-then-column
    walk: the same levels as warpAffine's 2x2 weights and blendLinear."""
    channels = (3, 1, 4)[seed % 3]
    crop, mask, frame, window, box, matrix = paste_case(200 + seed, channels, upright=True)
    assert matrix[0, 1] == 0.0 and matrix[1, 0] == 0.0
    assert_paste_is_opencvs(crop, mask, frame, window, box, matrix)


@needs_compiled
def test_the_upright_cases_paste_faces_onto_their_frames():
    """The cases above are not vacuous: most of them change their frame."""
    changed = 0
    for seed in range(40):
        crop, mask, frame, window, box, matrix = paste_case(200 + seed, upright=True)
        got = frame.copy()
        kernels.paste_warped(got, crop, mask, tuple(window), tuple(box), matrix)
        changed += bool((got != frame).any())
    assert changed >= 30


@needs_compiled
@pytest.mark.parametrize("seed", range(12))
def test_paste_warped_cells_of_ones_and_zeros_beside_values_a_step_from_them(seed):
    """The kernel reads 2x2 cells whose mask is all 0 or all 1 without
    sampling the mask: cells with a value one float step from 0 or 1, or a
    negative zero, beside them blend as OpenCV does."""
    crop, mask, frame, window, box, matrix = paste_case(100 + seed, upright=seed % 2 == 1)
    rng = np.random.default_rng(seed)
    mask = np.where(mask > 0.5, np.float32(1.0), np.float32(0.0))
    spots = rng.random(mask.shape) < 0.05
    near = np.array([np.nextafter(np.float32(1), np.float32(0)), np.float32(1e-38), np.float32(-0.0)], np.float32)
    steps = rng.choice(near, mask.shape)
    mask = np.where(spots, steps, mask).astype(np.float32)
    assert_paste_is_opencvs(crop, mask, frame, window, box, matrix)


@needs_compiled
def test_paste_warped_leaves_the_frame_alone_outside_its_box_and_where_the_mask_is_0():
    crop, mask, _, _, _, _ = paste_case(7)
    mask[:, : mask.shape[1] // 2] = 0.0
    h, w = crop.shape[:2]
    frame = np.random.default_rng(7).integers(0, 256, (h + 12, w + 10, 3), dtype=np.uint8)
    got = frame.copy()
    kernels.paste_warped(got, crop, mask, (0, 0, w, h), (5, 6, 5 + w, 6 + h), np.array([[1.0, 0, 0], [0, 1.0, 0]]))
    changed = (got != frame).any(axis=-1)
    assert changed.any() and not changed[:6].any() and not changed[:, :5].any()
    assert not changed[6 : 6 + h, 5 : 5 + w // 2 - 1].any()  # the mask's 0 half, warped in place


@needs_compiled
def test_paste_warped_refuses_windows_and_boxes_that_do_not_fit():
    crop, mask, frame, _, _, matrix = paste_case(1)
    h, w = crop.shape[:2]
    fh, fw = frame.shape[:2]
    with pytest.raises(ValueError, match="window must lie"):
        kernels.paste_warped(frame, crop, mask, (1, 0, w, h), (0, 0, 4, 4), matrix)
    with pytest.raises(ValueError, match="box in the frame"):
        kernels.paste_warped(frame, crop, mask, (0, 0, w, h), (0, 0, fw + 1, 4), matrix)
    with pytest.raises(ValueError, match="one size"):
        kernels.paste_warped(frame, crop, mask[:-1], (0, 0, w, h - 1), (0, 0, 4, 4), matrix)
    with pytest.raises(ValueError, match="uint8"):
        kernels.paste_warped(frame.astype(np.float32), crop, mask, (0, 0, w, h), (0, 0, 4, 4), matrix)


def detail_case(seed: int, channels: int = 3) -> tuple[np.ndarray, ...]:
    """Float windows that reach past 0..255 (clipped), hold NaN (written 0),
    and a band whose steps land on exact halves."""
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(3, 40, 2))
    new = rng.uniform(-30, 285, (h, w, channels)).astype(np.float32)
    new.reshape(-1)[rng.integers(0, new.size, 5)] = np.nan
    new.reshape(-1)[rng.integers(0, new.size, 9)] = np.float32(127.5)
    src = rng.uniform(0, 255, new.shape).astype(np.float32)
    low = cv2.GaussianBlur(src, (5, 5), 1.5).reshape(new.shape)
    mask = rng.uniform(0, 1, (h, w)).astype(np.float32)
    return new, src, low, mask


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("sign", [-1, 0, 1])
def test_put_detail_is_its_reference_to_the_bit(seed, sign):
    new, src, low, mask = detail_case(seed, channels=(3, 1)[seed % 2])
    h, w = new.shape[:2]
    frame = np.random.default_rng(seed).integers(0, 256, (h + 9, w + 7, new.shape[2]), dtype=np.uint8)
    got, want = frame.copy(), frame.copy()
    kernels.put_detail(got, (4, 6), new, mask, band=(src, low), step=0.37, sign=sign)
    pair = (src, low) if sign else None
    reference.put_detail(want, (4, 6), new, pair, mask, np.float32(0.37), sign)
    np.testing.assert_array_equal(got, want)
    outside = np.ones(frame.shape[:2], bool)
    outside[6 : 6 + h, 4 : 4 + w] = False
    np.testing.assert_array_equal(got[outside], frame[outside])


def test_to_uint8_is_numpys_round_and_clip():
    new = detail_case(3)[0]
    want = np.clip(np.nan_to_num(new + np.float32(0.5), nan=0.0), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(kernels.to_uint8(new), want)
    assert kernels.to_uint8(new)[np.isnan(new)].max() == 0


def test_put_detail_refuses_a_window_past_the_frame_or_a_float_frame():
    new, src, low, mask = detail_case(2)
    h, w = new.shape[:2]
    frame = np.zeros((h + 2, w + 2, 3), np.uint8)
    with pytest.raises(ValueError, match="does not fit"):
        kernels.put_detail(frame, (3, 0), new)
    with pytest.raises(ValueError, match="uint8 frame"):
        kernels.put_detail(frame.astype(np.float32), (0, 0), new)
    with pytest.raises(ValueError, match="uint8 frame"):
        kernels.put_detail(frame[:, ::2], (0, 0), new)


@needs_compiled
def test_the_pixel_kernels_refuse_buffers_of_the_wrong_size_not_read_past():
    from faceweave.kernels import _pixels  # type: ignore[attr-defined]

    new, weights = np.zeros((4, 4, 3), np.float32), np.zeros((4, 4), np.float32)
    out = np.zeros((6, 6, 3), np.uint8)
    with pytest.raises(ValueError, match="float32 values"):
        _pixels.put_detail(new[:3], new, new, weights, out, 4, 4, 3, 6, 0, 0, 1.0, 0)
    with pytest.raises(ValueError, match="frame's height"):
        _pixels.put_detail(new, new, new, weights, out, 4, 4, 3, 6, 0, 3, 1.0, 0)
    with pytest.raises(ValueError, match="frame's width"):
        _pixels.put_detail(new, new, new, weights, out, 4, 4, 3, 6, 3, 0, 1.0, 0)
    crop, mask = np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="sizes and channels"):
        _pixels.paste_warped(crop, mask[:3], out, 4, 4, 3, 0, 0, 4, 4, 6, 6, 0, 0, 2, 2, 1, 0, 0, 0, 1, 0)
    with pytest.raises(TypeError):
        _pixels.paste_warped(crop, mask, b"read-only", 4, 4, 3, 0, 0, 4, 4, 6, 6, 0, 0, 2, 2, 1, 0, 0, 0, 1, 0)
    grid, offsets = np.zeros((3, 3, 3), np.float32), np.zeros((4, 4, 2), np.float32)
    with pytest.raises(ValueError, match="match their sizes"):
        _pixels.warp_by_grid(grid, crop, offsets, mask, crop, 3, 4, 4, 4, 3, 2)


@needs_compiled
def test_without_the_compiled_kernels_the_same_pixels_come_out(monkeypatch):
    """An install without a C compiler runs reference.py: same frames to the bit."""
    crop, mask, frame, window, box, matrix = paste_case(11)
    new, src, low, weights = detail_case(11)
    h, w = new.shape[:2]
    target = np.zeros((h + 3, w + 3, 3), np.uint8)
    compiled_out = frame.copy(), target.copy()
    kernels.paste_warped(compiled_out[0], crop, mask, tuple(window), tuple(box), matrix)
    kernels.put_detail(compiled_out[1], (2, 1), new, weights, band=(src, low), step=0.5, sign=1)
    monkeypatch.setattr(pixels, "_pixels", None)
    assert not kernels.compiled()
    plain = frame.copy(), target.copy()
    kernels.paste_warped(plain[0], crop, mask, tuple(window), tuple(box), matrix)
    kernels.put_detail(plain[1], (2, 1), new, weights, band=(src, low), step=0.5, sign=1)
    for a, b in zip(compiled_out, plain, strict=True):
        np.testing.assert_array_equal(a, b)
    monkeypatch.undo()
    pixels_in, grid, step = grid_case(11)
    fast = kernels.warp_by_grid(pixels_in, grid, step)
    monkeypatch.setattr(pixels, "_pixels", None)
    for a, b in zip(fast, kernels.warp_by_grid(pixels_in, grid, step), strict=True):
        np.testing.assert_array_equal(a, b)


def grid_case(seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """A picture and a field on a grid that reaches past its edges (replicated) and moves far."""
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(8, 120, 2))
    step = int(rng.integers(1, 12))
    grid = rng.normal(0, rng.uniform(0.5, 30), (h // step + 2, w // step + 2, 3)).astype(np.float32)
    return rng.integers(0, 256, (h, w, (3, 1, 4)[seed % 3]), dtype=np.uint8), grid, step


@needs_compiled
@pytest.mark.parametrize("seed", range(60))
def test_warp_by_grid_is_opencvs_warp_and_remap_to_the_bit(seed):
    pixels, grid, step = grid_case(seed)
    got, want = kernels.warp_by_grid(pixels, grid, step), reference.warp_by_grid(pixels, grid, step)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@needs_compiled
@pytest.mark.parametrize("seed", range(24))
def test_warp_by_grid_where_the_field_is_still_in_places_is_opencvs_to_the_bit(seed):
    """The kernel copies the pixels whose four grid samples are all 0 (the
    reshaping's field fades to nothing away from the face): a field still
    outside a disc, with negative zeros and single moving samples beside
    still ones, gives OpenCV's warp and remap still."""
    pixels, grid, step = grid_case(seed)
    rng = np.random.default_rng(100 + seed)
    gh, gw = grid.shape[:2]
    yy, xx = np.mgrid[:gh, :gw]
    inside = np.hypot(yy - gh / 2, xx - gw / 2) < rng.uniform(0.5, 0.4 * max(gh, gw))
    grid = np.where(inside[..., None], grid, np.float32(0.0)) * np.float32(rng.choice([1.0, -1.0]))
    grid[rng.random((gh, gw)) < 0.05] = rng.normal(0, 3, 3)  # lone moving samples
    grid[rng.random((gh, gw)) < 0.05] = np.float32(-0.0)
    grid = np.ascontiguousarray(grid, np.float32)
    got, want = kernels.warp_by_grid(pixels, grid, step), reference.warp_by_grid(pixels, grid, step)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_warp_by_grid_of_a_still_field_is_the_picture():
    pixels, grid, step = grid_case(4)
    moved, offsets, changed = kernels.warp_by_grid(pixels, np.zeros_like(grid), step)
    np.testing.assert_array_equal(moved, pixels)
    assert not offsets.any() and not changed.any()


def test_warp_by_grid_refuses_what_it_cannot_read():
    pixels, grid, step = grid_case(2)
    with pytest.raises(ValueError, match="uint8"):
        kernels.warp_by_grid(pixels.astype(np.float32), grid, step)
    with pytest.raises(ValueError, match="grid"):
        kernels.warp_by_grid(pixels, grid[..., :2], step)
    with pytest.raises(ValueError, match="step"):
        kernels.warp_by_grid(pixels, grid, 0)


def grain_case(seed: int, channels: int = 3, *, upright: bool = False) -> tuple[np.ndarray, ...]:
    """Two frames (the original and the one with a face pasted), a crop mask
    and a window -> box warp of paste_case (``upright``: one that scales and
    shifts only, as the working crop's), and low-pass taps of 3 to 9."""
    _, mask, pasted, window, box, matrix = paste_case(seed, channels, upright=upright)
    rng = np.random.default_rng(1000 + seed)
    original = np.clip(pasted.astype(int) + rng.integers(-40, 41, pasted.shape), 0, 255).astype(np.uint8)
    sigma = float(rng.uniform(0.4, 1.2))
    taps = cv2.getGaussianKernel(int((3, 5, 7, 9)[seed % 4]), sigma, cv2.CV_32F)
    return original, pasted, mask, tuple(int(v) for v in window), tuple(int(v) for v in box), matrix, taps


def grain_by_opencv(original, out, mask, window, box, matrix, taps, step, sign) -> tuple[int, int, int, int] | None:
    """The video's detail step as NumPy and OpenCV make it: the mask warped,
    its box, cv2.GaussianBlur's low-pass by the same taps, put_detail."""
    bx, by, bw, bh = window
    x1, y1, x2, y2 = box
    part = np.ascontiguousarray(mask[by : by + bh, bx : bx + bw])
    m = cv2.warpAffine(part, matrix, (x2 - x1, y2 - y1), flags=cv2.INTER_LINEAR, borderValue=(0.0,))
    lx, ly, w, h = cv2.boundingRect((m > 0.01).astype(np.uint8))
    if w * h < 64 or cv2.countNonZero((m > 0.5).astype(np.uint8)) < 64:
        return None
    cx, cy = x1 + lx, y1 + ly
    src = (original if sign > 0 else out)[cy : cy + h, cx : cx + w].astype(np.float32)
    new = out[cy : cy + h, cx : cx + w].astype(np.float32)
    low = cv2.sepFilter2D(src, cv2.CV_32F, taps, taps, borderType=cv2.BORDER_REFLECT_101).reshape(src.shape)
    kernels.put_detail(out, (cx, cy), new, m[ly : ly + h, lx : lx + w], band=(src, low), step=step, sign=sign)
    return cx, cy, cx + w, cy + h


@needs_compiled
@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("sign", [1, -1])
def test_detail_grain_is_its_reference_to_the_bit(seed, sign):
    original, pasted, mask, window, box, matrix, taps = grain_case(
        seed, channels=(3, 1, 4)[seed % 3], upright=seed % 2 == 1
    )
    step = float(np.random.default_rng(seed).uniform(0.0, 2.0))
    got, want = pasted.copy(), pasted.copy()
    found = kernels.detail_grain(original, got, mask, window, box, matrix, taps=taps, step=step, sign=sign, least=8)
    expected = reference.detail_grain(
        original, want, mask, window, box, matrix, taps.ravel(), np.float32(step), sign, 8
    )
    assert found == expected
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("sign", [1, -1])
def test_detail_grain_is_the_opencv_steps_within_a_level(seed, sign):
    """Against the steps it fuses (warpAffine, boundingRect, GaussianBlur's
    separable filter, put_detail): the same box and mask to the bit; the
    low-pass sums its taps in another order, so a value that lands within
    about 1e-5 of a half may round the other way, by one level, rarely."""
    original, pasted, mask, window, box, matrix, taps = grain_case(seed, upright=seed % 2 == 1)
    got, want = pasted.copy(), pasted.copy()
    found = kernels.detail_grain(original, got, mask, window, box, matrix, taps=taps, step=1.3, sign=sign, least=64)
    assert found == grain_by_opencv(original, want, mask, window, box, matrix, taps, 1.3, sign)
    diff = np.abs(got.astype(int) - want)
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-3
    if found is not None:
        x1, y1, x2, y2 = found
        outside = np.ones(pasted.shape[:2], bool)
        outside[y1:y2, x1:x2] = False
        np.testing.assert_array_equal(got[outside], pasted[outside])
        assert (got != pasted).any()


def test_detail_grain_changes_nothing_where_too_little_of_the_mask_lands():
    original, pasted, mask, window, _, matrix, taps = grain_case(3)
    fh, fw = pasted.shape[:2]
    got = pasted.copy()
    # the whole mask mapped into a 4 x 4 corner of the frame: fewer than 64 pixels
    tiny = np.array([[4.0 / window[2], 0.0, 0.0], [0.0, 4.0 / window[3], 0.0]])
    assert kernels.detail_grain(original, got, mask, window, (0, 0, 4, 4), tiny, taps=taps, step=1.0, sign=1) is None
    np.testing.assert_array_equal(got, pasted)
    assert (
        kernels.detail_grain(original, got, mask * 0.3, window, (0, 0, fw, fh), matrix, taps=taps, step=1.0, sign=1)
        is None
    )
    np.testing.assert_array_equal(got, pasted)  # nothing over 0.5


def test_detail_grain_of_a_step_of_0_writes_the_frame_back_as_it_was():
    original, pasted, mask, window, box, matrix, taps = grain_case(5)
    got = pasted.copy()
    kernels.detail_grain(original, got, mask, window, box, matrix, taps=taps, step=0.0, sign=1, least=1)
    np.testing.assert_array_equal(got, pasted)


@needs_compiled
def test_detail_grain_refuses_what_it_cannot_read():
    original, pasted, mask, window, box, matrix, taps = grain_case(1)
    fh, fw = pasted.shape[:2]
    with pytest.raises(ValueError, match="sign"):
        kernels.detail_grain(original, pasted, mask, window, box, matrix, taps=taps, step=1.0, sign=0)
    with pytest.raises(ValueError, match="original's shape"):
        kernels.detail_grain(original[1:], pasted, mask, window, box, matrix, taps=taps, step=1.0, sign=1)
    with pytest.raises(ValueError, match="window must lie"):
        kernels.detail_grain(
            original, pasted, mask, (1, 0, *mask.shape[::-1]), box, matrix, taps=taps, step=1.0, sign=1
        )
    with pytest.raises(ValueError, match="box in the frame"):
        kernels.detail_grain(original, pasted, mask, window, (0, 0, fw + 1, 4), matrix, taps=taps, step=1.0, sign=1)
    with pytest.raises(ValueError, match="odd count"):
        kernels.detail_grain(original, pasted, mask, window, box, matrix, taps=taps[:-1], step=1.0, sign=1)


def test_detail_grain_without_the_compiled_kernels_gives_the_same_frame(monkeypatch):
    original, pasted, mask, window, box, matrix, taps = grain_case(9)
    fast = pasted.copy()
    found = kernels.detail_grain(original, fast, mask, window, box, matrix, taps=taps, step=0.8, sign=-1, least=8)
    monkeypatch.setattr(pixels, "_pixels", None)
    plain = pasted.copy()
    assert (
        kernels.detail_grain(original, plain, mask, window, box, matrix, taps=taps, step=0.8, sign=-1, least=8) == found
    )
    np.testing.assert_array_equal(fast, plain)


@needs_compiled
def test_detail_grain_runs_side_by_side_in_threads():
    """Each thread's frame is its own: the kernel's scratch (warped mask,
    rows, the ring of filtered rows) is allocated per call."""
    cases = [grain_case(20 + k) for k in range(4)]

    def job(k: int) -> np.ndarray:
        original, pasted, mask, window, box, matrix, taps = cases[k]
        out = pasted.copy()
        kernels.detail_grain(original, out, mask, window, box, matrix, taps=taps, step=0.9, sign=1, least=8)
        return out

    want = [job(k) for k in range(4)]
    for got, expected in zip(side_by_side([partial(job, k) for k in range(4)], repeats=20), want, strict=True):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("with_back", [False, True])
def test_mix_band_is_its_reference_to_the_bit(seed, with_back):
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(1, 60, 2))
    ch = (3, 1, 4)[seed % 3]
    up, fine, coarse, back = (rng.normal(0, 80, (h, w, ch)).astype(np.float32) for _ in range(4))
    mask = rng.uniform(-0.1, 1.1, (h, w)).astype(np.float32)
    got = kernels.mix_band(up.copy(), fine, coarse, mask, back if with_back else None)
    want = reference.mix_band(up.copy(), fine, coarse, mask, back if with_back else None)
    np.testing.assert_array_equal(got, want)


def test_mix_band_refuses_pictures_of_other_shapes():
    a = np.zeros((4, 5, 3), np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernels.mix_band(a[:, ::2], a[:, ::2], a[:, ::2], np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match="mask"):
        kernels.mix_band(a, a, a, np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="back"):
        kernels.mix_band(a, a, a, np.zeros((4, 5), np.float32), a[:3])


def _multiband_by_numpy(front, back, mask, levels):
    """compositing.blend.laplacian_blend as NumPy mixed its levels before kernels.mix_band."""
    from faceweave.compositing.blend import per_channel

    h, w = mask.shape
    levels = max(1, min(levels, int(np.log2(max(1, min(h, w) // 8))) + 1))
    gm, gd = [mask], [front - back]
    for _ in range(levels - 1):
        gm.append(cv2.pyrDown(gm[-1]))
        gd.append(cv2.pyrDown(gd[-1]))
    out = gd[-1] * per_channel(gm[-1], 3)
    for i in range(levels - 2, -1, -1):
        size = (gd[i].shape[1], gd[i].shape[0])
        band = gd[i] - cv2.pyrUp(gd[i + 1], dstsize=size)
        band *= per_channel(gm[i], 3)
        out = cv2.pyrUp(out, dstsize=size) + band
    out += back
    return out


@pytest.mark.parametrize("seed", range(16))
def test_the_multiband_blend_mixes_its_levels_as_numpy_did(seed):
    from faceweave.compositing.blend import laplacian_blend

    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(5, 300, 2))
    front, back = (rng.uniform(0, 255, (h, w, 3)).astype(np.float32) for _ in range(2))
    mask = np.clip(cv2.GaussianBlur(rng.random((h, w)).astype(np.float32), (0, 0), 3) * 3 - 1, 0, 1)
    mask = mask.astype(np.float32)
    levels = int(rng.integers(1, 6))
    np.testing.assert_array_equal(
        laplacian_blend(front, back, mask, levels=levels), _multiband_by_numpy(front, back, mask, levels)
    )


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("share", [1.0, 0.37])
def test_add_under_is_its_reference_to_the_bit(seed, share):
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(1, 60, 2))
    ch = (3, 1, 4)[seed % 3]
    out, values = (rng.normal(0, 80, (h, w, ch)).astype(np.float32) for _ in range(2))
    mask = rng.uniform(-0.1, 1.1, (h, w)).astype(np.float32)
    got = kernels.add_under(out.copy(), values, mask, share)
    want = reference.add_under(out.copy(), values, mask, np.float32(share))
    np.testing.assert_array_equal(got, want)
    # what NumPy gives for the same expression
    part = values * mask[..., None]
    np.testing.assert_array_equal(got, out + (part if share == 1.0 else np.float32(share) * part))


@needs_compiled
@pytest.mark.parametrize("side", [(1, 9), (2, 5), (3, 3), (9, 1), (4, 2)])
def test_detail_grain_mirrors_the_edges_of_a_box_narrower_than_its_taps(side):
    """A box of 1 to 4 pixels across (the 7 taps reach past it on both
    sides, more than once): mirrored as OpenCV's BORDER_REFLECT_101, to the
    bit of the reference."""
    w, h = side
    rng = np.random.default_rng(w * 10 + h)
    original = rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)
    pasted = rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)
    mask = np.zeros((12, 12), np.float32)
    mask[2 : 2 + h, 3 : 3 + w] = 1.0
    identity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    taps = cv2.getGaussianKernel(7, 0.9, cv2.CV_32F)
    got, want = pasted.copy(), pasted.copy()
    box = kernels.detail_grain(
        original, got, mask, (0, 0, 12, 12), (0, 0, 12, 12), identity, taps=taps, step=1.5, sign=1, least=1
    )
    ref = reference.detail_grain(
        original, want, mask, (0, 0, 12, 12), (0, 0, 12, 12), identity, taps.ravel(), np.float32(1.5), 1, 1
    )
    assert box == ref == (3, 2, 3 + w, 2 + h)
    np.testing.assert_array_equal(got, want)
    assert (got != pasted).any()
