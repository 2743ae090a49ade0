"""UniFace (``uniface_256``): the target crop (``ffhq_512`` at 256 px,
``[-1, 1]``; the output is de-normalised) and a source image crop
(``ffhq_512`` at 256 px, RGB in ``[0, 1]``) instead of an embedding."""

from __future__ import annotations

from faceweave.swappers.neural.base import NeuralSwapper, catalog_spec

UNIFACE_256 = catalog_spec("uniface_256", family="uniface", denormalize=True, source_template="ffhq_512")


class UniFace(NeuralSwapper):
    """A source image crop, not an embedding, goes to the model (``spec.source == "image"``)."""
