"""Build a neural swapper from the model files: the swapper's own ONNX model,
the ArcFace embedder and embedding converter it needs, and inswapper's emap,
all loaded through a caller-owned :class:`~faceweave.runtime.SessionPool`."""

from __future__ import annotations

from typing import Any

from faceweave.embedders.arcface import ArcFaceEmbedder, EmbeddingConverter
from faceweave.errors import InvalidOptionError
from faceweave.swappers.neural import NEURAL_SWAPPERS
from faceweave.swappers.neural.base import NeuralSwapper


def load_neural_swapper(
    name: str,
    *,
    pool: Any,
    provider: Any = None,
    pixel_boost: int | None = None,
    **options: Any,
) -> NeuralSwapper:
    """The neural swapper ``name`` with its models loaded from ``pool``
    (files from the pool's model store; missing files raise
    :class:`~faceweave.errors.ModelNotFoundError` saying how to get them).
    ``options`` go to the swapper (``weight``, ``mask_blur``, ...)."""
    if name not in NEURAL_SWAPPERS:
        raise InvalidOptionError(f"unknown neural swapper {name!r}; available: {', '.join(sorted(NEURAL_SWAPPERS))}")
    if pool is None:
        raise InvalidOptionError(f"the neural swapper {name!r} needs a model session pool")
    entry = NEURAL_SWAPPERS[name]
    spec = entry.spec
    kwargs: dict[str, Any] = dict(options)
    if spec.embedder:
        kwargs["embedder"] = ArcFaceEmbedder(pool.get(spec.embedder, provider))
    if spec.converter:
        kwargs["converter"] = EmbeddingConverter(pool.get(spec.converter, provider), name=spec.converter)
    if spec.family == "inswapper":
        from faceweave.swappers.neural.inswapper import read_emap

        kwargs["emap"] = read_emap(pool.store.resolve(name))
    return entry.create(pool.get(name, provider), pixel_boost=pixel_boost, **kwargs)
