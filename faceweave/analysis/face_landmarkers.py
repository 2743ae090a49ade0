"""Face landmarkers as components: FaceFusion's ``2dfan4`` (68 points from a
256 px crop around the detector's box) and ``fan_68_5`` (68 points from the
five), and the registry that makes one by name.

``mediapipe`` (the default) adds no model: the five alignment points are
the detector's (an ONNX detector) or the mesh's (the mediapipe detector).
With ``2dfan4`` they are the 68 points' eyes, nose tip and mouth corners when
its heatmaps are confident enough (FaceFusion's landmarker score, 0.5), else
the detector's.  As in FaceFusion, ``2dfan4`` runs on a crop turned upright
by the face's angle, which ``fan_68_5`` estimates from the five points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import cv2
import numpy as np

from faceweave.analysis import decoding
from faceweave.analysis.face_detectors import bgr
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import estimate_alignment
from faceweave.runtime.model import RunnableModel

#: every name ``--face-landmarker`` takes, the default first
FACE_LANDMARKERS: tuple[str, ...] = ("mediapipe", "2dfan4", "fan_68_5")
#: the catalog entries each landmarker loads
LANDMARKER_MODELS = {"mediapipe": (), "2dfan4": ("2dfan4", "fan_68_5"), "fan_68_5": ("fan_68_5",)}


@dataclass(frozen=True)
class FacePoints:
    """What a landmarker says about one face: the ``(5, 2)`` alignment points
    it settles on, its ``(68, 2)`` points and their confidence (0 when the
    68 points only follow from the five)."""

    five: np.ndarray
    points68: np.ndarray
    score: float


@runtime_checkable
class FaceLandmarker(Protocol):
    name: str

    def points(self, rgb: np.ndarray, box: np.ndarray, five: np.ndarray) -> FacePoints:
        """Points of the face in ``box`` (x1, y1, x2, y2 image pixels) whose
        detector gave the five points ``five`` ``(5, 2)``."""


def _check(model: RunnableModel, name: str, outputs: int) -> None:
    names = [t.name for t in model.inputs]
    if names != ["input"] or len(model.outputs) != outputs:
        raise ModelSignatureError(
            f"face landmarker {name}: expected one input 'input' and {outputs} output(s), "
            f"found inputs {names} and {len(model.outputs)} outputs"
        )


class Fan68From5:
    """``fan_68_5``: the five points aligned to the ``ffhq_512`` template at
    unit size, 68 points predicted there, mapped back."""

    name = "fan_68_5"

    def __init__(self, model: RunnableModel) -> None:
        _check(model, self.name, 1)
        self.model = model

    def points68(self, five: np.ndarray) -> np.ndarray:
        """``(68, 2)`` image points from the five ``(5, 2)``."""
        matrix = estimate_alignment(np.asarray(five, np.float64), "ffhq_512", 1)
        unit = decoding.transform(five, matrix).astype(np.float32)[None]
        out = np.asarray(self.model.run({"input": unit})[self.model.outputs[0].name], np.float64)
        return decoding.transform(out.reshape(-1, 2), cv2.invertAffineTransform(matrix))

    def points(self, rgb: np.ndarray, box: np.ndarray, five: np.ndarray) -> FacePoints:
        return FacePoints(five=np.asarray(five, np.float64), points68=self.points68(five), score=0.0)


class Fan2dLandmarker:
    """``2dfan4``: the box's longer side scaled to 195 px in a 256 px square,
    turned upright by the face's angle, the Lab round trip, BGR in [0, 1];
    the graph gives 68 points on its 64 px heatmap grid and the heatmaps,
    whose mean peak is the score.  ``min_score``: the score above which its
    five points replace the detector's."""

    name = "2dfan4"

    def __init__(self, model: RunnableModel, angle_model: Fan68From5, *, min_score: float = 0.5) -> None:
        _check(model, self.name, 2)
        self.model = model
        self.angle_model = angle_model
        self.min_score = min_score

    def run(self, rgb: np.ndarray, box: np.ndarray, angle: int) -> tuple[np.ndarray, float]:
        """``(68, 2)`` image points and the score, the crop turned by ``angle``."""
        side = decoding.FAN_CROP
        to_crop = decoding.fan_crop_matrix(np.asarray(box, np.float64))
        turn = decoding.rotation_about_centre(angle, side)
        crop = cv2.warpAffine(bgr(rgb), to_crop, (side, side))
        crop = decoding.lift_dark(cv2.warpAffine(crop, turn, (side, side)))
        tensor = (crop.transpose(2, 0, 1).astype(np.float32) / 255.0)[None]
        result = self.model.run({"input": tensor})
        marks, heatmaps = (np.asarray(result[t.name]) for t in self.model.outputs)
        grid = np.asarray(marks, np.float64).reshape(-1, 68, marks.shape[-1])[0, :, :2]
        points = grid / decoding.FAN_HEATMAP * side
        points = decoding.transform(points, cv2.invertAffineTransform(turn))
        points = decoding.transform(points, cv2.invertAffineTransform(to_crop))
        return points, decoding.heatmap_score(np.asarray(heatmaps)[0])

    def points(self, rgb: np.ndarray, box: np.ndarray, five: np.ndarray) -> FacePoints:
        angle = decoding.face_angle(self.angle_model.points68(five))
        points, score = self.run(rgb, box, angle)
        chosen = decoding.five_from_68(points) if score > self.min_score else np.asarray(five, np.float64)
        return FacePoints(five=chosen, points68=points, score=score)


def check_face_landmarker(name: str) -> str:
    """``name`` when it is a registered landmarker, else :class:`InvalidOptionError`
    naming the accepted ones."""
    if name not in FACE_LANDMARKERS:
        raise InvalidOptionError(f"unknown face landmarker {name!r}; one of {', '.join(FACE_LANDMARKERS)}")
    return name


def create_face_landmarker(
    name: str, load: Callable[[str], RunnableModel], *, min_score: float = 0.5
) -> FaceLandmarker | None:
    """The landmarker ``name`` on models from ``load(catalog name)``; ``None``
    for ``mediapipe`` (the mesh's points)."""
    check_face_landmarker(name)
    if name == "mediapipe":
        return None
    fan_68_5 = Fan68From5(load("fan_68_5"))
    if name == "fan_68_5":
        return fan_68_5
    return Fan2dLandmarker(load("2dfan4"), fan_68_5, min_score=min_score)
