"""SimSwap (``simswap_256``, ``simswap_unofficial_512``): the target crop
(``arcface_112_v1``; ImageNet mean/std for the 256 model, plain ``[0, 1]``
for the 512 one; the output is not de-normalised) and the source's ArcFace
w600k embedding mapped by ``crossface_simswap`` and L2-normalised.  Without
a converter the embedder must already give SimSwap's own identity space
(``arcface_simswap``, FaceFusion 2.x)."""

from __future__ import annotations

import numpy as np

from faceweave.embedders.arcface import l2_normalize
from faceweave.swappers.neural.base import NeuralSwapper, catalog_spec

SIMSWAP_256 = catalog_spec("simswap_256", family="simswap", denormalize=False)
SIMSWAP_UNOFFICIAL_512 = catalog_spec("simswap_unofficial_512", family="simswap", denormalize=False)


class SimSwap(NeuralSwapper):
    def embedding_tensor(self, embedding: np.ndarray, embedding_norm: np.ndarray) -> np.ndarray:
        e = np.asarray(embedding, np.float32).reshape(1, -1)
        if self.converter is not None:
            e = self.converter.convert(e)
        return l2_normalize(e)
