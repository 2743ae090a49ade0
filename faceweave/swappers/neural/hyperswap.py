"""FaceFusion's HyperSwap (``hyperswap_1a/1b/1c_256``): the target crop
(``arcface_128``, ``[-1, 1]``; the output is de-normalised) and the source's
L2-normalised ArcFace w600k embedding.

The files have two outputs: the face (``output``, or the first) and the
model's own face mask (``mask``, ``[N, 1, 256, 256]``).  FaceFusion (3.3 to
3.8) reads only the first and pastes under its box (and occlusion/region)
masks, so that is the default here too.  ``use_model_mask=True`` also pastes
under the model's mask: clipped to ``[0, 1]``, put back together over the
pixel-boost tiles, and combined with the box mask by ``numpy.minimum`` in
the coverage the swapper returns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from faceweave.errors import ModelSignatureError
from faceweave.swappers.neural.base import InferenceModel, NeuralSpec, NeuralSwapper, catalog_spec

#: the name of the model's own mask output
MASK_OUTPUT = "mask"


def _hyperswap(v: str) -> NeuralSpec:
    return catalog_spec(f"hyperswap_1{v}_256", family="hyperswap", denormalize=True)


HYPERSWAP_1A_256, HYPERSWAP_1B_256, HYPERSWAP_1C_256 = _hyperswap("a"), _hyperswap("b"), _hyperswap("c")


class HyperSwap(NeuralSwapper):
    """``use_model_mask``: paste under the model's ``mask`` output too (see the module doc)."""

    def __init__(self, model: InferenceModel, *, use_model_mask: bool = False, **kwargs: Any) -> None:
        self.use_model_mask = use_model_mask
        super().__init__(model, **kwargs)

    def mask_output(self, names: Sequence[str]) -> str | None:
        if not self.use_model_mask:
            return None
        if MASK_OUTPUT not in names:
            raise ModelSignatureError(
                f"{self.spec.name}: use_model_mask needs an output named {MASK_OUTPUT!r}; the model has {list(names)}"
            )
        return MASK_OUTPUT

    def embedding_tensor(self, embedding: np.ndarray, embedding_norm: np.ndarray) -> np.ndarray:
        """The normalised embedding (for several photos: the mean of theirs, not normalised again, as FaceFusion)."""
        return np.asarray(embedding_norm, np.float32).reshape(1, -1)
