"""GHOST (``ghost_1/2/3_256``): the target crop (``arcface_112_v1``,
``[-1, 1]``; the output is de-normalised) and the source's ArcFace w600k
embedding mapped by ``crossface_ghost``, not normalised.  A mixed-in target
embedding is taken raw, as FaceFusion does."""

from __future__ import annotations

import numpy as np

from faceweave.swappers.neural.base import NeuralSpec, NeuralSwapper, catalog_spec


def _ghost(n: int) -> NeuralSpec:
    return catalog_spec(f"ghost_{n}_256", family="ghost", denormalize=True)


GHOST_1_256, GHOST_2_256, GHOST_3_256 = _ghost(1), _ghost(2), _ghost(3)


class Ghost(NeuralSwapper):
    normalize_target_embedding = False

    def embedding_tensor(self, embedding: np.ndarray, embedding_norm: np.ndarray) -> np.ndarray:
        e = np.asarray(embedding, np.float32).reshape(1, -1)
        if self.converter is not None:
            e = self.converter.convert(e)
        return e.astype(np.float32)
