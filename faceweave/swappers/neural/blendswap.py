"""BlendSwap (``blendswap_256``): the target crop (``ffhq_512`` at 256 px,
RGB in ``[0, 1]``) and a source image crop (``arcface_112_v2`` at 112 px,
RGB in ``[0, 1]``) instead of an embedding."""

from __future__ import annotations

from faceweave.swappers.neural.base import NeuralSwapper, catalog_spec

BLENDSWAP_256 = catalog_spec("blendswap_256", family="blendswap", denormalize=False, source_template="arcface_112_v2")


class BlendSwap(NeuralSwapper):
    """A source image crop, not an embedding, goes to the model (``spec.source == "image"``)."""
