"""Swappers: one small class per kind behind :class:`Swapper`, built by name."""

from faceweave.swappers.base import AlignedCrop, SourceFace, SwapOutput, Swapper, available_swappers, create_swapper

__all__ = ["AlignedCrop", "SourceFace", "Swapper", "SwapOutput", "available_swappers", "create_swapper"]
