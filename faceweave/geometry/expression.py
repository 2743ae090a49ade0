"""Expression ratios of a face mesh: mouth and eye opening and mouth width
over the distance between the irises.  Pure functions; used by the swap
pipeline's expression check and by ``faceweave evaluate``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from faceweave.geometry import topology as topo

__all__ = ["ExpressionRatios", "expression_ratios"]


@dataclass(frozen=True)
class ExpressionRatios:
    """Mouth and eye openings divided by the distance between the iris centres.

    ``mouth_open``: inner lips 13-14; ``mouth_width``: mouth corners 61-291;
    ``eye_open``: mean of the lid gaps 159-145 and 386-374.
    """

    mouth_open: float
    mouth_width: float
    eye_open: float

    def as_tuple(self) -> tuple[float, float, float]:
        return (self.mouth_open, self.mouth_width, self.eye_open)


def expression_ratios(mesh: np.ndarray) -> ExpressionRatios:
    """:class:`ExpressionRatios` of a ``(478, 2+)`` refined mesh, from the x, y
    image coordinates.  Raises ``ValueError`` when the iris centres coincide."""
    p = np.asarray(mesh, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != 478 or p.shape[1] < 2:
        raise ValueError(f"mesh: expected (478, 2+), got {p.shape}")
    p = p[:, :2]

    def dist(i: int, j: int) -> float:
        return float(np.linalg.norm(p[i] - p[j]))

    eyes = dist(int(topo.RIGHT_IRIS[0]), int(topo.LEFT_IRIS[0]))
    if eyes <= 1e-6:
        raise ValueError("mesh: the iris centres coincide")
    eye_open = (dist(topo.RIGHT_EYE_UPPER, topo.RIGHT_EYE_LOWER) + dist(topo.LEFT_EYE_UPPER, topo.LEFT_EYE_LOWER)) / 2.0
    return ExpressionRatios(
        mouth_open=dist(topo.UPPER_LIP_INNER, topo.LOWER_LIP_INNER) / eyes,
        mouth_width=dist(topo.MOUTH_CORNER_RIGHT, topo.MOUTH_CORNER_LEFT) / eyes,
        eye_open=eye_open / eyes,
    )
