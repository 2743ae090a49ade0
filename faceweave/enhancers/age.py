"""Age modifiers: FaceFusion's ``age_modifier`` (FRAN, StyleGANEX), which
make a face older or younger by ``direction`` (-100 .. 100), run as
FaceFusion 3.x runs them (in RGB here, where FaceFusion flips its BGR):

* **fran**: the face on the ``ffhq_512`` template at 1024 px, RGB in
  ``[0, 1]``, and ``direction`` ``[2]``: the face's age (the mean of its
  FairFace class, :mod:`faceweave.analysis.face_classifier`) and that age
  plus the change, over 100 and clipped to ``[0, 1]``; the output (RGB in
  ``[0, 1]``) pasted back in floating point under FaceFusion's box mask.
* **styleganex**: the face at 256 px (``target``) and the head with its
  surroundings on the ``styleganex_384`` template (the five points drawn
  in by 0.875 about the nose) at 384 px (``target_with_background``), both
  in ``[-1, 1]``, and ``direction``: the change mapped from ``[-100, 100]``
  to ``[2.5, -2.5]``; the output (cut to 8 bits, not rounded, as
  FaceFusion) resized to 1024 px, its colours matched to the 384 crop at
  three scales (FaceFusion's ``match_frame_color``), pasted back under the
  box mask of the 384 crop.

FaceFusion's optional occlusion mask is not applied here.  FRAN's age is
classified on the frame the modifier is given (after the swap: the new
face's age; FaceFusion classifies the target's own face), each frame on
its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from faceweave import names
from faceweave.analysis.face_classifier import FaceClassifier
from faceweave.compositing.facefusion import paste_face
from faceweave.enhancers.base import InferenceModel, find_input, first_output
from faceweave.enhancers.face import check_frame
from faceweave.errors import InvalidOptionError
from faceweave.geometry.templates import warp_to_template
from faceweave.swappers.neural.base import box_mask
from faceweave.types import Face

#: the side FRAN works at, and StyleGANEX's crop, surroundings and result
FRAN_SIZE = 1024
STYLEGANEX_SIZE, STYLEGANEX_WIDE, STYLEGANEX_OUT = 256, 384, 1024


def scale_points(five: np.ndarray, scale: float) -> np.ndarray:
    """The five points drawn towards (or away from) the nose tip by ``scale``."""
    five = np.asarray(five, np.float64)
    return (five - five[2]) * scale + five[2]


def equalize_colour(source: np.ndarray, target: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``target`` plus the difference of the two, both shrunk to ``size`` (area) and grown back (bicubic)."""
    small_source = cv2.resize(source, size, interpolation=cv2.INTER_AREA).astype(np.float32)
    small_target = cv2.resize(target, size, interpolation=cv2.INTER_AREA).astype(np.float32)
    back = cv2.resize(small_source - small_target, target.shape[:2][::-1], interpolation=cv2.INTER_CUBIC)
    return np.add(target, back).clip(0, 255).astype(np.uint8)


def match_colour(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``target``'s colours matched to ``source``'s at three coarse scales
    then at full size (FaceFusion's ``match_frame_color``)."""
    for side in np.linspace(16, target.shape[0], 3, endpoint=False):
        even = round(side / 2) * 2
        source = equalize_colour(source, target, (even, even))
    return equalize_colour(source, target, (target.shape[1], target.shape[0]))


def model_input(crop: np.ndarray, mean: float, std: float) -> np.ndarray:
    """``[1, 3, S, S]`` float32 of an RGB crop: ``(x / 255 - mean) / std``."""
    x = (crop / 255.0 - mean) / std
    return np.expand_dims(x.transpose(2, 0, 1), axis=0).astype(np.float32)


class AgeModifier:
    """Age faces with one age modifier model (the caller owns ``model`` and
    ``classifier``, FRAN's FairFace); ``direction``: years of change, -100
    (younger) .. 100 (older); ``mask_blur``: the box mask's blur."""

    def __init__(
        self,
        model: InferenceModel,
        *,
        name: str,
        direction: int = 0,
        classifier: FaceClassifier | None = None,
        mask_blur: float = 0.3,
    ) -> None:
        if name not in names.AGE_MODIFIERS:
            raise InvalidOptionError(names.unknown("age modifier", name, tuple(names.AGE_MODIFIERS)))
        if not -100 <= direction <= 100:
            raise InvalidOptionError(f"age modifier direction must be from -100 to 100; got {direction}")
        self.name, self.model, self.direction = name, model, int(direction)
        self.family = names.AGE_MODIFIERS[name]
        if self.family == "fran" and classifier is None:
            raise InvalidOptionError("fran takes the face's age from the face classifier (fairface): give one")
        self.classifier = classifier
        find_input(model, "target", model_name=name)
        find_input(model, "direction", model_name=name)
        self._inputs = {info.name for info in model.inputs}
        if self.family == "fran":
            self._mask = box_mask(FRAN_SIZE, blur=mask_blur)
        else:  # the 384 crop's box mask, at the side of the result it is pasted under
            wide = box_mask(STYLEGANEX_WIDE, blur=mask_blur)
            self._mask = cv2.resize(wide, (STYLEGANEX_OUT, STYLEGANEX_OUT))

    def modify(self, frame: np.ndarray, faces: Sequence[Face]) -> np.ndarray:
        """A new ``(H, W, 3)`` uint8 RGB frame with ``faces`` aged; ``frame``
        itself when there is no face; each face cut from the frame the
        previous one left, as FaceFusion does."""
        check_frame(frame)
        if not faces:
            return frame
        out = frame.copy()
        for face in faces:
            if self.family == "fran":
                self._fran(out, np.asarray(face.kps5, np.float64))
            else:
                self._styleganex(out, np.asarray(face.kps5, np.float64))
        return out

    def _run(self, crop: np.ndarray, wide: np.ndarray, direction: np.ndarray) -> np.ndarray:
        feeds = {"target": crop, "target_with_background": wide, "direction": direction}
        return first_output(self.model, self.model.run({k: v for k, v in feeds.items() if k in self._inputs}))[0]

    def _fran(self, out: np.ndarray, five: np.ndarray) -> None:
        crop, matrix = warp_to_template(out, five, "ffhq_512", FRAN_SIZE)
        age = self.classifier.classify(out, five).years if self.classifier is not None else 0.0
        direction = (np.array([age, age + self.direction], np.float32) / 100).clip(0, 1)
        x = model_input(crop, 0.0, 1.0)
        y = self._run(x, x, direction)
        face = y.transpose(1, 2, 0).clip(0, 1) * 255
        paste_face(out, face, self._mask, matrix, out=out)

    def _styleganex(self, out: np.ndarray, five: np.ndarray) -> None:
        crop, _ = warp_to_template(out, five, "ffhq_512", STYLEGANEX_SIZE)
        wide, matrix = warp_to_template(out, scale_points(five, 0.875), "styleganex_384", STYLEGANEX_WIDE)
        direction = np.array(np.interp(self.direction, [-100, 100], [2.5, -2.5])).astype(np.float32)
        y = self._run(model_input(crop, 0.5, 0.5), model_input(wide, 0.5, 0.5), direction)
        levels = (((np.clip(y, -1, 1) + 1) / 2).transpose(1, 2, 0).clip(0, 255) * 255.0).astype(np.uint8)
        grown = cv2.resize(levels, (STYLEGANEX_OUT, STYLEGANEX_OUT), interpolation=cv2.INTER_AREA)
        face = match_colour(wide, grown)
        paste_face(out, face, self._mask, matrix * (STYLEGANEX_OUT / STYLEGANEX_WIDE), out=out)
