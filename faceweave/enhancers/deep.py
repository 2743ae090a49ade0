"""The deep swapper: FaceFusion's ``deep_swapper``, DeepFaceLive's DFM
models, each trained on one person, which swap a face with no source photo
(with ``--swapper none``, or over another swapper's face), run as FaceFusion
3.x runs them (in RGB here; the model takes BGR):

the face on the ``dfl_whole_face`` template at the model's side, sharpened
(``1.75 x crop - 0.75 x its Gaussian blur``, sigma 2), BGR in ``[0, 1]``,
NHWC (``in_face:0``), with ``morph_value:0`` (the morph 0-100 over 100) where
the model takes it; out come the target's mask, the face (BGR in ``[0, 1]``,
cut to 8 bits) and the source's mask.  The face's colours are matched to
the crop's at three scales, by the share the two's hue-saturation
histograms correlate (FaceFusion's ``conditional_match_frame_color``); it is
pasted under the minimum of the box mask, the two masks' minimum (eroded
twice by a 3 px ellipse, blurred with sigma 6.25) and, when face mask
areas are chosen, the area mask of the face's 68 points.  FaceFusion's
occlusion and region masks are not applied here.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from faceweave.compositing.facefusion import area_mask, crop_points, paste_face
from faceweave.enhancers.age import match_colour
from faceweave.enhancers.base import InferenceModel, find_input
from faceweave.enhancers.face import check_frame
from faceweave.enhancers.lips import face_points68
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import warp_to_template
from faceweave.models.deepfacelive import DEEP_SWAPPERS
from faceweave.swappers.neural.base import box_mask
from faceweave.types import Face


def sharpened(crop: np.ndarray) -> np.ndarray:
    """``1.75 x crop - 0.75 x`` its Gaussian blur (sigma 2), saturated to 8 bits."""
    return cv2.addWeighted(crop, 1.75, cv2.GaussianBlur(crop, (0, 0), 2), -0.75, 0)


def model_mask(target: np.ndarray, source: np.ndarray, side: int) -> np.ndarray:
    """The minimum of the model's two masks, eroded and blurred as FaceFusion's ``prepare_crop_mask``."""
    mask = np.minimum(target, source).reshape(side, side).clip(0, 1)
    mask = cv2.erode(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3)), iterations=2)
    return cv2.GaussianBlur(mask, (0, 0), 6.25)


def histogram_likeness(a: np.ndarray, b: np.ndarray) -> float:
    """How alike two RGB pictures' hue-saturation histograms are, ``[0, 1]`` (correlation mapped from ``[-1, 1]``)."""
    ha, hb = (
        cv2.calcHist([cv2.cvtColor(x, cv2.COLOR_RGB2HSV)], [0, 1], None, [50, 60], [0, 180, 0, 256]) for x in (a, b)
    )
    return float(np.interp(cv2.compareHist(ha, hb, cv2.HISTCMP_CORREL), [-1, 1], [0, 1]))


def matched(raw: np.ndarray, face: np.ndarray) -> np.ndarray:
    """``face`` moved towards its colours matched to ``raw`` by their histograms' likeness."""
    share = histogram_likeness(raw, face)
    return cv2.addWeighted(face, 1 - share, match_colour(raw, face), share, 0)


class DeepSwapper:
    """Swap faces with one DFM model (the caller owns ``model``); ``name``:
    FaceFusion's ``scope/name``; ``morph`` 0-100; ``mask_blur``,
    ``mask_padding``: the box mask's; ``areas``: face mask areas (the 68
    points' hull), none by default."""

    def __init__(
        self,
        model: InferenceModel,
        *,
        name: str,
        morph: int = 100,
        mask_blur: float = 0.3,
        mask_padding: tuple[float, float, float, float] = (0, 0, 0, 0),
        areas: Sequence[str] = (),
    ) -> None:
        if name not in DEEP_SWAPPERS:
            raise InvalidOptionError(
                f"unknown deep swapper {name!r}; FaceFusion's are scope/name, e.g. iperov/elon_musk_224"
            )
        if not 0 <= morph <= 100:
            raise InvalidOptionError(f"deep swapper morph must be from 0 to 100; got {morph}")
        self.name, self.model, self.morph, self.areas = name, model, morph, tuple(areas)
        info = find_input(model, "in_face:0", model_name=name)
        shape = list(info.shape)
        if len(shape) != 4 or not isinstance(shape[1], int) or shape[1] != shape[2] or shape[3] != 3:
            raise ModelSignatureError(f"{name}: input 'in_face:0' expected shape [N, S, S, 3], got {shape}")
        self.side = int(shape[1])
        self._morph = "morph_value:0" in {i.name for i in model.inputs}
        if len(model.outputs) < 3:
            raise ModelSignatureError(
                f"{name}: expected 3 outputs (target mask, face, source mask), got {len(model.outputs)}"
            )
        self._box = box_mask(self.side, blur=mask_blur, padding=mask_padding)

    def swap(self, frame: np.ndarray, faces: Sequence[Face]) -> np.ndarray:
        """A new frame with ``faces`` swapped for the model's person (each
        cut from the frame the previous one left); ``frame`` itself when
        there is no face."""
        check_frame(frame)
        if not faces:
            return frame
        out = frame.copy()
        for face in faces:
            self._swap_face(out, face)
        return out

    def _swap_face(self, out: np.ndarray, face: Face) -> None:
        crop, matrix = warp_to_template(out, np.asarray(face.kps5, np.float64), "dfl_whole_face", self.side)
        x = np.expand_dims(sharpened(crop)[:, :, ::-1] / 255.0, axis=0).astype(np.float32)
        feeds = {"in_face:0": x}
        if self._morph:
            feeds["morph_value:0"] = np.array([np.interp(self.morph, [0, 100], [0, 1])]).astype(np.float32)
        result = self.model.run(feeds)
        target_mask, made, source_mask = (np.asarray(result[o.name])[0] for o in self.model.outputs[:3])
        new = (made * 255.0).clip(0, 255).astype(np.uint8)[:, :, ::-1]
        new = matched(crop, np.ascontiguousarray(new))
        masks = [self._box, model_mask(target_mask, source_mask, self.side)]
        points = face_points68(face) if self.areas else None
        if points is not None:
            masks.append(area_mask(self.side, crop_points(points, matrix), self.areas))
        paste_face(out, new, np.minimum.reduce(masks).clip(0, 1), matrix, out=out)
