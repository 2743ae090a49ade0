"""UniFace (``uniface_256``): the target crop (``ffhq_512`` at 256 px,
``[-1, 1]``; the output is de-normalised) and a source image crop
(``ffhq_512`` at 256 px, RGB in ``[0, 1]``) instead of an embedding."""

from __future__ import annotations

from faceweave.swappers.neural.base import NeuralSpec, NeuralSwapper

UNIFACE_256 = NeuralSpec(
    name="uniface_256",
    family="uniface",
    template="ffhq_512",
    size=256,
    mean=(0.5, 0.5, 0.5),
    std=(0.5, 0.5, 0.5),
    denormalize=True,
    source="image",
    source_template="ffhq_512",
    source_size=256,
)


class UniFace(NeuralSwapper):
    """A source image crop, not an embedding, goes to the model (``spec.source == "image"``)."""
