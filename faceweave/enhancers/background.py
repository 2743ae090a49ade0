"""Background removers: FaceFusion's ``background_remover`` (BEN2, BiRefNet,
CorridorKey, IS-Net, MODNet, ORMBG, RMBG, Silueta, U2-Net), which find the
foreground and give the frame a mask that keeps it: the picture's alpha
where it is written with one (a PNG, WebP or TIFF photo), and a fill colour
over the background when one is asked for.

Run as FaceFusion 3.8.1 runs them, in RGB here where it works in BGR: the
frame resized to the model's side, ``(x / 255 - mean) / std`` (CorridorKey
adds a coarse green-screen mask as a fourth channel: one minus twice how
much greener than red or blue each pixel is), the first output squeezed,
clipped to ``[0, 1]``, made 8-bit and resized back (U2-Net cloth: the class
of each pixel, 0 the background; CorridorKey also gives the keyed frame,
which replaces the picture); then the despill colour's spill taken out
(each channel held under the mean of the other two, by the colour's alpha)
and the fill colour laid over the background by its alpha.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from faceweave import names
from faceweave.enhancers.base import InferenceModel, find_input, first_output
from faceweave.enhancers.face import check_frame
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.models.catalog import find_spec

#: an RGBA colour, each 0-255
Colour = tuple[int, int, int, int]
NO_COLOUR: Colour = (0, 0, 0, 0)


@dataclass(frozen=True)
class Removed:
    """A frame with its background handled: ``pixels`` (uint8 RGB) and the
    foreground's ``mask`` (uint8, the frame's size; 255 keeps a pixel)."""

    pixels: np.ndarray
    mask: np.ndarray


def remover_input(frame: np.ndarray, family: str, side: int, mean, std) -> np.ndarray:
    """The model's ``[1, C, side, side]`` float32 input for an RGB uint8 frame."""
    x = cv2.resize(frame, (side, side)) / 255.0
    x = (x - np.asarray(mean)) / np.asarray(std)
    if family == "corridor_key":
        colour = frame.astype(np.float32) / 255.0
        bias = colour[:, :, 1] - np.maximum(colour[:, :, 0], colour[:, :, 2])
        coarse = cv2.resize(1.0 - np.clip(bias * 2.0, 0, 1), (side, side))[:, :, np.newaxis]
        x = np.concatenate([x, coarse], axis=2)
    return np.expand_dims(x.transpose(2, 0, 1), axis=0).astype(np.float32)


def removal_mask(output: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The model's mask output as uint8 at the frame's ``(height, width)``."""
    mask = np.squeeze(output).clip(0, 1) * 255
    mask = np.clip(mask, 0, 255).astype(np.uint8)
    return cv2.resize(mask, (shape[1], shape[0]))


def keyed_frame(output: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """CorridorKey's keyed RGB frame (its second output) at the frame's size."""
    pixels = np.clip(np.squeeze(output).transpose(1, 2, 0) * 255, 0, 255).astype(np.uint8)
    return cv2.resize(pixels, (shape[1], shape[0]))


def despill(frame: np.ndarray, colour: Colour) -> np.ndarray:
    """The frame with the colour's spill taken out: each channel moved
    towards the mean of the other two, where it is above it, by the
    colour's alpha times that channel's share of the colour."""
    pixels = frame.astype(np.float32)
    weight = np.asarray(colour[:3], np.float32) / max(max(colour[:3]), 1)
    limit = np.roll(pixels, 1, 2) + np.roll(pixels, -1, 2)
    held = np.minimum(pixels, limit * 0.5)
    return (pixels + (held - pixels) * (colour[3] / 255.0) * weight).astype(np.uint8)


def fill(frame: np.ndarray, mask: np.ndarray, colour: Colour) -> np.ndarray:
    """The fill colour over the background (where ``mask`` is low), by its alpha."""
    share = np.expand_dims(mask.astype(np.float32) / 255, axis=2)
    share = (1 - share) * colour[3] / 255
    filled = np.zeros_like(frame)
    filled[:, :, :] = colour[:3]
    return (frame * (1 - share) + filled * share).astype(np.uint8)


def check_colour(colour: tuple[int, ...], what: str) -> Colour:
    """``colour`` as four whole numbers 0-255 (R G B A)."""
    if len(colour) != 4 or any(not 0 <= int(c) <= 255 for c in colour):
        raise InvalidOptionError(f"{what} is four whole numbers 0-255 (red green blue alpha); got {tuple(colour)}")
    return (int(colour[0]), int(colour[1]), int(colour[2]), int(colour[3]))


class BackgroundRemover:
    """Find the foreground of RGB frames with one background remover model
    (the caller owns ``model``); ``fill`` and ``despill`` are RGBA colours
    (alpha 0: not used, as by default)."""

    def __init__(
        self, model: InferenceModel, *, name: str, fill: Colour = NO_COLOUR, despill: Colour = NO_COLOUR
    ) -> None:
        if name not in names.BACKGROUND_REMOVERS:
            raise InvalidOptionError(names.unknown("background remover", name, tuple(names.BACKGROUND_REMOVERS)))
        spec = find_spec(name)
        self.name, self.model = name, model
        self.family = names.BACKGROUND_REMOVERS[name]
        self.side = int(spec.crop_size or 1024)
        self.mean, self.std = spec.mean or (0.0, 0.0, 0.0), spec.std or (1.0, 1.0, 1.0)
        self.fill = check_colour(fill, "the background fill colour")
        self.despill = check_colour(despill, "the despill colour")
        info = find_input(model, "input", model_name=name)
        want = 4 if self.family == "corridor_key" else 3
        shape = list(info.shape)
        if len(shape) != 4 or (isinstance(shape[1], int) and shape[1] not in (-1, want)):
            raise ModelSignatureError(f"{name}: input 'input' expected shape ['N', {want}, 'H', 'W'], got {shape}")
        if self.family == "corridor_key" and len(model.outputs) < 2:
            raise ModelSignatureError(f"{name}: expected two outputs (the mask and the keyed frame)")

    def remove(self, frame: np.ndarray) -> Removed:
        """The frame (keyed, despilled and filled as asked) and its foreground mask."""
        check_frame(frame)
        shape = (frame.shape[0], frame.shape[1])
        outputs = self.model.run({"input": remover_input(frame, self.family, self.side, self.mean, self.std)})
        first = first_output(self.model, outputs)
        if self.family == "u2net_cloth":
            first = np.argmax(first, axis=1)
        if first.ndim < 2 or first.size == 0:
            raise ModelSignatureError(f"{self.name}: the mask output has shape {list(first.shape)}")
        pixels = frame
        if self.family == "corridor_key":
            pixels = keyed_frame(np.asarray(outputs[self.model.outputs[1].name]), shape)
        mask = removal_mask(first, shape)
        return Removed(pixels=fill(despill(pixels, self.despill), mask, self.fill), mask=mask)
