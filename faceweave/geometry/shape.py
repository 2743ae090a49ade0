"""Carry one face's 3D shape onto another face's pose and expression."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from faceweave.geometry import topology as topo
from faceweave.geometry.align import apply_similarity, procrustes
from faceweave.geometry.expression import ExpressionCorrection, apply_correction

#: how far the lips' and eyes' expression offsets spread into the skin around
#: them, as the Gaussian width over the mouth's (or eye's) own width
SURROUND = 0.25


@lru_cache(maxsize=1)
def _blocks() -> tuple[tuple[np.ndarray, tuple[int, int]], ...]:
    """The moving blocks (lips, each eyelid loop with its iris) and the two
    points whose distance is each block's width."""
    return (
        (topo.lips_block(), (topo.MOUTH_CORNER_RIGHT, topo.MOUTH_CORNER_LEFT)),
        (np.concatenate([topo.right_eye(), topo.RIGHT_IRIS]), (topo.RIGHT_EYE_OUTER, topo.RIGHT_EYE_INNER)),
        (np.concatenate([topo.left_eye(), topo.LEFT_IRIS]), (topo.LEFT_EYE_OUTER, topo.LEFT_EYE_INNER)),
    )


@lru_cache(maxsize=1)
def _free_points() -> np.ndarray:
    """Mesh points that belong to no moving block (read-only)."""
    moving = np.concatenate([b for b, _ in _blocks()])
    free = np.setdiff1d(np.arange(468), moving)
    free.setflags(write=False)
    return free


def transfer_shape(
    target: np.ndarray, source: np.ndarray, *, amount: float = 1.0, surround: float = SURROUND,
    correction: ExpressionCorrection | None = None,
) -> np.ndarray:
    """A new ``(478, 3)`` mesh with the source's face shape in the target's pose.

    The source mesh is fitted onto the target with a 3D similarity on stable
    points (no lips, eyelids or irises); the result takes the fitted source
    everywhere except the lips and each eye, which keep the target's own
    points moved as blocks: shifted by their mean offset and scaled about
    their centre by the change of the distance between the eyes, so that the
    target's expression (mouth and eye opening, mouth width, all relative to
    the eye distance) stays.

    The skin around the lips and eyes follows them: each block's offset from
    the fitted source spreads to the points around it, falling off as a
    Gaussian ``surround`` times the mouth's (eye's) width wide.  Without it a
    wide smile sits in the source's resting cheeks, whose texture then shows
    the source's mouth corners.  ``correction`` then changes the new lips
    and eyelids alone (:func:`faceweave.geometry.expression.apply_correction`;
    made after the finished face has been looked at, see
    :meth:`faceweave.pipeline.FaceSwapper.check_expression`).  ``amount`` in
    ``[0, 1]`` blends from the target's shape (0) to the source's (1).
    """
    target = np.asarray(target, np.float64)
    stable = topo.stable_points()
    s, r, t = procrustes(np.asarray(source, np.float64)[stable], target[stable])
    fitted = apply_similarity(source, s, r, t).astype(np.float64)
    new = fitted.copy()
    blocks = _blocks()

    def eye_distance(mesh: np.ndarray) -> float:
        return float(np.linalg.norm(mesh[blocks[1][0]].mean(axis=0) - mesh[blocks[2][0]].mean(axis=0)))

    k = eye_distance(fitted) / max(eye_distance(target), 1e-6)
    for block, _ in blocks:
        centre_t = target[block].mean(axis=0)
        new[block] = fitted[block].mean(axis=0) + k * (target[block] - centre_t)
    if surround > 0:
        free = _free_points()
        for block, (i, j) in blocks:
            offset = (new[block] - fitted[block]).astype(np.float32)
            sigma = surround * max(float(np.linalg.norm(fitted[i, :2] - fitted[j, :2])), 1e-6)
            # only points within four sigmas of the block are moved noticeably
            lo, hi = fitted[block, :2].min(axis=0) - 4.0 * sigma, fitted[block, :2].max(axis=0) + 4.0 * sigma
            near = free[np.all((fitted[free, :2] >= lo) & (fitted[free, :2] <= hi), axis=1)]
            d = fitted[near, None, :2].astype(np.float32) - fitted[None, block, :2].astype(np.float32)
            w = np.exp(-(d * d).sum(-1) / np.float32(2.0 * sigma**2))
            # the weighted mean offset of the block's points, faded by the distance to the nearest
            new[near] += (w @ offset) / np.maximum(w.sum(axis=1), 1e-12)[:, None] * w.max(axis=1)[:, None]
    if correction is not None and not correction.is_none:
        # the lips and lids alone: the skin around them keeps its place, so
        # that the corners move against the texture beside them
        new = apply_correction(new, correction).astype(np.float64)
    return (target + amount * (new - target)).astype(np.float32)
