"""Face enhancers: align each face to the model's template, restore the
crop, paste it back under a feathered box mask.

:class:`RestorationEnhancer` runs GFPGAN, GPEN-BFR and RestoreFormer++
(one input ``input`` ``[N, 3, S, S]``, values ``(rgb / 255 - 0.5) / 0.5``, one
output of the same shape and range); :class:`CodeFormerEnhancer` adds
CodeFormer's fidelity ``weight`` input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from faceweave.compositing.blend import paste_back
from faceweave.compositing.facefusion import paste_blended
from faceweave.compositing.masks import box_mask
from faceweave.enhancers.base import (
    FaceEnhancerSpec,
    FaceLike,
    InferenceModel,
    check_image_input,
    find_input,
    first_output,
    is_dynamic,
    tensor_dtype,
)
from faceweave.errors import InputError, InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import estimate_alignment, warp_crop
from faceweave.types import Face


def normalize_crops(crops: np.ndarray) -> np.ndarray:
    """``(N, S, S, 3)`` uint8 RGB -> ``(N, 3, S, S)`` float32 in ``[-1, 1]``."""
    x = crops.astype(np.float32) / 255.0
    return np.ascontiguousarray(((x - 0.5) / 0.5).transpose(0, 3, 1, 2))


def denormalize_crops(values: np.ndarray) -> np.ndarray:
    """``(N, 3, S, S)`` model output in ``[-1, 1]`` (clipped) -> ``(N, S, S, 3)``
    uint8 RGB, rounded to the nearest level."""
    x = (np.clip(np.asarray(values, np.float32), -1.0, 1.0) + 1.0) / 2.0
    return np.round(x.transpose(0, 2, 3, 1) * 255.0).astype(np.uint8)


def face_points(face: FaceLike) -> np.ndarray:
    """``(5, 2)`` float64 key points of a :class:`Face` or of a point array."""
    pts = face.kps5 if isinstance(face, Face) else np.asarray(face)
    if pts.shape != (5, 2) or not np.all(np.isfinite(pts)):
        raise InputError(f"a face to enhance must be a Face or (5, 2) finite key points; got shape {pts.shape}")
    return pts.astype(np.float64)


def check_frame(frame: np.ndarray) -> None:
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        shape = getattr(frame, "shape", None)
        raise InputError(f"expected a (H, W, 3) uint8 RGB frame, got {type(frame).__name__} {shape}")


def check_blend(blend: float) -> float:
    if not 0.0 <= float(blend) <= 1.0:
        raise InvalidOptionError(f"blend must be in [0, 1], got {blend}")
    return float(blend)


class RestorationEnhancer:
    """A face-restoration model with one image input named ``input``.

    ``mask_blur``: feather of the paste-back box mask, fraction of the crop
    side (FaceFusion's default 0.3); ``facefusion``: FaceFusion's way --
    its own box mask (a hard border blurred, as the neural swappers'
    ``box_mask``) instead of faceweave's smooth ramp, the crop warped
    straight from the frame (no ``pyrDown`` before a large shrink), pasted
    and truncated, then mixed with the frame by the blend
    (:func:`~faceweave.compositing.facefusion.paste_blended`); ``max_batch``: most faces per model run
    when the model's batch dimension is dynamic (fixed batch: one at a time).
    The caller owns ``model``.
    """

    def __init__(
        self,
        model: InferenceModel,
        *,
        spec: FaceEnhancerSpec,
        mask_blur: float = 0.3,
        max_batch: int = 8,
        facefusion: bool = False,
    ) -> None:
        if not 0.0 <= mask_blur <= 1.0:
            raise InvalidOptionError(f"mask_blur must be in [0, 1], got {mask_blur}")
        if max_batch < 1:
            raise InvalidOptionError(f"max_batch must be at least 1, got {max_batch}")
        self.name = spec.name
        self.spec = spec
        self.model = model
        self.mask_blur = mask_blur
        self.facefusion = facefusion
        info = find_input(model, "input", model_name=spec.name)
        check_image_input(info, model_name=spec.name, size=(spec.size, spec.size))
        self._dtype = tensor_dtype(info)
        self.batch = max_batch if is_dynamic(info.shape[0]) else 1
        if facefusion:
            from faceweave.swappers.neural.base import box_mask as facefusion_box

            mask = facefusion_box(spec.size, blur=mask_blur)
        else:
            mask = box_mask((spec.size, spec.size), inset=0.0, blur=mask_blur)
        mask.setflags(write=False)
        self.mask = mask

    def feeds(self, batch: np.ndarray) -> dict[str, np.ndarray]:
        """Model inputs for a ``(n, 3, S, S)`` normalised batch."""
        return {"input": batch.astype(self._dtype, copy=False)}

    def restore(self, crops: np.ndarray) -> np.ndarray:
        """Run the model on ``(N, S, S, 3)`` uint8 RGB aligned crops; returns
        the restored crops, same shape and type."""
        x = normalize_crops(crops)
        outs = []
        for start in range(0, len(x), self.batch):
            part = x[start : start + self.batch]
            y = first_output(self.model, self.model.run(self.feeds(part)))
            if y.shape != part.shape:
                raise ModelSignatureError(f"{self.name}: output expected shape {list(part.shape)}, got {list(y.shape)}")
            outs.append(y)
        return denormalize_crops(np.concatenate(outs))

    def cut(self, frame: np.ndarray, matrix: np.ndarray) -> np.ndarray:
        """The model's ``(S, S, 3)`` crop of ``frame`` under ``matrix``: as
        FaceFusion cuts it (one warp, ``INTER_AREA``, edges replicated) in
        ``facefusion`` mode, else :func:`warp_crop` (halved first when the
        face shrinks by more than half)."""
        size = self.spec.size
        if self.facefusion:
            return cv2.warpAffine(frame, matrix, (size, size), flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REPLICATE)
        return warp_crop(frame, matrix, size)

    def enhance(self, frame: np.ndarray, faces: Sequence[FaceLike], *, blend: float = 0.8) -> np.ndarray:
        """A new ``(H, W, 3)`` uint8 RGB frame with each face restored and
        mixed in by ``blend`` under the feathered box mask; pixels outside
        the faces' crops are not touched.  All crops are cut from ``frame``
        before any is pasted back, so the faces' order does not matter."""
        check_frame(frame)
        blend = check_blend(blend)
        points = [face_points(f) for f in faces]
        if not points or blend == 0.0:
            return frame.copy()
        size = self.spec.size
        matrices = [estimate_alignment(p, self.spec.template, size) for p in points]
        restored = self.restore(np.stack([self.cut(frame, m) for m in matrices]))
        if self.facefusion:
            out = frame.copy()
            for crop, matrix in zip(restored, matrices, strict=False):
                paste_blended(out, crop, self.mask, matrix, blend, out=out)
            return out
        mask = self.mask * np.float32(blend)
        out = frame
        for crop, matrix in zip(restored, matrices, strict=False):
            out = paste_back(out, crop, mask, matrix)
        return out


class CodeFormerEnhancer(RestorationEnhancer):
    """CodeFormer: inputs ``input`` and ``weight``, the fidelity weight in
    ``[0, 1]`` (0: strongest restoration, 1: closest to the input face)."""

    def __init__(self, model: InferenceModel, *, spec: FaceEnhancerSpec, weight: float = 0.5, **options: Any) -> None:
        if not 0.0 <= weight <= 1.0:
            raise InvalidOptionError(f"codeformer weight must be in [0, 1], got {weight}")
        super().__init__(model, spec=spec, **options)
        self.weight = float(weight)
        info = find_input(model, "weight", model_name=spec.name)
        shape = tuple(1 if is_dynamic(d) else int(d) for d in info.shape)
        self._weight = np.full(shape, self.weight, dtype=tensor_dtype(info))

    def feeds(self, batch: np.ndarray) -> dict[str, np.ndarray]:
        return {**super().feeds(batch), "weight": self._weight}
