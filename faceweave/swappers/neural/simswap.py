"""SimSwap (``simswap_256``, ``simswap_unofficial_512``): the target crop
(``arcface_112_v1``; ImageNet mean/std for the 256 model, plain ``[0, 1]``
for the 512 one; the output is not de-normalised) and the source's ArcFace
w600k embedding mapped by ``crossface_simswap`` and L2-normalised.  Without
a converter the embedder must already give SimSwap's own identity space
(``arcface_simswap``, FaceFusion 2.x)."""

from __future__ import annotations

import numpy as np

from faceweave.embedders.arcface import l2_normalize
from faceweave.swappers.neural.base import NeuralSpec, NeuralSwapper

SIMSWAP_256 = NeuralSpec(
    name="simswap_256",
    family="simswap",
    template="arcface_112_v1",
    size=256,
    mean=(0.485, 0.456, 0.406),
    std=(0.229, 0.224, 0.225),
    denormalize=False,
    source="embedding",
    embedder="arcface_w600k_r50",
    converter="crossface_simswap",
)
SIMSWAP_UNOFFICIAL_512 = NeuralSpec(
    name="simswap_unofficial_512",
    family="simswap",
    template="arcface_112_v1",
    size=512,
    mean=(0.0, 0.0, 0.0),
    std=(1.0, 1.0, 1.0),
    denormalize=False,
    source="embedding",
    embedder="arcface_w600k_r50",
    converter="crossface_simswap",
)


class SimSwap(NeuralSwapper):
    def embedding_tensor(self, embedding: np.ndarray, embedding_norm: np.ndarray) -> np.ndarray:
        e = np.asarray(embedding, np.float32).reshape(1, -1)
        if self.converter is not None:
            e = self.converter.convert(e)
        return l2_normalize(e)
