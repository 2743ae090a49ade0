"""Lip syncers: FaceFusion's ``lip_syncer`` (Wav2Lip, Wav2Lip-GAN, EDTalk),
which move a face's mouth to a frame's window of speech
(:mod:`faceweave.audio`), run as FaceFusion 3.x runs them.

Each face is cut at 512 px on FaceFusion's ``ffhq_512`` template (its five
points; ``INTER_AREA``, edges replicated), then:

* **wav2lip**: the crop's box of the face's 68 points is cut at 96 px (a
  plain affine warp, ``INTER_AREA`` when it shrinks, black outside); the
  model takes it twice in BGR in ``[0, 1]``, its lower half blanked the first
  time (``target`` ``[1, 6, 96, 96]``), and the window scaled by
  ``weight * 2`` (``source`` ``[1, 1, 80, 16]``); its BGR output goes back
  into the crop (edges replicated), under the lower face's hull of the 68
  points (FaceFusion's ``lower-face`` area mask).
* **edtalk**: the crop at 256 px (``INTER_AREA``, RGB in ``[0, 1]``), the
  window and ``weight`` (``[1]``) in; its RGB output resized to 512 px
  (bicubic), under FaceFusion's box mask (the face mask blur and padding).

The crop is pasted back as FaceFusion's ``paste_back`` pastes it; faces are
synced one after the other, each cut from the frame the previous one left.
A face's 68 points are its landmarker's, or the mesh's
(:data:`~faceweave.geometry.topology.MESH_TO_68`); FaceFusion's optional
occlusion mask is not applied here.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from faceweave import names
from faceweave.audio.features import speech_input
from faceweave.compositing.facefusion import area_mask, paste_face
from faceweave.enhancers.base import InferenceModel, find_input, first_output, is_dynamic, tensor_dtype
from faceweave.enhancers.face import check_frame
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import warp_to_template
from faceweave.geometry.topology import points68_from_mesh
from faceweave.swappers.neural.base import box_mask
from faceweave.types import Face

#: the side of the aligned crop every lip syncer works in (FaceFusion's ``ffhq_512``)
CROP = 512


def face_points68(face: Face) -> np.ndarray | None:
    """``(68, 2)`` float32 points of ``face``: its landmarker's, else its mesh's; ``None`` without either."""
    if face.landmarks68 is not None:
        return np.asarray(face.landmarks68, np.float32)
    if face.mesh is not None:
        return points68_from_mesh(face.mesh)
    return None


def box_crop(crop: np.ndarray, points: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``(size, size)`` cut of the box around ``points`` (crop pixels)
    and its matrix, as FaceFusion's ``warp_face_by_bounding_box``."""
    x1, y1 = np.min(points, axis=0)
    x2, y2 = np.max(points, axis=0)
    src = np.array([[x1, y1], [x2, y1], [x1, y2]], np.float32)
    dst = np.array([[0, 0], [size, 0], [0, size]], np.float32)
    matrix = cv2.getAffineTransform(src, dst)
    shrinks = x2 - x1 > size or y2 - y1 > size
    flags = cv2.INTER_AREA if shrinks else cv2.INTER_LINEAR
    return cv2.warpAffine(crop, matrix, (size, size), flags=flags), matrix


def wav2lip_input(area: np.ndarray) -> np.ndarray:
    """``[1, 6, S, S]`` float32: the RGB ``area`` in BGR in ``[0, 1]``, its lower half blanked, then whole."""
    whole = np.expand_dims(area[:, :, ::-1], axis=0)
    blanked = whole.copy()
    blanked[:, area.shape[0] // 2 :] = 0
    both = np.concatenate((blanked, whole), axis=3)
    return both.transpose(0, 3, 1, 2).astype(np.float32) / 255.0


def model_face(output: np.ndarray, *, bgr: bool) -> np.ndarray:
    """A ``[1, 3, S, S]`` output in ``[0, 1]`` -> ``(S, S, 3)`` uint8 RGB (cut, not rounded, as FaceFusion)."""
    face = (output[0].transpose(1, 2, 0).clip(0, 1) * 255).astype(np.uint8)
    return np.ascontiguousarray(face[:, :, ::-1]) if bgr else face


def check_shape(info, want: tuple[int, ...], *, model_name: str) -> None:
    """Raise :class:`ModelSignatureError` unless ``info`` is ``[N, *want]`` where its sizes are fixed."""
    shape = list(info.shape)
    wrong = any(not is_dynamic(d) and int(d) != w for d, w in zip(shape[1:], want, strict=False))
    if len(shape) != len(want) + 1 or wrong:
        expected = ", ".join(["N", *map(str, want)])
        raise ModelSignatureError(f"{model_name}: input {info.name!r} expected shape [{expected}], got {shape}")


class LipSyncer:
    """Move the mouths of faces to speech with one lip syncer model (the
    caller owns ``model``); ``weight``: how strongly (FaceFusion's
    ``lip_syncer_weight``); ``mask_blur``, ``mask_padding``: EDTalk's box mask."""

    def __init__(
        self,
        model: InferenceModel,
        *,
        name: str,
        weight: float = 0.5,
        mask_blur: float = 0.3,
        mask_padding: tuple[float, float, float, float] = (0, 0, 0, 0),
    ) -> None:
        if name not in names.LIP_SYNCERS:
            raise InvalidOptionError(names.unknown("lip syncer", name, tuple(names.LIP_SYNCERS)))
        if not 0.0 <= weight <= 1.0:
            raise InvalidOptionError(f"lip syncer weight must be from 0 to 1; got {weight}")
        self.name, self.model, self.weight = name, model, float(weight)
        self.family = names.LIP_SYNCERS[name]
        self.size = 96 if self.family == "wav2lip" else 256
        self._check_inputs()
        self._mask = box_mask(CROP, blur=mask_blur, padding=mask_padding) if self.family == "edtalk" else None

    def _check_inputs(self) -> None:
        source = find_input(self.model, "source", model_name=self.name)
        target = find_input(self.model, "target", model_name=self.name)
        self._dtype = tensor_dtype(target)
        check_shape(source, (1, 80, 16), model_name=self.name)
        check_shape(target, (6 if self.family == "wav2lip" else 3, self.size, self.size), model_name=self.name)
        if self.family == "edtalk":
            find_input(self.model, "weight", model_name=self.name)

    def sync(self, frame: np.ndarray, faces: Sequence[Face], window: np.ndarray | None) -> np.ndarray:
        """A new ``(H, W, 3)`` uint8 RGB frame whose ``faces`` say the mel
        ``window`` ``(80, 16)`` (``None``: silence); ``frame`` itself when
        there is no face."""
        check_frame(frame)
        if not faces:
            return frame
        source = speech_input(window, scale=self.weight * 2.0 if self.family == "wav2lip" else None)
        out = frame.copy()
        for face in faces:
            self._sync_face(out, face, source)
        return out

    def _sync_face(self, out: np.ndarray, face: Face, source: np.ndarray) -> None:
        crop, matrix = warp_to_template(out, np.asarray(face.kps5, np.float64), "ffhq_512", CROP)
        if self.family == "wav2lip":
            points = face_points68(face)
            if points is None:
                return  # a face kept from its five points alone: no 68 points to find its lower face
            inside = cv2.transform(points.reshape(1, -1, 2), matrix).reshape(-1, 2)
            mask = area_mask(CROP, inside, ["lower-face"])
            area, area_matrix = box_crop(crop, inside, self.size)
            y = self._run({"source": source, "target": wav2lip_input(area)})
            back = cv2.invertAffineTransform(area_matrix)
            crop = cv2.warpAffine(model_face(y, bgr=True), back, (CROP, CROP), borderMode=cv2.BORDER_REPLICATE)
        else:
            small = cv2.resize(crop, (self.size, self.size), interpolation=cv2.INTER_AREA) / 255.0
            target = np.expand_dims(small.transpose(2, 0, 1), axis=0)
            weight = np.array([self.weight], np.float32)
            y = self._run({"source": source, "target": target, "weight": weight})
            crop = cv2.resize(model_face(y, bgr=False), (CROP, CROP), interpolation=cv2.INTER_CUBIC)
            mask = np.asarray(self._mask, np.float32)
        paste_face(out, crop, mask, matrix, out=out)

    def _run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        feeds["target"] = feeds["target"].astype(self._dtype, copy=False)
        y = first_output(self.model, self.model.run(feeds))
        want = (1, 3, self.size, self.size)
        if y.shape != want:
            raise ModelSignatureError(f"{self.name}: output expected shape {list(want)}, got {list(y.shape)}")
        return y
