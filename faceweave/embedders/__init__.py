"""Identity embedders used by the neural swappers (ArcFace and FaceFusion's converters)."""

from faceweave.embedders.arcface import (
    ArcFaceEmbedder,
    EmbeddingConverter,
    arcface_input,
    l2_normalize,
)

__all__ = ["ArcFaceEmbedder", "EmbeddingConverter", "arcface_input", "l2_normalize"]
