"""FaceFusion-compatible neural swappers, one small module per model family.

:data:`NEURAL_SWAPPERS` maps each model name to its class and constants::

    entry = NEURAL_SWAPPERS["inswapper_128"]
    swapper = entry.create(model, embedder=arcface, emap=read_emap(path))

The models (``InferenceModel``: ``inputs``, ``outputs``, ``run(feeds)``)
are loaded and owned by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from faceweave import names
from faceweave.swappers.neural.base import (
    InferenceModel,
    NeuralSpec,
    NeuralSwapper,
    PreparedSource,
)
from faceweave.swappers.neural.blendswap import BLENDSWAP_256, BlendSwap
from faceweave.swappers.neural.ghost import GHOST_1_256, GHOST_2_256, GHOST_3_256, Ghost
from faceweave.swappers.neural.hififace import HIFIFACE_UNOFFICIAL_256, HiFiFace
from faceweave.swappers.neural.hyperswap import (
    HYPERSWAP_1A_256,
    HYPERSWAP_1B_256,
    HYPERSWAP_1C_256,
    HyperSwap,
)
from faceweave.swappers.neural.inswapper import (
    INSWAPPER_128,
    INSWAPPER_128_FP16,
    InSwapper,
    read_emap,
)
from faceweave.swappers.neural.simswap import (
    SIMSWAP_256,
    SIMSWAP_UNOFFICIAL_512,
    SimSwap,
)
from faceweave.swappers.neural.uniface import UNIFACE_256, UniFace


@dataclass(frozen=True)
class NeuralEntry:
    """A registered neural model: its swapper class and its constants."""

    cls: type[NeuralSwapper]
    spec: NeuralSpec

    def create(self, model: InferenceModel, **kwargs: Any) -> NeuralSwapper:
        return self.cls(model, spec=self.spec, **kwargs)


def _entries() -> dict[str, NeuralEntry]:
    pairs = [
        (InSwapper, INSWAPPER_128),
        (InSwapper, INSWAPPER_128_FP16),
        (SimSwap, SIMSWAP_256),
        (SimSwap, SIMSWAP_UNOFFICIAL_512),
        (HyperSwap, HYPERSWAP_1A_256),
        (HyperSwap, HYPERSWAP_1B_256),
        (HyperSwap, HYPERSWAP_1C_256),
        (HiFiFace, HIFIFACE_UNOFFICIAL_256),
        (Ghost, GHOST_1_256),
        (Ghost, GHOST_2_256),
        (Ghost, GHOST_3_256),
        (BlendSwap, BLENDSWAP_256),
        (UniFace, UNIFACE_256),
    ]
    return {spec.name: NeuralEntry(cls=cls, spec=spec) for cls, spec in pairs}


#: model name -> (class, constants); read-only
NEURAL_SWAPPERS: Mapping[str, NeuralEntry] = names.registered("neural swapper", names.NEURAL_SWAPPERS, _entries())


__all__ = [
    "NEURAL_SWAPPERS",
    "BlendSwap",
    "Ghost",
    "HiFiFace",
    "HyperSwap",
    "InSwapper",
    "InferenceModel",
    "NeuralEntry",
    "NeuralSpec",
    "NeuralSwapper",
    "PreparedSource",
    "SimSwap",
    "UniFace",
    "read_emap",
]
