"""Build a neural swapper from the model files: the swapper's own ONNX model,
the ArcFace embedder and embedding converter it needs, and inswapper's emap,
all loaded through the owner's :class:`~faceweave.sessions.ModelSessions`."""

from __future__ import annotations

from typing import Any

from faceweave.embedders.arcface import ArcFaceEmbedder, EmbeddingConverter
from faceweave.errors import InvalidOptionError
from faceweave.swappers.base import SwapperContext
from faceweave.swappers.neural import NEURAL_SWAPPERS
from faceweave.swappers.neural.base import NeuralSwapper


def load_neural_swapper(name: str, context: SwapperContext) -> NeuralSwapper:
    """The registry's factory for the neural model ``name`` (a key of
    :data:`NEURAL_SWAPPERS`; the registry has checked it), with its models
    loaded from the context's sessions on their provider, and the options'
    ``pixel_boost``, FaceFusion's box-mask blur and padding and the swapper
    weight (missing files raise
    :class:`~faceweave.errors.ModelNotFoundError` saying how to get them)."""
    entry = NEURAL_SWAPPERS[name]
    spec = entry.spec
    if context.options.swapper_weight != 0.5 and spec.source != "embedding":
        raise InvalidOptionError(
            f"{name} takes the source face as an image, not an identity embedding: the swapper weight applies "
            "only to the embedding swappers (inswapper, hyperswap, simswap, ghost, hififace); leave it at 0.5"
        )
    pool = context.sessions.open()
    provider = context.sessions.provider
    kwargs: dict[str, Any] = {}
    if spec.embedder:
        kwargs["embedder"] = ArcFaceEmbedder(pool.get(spec.embedder, provider))
    if spec.converter:
        kwargs["converter"] = EmbeddingConverter(pool.get(spec.converter, provider), name=spec.converter)
    model = pool.get(name, provider)  # checked the file (size, FaceFusion's .hash, signature)
    if spec.family == "inswapper":
        from faceweave.swappers.neural.inswapper import read_emap

        path = pool.store.locate(pool.store.spec(name))  # the file just loaded, not hashed again
        kwargs["emap"] = read_emap(path if path is not None else pool.store.resolve(name))
    # the runtime's InferenceModel declares inputs/outputs as tuple attributes, which a
    # protocol's Sequence attributes (RunnableModel, invariant) do not accept: runtime/model.py's to align
    options = context.options
    return entry.create(
        model,
        pixel_boost=options.pixel_boost,
        mask_blur=options.masks.face_mask_blur,
        mask_padding=tuple(float(p) for p in options.masks.face_mask_padding),
        weight=options.swapper_weight,
        **kwargs,
    )
