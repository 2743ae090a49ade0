"""The expression restorer: FaceFusion's ``expression_restorer``
(LivePortrait), which gives a swapped face back the expression the target's
own face had, run as FaceFusion 3.x runs it (in RGB, where FaceFusion flips
its BGR; LivePortrait takes RGB, so the flips cancel).

The target's original face and the swapped face are cut on the
``arcface_128`` template at 512 px (``INTER_AREA``, edges replicated) and
seen at 256 px in ``[0, 1]``.  LivePortrait's motion extractor gives each
its head pose, scale, translation, expression (21 key points' offsets) and
canonical key points; the expression moved to is the swapped face's, with
the original's in the areas asked for (upper face: points 1, 2, 6, 10-13,
15, 16; lower face: 3, 7, 14, 17-20; points 0, 4, 5, 8, 9 always the
swapped face's), mixed by ``factor`` (``0-100`` mapped to ``0-1.2``) and
limited to LivePortrait's range; the generator moves the swapped face's
feature volume from its own key points to those, and its output (cut to 8
bits) is pasted back under the box mask.  FaceFusion's optional occlusion
mask is not applied here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from faceweave import names
from faceweave.compositing.facefusion import paste_face
from faceweave.enhancers.base import InferenceModel, find_input, first_output
from faceweave.enhancers.face import check_frame
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import warp_to_template
from faceweave.swappers.neural.base import box_mask
from faceweave.types import Face

#: the side of the aligned crop, and the side LivePortrait sees it at
CROP, SEEN = 512, 256
#: the key points of each area (the others always keep the swapped face's)
AREA_POINTS = {"upper-face": (1, 2, 6, 10, 11, 12, 13, 15, 16), "lower-face": (3, 7, 14, 17, 18, 19, 20)}
KEPT_POINTS = (0, 4, 5, 8, 9)

# LivePortrait's range of each key point's expression offset (x, y, z), as FaceFusion limits it
# (``facefusion/processors/live_portrait.py``; LivePortrait is MIT-licensed)
EXPRESSION_MIN = np.array(
    [
        [-2.88067125e-02, -8.12731311e-02, -1.70541159e-03],
        [-4.88598682e-02, -3.32196616e-02, -1.67431499e-04],
        [-6.75425082e-02, -4.28681746e-02, -1.98950816e-04],
        [-7.23103955e-02, -3.28503326e-02, -7.31324719e-04],
        [-3.87073644e-02, -6.01546466e-02, -5.50269964e-04],
        [-6.38048723e-02, -2.23840728e-01, -7.13261834e-04],
        [-3.02710701e-02, -3.93195450e-02, -8.24086510e-06],
        [-2.95799859e-02, -5.39318882e-02, -1.74219604e-04],
        [-2.92359516e-02, -1.53050944e-02, -6.30460854e-05],
        [-5.56493877e-03, -2.34344602e-02, -1.26858242e-04],
        [-4.37593013e-02, -2.77768299e-02, -2.70503685e-02],
        [-1.76926646e-02, -1.91676542e-02, -1.15090821e-04],
        [-8.34268332e-03, -3.99775570e-03, -3.27481248e-05],
        [-3.40162888e-02, -2.81868968e-02, -1.96679524e-04],
        [-2.91855410e-02, -3.97511162e-02, -2.81230678e-05],
        [-1.50395725e-02, -2.49494594e-02, -9.42573533e-05],
        [-1.67938769e-02, -2.00953931e-02, -4.00750607e-04],
        [-1.86435618e-02, -2.48535164e-02, -2.74416432e-02],
        [-4.61211195e-03, -1.21660791e-02, -2.93173041e-04],
        [-4.10017073e-02, -7.43824020e-02, -4.42762971e-02],
        [-1.90370996e-02, -3.74363363e-02, -1.34740388e-02],
    ],
    np.float32,
)[None]
EXPRESSION_MAX = np.array(
    [
        [4.46682945e-02, 7.08772913e-02, 4.08344204e-04],
        [2.14308221e-02, 6.15894832e-02, 4.85319615e-05],
        [3.02363783e-02, 4.45043296e-02, 1.28298725e-05],
        [3.05869691e-02, 3.79812494e-02, 6.57040102e-04],
        [4.45670523e-02, 3.97259220e-02, 7.10966764e-04],
        [9.43699256e-02, 9.85926315e-02, 2.02551950e-04],
        [1.61131397e-02, 2.92906128e-02, 3.44733417e-06],
        [5.23825921e-02, 1.07065082e-01, 6.61510974e-04],
        [2.85718683e-03, 8.32320191e-03, 2.39314613e-04],
        [2.57947259e-02, 1.60935968e-02, 2.41853559e-05],
        [4.90833223e-02, 3.43903080e-02, 3.22353356e-02],
        [1.44766076e-02, 3.39248963e-02, 1.42291479e-04],
        [8.75749043e-04, 6.82212645e-03, 2.76097053e-05],
        [1.86958015e-02, 3.84016186e-02, 7.33085908e-05],
        [2.01714113e-02, 4.90544215e-02, 2.34028921e-05],
        [2.46518422e-02, 3.29151377e-02, 3.48571630e-05],
        [2.22457591e-02, 1.21796541e-02, 1.56396593e-04],
        [1.72109623e-02, 3.01626958e-02, 1.36556877e-02],
        [1.83460284e-02, 1.61141958e-02, 2.87440169e-04],
        [3.57594155e-02, 1.80554688e-01, 2.75554154e-02],
        [2.17450950e-02, 8.66811201e-02, 3.34241726e-02],
    ],
    np.float32,
)[None]


@dataclass(frozen=True)
class Motion:
    """What LivePortrait's motion extractor sees in a face: head pose in
    degrees, ``scale``, ``translation``, the ``expression`` offsets and the
    canonical key ``points`` (``[1, 21, 3]`` each)."""

    pitch: float
    yaw: float
    roll: float
    scale: np.ndarray
    translation: np.ndarray
    expression: np.ndarray
    points: np.ndarray

    def rotation(self) -> np.ndarray:
        """``(3, 3)`` float32: the head's rotation (``xyz`` Euler angles)."""
        angles = [self.pitch, self.yaw, self.roll]
        return Rotation.from_euler("xyz", angles, degrees=True).as_matrix().astype(np.float32)

    def moved(self, expression: np.ndarray) -> np.ndarray:
        """The key points in the frame's pose with ``expression``."""
        return self.scale * (self.points @ self.rotation().T + expression) + self.translation


def portrait_input(crop: np.ndarray) -> np.ndarray:
    """``[1, 3, 256, 256]`` float32 of a 512 px RGB crop, in ``[0, 1]``."""
    small = cv2.resize(crop, (SEEN, SEEN), interpolation=cv2.INTER_AREA) / 255.0
    return np.expand_dims(small.transpose(2, 0, 1), axis=0).astype(np.float32)


def restored_expression(swapped: np.ndarray, original: np.ndarray, factor: float, areas: Sequence[str]) -> np.ndarray:
    """The expression to move to: the original's in ``areas``, the swapped
    face's elsewhere, mixed by ``factor`` (0-1.2), within LivePortrait's range."""
    wanted = np.array(original, copy=True)
    for area, points in AREA_POINTS.items():
        if area not in areas:
            wanted[:, list(points)] = swapped[:, list(points)]
    wanted[:, list(KEPT_POINTS)] = swapped[:, list(KEPT_POINTS)]
    wanted = wanted * factor + swapped * (1 - factor)
    return np.clip(wanted, EXPRESSION_MIN, EXPRESSION_MAX)


class LivePortrait:
    """LivePortrait's feature extractor, motion extractor and generator, and
    the face editor's eye and lip retargeters and stitcher when given (the
    caller owns the models)."""

    def __init__(
        self,
        features: InferenceModel,
        motion: InferenceModel,
        generator: InferenceModel,
        *,
        eye: InferenceModel | None = None,
        lip: InferenceModel | None = None,
        stitcher: InferenceModel | None = None,
    ) -> None:
        for model, part in ((features, "feature_extractor"), (motion, "motion_extractor")):
            find_input(model, "input", model_name=names.LIVE_PORTRAIT[part])
        for name in ("feature_volume", "source", "target"):
            find_input(generator, name, model_name=names.LIVE_PORTRAIT["generator"])
        if len(motion.outputs) < 7:
            raise ModelSignatureError(
                f"{names.LIVE_PORTRAIT['motion_extractor']}: expected 7 outputs (pitch, yaw, roll, scale, "
                f"translation, expression, motion points), got {len(motion.outputs)}"
            )
        self.features_model, self.motion_model, self.generator = features, motion, generator
        for retargeter, part in ((eye, "eye_retargeter"), (lip, "lip_retargeter")):
            if retargeter is not None:
                find_input(retargeter, "input", model_name=names.LIVE_PORTRAIT[part])
        if stitcher is not None:
            for name in ("source", "target"):
                find_input(stitcher, name, model_name=names.LIVE_PORTRAIT["stitcher"])
        self.eye, self.lip, self.stitcher = eye, lip, stitcher

    def features(self, seen: np.ndarray) -> np.ndarray:
        return first_output(self.features_model, self.features_model.run({"input": seen}))

    def motion(self, seen: np.ndarray) -> Motion:
        result = self.motion_model.run({"input": seen})
        pitch, yaw, roll, scale, translation, expression, points = (
            np.asarray(result[o.name]) for o in self.motion_model.outputs[:7]
        )
        return Motion(
            float(pitch.reshape(-1)[0]),
            float(yaw.reshape(-1)[0]),
            float(roll.reshape(-1)[0]),
            scale,
            translation,
            expression,
            points,
        )

    def retarget(self, part: str, points: np.ndarray) -> np.ndarray:
        """The eye (``part`` ``"eye"``) or lip retargeter's first output for ``points`` ``[1, N]``."""
        model: InferenceModel | None = self.eye if part == "eye" else self.lip
        if model is None:
            raise InvalidOptionError(f"this LivePortrait has no {part} retargeter")
        return first_output(model, model.run({"input": points}))

    def stitch(self, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        """The stitcher's first output: the edited key points ``source`` stitched to ``target``'s head."""
        if self.stitcher is None:
            raise InvalidOptionError("this LivePortrait has no stitcher")
        feeds = {"source": source.astype(np.float32), "target": target.astype(np.float32)}
        return first_output(self.stitcher, self.stitcher.run(feeds))

    def generate(self, volume: np.ndarray, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        """``(512, 512, 3)`` uint8 RGB: the feature volume moved from ``target`` key points to ``source``."""
        feeds = {"feature_volume": volume, "source": source.astype(np.float32), "target": target.astype(np.float32)}
        y = first_output(self.generator, self.generator.run(feeds))
        if y.shape[1:] != (3, CROP, CROP):
            raise ModelSignatureError(
                f"live_portrait_generator: output expected shape [1, 3, 512, 512], got {list(y.shape)}"
            )
        return (y[0].transpose(1, 2, 0).clip(0, 1) * 255.0).astype(np.uint8)


class ExpressionRestorer:
    """Give swapped faces back their target's expression with LivePortrait;
    ``factor`` 0-100 (FaceFusion's, default 80), ``areas`` of
    :data:`~faceweave.names.EXPRESSION_RESTORER_AREAS`, ``mask_blur``: the box mask's."""

    def __init__(
        self,
        portrait: LivePortrait,
        *,
        factor: int = 80,
        areas: Sequence[str] = names.EXPRESSION_RESTORER_AREAS,
        mask_blur: float = 0.3,
    ) -> None:
        if not 0 <= factor <= 100:
            raise InvalidOptionError(f"expression restorer factor must be from 0 to 100; got {factor}")
        unknown = [a for a in areas if a not in names.EXPRESSION_RESTORER_AREAS]
        if unknown:
            raise InvalidOptionError(
                names.unknown("expression restorer area", unknown[0], names.EXPRESSION_RESTORER_AREAS)
            )
        self.portrait, self.areas = portrait, tuple(areas)
        self.factor = float(np.interp(float(factor), [0, 100], [0, 1.2]))
        self._mask = box_mask(CROP, blur=mask_blur)

    def restore(self, frame: np.ndarray, original: np.ndarray, faces: Sequence[Face]) -> np.ndarray:
        """A new frame with each of ``faces`` (found in ``original``, the
        frame before the swap) given back its expression; ``frame`` itself
        when there is no face."""
        check_frame(frame)
        check_frame(original)
        if not faces:
            return frame
        out = frame.copy()
        for face in faces:
            five = np.asarray(face.kps5, np.float64)
            before, _ = warp_to_template(original, five, "arcface_128", CROP)
            after, matrix = warp_to_template(out, five, "arcface_128", CROP)
            paste_face(out, self._restored(portrait_input(before), portrait_input(after)), self._mask, matrix, out=out)
        return out

    def _restored(self, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        volume = self.portrait.features(after)
        target = self.portrait.motion(before).expression
        motion = self.portrait.motion(after)
        wanted = restored_expression(motion.expression, target, self.factor, self.areas)
        return self.portrait.generate(volume, motion.moved(wanted), motion.moved(motion.expression))
