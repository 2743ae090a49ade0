"""Expression ratios of a face mesh (mouth and eye opening and mouth width
over the distance between the outer eye corners), and corrections of a new face's
geometry that make its expression read as the target's.  Pure functions;
used by the swap pipeline's expression check and by ``faceweave evaluate``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from faceweave.geometry import topology as topo

__all__ = ["ExpressionCorrection", "ExpressionRatios", "apply_correction", "expression_ratios", "next_correction"]


@dataclass(frozen=True)
class ExpressionRatios:
    """Mouth and eye openings and mouth width divided by the distance
    between the outer eye corners (33-263), as the swap judge and
    ``faceweave evaluate``'s video report measure them.

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
    image coordinates.  Raises ``ValueError`` when the outer eye corners
    coincide.

    The outer corners, not the irises: a new face has the source's eyes,
    whose width beside the distance between its pupils is the source's
    own, and a mouth is seen against the breadth of the eyes (the judge's
    reading); over the pupils' distance a swap could keep every ratio and
    still read as a wider or narrower smile."""
    p = np.asarray(mesh, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != 478 or p.shape[1] < 2:
        raise ValueError(f"mesh: expected (478, 2+), got {p.shape}")
    p = p[:, :2]

    def dist(i: int, j: int) -> float:
        return float(np.linalg.norm(p[i] - p[j]))

    eyes = dist(topo.RIGHT_EYE_OUTER, topo.LEFT_EYE_OUTER)
    if eyes <= 1e-6:
        raise ValueError("mesh: the outer eye corners coincide")
    eye_open = (dist(topo.RIGHT_EYE_UPPER, topo.RIGHT_EYE_LOWER) + dist(topo.LEFT_EYE_UPPER, topo.LEFT_EYE_LOWER)) / 2.0
    return ExpressionRatios(
        mouth_open=dist(topo.UPPER_LIP_INNER, topo.LOWER_LIP_INNER) / eyes,
        mouth_width=dist(topo.MOUTH_CORNER_RIGHT, topo.MOUTH_CORNER_LEFT) / eyes,
        eye_open=eye_open / eyes,
    )


@dataclass(frozen=True)
class ExpressionCorrection:
    """Changes to a new face's geometry that make up for how its expression
    reads off the finished picture.

    ``mouth_width``: factor on the lips along the line of the mouth corners;
    ``mouth_open``: added to the gap between the inner lips, in eye
    distances (the upper lip goes up and the lower lip down by half of it,
    less towards the corners); ``eye_open``: factor on each eyelid gap."""

    mouth_width: float = 1.0
    mouth_open: float = 0.0
    eye_open: float = 1.0

    @property
    def is_none(self) -> bool:
        return self.mouth_width == 1.0 and self.mouth_open == 0.0 and self.eye_open == 1.0


#: how far the eyelid gap may be scaled: opened further, the source's eye
#: texture is stretched into a smear of lashes
EYE_OPEN_LIMITS = (0.85, 1.15)


def corner_axes(p: np.ndarray, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Midpoint of points ``a`` and ``b``, the unit vector from ``a`` to
    ``b``, its normal, and their distance (x, y only)."""
    length = float(np.linalg.norm(p[b, :2] - p[a, :2]))
    u = (p[b, :2] - p[a, :2]) / max(length, 1e-9)
    return (p[a, :2] + p[b, :2]) / 2.0, u, np.array([-u[1], u[0]]), length


def apply_correction(mesh: np.ndarray, correction: ExpressionCorrection) -> np.ndarray:
    """A copy of a ``(478, 3)`` mesh with ``correction`` applied to its lips
    and eyelids (nothing else moves)."""
    out = np.array(mesh, np.float64)
    if correction.is_none:
        return out.astype(np.float32)
    lips = topo.lips_block()
    centre, u, v, width = corner_axes(out, topo.MOUTH_CORNER_RIGHT, topo.MOUTH_CORNER_LEFT)
    if width > 1e-6 and (correction.mouth_width != 1.0 or correction.mouth_open != 0.0):
        rel = out[lips, :2] - centre
        along, across = rel @ u, rel @ v
        if correction.mouth_open != 0.0:
            eyes = float(np.linalg.norm(out[topo.RIGHT_EYE_OUTER, :2] - out[topo.LEFT_EYE_OUTER, :2]))
            upper, lower = out[topo.UPPER_LIP_INNER, :2], out[topo.LOWER_LIP_INNER, :2]
            up = float(np.sign((upper - lower) @ v)) or -1.0  # the upper lip's side along v
            gap = abs(float((upper - lower) @ v))
            delta = max(correction.mouth_open * eyes, -gap)  # a mouth cannot close past shut
            # full at the middle of the mouth, nothing at the corners
            profile = np.clip(1.0 - (2.0 * along / width) ** 2, 0.0, 1.0)
            # the lips part along a curve through the corners and the middle
            # of the opening (a smile's corners sit above both lips' middles)
            middle = float(((upper + lower) / 2.0 - centre) @ v)
            parting = middle * profile
            side = np.where((across - parting) * up > 0, 1.0, -1.0)  # +1 on the upper lip
            across = across + side * up * profile * delta / 2.0
        along = along * correction.mouth_width
        out[lips, :2] = centre + np.outer(along, u) + np.outer(across, v)
    if correction.eye_open != 1.0:
        for loop, corners, _ in topo.eyes():
            c, ue, ve, _ = corner_axes(out, *corners)
            rel = out[loop, :2] - c
            out[loop, :2] = c + np.outer(rel @ ue, ue) + np.outer((rel @ ve) * correction.eye_open, ve)
    return out.astype(np.float32)


def next_correction(
    current: ExpressionCorrection,
    want: ExpressionRatios,
    seen: ExpressionRatios,
    *,
    tolerance: float,
    gain: float,
    eyes: bool = True,
) -> ExpressionCorrection | None:
    """The correction to try next when a face made with ``current`` reads
    as ``seen`` and should read as ``want``; ``None`` when every ratio is
    within ``tolerance`` already.  Factors move by the ratio of the wanted to
    the seen value raised to ``gain`` (a face's reading follows its geometry
    less than one to one), the mouth gap by ``gain`` times the difference;
    all stay within sensible limits (a quarter narrower to a third wider)."""
    width, opening, eye = current.mouth_width, current.mouth_open, current.eye_open
    changed = False
    if abs(want.mouth_width - seen.mouth_width) > tolerance and seen.mouth_width > 1e-6:
        width = float(np.clip(width * (want.mouth_width / seen.mouth_width) ** gain, 0.75, 1.33))
        changed = True
    if abs(want.mouth_open - seen.mouth_open) > tolerance:
        opening = float(np.clip(opening + gain * (want.mouth_open - seen.mouth_open), -0.15, 0.15))
        changed = True
    if eyes and abs(want.eye_open - seen.eye_open) > tolerance and seen.eye_open > 0.02:
        eye = float(np.clip(eye * (want.eye_open / seen.eye_open) ** gain, *EYE_OPEN_LIMITS))
        changed = True
    if not changed:
        return None
    return ExpressionCorrection(mouth_width=width, mouth_open=opening, eye_open=eye)
