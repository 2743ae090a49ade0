"""FaceFusion's face classifier (FairFace): the gender, age and race class
of a face, from its ``arcface_112_v2`` crop at 224 px (RGB, ImageNet's mean
and deviation).  The age modifier FRAN takes the face's age from it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from faceweave.errors import ModelSignatureError
from faceweave.geometry.templates import warp_to_template
from faceweave.runtime.model import RunnableModel

#: the age classes, by the class number the model gives (years, inclusive-exclusive as FaceFusion's ``range``)
AGE_CLASSES: tuple[range, ...] = (
    range(0, 2),
    range(3, 9),
    range(10, 19),
    range(20, 29),
    range(30, 39),
    range(40, 49),
    range(50, 59),
    range(60, 69),
    range(70, 100),
)
GENDERS = ("male", "female")
RACES = ("white", "black", "latino", "asian", "asian", "indian", "arabic")
_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
_STD = np.array([0.229, 0.224, 0.225], np.float32)


@dataclass(frozen=True)
class FaceClass:
    """What the classifier sees in a face: ``gender``, ``age`` (years) and ``race``."""

    gender: str
    age: range
    race: str

    @property
    def years(self) -> float:
        """The age as one number: the mean of the class's years (FaceFusion's ``numpy.mean(face.age)``)."""
        return float(np.mean(self.age))


def classifier_input(frame: np.ndarray, five: np.ndarray) -> np.ndarray:
    """The model's ``[1, 3, 224, 224]`` float32 input for the face at ``five`` points of an RGB frame."""
    crop, _ = warp_to_template(frame, np.asarray(five, np.float64), "arcface_112_v2", 224)
    x = (crop.astype(np.float32) / 255.0 - _MEAN) / _STD
    return np.expand_dims(x.transpose(2, 0, 1), axis=0)


class FaceClassifier:
    """Classify faces with FairFace (the caller owns ``model``)."""

    def __init__(self, model: RunnableModel, *, name: str = "fairface") -> None:
        if len(model.outputs) < 3:
            raise ModelSignatureError(f"{name}: expected three outputs (race, gender, age), got {len(model.outputs)}")
        self.model, self.name = model, name

    def classify(self, frame: np.ndarray, five: np.ndarray) -> FaceClass:
        """The class of the face at ``five`` ``(5, 2)`` points of ``frame``."""
        result = self.model.run({"input": classifier_input(frame, five)})
        race, gender, age = (int(np.asarray(result[o.name]).reshape(-1)[0]) for o in self.model.outputs[:3])
        return FaceClass(
            gender=GENDERS[1] if gender == 1 else GENDERS[0],
            age=AGE_CLASSES[min(max(age, 0), len(AGE_CLASSES) - 1)],
            race=RACES[race] if 0 <= race < len(RACES) else RACES[0],
        )
