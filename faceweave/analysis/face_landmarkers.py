"""Face landmarkers as components: FaceFusion's ``2dfan4`` and
``peppa_wutz`` (68 points from a 256 px crop around the detector's box),
``many`` (both, FaceFusion's choice between them) and ``fan_68_5`` (68
points from the five), and the registry that makes one by name.

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

from faceweave import names
from faceweave.analysis import decoding
from faceweave.analysis.face_detectors import bgr
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import estimate_alignment
from faceweave.runtime.model import RunnableModel

#: every name ``--face-landmarker`` takes, the default first
FACE_LANDMARKERS: tuple[str, ...] = names.FACE_LANDMARKERS
#: the catalog entries each landmarker loads
LANDMARKER_MODELS = names.LANDMARKER_MODELS
#: ``many``: 2dfan4's points are kept unless peppa_wutz's score is more than this above its own (FaceFusion's)
MANY_MARGIN = 0.2


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


class _CropLandmarker:
    """A landmarker on :class:`UprightCrop` (2dfan4, peppa_wutz): the face's
    angle from ``angle_model``, the 68 points and a score from :meth:`run`;
    ``min_score``: the score above which its five points replace the
    detector's."""

    name: str
    #: how many outputs the graph has
    outputs: int

    def __init__(self, model: RunnableModel, angle_model: Fan68From5, *, min_score: float = 0.5) -> None:
        _check(model, self.name, self.outputs)
        self.model = model
        self.angle_model = angle_model
        self.min_score = min_score

    def run(self, rgb: np.ndarray, box: np.ndarray, angle: int) -> tuple[np.ndarray, float]:
        raise NotImplementedError

    def points(self, rgb: np.ndarray, box: np.ndarray, five: np.ndarray) -> FacePoints:
        angle = decoding.face_angle(self.angle_model.points68(five))
        points, score = self.run(rgb, box, angle)
        return _settled(points, score, five, self.min_score)


class Fan2dLandmarker(_CropLandmarker):
    """``2dfan4``: the box's longer side scaled to 195 px in a 256 px square,
    turned upright by the face's angle, the Lab round trip, BGR in [0, 1];
    the graph gives 68 points on its 64 px heatmap grid and the heatmaps,
    whose mean peak is the score."""

    name = "2dfan4"
    outputs = 2

    def run(self, rgb: np.ndarray, box: np.ndarray, angle: int) -> tuple[np.ndarray, float]:
        """``(68, 2)`` image points and the score, the crop turned by ``angle``."""
        crop = UprightCrop.of(rgb, box, angle)
        result = self.model.run({"input": crop.tensor})
        marks, heatmaps = (np.asarray(result[t.name]) for t in self.model.outputs)
        grid = np.asarray(marks, np.float64).reshape(-1, 68, marks.shape[-1])[0, :, :2]
        return crop.back(grid), decoding.heatmap_score(np.asarray(heatmaps)[0])


def _settled(points: np.ndarray, score: float, five: np.ndarray, min_score: float) -> FacePoints:
    """The 68 points' five when ``score`` is above ``min_score``, else the detector's ``five``."""
    chosen = decoding.five_from_68(points) if score > min_score else np.asarray(five, np.float64)
    return FacePoints(five=chosen, points68=points, score=score)


@dataclass(frozen=True)
class UprightCrop:
    """The 256 px crop 2dfan4 and peppa_wutz see: the box's longer side at
    195 px, turned upright by the face's angle, the Lab round trip, BGR in
    ``[0, 1]`` as a ``(1, 3, 256, 256)`` tensor, and the two warps back."""

    tensor: np.ndarray
    to_crop: np.ndarray
    turn: np.ndarray

    @staticmethod
    def of(rgb: np.ndarray, box: np.ndarray, angle: int) -> UprightCrop:
        side = decoding.FAN_CROP
        to_crop = decoding.fan_crop_matrix(np.asarray(box, np.float64))
        turn = decoding.rotation_about_centre(angle, side)
        crop = cv2.warpAffine(bgr(rgb), to_crop, (side, side))
        crop = decoding.lift_dark(cv2.warpAffine(crop, turn, (side, side)))
        tensor = (crop.transpose(2, 0, 1).astype(np.float32) / 255.0)[None]
        return UprightCrop(tensor=tensor, to_crop=to_crop, turn=turn)

    def back(self, grid: np.ndarray) -> np.ndarray:
        """Image points of ``(68, 2)`` points on the 64 px heatmap grid of the crop."""
        points = np.asarray(grid, np.float64) / decoding.FAN_HEATMAP * decoding.FAN_CROP
        points = decoding.transform(points, cv2.invertAffineTransform(self.turn))
        return decoding.transform(points, cv2.invertAffineTransform(self.to_crop))


class PeppaWutzLandmarker(_CropLandmarker):
    """``peppa_wutz``: the crop 2dfan4 sees; its one output holds, per point,
    x and y on the 64 px grid and a confidence, whose mean stretched so that
    0.95 is 1 is the score (FaceFusion's)."""

    name = "peppa_wutz"
    outputs = 1

    def run(self, rgb: np.ndarray, box: np.ndarray, angle: int) -> tuple[np.ndarray, float]:
        crop = UprightCrop.of(rgb, box, angle)
        out = np.asarray(self.model.run({"input": crop.tensor})[self.model.outputs[0].name], np.float64)
        if out.size != 68 * 3:
            raise ModelSignatureError(
                f"face landmarker peppa_wutz: expected 68 x (x, y, score) = 204 values, got shape {list(out.shape)}"
            )
        rows = out.reshape(-1, 3)
        score = float(np.interp(rows[:, 2].mean(), [0.0, 0.95], [0.0, 1.0]))
        return crop.back(rows[:, :2]), score


class ManyLandmarkers:
    """FaceFusion's ``many``: 2dfan4 and peppa_wutz on the same crop, and
    2dfan4's points unless peppa_wutz's score beats 2dfan4's by more than
    :data:`MANY_MARGIN`."""

    name = "many"

    def __init__(self, fan: Fan2dLandmarker, peppa: PeppaWutzLandmarker, *, min_score: float = 0.5) -> None:
        self.fan, self.peppa, self.min_score = fan, peppa, min_score

    def points(self, rgb: np.ndarray, box: np.ndarray, five: np.ndarray) -> FacePoints:
        angle = decoding.face_angle(self.fan.angle_model.points68(five))
        fan_points, fan_score = self.fan.run(rgb, box, angle)
        peppa_points, peppa_score = self.peppa.run(rgb, box, angle)
        if fan_score > peppa_score - MANY_MARGIN:
            return _settled(fan_points, fan_score, five, self.min_score)
        return _settled(peppa_points, peppa_score, five, self.min_score)


def check_face_landmarker(name: str) -> str:
    """``name`` when it is a registered landmarker, else :class:`InvalidOptionError`
    naming the accepted ones."""
    if name not in FACE_LANDMARKERS:
        raise InvalidOptionError(names.unknown("face landmarker", name, FACE_LANDMARKERS))
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
    if name == "peppa_wutz":
        return PeppaWutzLandmarker(load("peppa_wutz"), fan_68_5, min_score=min_score)
    fan = Fan2dLandmarker(load("2dfan4"), fan_68_5, min_score=min_score)
    if name == "2dfan4":
        return fan
    peppa = PeppaWutzLandmarker(load("peppa_wutz"), fan_68_5, min_score=min_score)
    return ManyLandmarkers(fan, peppa, min_score=min_score)
