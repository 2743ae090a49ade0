"""Swappers: one small class per kind behind :class:`Swapper`, built by name
from a :class:`SwapperContext`."""

from faceweave.swappers.base import (
    AlignedCrop,
    Precomputed,
    SourceFace,
    SwapOutput,
    Swapper,
    SwapperContext,
    SwapperFactory,
    available_swappers,
    create_swapper,
    swapper_factory,
)

__all__ = [
    "AlignedCrop",
    "Precomputed",
    "SourceFace",
    "SwapOutput",
    "Swapper",
    "SwapperContext",
    "SwapperFactory",
    "available_swappers",
    "create_swapper",
    "swapper_factory",
]
