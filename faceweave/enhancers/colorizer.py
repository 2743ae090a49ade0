"""Frame colorizers: FaceFusion's ``frame_colorizer`` (DDColor, DeOldify),
which colour a grey or faded picture from its lightness.

Both families take ``input`` ``[1, 3, S, S]`` float32 (``S`` the size the
user chooses, 256 by default) and are run as FaceFusion 3.x runs them, in
RGB here where FaceFusion works in BGR:

* **ddcolor**: the frame's grey (``RGB2GRAY``) as its CIELAB lightness
  alone (``L, 0, 0`` back to RGB in ``[0, 1]``) in; the colour channels
  ``a, b`` out (``[1, 2, S, S]``), resized to the frame and put beside the
  frame's own lightness.
* **deoldify**: the grey as RGB in 0-255 in; RGB out (``[1, 3, S, S]``),
  whose ``a, b`` (8-bit CIELAB) are put beside the frame's *blue* channel as
  the lightness, as FaceFusion does.

Where FaceFusion casts the model's output to 8 bits without clipping (so a
value below 0 wraps round to white), it is clipped first; inside the range
the two agree to the bit.  ``blend`` keeps that share of the colour
(``cv2.addWeighted``, FaceFusion's ``frame_colorizer_blend / 100``).
"""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np

from faceweave import names
from faceweave.enhancers.base import (
    InferenceModel,
    check_image_input,
    find_input,
    first_output,
    is_dynamic,
    tensor_dtype,
)
from faceweave.enhancers.face import check_blend, check_frame
from faceweave.errors import InvalidOptionError, ModelSignatureError

Family = Literal["ddcolor", "deoldify"]


def colorizer_input(frame: np.ndarray, family: str, size: int) -> np.ndarray:
    """The model's ``[1, 3, size, size]`` float32 input for an RGB uint8 frame."""
    grey = cv2.cvtColor(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
    if family == "ddcolor":
        light = cv2.cvtColor((grey / 255.0).astype(np.float32), cv2.COLOR_RGB2LAB)[:, :, :1]
        none = np.zeros_like(light)
        grey = cv2.cvtColor(np.concatenate((light, none, none), axis=-1), cv2.COLOR_LAB2RGB)
    grey = cv2.resize(grey, (size, size))
    return np.expand_dims(grey.transpose((2, 0, 1)), axis=0).astype(np.float32)


def colorized(frame: np.ndarray, output: np.ndarray, family: str) -> np.ndarray:
    """The RGB uint8 frame coloured by the model's ``output`` (``[C, S, S]``)."""
    h, w = frame.shape[:2]
    colour = cv2.resize(np.ascontiguousarray(output.transpose(1, 2, 0), np.float32), (w, h))
    if family == "ddcolor":
        light = cv2.cvtColor((frame / 255.0).astype(np.float32), cv2.COLOR_RGB2LAB)[:, :, :1]
        rgb = cv2.cvtColor(np.concatenate((light, colour.reshape(h, w, 2)), axis=-1), cv2.COLOR_LAB2RGB)
        return (np.clip(rgb, 0.0, 1.0) * 255.0).round().astype(np.uint8)
    lab = cv2.cvtColor(np.clip(colour, 0.0, 255.0).astype(np.uint8), cv2.COLOR_RGB2LAB)
    lab[..., 0] = frame[..., 2]
    return cv2.cvtColor(lab, cv2.COLOR_LAB2RGB)


class FrameColorizer:
    """Colour whole RGB frames with one colorizer model (the caller owns
    ``model``), at ``size`` (a model with a fixed input side imposes it)."""

    def __init__(self, model: InferenceModel, *, name: str, size: int = 256) -> None:
        if name not in names.FRAME_COLORIZERS:
            raise InvalidOptionError(names.unknown("frame colorizer", name, tuple(names.FRAME_COLORIZERS)))
        self.name = name
        self.family = names.FRAME_COLORIZERS[name]
        self.model = model
        info = find_input(model, "input", model_name=name)
        check_image_input(info, model_name=name, size=None)
        self._dtype = tensor_dtype(info)
        fixed = [int(d) for d in info.shape[2:] if not is_dynamic(d)]
        if fixed and set(fixed) != {size}:
            raise InvalidOptionError(
                f"{name}: the model takes {list(info.shape)[2:]} frames; frame colorizer size {size} cannot be used"
            )
        self.size = int(size)
        self._channels = 2 if self.family == "ddcolor" else 3

    def colorize(self, frame: np.ndarray, *, blend: float = 1.0) -> np.ndarray:
        """``(H, W, 3)`` uint8 RGB: ``frame`` coloured, ``blend`` of it kept."""
        check_frame(frame)
        blend = check_blend(blend)
        if blend == 0.0:
            return frame.copy()
        x = colorizer_input(frame, self.family, self.size).astype(self._dtype, copy=False)
        y = first_output(self.model, self.model.run({"input": x}))
        want = (1, self._channels, self.size, self.size)
        if y.shape != want:
            raise ModelSignatureError(f"{self.name}: output expected shape {list(want)}, got {list(y.shape)}")
        colour = colorized(frame, y[0].astype(np.float32), self.family)
        if blend == 1.0:
            return colour
        return cv2.addWeighted(frame, 1.0 - blend, colour, blend, 0.0)
