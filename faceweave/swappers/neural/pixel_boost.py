"""Pixel boost: run a model of side ``S`` on a crop of side ``S * k`` by
splitting the crop into ``k * k`` interleaved tiles, as FaceFusion does.

Tile ``t = i * k + j`` takes the pixels ``crop[i::k, j::k]``: every tile is
the whole face at the model's resolution, shifted by a sub-pixel offset, so
the model sees a face it knows in each; putting the outputs back in the same
interleaved places gives a ``k`` times finer result.  Pure functions.
"""

from __future__ import annotations

import numpy as np

from faceweave.errors import InvalidOptionError


def boost_factor(model_size: int, pixel_boost: int | None) -> int:
    """``k`` such that ``pixel_boost == model_size * k`` (1 for ``None``)."""
    if pixel_boost is None or pixel_boost == model_size:
        return 1
    if pixel_boost < model_size or pixel_boost % model_size:
        raise InvalidOptionError(
            f"pixel boost {pixel_boost} must be a multiple of the model size {model_size} "
            f"(e.g. {model_size * 2} or {model_size * 4})"
        )
    return pixel_boost // model_size


def tile(crop: np.ndarray, k: int) -> np.ndarray:
    """``(S * k, S * k, C)`` -> ``(k * k, S, S, C)`` interleaved tiles."""
    h, w = crop.shape[:2]
    if h != w or h % k:
        raise ValueError(f"crop must be square with a side divisible by {k}; got {crop.shape}")
    s = h // k
    c = crop.shape[2:]
    parts = crop.reshape(s, k, s, k, *c)
    order = (1, 3, 0, 2) + tuple(range(4, 4 + len(c)))
    return np.ascontiguousarray(parts.transpose(order).reshape(k * k, s, s, *c))


def untile(tiles: np.ndarray, k: int) -> np.ndarray:
    """``(k * k, S, S, C)`` -> ``(S * k, S * k, C)``; inverse of :func:`tile`."""
    if tiles.shape[0] != k * k:
        raise ValueError(f"expected {k * k} tiles; got {tiles.shape[0]}")
    s = tiles.shape[1]
    c = tiles.shape[3:]
    parts = tiles.reshape(k, k, s, s, *c)
    order = (2, 0, 3, 1) + tuple(range(4, 4 + len(c)))
    return np.ascontiguousarray(parts.transpose(order).reshape(s * k, s * k, *c))
