"""FaceFusion's HyperSwap (``hyperswap_1a/1b/1c_256``): the target crop
(``arcface_128``, ``[-1, 1]``; the output is de-normalised) and the source's
L2-normalised ArcFace w600k embedding.  Only the first output (``output``)
is used; the model's own ``mask`` output is ignored, as in FaceFusion."""

from __future__ import annotations

import numpy as np

from faceweave.embedders.arcface import l2_normalize
from faceweave.swappers.base import SourceFace
from faceweave.swappers.neural.base import NeuralSpec, NeuralSwapper


def _hyperswap(v: str) -> NeuralSpec:
    return NeuralSpec(
        name=f"hyperswap_1{v}_256",
        family="hyperswap",
        template="arcface_128",
        size=256,
        mean=(0.5, 0.5, 0.5),
        std=(0.5, 0.5, 0.5),
        denormalize=True,
        source="embedding",
        embedder="arcface_w600k_r50",
    )


HYPERSWAP_1A_256, HYPERSWAP_1B_256, HYPERSWAP_1C_256 = _hyperswap("a"), _hyperswap("b"), _hyperswap("c")


class HyperSwap(NeuralSwapper):
    def source_tensor(self, source: SourceFace) -> np.ndarray:
        return l2_normalize(self.source_embedding(source).reshape(1, -1))
