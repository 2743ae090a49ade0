"""Compiled kernels for per-frame work that NumPy and OpenCV cannot do in
a few calls.

A kernel is a small C function, built when faceweave is installed
(``_raster.c``, ``_pixels.c``: CPython extensions with no dependency beyond a C
compiler), that replaces a Python-level loop of many small calls and runs
with the interpreter lock released, so the video's render threads run it
side by side: the mesh swapper's rasterizer and its piecewise-affine
maps (:mod:`faceweave.kernels.raster`), paste-back, the detail step and
the reshaping warp and the watermark's mark on a video frame's Y plane and on a picture's colours
(:mod:`faceweave.kernels.pixels`), and the blend's colour chain
(:mod:`faceweave.kernels.lab`).

Where no C compiler was there at install time, the same functions run
their NumPy formulations (:mod:`faceweave.kernels.reference`), which give
the same values to the bit, only slower: :func:`compiled` says which.
Nothing is compiled at run time, so there is no compile cache, no cold
start, and a read-only root filesystem needs nothing.
"""

from __future__ import annotations

from faceweave.kernels import lab, pixels, raster
from faceweave.kernels.lab import LabMap, shade_face
from faceweave.kernels.pixels import (
    add_under,
    detail_grain,
    mark_luma,
    mark_pixels,
    mix_band,
    paste_warped,
    put_detail,
    rgb_to_i420,
    to_uint8,
    warp_by_grid,
)
from faceweave.kernels.raster import affine_maps, rasterize


def compiled() -> bool:
    """Whether every compiled kernel is installed (else NumPy runs those that are not)."""
    return raster.compiled() and pixels.compiled()


__all__ = [
    "LabMap",
    "add_under",
    "affine_maps",
    "compiled",
    "detail_grain",
    "lab",
    "mark_luma",
    "mark_pixels",
    "mix_band",
    "paste_warped",
    "put_detail",
    "rasterize",
    "rgb_to_i420",
    "shade_face",
    "to_uint8",
    "warp_by_grid",
]
