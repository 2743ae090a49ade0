"""Swappers: one small class per kind behind :class:`Swapper`, built by name
from a :class:`SwapperContext` (:mod:`faceweave.swappers.registry`)."""

from faceweave.swappers.base import (
    AlignedCrop,
    Precomputed,
    SourceFace,
    SwapOutput,
    Swapper,
    SwapperContext,
    SwapperFactory,
)

__all__ = [
    "AlignedCrop",
    "Precomputed",
    "SourceFace",
    "SwapOutput",
    "Swapper",
    "SwapperContext",
    "SwapperFactory",
]
