"""Alignment transforms: working crops and similarity fits.  Pure functions."""

from __future__ import annotations

import numpy as np

from faceweave.types import BBox


def crop_matrix(box: BBox, *, face_size: int, margin: float) -> tuple[np.ndarray, int]:
    """Axis-aligned scale+translate ``(2, 3)`` matrix mapping image pixels into
    a square working crop in which the face box's larger side measures
    ``face_size`` pixels and the crop side is ``face_size * margin``.
    Returns ``(matrix, side)``."""
    side = int(round(face_size * margin))
    scale = face_size / max(box.width, box.height, 1e-6)
    cx, cy = box.center
    m = np.array([[scale, 0.0, side / 2.0 - cx * scale], [0.0, scale, side / 2.0 - cy * scale]], np.float64)
    return m, side


def transform_points(points: np.ndarray, m: np.ndarray, *, scale_z: bool = True) -> np.ndarray:
    """Apply a ``(2, 3)`` similarity to ``(N, 2)`` or ``(N, 3)`` points; z is
    multiplied by the matrix's scale so depth stays in pixels."""
    pts = np.asarray(points, np.float64)
    out = pts.copy()
    out[:, :2] = pts[:, :2] @ m[:, :2].T + m[:, 2]
    if pts.shape[1] == 3 and scale_z:
        out[:, 2] = pts[:, 2] * np.sqrt(abs(np.linalg.det(m[:, :2])))
    return out.astype(np.float32)


def procrustes(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Least-squares similarity ``dst ≈ s * R @ src + t`` (Umeyama) for
    ``(N, D)`` point sets; returns ``(s, R (D, D), t (D,))`` with ``det R = 1``."""
    src = np.asarray(src, np.float64)
    dst = np.asarray(dst, np.float64)
    mu_s, mu_d = src.mean(axis=0), dst.mean(axis=0)
    a, b = src - mu_s, dst - mu_d
    cov = b.T @ a / len(src)
    u, sig, vt = np.linalg.svd(cov)
    d = np.ones(len(sig))
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        d[-1] = -1.0
    r = u @ np.diag(d) @ vt
    var = (a**2).sum() / len(src)
    s = float((sig * d).sum() / var) if var > 0 else 1.0
    t = mu_d - s * r @ mu_s
    return s, r, t


def apply_similarity(points: np.ndarray, s: float, r: np.ndarray, t: np.ndarray) -> np.ndarray:
    return (s * np.asarray(points, np.float64) @ r.T + t).astype(np.float32)
