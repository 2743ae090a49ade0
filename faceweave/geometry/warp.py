"""Warps: a smooth thin-plate-spline field pinned on a ring, and a
piecewise-affine (per mesh triangle) texture map.  Pure functions."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from faceweave import kernels


def ellipse_ring(center: tuple[float, float], radii: tuple[float, float], count: int) -> np.ndarray:
    """``(count, 2)`` points on an axis-aligned ellipse."""
    ang = np.linspace(0.0, 2.0 * np.pi, count, endpoint=False)
    return np.stack([center[0] + radii[0] * np.cos(ang), center[1] + radii[1] * np.sin(ang)], axis=1).astype(np.float32)


def tps_grid(
    dst: np.ndarray, src: np.ndarray, size: tuple[int, int], *, step: int = 8, regularization: float = 1e-3
) -> np.ndarray:
    """The thin-plate-spline displacement of :func:`tps_displacement` on a
    grid every ``step`` pixels: ``(GH, GW, 2)`` float32, sample ``(i, j)`` at
    pixel ``(j * step, i * step)``, covering ``size = (W, H)`` and one step
    beyond (see :func:`grid_to_pixels`)."""
    w, h = size
    dst = np.asarray(dst, np.float64)
    disp = np.asarray(src, np.float64) - dst
    scale = float(max(w, h))
    p = dst / scale
    n = len(p)
    sq = (p * p).sum(1)
    r2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (p @ p.T), 0.0)
    k = r2 * np.log(np.maximum(r2, 1e-300)) + regularization * np.eye(n)  # r^2 log r^2, 0 at r = 0
    pm = np.hstack([np.ones((n, 1)), p])
    a = np.zeros((n + 3, n + 3))
    a[:n, :n], a[:n, n:], a[n:, :n] = k, pm, pm.T
    rhs = np.zeros((n + 3, 2))
    rhs[:n] = disp
    coef = np.linalg.solve(a, rhs)
    gw, gh = w // step + 2, h // step + 2
    gx, gy = np.meshgrid(np.arange(gw) * step, np.arange(gh) * step)
    g = np.stack([gx.ravel(), gy.ravel()], axis=1) / scale
    # the field on the grid in float32 (a tenth of the time of float64, and
    # far finer than a pixel); squared distances as |g|^2 + |p|^2 - 2 g.p
    g32, p32 = g.astype(np.float32), p.astype(np.float32)
    r2 = np.maximum((g32 * g32).sum(1)[:, None] + (p32 * p32).sum(1)[None, :] - 2.0 * (g32 @ p32.T), 0.0)
    kg = r2 * np.log(np.maximum(r2, np.float32(1e-30)))  # r^2 log r^2, 0 at r = 0
    field = kg @ coef[:n].astype(np.float32) + np.hstack([np.ones((len(g), 1)), g]).astype(np.float32) @ coef[
        n:
    ].astype(np.float32)
    return np.ascontiguousarray(field.reshape(gh, gw, 2), dtype=np.float32)


def grid_to_pixels(grid: np.ndarray, size: tuple[int, int], step: int) -> np.ndarray:
    """A smooth field sampled every ``step`` pixels (``(GH, GW, C)``, C <= 4,
    sample ``(i, j)`` at pixel ``(j * step, i * step)``) interpolated to
    every pixel of ``size = (W, H)``: ``(H, W, C)`` float32 (``(H, W)`` for
    one channel), by one affine resampling."""
    w, h = size
    # output pixel x samples the grid at x / step
    m = np.array([[1.0 / step, 0.0, 0.0], [0.0, 1.0 / step, 0.0]], np.float64)
    return cv2.warpAffine(
        np.ascontiguousarray(grid, np.float32),
        m,
        (w, h),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_REPLICATE,
    )


def tps_displacement(
    dst: np.ndarray, src: np.ndarray, size: tuple[int, int], *, step: int = 8, regularization: float = 1e-3
) -> tuple[np.ndarray, np.ndarray]:
    """Dense backward displacement ``(dx, dy)``, each ``(H, W)`` float32, such
    that output pixel ``dst[i]`` samples input ``src[i] = dst[i] + d``,
    interpolated smoothly (thin-plate spline) in between.  The spline is
    evaluated on a grid every ``step`` pixels (:func:`tps_grid`) and
    interpolated (:func:`grid_to_pixels`), which is exact enough for a
    smooth field and keeps the cost small."""
    field = grid_to_pixels(tps_grid(dst, src, size, step=step, regularization=regularization), size, step)
    return np.ascontiguousarray(field[..., 0]), np.ascontiguousarray(field[..., 1])


def falloff_at(
    xs: np.ndarray, ys: np.ndarray, center: tuple[float, float], radii: tuple[float, float], *, inner: float
) -> np.ndarray:
    """:func:`radial_falloff` at the points of the grid ``xs`` x ``ys``:
    ``(len(ys), len(xs))`` float32."""
    dx = (np.asarray(xs, np.float32) - np.float32(center[0])) / np.float32(radii[0])
    dy = (np.asarray(ys, np.float32) - np.float32(center[1])) / np.float32(radii[1])
    r = np.sqrt(dy[:, None] ** 2 + dx[None, :] ** 2)
    t = np.clip((1.0 - r) / (1.0 - inner), 0.0, 1.0)
    return (t * t * (3.0 - 2.0 * t)).astype(np.float32)


def hull_falloff(points: np.ndarray, xs: np.ndarray, ys: np.ndarray, *, reach: float, cell: float = 4.0) -> np.ndarray:
    """``(len(ys), len(xs))`` float32 weight at the grid ``xs`` x ``ys``
    (pixels): 1 inside the convex hull of ``points`` ``(N, 2+)``, falling
    smoothly to 0 at ``reach`` pixels outside it.  Distances are measured on
    a raster of ``cell``-pixel cells."""
    if reach <= 0:
        raise ValueError(f"reach must be positive; got {reach}")
    xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    cols = int(np.ceil(max(float(xs.max()), 1.0) / cell)) + 2
    rows = int(np.ceil(max(float(ys.max()), 1.0) / cell)) + 2
    inside = np.zeros((rows, cols), np.uint8)
    hull = cv2.convexHull(np.round(np.asarray(points, np.float64)[:, :2] / cell).astype(np.int32))
    cv2.fillConvexPoly(inside, hull, (1,))
    dist = cv2.distanceTransform(1 - inside, cv2.DIST_L2, 3) * cell
    i = np.clip(np.round(ys / cell).astype(int), 0, rows - 1)
    j = np.clip(np.round(xs / cell).astype(int), 0, cols - 1)
    t = np.clip(1.0 - dist[i[:, None], j[None, :]] / reach, 0.0, 1.0)
    return (t * t * (3.0 - 2.0 * t)).astype(np.float32)


def radial_falloff(
    size: tuple[int, int], center: tuple[float, float], radii: tuple[float, float], *, inner: float
) -> np.ndarray:
    """``(H, W)`` float32 weight: 1 inside the ellipse scaled by ``inner``,
    falling smoothly to 0 on the ellipse itself and 0 outside."""
    w, h = size
    return falloff_at(np.arange(w), np.arange(h), center, radii, inner=inner)


def triangle_facing(points3d: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """``(T,)`` cosine between each triangle's normal and the direction to the
    camera (1 facing, 0 edge-on, < 0 turned away), for triangles wound as in
    :func:`faceweave.geometry.topology.triangles`."""
    p = np.asarray(points3d, np.float64)
    a, b, c = p[triangles[:, 0]], p[triangles[:, 1]], p[triangles[:, 2]]
    n = np.cross(b - a, c - a)
    return (n[:, 2] / (np.linalg.norm(n, axis=1) + 1e-9)).astype(np.float32)


#: how far outside a triangle a pixel centre is still drawn (pixels)
RASTER_REACH = 0.5


def rasterize_triangles(
    points2d: np.ndarray, triangles: np.ndarray, depth: np.ndarray, size: tuple[int, int]
) -> np.ndarray:
    """``(H, W)`` int32 map of the index of the triangle covering each pixel
    (-1 for none); triangles with larger ``depth`` (farther) are drawn first so
    nearer ones win.  A pixel is covered when its centre lies within half a
    pixel of the triangle (as ``cv2.fillConvexPoly``, which also fills the
    pixels its edges pass through), so each pixel is the nearest triangle's
    where they overlap; compiled (:func:`faceweave.kernels.rasterize`)."""
    order = np.argsort(-np.asarray(depth), kind="stable")
    return kernels.rasterize(points2d, triangles, order, size, reach=RASTER_REACH)


def triangle_affines(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    """``(T, 2, 3)`` affine maps taking each destination triangle ``(T, 3, 2)``
    onto its source triangle ``(T, 3, 2)`` (degenerate triangles get a
    least-squares map)."""
    d = np.asarray(dst, np.float64)
    s = np.asarray(src, np.float64)
    # per triangle, with e1 = d1 - d0, e2 = d2 - d0 (and f1, f2 for the
    # source): the linear part L solves L [e1 e2] = [f1 f2], in closed form
    e1, e2 = d[:, 1] - d[:, 0], d[:, 2] - d[:, 0]
    f1, f2 = s[:, 1] - s[:, 0], s[:, 2] - s[:, 0]
    det = e1[:, 0] * e2[:, 1] - e2[:, 0] * e1[:, 1]  # twice the signed area
    ok = np.abs(det) > 1e-6
    out = np.empty((len(d), 2, 3))
    safe = np.where(ok, det, 1.0)
    # inverse of [e1 e2] = [[e2y, -e2x], [-e1y, e1x]] / det
    i00, i01, i10, i11 = e2[:, 1] / safe, -e2[:, 0] / safe, -e1[:, 1] / safe, e1[:, 0] / safe
    for row in range(2):  # L = [f1 f2] inv and the shift, written out (no stacked 2x2 products)
        a, b = f1[:, row], f2[:, row]
        out[:, row, 0] = a * i00 + b * i10
        out[:, row, 1] = a * i01 + b * i11
        out[:, row, 2] = s[:, 0, row] - (out[:, row, 0] * d[:, 0, 0] + out[:, row, 1] * d[:, 0, 1])
    if not ok.all():  # degenerate triangles: a least-squares map
        dh = np.concatenate([d[~ok], np.ones((int((~ok).sum()), 3, 1))], axis=2)
        out[~ok] = np.transpose(np.linalg.pinv(dh) @ s[~ok], (0, 2, 1))
    return out.astype(np.float32)


def piecewise_affine_maps(
    ids: np.ndarray, affines: np.ndarray, *, origin: tuple[int, int] = (0, 0)
) -> tuple[np.ndarray, np.ndarray]:
    """Backward maps for ``cv2.remap`` from a triangle-index map and per
    triangle affines; pixels with no triangle map to ``-1`` (outside).
    ``origin``: where ``ids``'s first pixel lies in the affines' frame (a
    window of a larger map).  Compiled (:func:`faceweave.kernels.affine_maps`)."""
    return kernels.affine_maps(ids, affines, origin=origin)


def piecewise_remap(images: Sequence[np.ndarray], ids: np.ndarray, affines: np.ndarray) -> list[np.ndarray]:
    """Each of ``images`` sampled through the piecewise-affine maps of the
    triangle-index map ``ids`` ``(H, W)`` and ``affines``: what
    ``cv2.remap`` with :func:`piecewise_affine_maps`, bilinear interpolation
    and replicated borders gives, with the maps built (once, in fixed point,
    for all images) only over the triangles' bounding box.  Outside it, as
    wherever no triangle is, a pixel gets the image's first pixel (what a
    map to ``-1`` samples under replicated borders)."""
    h, w = ids.shape
    x, y, bw, bh = cv2.boundingRect((ids >= 0).astype(np.uint8))
    if bw == 0 or bh == 0:
        return [np.broadcast_to(image[0, 0], (h, w, *image.shape[2:])).copy() for image in images]
    map_x, map_y = piecewise_affine_maps(ids[y : y + bh, x : x + bw], affines, origin=(x, y))
    fixed, fraction = cv2.convertMaps(map_x, map_y, cv2.CV_16SC2)
    outs = []
    for image in images:
        inside = cv2.remap(image, fixed, fraction, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        # the box framed by the first pixel (one pass, not a fill of the whole
        # image over a last axis of 3 channels and then the box written over it)
        first = tuple(float(v) for v in np.atleast_1d(image[0, 0]))
        framed = cv2.copyMakeBorder(inside, y, h - y - bh, x, w - x - bw, cv2.BORDER_CONSTANT, value=first)
        outs.append(np.asarray(framed).reshape(h, w, *image.shape[2:]))
    return outs
