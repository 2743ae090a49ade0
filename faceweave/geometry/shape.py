"""Carry one face's 3D shape onto another face's pose and expression."""

from __future__ import annotations

import numpy as np

from faceweave.geometry import topology as topo
from faceweave.geometry.align import apply_similarity, procrustes


def transfer_shape(target: np.ndarray, source: np.ndarray, *, amount: float = 1.0) -> np.ndarray:
    """A new ``(478, 3)`` mesh with the source's face shape in the target's pose.

    The source mesh is fitted onto the target with a 3D similarity on stable
    points (no lips, eyelids or irises); the result takes the fitted source
    everywhere except the lips and each eye, which keep the target's own
    points moved as blocks: shifted by their mean offset and scaled about
    their centre by the change of the distance between the eyes, so that the
    target's expression (mouth and eye opening, mouth width, all relative to
    the eye distance) stays.  ``amount`` in ``[0, 1]`` blends from the
    target's shape (0) to the source's (1).
    """
    target = np.asarray(target, np.float64)
    stable = topo.stable_points()
    s, r, t = procrustes(np.asarray(source, np.float64)[stable], target[stable])
    fitted = apply_similarity(source, s, r, t).astype(np.float64)
    new = fitted.copy()
    eyes = (np.concatenate([topo.right_eye(), topo.RIGHT_IRIS]), np.concatenate([topo.left_eye(), topo.LEFT_IRIS]))

    def eye_distance(mesh: np.ndarray) -> float:
        return float(np.linalg.norm(mesh[eyes[0]].mean(axis=0) - mesh[eyes[1]].mean(axis=0)))

    k = eye_distance(fitted) / max(eye_distance(target), 1e-6)
    for block in (topo.lips_block(), *eyes):
        centre_t = target[block].mean(axis=0)
        new[block] = fitted[block].mean(axis=0) + k * (target[block] - centre_t)
    return (target + amount * (new - target)).astype(np.float32)
