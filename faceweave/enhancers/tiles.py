"""Overlapping tiles and their seamless reassembly.  Pure functions.

An image is covered by equal tiles whose start positions are spread evenly,
so that neighbours overlap by at least ``overlap`` pixels.  On reassembly,
each tile's weight rises linearly from near 0 at a side that has a neighbour
to 1 across the overlap (sides on the image border keep weight 1), and every
output pixel is the weighted mean of the tiles that cover it: two tiles'
ramps across a shared overlap sum to one, so there is no seam.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np


def tile_starts(length: int, tile: int, overlap: int) -> tuple[int, ...]:
    """Start positions of tiles of ``tile`` pixels covering ``[0, length)``,
    the first at 0, the last at ``length - tile``, neighbours overlapping by
    at least ``overlap``.  One tile (at 0) when ``length <= tile``."""
    if tile < 1 or not 0 <= overlap < tile:
        raise ValueError(f"need tile >= 1 and 0 <= overlap < tile, got tile={tile}, overlap={overlap}")
    if length <= tile:
        return (0,)
    count = int(np.ceil((length - overlap) / (tile - overlap)))
    count = max(count, 2)
    return tuple(int(s) for s in np.round(np.linspace(0, length - tile, count)).astype(int))


@dataclass(frozen=True)
class TileGrid:
    """Tiles of ``(tile_h, tile_w)`` over a ``(height, width)`` image, at
    every ``(y, x)`` for ``y`` in ``ys`` and ``x`` in ``xs`` (row by row)."""

    height: int
    width: int
    tile_h: int
    tile_w: int
    ys: tuple[int, ...]
    xs: tuple[int, ...]

    def boxes(self) -> list[tuple[int, int, int, int]]:
        """``(y0, x0, y1, x1)`` of each tile, row by row."""
        return [(y, x, y + self.tile_h, x + self.tile_w) for y in self.ys for x in self.xs]

    def scaled(self, factor: int) -> TileGrid:
        """The same grid on an image ``factor`` times larger."""
        return TileGrid(
            self.height * factor,
            self.width * factor,
            self.tile_h * factor,
            self.tile_w * factor,
            tuple(y * factor for y in self.ys),
            tuple(x * factor for x in self.xs),
        )

    def __len__(self) -> int:
        return len(self.ys) * len(self.xs)


def make_grid(height: int, width: int, *, tile: int, overlap: int) -> TileGrid:
    """Square tiles of side ``tile`` (smaller along a side shorter than it)."""
    th, tw = min(tile, height), min(tile, width)
    return TileGrid(
        height,
        width,
        th,
        tw,
        tile_starts(height, th, min(overlap, th - 1)),
        tile_starts(width, tw, min(overlap, tw - 1)),
    )


def axis_weights(starts: tuple[int, ...], tile: int) -> list[np.ndarray]:
    """``(tile,)`` float32 weight along one axis for each tile: a linear ramp
    across the overlap with each neighbour, 1 elsewhere."""
    out = []
    pos = np.arange(tile, dtype=np.float64) + 0.5
    for k, start in enumerate(starts):
        w = np.ones(tile)
        before = starts[k - 1] + tile - start if k > 0 else 0  # overlap with the previous tile
        after = start + tile - starts[k + 1] if k < len(starts) - 1 else 0  # with the next
        if before > 0:
            w = np.minimum(w, pos / before)
        if after > 0:
            w = np.minimum(w, (tile - pos) / after)
        out.append(w.astype(np.float32))
    return out


def split_tiles(image: np.ndarray, grid: TileGrid) -> Iterator[np.ndarray]:
    """The tiles of ``image`` ``(H, W, ...)`` in ``grid`` order (views)."""
    for y0, x0, y1, x1 in grid.boxes():
        yield image[y0:y1, x0:x1]


def merge_tiles(tiles: Iterable[np.ndarray], grid: TileGrid) -> np.ndarray:
    """Reassemble ``(tile_h, tile_w, C)`` tiles given in ``grid`` order into a
    ``(height, width, C)`` float32 image, each pixel the ramp-weighted mean of
    the tiles over it.  ``tiles`` may be a generator: one tile at a time is
    held besides the result."""
    wy, wx = axis_weights(grid.ys, grid.tile_h), axis_weights(grid.xs, grid.tile_w)
    acc = None
    total = np.zeros((grid.height, grid.width), np.float32)
    count = 0
    for index, ((y0, x0, y1, x1), tile) in enumerate(zip(grid.boxes(), tiles, strict=False)):
        tile = np.asarray(tile, np.float32)
        if tile.shape[:2] != (grid.tile_h, grid.tile_w):
            raise ValueError(f"tile {index}: expected shape ({grid.tile_h}, {grid.tile_w}, C), got {tile.shape}")
        if acc is None:
            acc = np.zeros((grid.height, grid.width) + tile.shape[2:], np.float32)
        w = np.outer(wy[index // len(grid.xs)], wx[index % len(grid.xs)])
        acc[y0:y1, x0:x1] += tile * (w if tile.ndim == 2 else w[..., None])
        total[y0:y1, x0:x1] += w
        count += 1
    if count != len(grid) or acc is None:
        raise ValueError(f"expected {len(grid)} tiles, got {count}")
    return acc / (total if acc.ndim == 2 else total[..., None])
