"""The face editor: FaceFusion's ``face_editor`` (LivePortrait), which
moves a face's eyebrows, gaze, eyes, lips, mouth and head by knobs from -1
to 1 (:class:`~faceweave.options.FaceEditOptions`), run as FaceFusion 3.x
runs it (in RGB; LivePortrait takes RGB, so FaceFusion's flips cancel).

The face is cut on the ``ffhq_512`` template at 512 px, its five points
spread by 1.5 about the nose, and seen at 256 px.  The motion extractor
gives its pose, scale, translation, expression and canonical key points;
each knob nudges some key points' expression offsets (:data:`NUDGES`: a
point, an axis and the offset at full turn, ``numpy.interp`` of the knob
over ``[-1, 1]``, some only on one side of 0), the expression is limited to
LivePortrait's range, the head is turned by the pitch, yaw and roll knobs
(20, 60 and 15 degrees at full turn, within LivePortrait's limits), the
eye and lip retargeters add the eyes' and lips' opening (their ratio on
the face's 68 points; the shift scaled by the knob), the stitcher fits the
edited key points to the head, and the generator draws the face moved from
its own key points to those, pasted back (cut to 8 bits) under the box mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.spatial.transform import Rotation

from faceweave.compositing.facefusion import paste_face
from faceweave.enhancers.age import scale_points
from faceweave.enhancers.face import check_frame
from faceweave.enhancers.lips import face_points68
from faceweave.enhancers.restorer import CROP, EXPRESSION_MAX, EXPRESSION_MIN, LivePortrait, Motion, portrait_input
from faceweave.errors import InvalidOptionError
from faceweave.geometry.templates import warp_to_template
from faceweave.options import FaceEditOptions
from faceweave.swappers.neural.base import box_mask
from faceweave.types import Face


@dataclass(frozen=True)
class Nudge:
    """One key point's expression offset moved by a knob: ``point``, ``axis``
    (0 x, 1 y, 2 z), ``sign`` and ``span`` (the offset at a full turn), only
    when the knob is above 0 (``"up"``), at or below it (``"down"``) or always."""

    knob: str
    point: int
    axis: int
    sign: int
    span: float
    when: Literal["up", "down", "always"] = "always"


def _n(knob: str, when: Literal["up", "down", "always"], *moves: tuple[int, int, int, float]) -> tuple[Nudge, ...]:
    return tuple(Nudge(knob, point, axis, sign, span, when) for point, axis, sign, span in moves)


#: FaceFusion 3.8.1's nudges, in the order it applies them (gaze, grim, mouth position, pout, purse,
#: smile, eyebrows): (point, axis, sign, span)
NUDGES: tuple[Nudge, ...] = (
    *_n("eye_gaze_horizontal", "up", (11, 0, 1, 0.015), (15, 0, 1, 0.020)),
    *_n("eye_gaze_horizontal", "down", (11, 0, 1, 0.020), (15, 0, 1, 0.015)),
    *_n("eye_gaze_vertical", "always", (1, 1, 1, 0.0025), (2, 1, -1, 0.0025), (11, 1, -1, 0.010)),
    *_n("eye_gaze_vertical", "always", (13, 1, -1, 0.005), (15, 1, -1, 0.010), (16, 1, -1, 0.005)),
    *_n("mouth_grim", "up", (17, 2, -1, 0.005), (19, 2, 1, 0.01), (20, 1, -1, 0.06), (20, 2, -1, 0.03)),
    *_n("mouth_grim", "down", (19, 1, -1, 0.05), (19, 2, -1, 0.02), (20, 2, -1, 0.03)),
    *_n("mouth_position_horizontal", "always", (19, 0, 1, 0.05), (20, 0, 1, 0.04)),
    *_n("mouth_position_vertical", "up", (19, 1, -1, 0.04), (20, 1, -1, 0.02)),
    *_n("mouth_position_vertical", "down", (19, 1, -1, 0.05), (20, 1, -1, 0.04)),
    *_n("mouth_pout", "up", (19, 1, -1, 0.022), (19, 2, 1, 0.025), (20, 2, -1, 0.002)),
    *_n("mouth_pout", "down", (19, 1, 1, 0.022), (19, 2, 1, 0.025), (20, 2, -1, 0.002)),
    *_n("mouth_purse", "up", (19, 1, -1, 0.04), (19, 2, -1, 0.02)),
    *_n("mouth_purse", "down", (14, 1, -1, 0.02), (17, 2, 1, 0.01), (19, 2, -1, 0.015), (20, 2, -1, 0.002)),
    *_n("mouth_smile", "up", (20, 1, -1, 0.015), (14, 1, -1, 0.025), (17, 1, 1, 0.01), (17, 2, 1, 0.004)),
    *_n("mouth_smile", "up", (3, 1, -1, 0.0045), (7, 1, -1, 0.0045)),
    *_n("mouth_smile", "down", (14, 1, -1, 0.02), (17, 1, 1, 0.003), (19, 1, 1, 0.02), (19, 2, -1, 0.005)),
    *_n("mouth_smile", "down", (20, 2, 1, 0.01), (3, 1, 1, 0.0045), (7, 1, 1, 0.0045)),
    *_n("eyebrow_direction", "up", (1, 1, 1, 0.015), (2, 1, -1, 0.020)),
    *_n("eyebrow_direction", "down", (1, 0, -1, 0.015), (2, 0, 1, 0.020), (1, 1, 1, 0.005), (2, 1, -1, 0.005)),
)
#: degrees of head turn at a full turn of the pitch, yaw and roll knobs (the sign: as FaceFusion maps them)
HEAD_TURN = {"head_pitch": -20.0, "head_yaw": -60.0, "head_roll": 15.0}
#: LivePortrait's head limits (degrees), widened to the face's own angle where it is already past them
ANGLE_LIMITS = {"pitch": 30.0, "yaw": 60.0, "roll": 20.0}


def nudged(expression: np.ndarray, edit: FaceEditOptions) -> np.ndarray:
    """``expression`` ``[1, 21, 3]`` with every nudge of :data:`NUDGES`
    applied, then limited to LivePortrait's range."""
    out = np.array(expression, copy=True)
    for nudge in NUDGES:
        value = float(getattr(edit, nudge.knob))
        if (nudge.when == "up" and not value > 0) or (nudge.when == "down" and value > 0):
            continue
        step = np.interp(value, [-1, 1], [-nudge.span, nudge.span])
        if nudge.sign > 0:
            out[0, nudge.point, nudge.axis] += step
        else:
            out[0, nudge.point, nudge.axis] -= step
    return np.clip(out, EXPRESSION_MIN, EXPRESSION_MAX)


def _limited(angle: float, turned: float, limit: float) -> float:
    low, high = -limit, limit
    if angle < 0:
        low = min(angle, low)
    else:
        high = max(angle, high)
    return float(np.clip(turned, low, high))


def turned(motion: Motion, edit: FaceEditOptions) -> np.ndarray:
    """``(3, 3)`` float32: the head's rotation turned by the pitch, yaw and roll knobs, within the limits."""
    angles = []
    for axis, knob in zip(("pitch", "yaw", "roll"), HEAD_TURN, strict=True):
        angle = getattr(motion, axis)
        span = HEAD_TURN[knob]
        moved = angle + float(np.interp(float(getattr(edit, knob)), [-1, 1], [-span, span]))
        angles.append(_limited(angle, moved, ANGLE_LIMITS[axis]))
    return Rotation.from_euler("xyz", angles, degrees=True).as_matrix().astype(np.float32)


def opening_ratio(points68: np.ndarray, top: int, bottom: int, left: int, right: int) -> float:
    """How open an eye or the lips are: the top-bottom distance over the left-right one."""
    vertical = np.linalg.norm(points68[top] - points68[bottom])
    return float(vertical / (np.linalg.norm(points68[left] - points68[right]) + 1e-6))


class FaceEditor:
    """Edit faces with LivePortrait (with its retargeters and stitcher) by
    the knobs of ``edit``; ``mask_blur``: the box mask's."""

    def __init__(self, portrait: LivePortrait, edit: FaceEditOptions, *, mask_blur: float = 0.3) -> None:
        if portrait.eye is None or portrait.lip is None or portrait.stitcher is None:
            raise InvalidOptionError("the face editor needs LivePortrait's eye and lip retargeters and its stitcher")
        self.portrait, self.edit = portrait, edit
        self._mask = box_mask(CROP, blur=mask_blur)

    def apply(self, frame: np.ndarray, faces: Sequence[Face]) -> np.ndarray:
        """A new frame with ``faces`` edited (each cut from the frame the
        previous one left); ``frame`` itself when there is no face."""
        check_frame(frame)
        if not faces:
            return frame
        out = frame.copy()
        for face in faces:
            five = scale_points(np.asarray(face.kps5, np.float64), 1.5)
            crop, matrix = warp_to_template(out, five, "ffhq_512", CROP)
            paste_face(out, self._edited(portrait_input(crop), face_points68(face)), self._mask, matrix, out=out)
        return out

    def _edited(self, seen: np.ndarray, points68: np.ndarray | None) -> np.ndarray:
        volume = self.portrait.features(seen)
        motion = self.portrait.motion(seen)
        target = motion.moved(motion.expression)
        source = motion.points @ turned(motion, self.edit).T
        source += nudged(motion.expression, self.edit)
        source *= motion.scale
        source += motion.translation
        if points68 is not None:  # a face kept from five points alone has no eye or lip opening to start from
            source += self._opening("eye", target, points68)
            source += self._opening("lip", target, points68)
        return self.portrait.generate(volume, self.portrait.stitch(source, target), target)

    def _opening(self, part: str, target: np.ndarray, points68: np.ndarray) -> np.ndarray:
        """The eye or lip retargeter's shift of the key points, scaled by its knob."""
        knob = self.edit.eye_open_ratio if part == "eye" else self.edit.lip_open_ratio
        if part == "eye":
            ratios = [opening_ratio(points68, 37, 40, 39, 36), opening_ratio(points68, 43, 46, 45, 42)]
            wanted = 0.0 if knob < 0 else 0.6
        else:
            ratios = [opening_ratio(points68, 62, 66, 54, 48)]
            wanted = 0.0 if knob < 0 else 1.0
        points = np.concatenate([target.ravel(), [*ratios, wanted]]).reshape(1, -1).astype(np.float32)
        return (self.portrait.retarget(part, points) * np.abs(knob)).reshape(-1, 21, 3)
