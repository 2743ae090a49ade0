"""HiFiFace (``hififace_unofficial_256``): the target crop (``mtcnn_512`` at
256 px, ``[-1, 1]``; the output is de-normalised) and the source's ArcFace
w600k embedding mapped by ``crossface_hififace`` and L2-normalised, as
FaceFusion's ``hififace`` model type.  A mixed-in target embedding is
L2-normalised first (the base class's default)."""

from __future__ import annotations

from typing import Any

import numpy as np

from faceweave.embedders.arcface import l2_normalize
from faceweave.errors import InvalidOptionError
from faceweave.swappers.neural.base import InferenceModel, NeuralSpec, NeuralSwapper, catalog_spec

HIFIFACE_UNOFFICIAL_256 = catalog_spec("hififace_unofficial_256", family="hififace", denormalize=True)


class HiFiFace(NeuralSwapper):
    """Needs its converter: HiFiFace was trained on another identity space
    than the w600k ArcFace, and no FaceFusion asset gives that space directly."""

    def __init__(self, model: InferenceModel, *, spec: NeuralSpec = HIFIFACE_UNOFFICIAL_256, **kwargs: Any) -> None:
        if kwargs.get("converter") is None:
            raise InvalidOptionError(f"{spec.name} needs its embedding converter ({spec.converter})")
        super().__init__(model, spec=spec, **kwargs)

    def embedding_tensor(self, embedding: np.ndarray, embedding_norm: np.ndarray) -> np.ndarray:
        return l2_normalize(self.converter.convert(np.asarray(embedding, np.float32).reshape(1, -1)))
