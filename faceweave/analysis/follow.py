"""Points carried from one frame to the next by the motion of the mesh:
the least-squares similarity (rotation, uniform scale, shift) between two
meshes of the same face, applied to other points of that face."""

from __future__ import annotations

import numpy as np


def similarity(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The ``(2, 3)`` similarity ``M`` that maps the points ``src`` ``(N, 2)``
    closest to ``dst`` in least squares (Umeyama's, no reflection)."""
    a, b = np.asarray(src, np.float64), np.asarray(dst, np.float64)
    ma, mb = a.mean(axis=0), b.mean(axis=0)
    ca, cb = a - ma, b - mb
    var = float((ca**2).sum()) / len(a)
    if var <= 0.0:
        return np.hstack([np.eye(2), (mb - ma)[:, None]])
    u, d, vt = np.linalg.svd(cb.T @ ca / len(a))
    sign = np.diag([1.0, -1.0 if np.linalg.det(u) * np.linalg.det(vt) < 0 else 1.0])
    rotation = u @ sign @ vt
    scale = float(np.trace(np.diag(d) @ sign)) / var
    return np.hstack([scale * rotation, (mb - scale * rotation @ ma)[:, None]])


def follow_points(points: np.ndarray, mesh_then: np.ndarray, mesh_now: np.ndarray) -> np.ndarray:
    """``points`` ``(K, 2)`` of a face whose mesh was ``mesh_then`` ``(N, 2)``,
    moved as the mesh moved to ``mesh_now``."""
    m = similarity(mesh_then, mesh_now)
    return np.asarray(points, np.float64) @ m[:, :2].T + m[:, 2]
