"""Frozen values passed between the compositing steps, with their array
shapes.  ``S`` is the side of the working crop; ``s = S // 2`` the side of
the half-resolution grid where masks and shading are made."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from faceweave.compositing.colour import ColourMatch


@dataclass(frozen=True, eq=False)
class HalfCrop:
    """The swap at half resolution, where the smooth maps are made.

    ``face_lab`` ``(s, s, 3)`` float32 CIELAB of the new face; ``behind_lab``
    ``(s, s, 3)`` float32 CIELAB of the target behind it (hands in front
    already put back); ``mesh`` ``(478, 3)`` float32 the output's mesh in
    half-crop pixels; ``face_size`` the face's size in half-crop pixels."""

    face_lab: np.ndarray
    behind_lab: np.ndarray
    mesh: np.ndarray
    face_size: float

    @property
    def size(self) -> tuple[int, int]:
        """``(W, H)`` of the half-resolution grid."""
        return int(self.face_lab.shape[1]), int(self.face_lab.shape[0])


@dataclass(frozen=True, eq=False)
class CompositeMasks:
    """The masks of one composite.

    ``mask`` ``(S, S)`` float32 in ``[0, 1]``: the blend mask (1 = new face);
    ``paste`` ``(S, S)`` float32 in ``[0, 1]``: where the crop replaces the
    frame; ``detail`` ``(S, S)`` float32: the new face's bare skin;
    ``skin`` ``(s, s)`` float32: the bare skin both faces show, where the
    colour statistics are measured."""

    mask: np.ndarray
    paste: np.ndarray
    detail: np.ndarray
    skin: np.ndarray


@dataclass(frozen=True, eq=False)
class ColourPlan:
    """How the new face's colour is changed: ``match`` maps its skin colour
    to the target's; ``shading`` ``(s, s, 3)`` float32 CIELAB offset, the
    target's low-frequency shading minus the matched face's, added
    ``amount`` (0..1) times."""

    match: ColourMatch
    shading: np.ndarray
    amount: float


@dataclass(frozen=True, eq=False)
class Composite:
    """``pixels`` ``(S, S, 3)`` uint8 result crop; ``mask`` ``(S, S)``
    float32 the blend mask; ``paste`` ``(S, S)`` float32: where the crop
    replaces the frame; ``detail`` ``(S, S)`` float32: the bare skin of the
    new face, where the target's own fine grain may be added back at full
    resolution."""

    pixels: np.ndarray
    mask: np.ndarray
    paste: np.ndarray
    detail: np.ndarray
