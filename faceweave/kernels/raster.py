"""The mesh swapper's rasterizer and its piecewise-affine maps: the
compiled kernels (``_raster.c``) when they were built, else their NumPy
formulations (:mod:`faceweave.kernels.reference`), which give the same
values."""

from __future__ import annotations

import numpy as np

from faceweave.kernels import reference

try:  # built at install time; absent where no C compiler was there
    from faceweave.kernels import _raster  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the install
    _raster = None


def compiled() -> bool:
    """Whether the compiled kernels are installed (else NumPy runs them)."""
    return _raster is not None


def rasterize(
    points: np.ndarray, triangles: np.ndarray, order: np.ndarray, size: tuple[int, int], *, reach: float
) -> np.ndarray:
    """``(H, W)`` int32: for each pixel of ``size = (W, H)``, the index of the
    last triangle of ``order`` whose area grown by ``reach`` pixels holds
    the pixel's centre; -1 where none does.  ``points`` ``(N, 2+)`` pixels
    (only the first two columns are read), ``triangles`` ``(T, 3)``
    indices into them (either winding), ``order`` indices of triangles."""
    w, h = int(size[0]), int(size[1])
    pts = np.ascontiguousarray(np.asarray(points)[:, :2], np.float64)
    tris = np.ascontiguousarray(triangles, np.int64).reshape(-1, 3)
    turns = np.ascontiguousarray(order, np.int64).ravel()
    if _raster is None:
        return reference.rasterize(pts, tris, turns, (w, h), reach=reach)
    ids = np.empty((h, w), np.int32)
    _raster.rasterize(pts, tris, turns, ids, w, h, float(reach))
    return ids


def affine_maps(ids: np.ndarray, affines: np.ndarray, *, origin: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The backward maps (float32 ``map_x``, ``map_y``, of ``ids``'s shape)
    of the index map ``ids``, whose first pixel is at ``origin`` in the
    affines' frame: ``affines[ids[p]] @ (p, 1)``, -1 where ``ids`` is -1.
    ``affines`` ``(T, 2, 3)``."""
    table = np.ascontiguousarray(affines, np.float32).reshape(-1, 2, 3)
    index = np.ascontiguousarray(ids, np.int32)
    if _raster is None:
        return reference.affine_maps(index, table, origin=origin)
    h, w = index.shape
    map_x, map_y = np.empty((h, w), np.float32), np.empty((h, w), np.float32)
    _raster.affine_maps(index, table, map_x, map_y, w, h, int(origin[0]), int(origin[1]))
    return map_x, map_y
