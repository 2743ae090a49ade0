"""BlendSwap (``blendswap_256``): the target crop (``ffhq_512`` at 256 px,
RGB in ``[0, 1]``) and a source image crop (``arcface_112_v2`` at 112 px,
RGB in ``[0, 1]``) instead of an embedding."""

from __future__ import annotations

from faceweave.swappers.neural.base import NeuralSpec, NeuralSwapper

BLENDSWAP_256 = NeuralSpec(
    name="blendswap_256",
    family="blendswap",
    template="ffhq_512",
    size=256,
    mean=(0.0, 0.0, 0.0),
    std=(1.0, 1.0, 1.0),
    denormalize=False,
    source="image",
    source_template="arcface_112_v2",
    source_size=112,
)


class BlendSwap(NeuralSwapper):
    """A source image crop, not an embedding, goes to the model (``spec.source == "image"``)."""
