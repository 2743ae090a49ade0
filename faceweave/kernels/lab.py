"""The colour chain at the end of the blend in one pass: :func:`shade_face`.

The new face's window, in CIELAB, goes through the skin-colour mapping
(:class:`LabMap`: the statistics transfer of
:func:`faceweave.compositing.colour.apply_statistics`) and the shading and
tint offsets, back to sRGB rounded to 8-bit levels, and where the swapper
did not cover the crop the crop behind stays: what a dozen NumPy passes,
OpenCV's ``cvtColor`` and ``copyTo`` did, done pixel by pixel in one loop
(the compiled kernel in ``_pixels.c``) with the interpreter lock released,
or by its NumPy formulation (:func:`faceweave.kernels.reference.shade_face`),
which gives the same values to the bit.

The conversion back is OpenCV's float Lab -> RGB (its D65 matrix,
thresholds and constants) with the sRGB curve read from a table made here
once (:func:`lab_tables`) rather than OpenCV's spline table: the levels are
``cvtColor``'s on all but a few pixels in ten thousand, and those are one
level off (``tests/test_kernels.py``).  (The way in stays OpenCV's: its
float RGB -> Lab interpolates a fixed-point table, which an exact formula
would miss by up to a third of a unit.)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from faceweave.kernels import pixels, reference

#: XYZ -> sRGB (linear, D65) and the white point, as OpenCV has them
_XYZ2RGB = np.array(
    [[3.240479, -1.53715, -0.498535], [-0.969256, 1.875991, 0.041556], [0.055648, -0.204043, 1.057311]], np.float64
)
_WHITE = np.array([0.950456, 1.0, 1.088754], np.float64)
#: entries (less one) of the sRGB curve's table over [0, 1]
TABLE_STEPS = 4096


@dataclass(frozen=True)
class ChromaMap:
    """One chroma channel's mapping: ``v * gain + shift``, except where
    ``v * sign > edge`` (beyond the skin's own range of tint; ``sign`` 0:
    nowhere), which is shifted by ``add``.  float32 values."""

    gain: float = 1.0
    shift: float = 0.0
    sign: float = 0.0
    edge: float = 0.0
    add: float = 0.0


@dataclass(frozen=True)
class LabMap:
    """A mapping of CIELAB colours: lightness ``(L - own) * gain + ref``,
    each chroma channel by its :class:`ChromaMap`, and ``share`` of the
    change taken (1: all of it).  Every number is a float32 value, so the
    NumPy and compiled formulations round alike."""

    gain: float = 1.0
    own: float = 0.0
    ref: float = 0.0
    a: ChromaMap = ChromaMap()
    b: ChromaMap = ChromaMap()
    share: float = 1.0

    def __post_init__(self) -> None:
        for name in ("gain", "own", "ref", "share"):
            object.__setattr__(self, name, float(np.float32(getattr(self, name))))
        for name in ("a", "b"):
            chroma = getattr(self, name)
            values = {k: float(np.float32(getattr(chroma, k))) for k in ("gain", "shift", "sign", "edge", "add")}
            object.__setattr__(self, name, ChromaMap(**values))

    def apply(self, lab: np.ndarray) -> np.ndarray:
        """float32 CIELAB ``(..., 3)`` mapped (``share`` of it taken)."""
        lab = np.asarray(lab, np.float32)
        out = np.empty_like(lab)
        f32 = np.float32
        out[..., 0] = (lab[..., 0] - f32(self.own)) * f32(self.gain) + f32(self.ref)
        for c, chroma in ((1, self.a), (2, self.b)):
            v = lab[..., c]
            scaled = v * f32(chroma.gain) + f32(chroma.shift)
            if chroma.sign != 0.0:
                scaled = np.where(v * f32(chroma.sign) > f32(chroma.edge), v + f32(chroma.add), scaled)
            out[..., c] = scaled
        if self.share >= 1.0:
            return out
        return np.asarray(lab + f32(self.share) * (out - lab), np.float32)

    def params(self) -> np.ndarray:
        """The kernel's parameters: the XYZ -> RGB matrix, then this map (float32 ``(23,)``)."""
        mine = [self.gain, self.own, self.ref]
        for chroma in (self.a, self.b):
            mine += [chroma.gain, chroma.shift, chroma.sign, chroma.edge, chroma.add]
        return np.concatenate([lab_tables().inverse, np.array(mine + [self.share], np.float32)])


@dataclass(frozen=True, eq=False)
class LabTables:
    """The conversion's numbers (read-only float32): ``inverse`` the ``(9,)``
    XYZ * white -> linear RGB matrix, ``degamma`` the sRGB curve at ``k /
    TABLE_STEPS`` for ``k = 0..TABLE_STEPS``."""

    inverse: np.ndarray
    degamma: np.ndarray


@cache
def lab_tables() -> LabTables:
    """The tables, made once (pure: the same numbers every time)."""
    v = np.arange(TABLE_STEPS + 1, dtype=np.float64) / TABLE_STEPS
    made = LabTables(
        inverse=(_XYZ2RGB * _WHITE[None, :]).reshape(9).astype(np.float32),
        degamma=np.where(v <= 0.0031308, v * 12.92, 1.055 * v ** (1.0 / 2.4) - 0.055).astype(np.float32),
    )
    for table in (made.inverse, made.degamma):
        table.setflags(write=False)
    return made


def shade_face(
    lab: np.ndarray,
    offset: np.ndarray,
    coverage: np.ndarray,
    behind: np.ndarray,
    box: tuple[int, int, int, int],
    mapping: LabMap,
) -> np.ndarray:
    """float32 ``(y1 - y0, x1 - x0, 3)`` for the window ``box = (x0, y0,
    x1, y1)`` of a crop: ``lab`` (the new face's window, float32 CIELAB)
    mapped by ``mapping``, plus ``offset`` (float32 CIELAB, the window's
    size), back in sRGB rounded to 8-bit levels (as
    :func:`faceweave.compositing.colour.to_rgb`); where ``coverage``
    (float32, the crop's ``(H, W)``) is not above 0.5, ``behind`` (uint8
    ``(H, W, 3)``) instead.  Compiled when the kernels were built, else
    NumPy, to the same values."""
    x0, y0, x1, y1 = (int(v) for v in box)
    h, w = coverage.shape[:2]
    window = (y1 - y0, x1 - x0, 3)
    if behind.dtype != np.uint8 or behind.shape != (h, w, 3) or coverage.ndim != 2:
        raise ValueError("behind must be uint8 (H, W, 3) and coverage (H, W)")
    if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
        raise ValueError(f"the window {box} must lie inside the {w}x{h} crop")
    if lab.shape != window or offset.shape != window:
        raise ValueError(f"lab and offset must be the window's {window}, got {lab.shape} and {offset.shape}")
    tables = lab_tables()
    args = (
        np.ascontiguousarray(lab, np.float32),
        np.ascontiguousarray(offset, np.float32),
        np.ascontiguousarray(coverage, np.float32),
        np.ascontiguousarray(behind),
    )
    params = mapping.params()
    if not pixels.compiled():
        return reference.shade_face(*args, (x0, y0, x1, y1), params, tables.degamma)
    out = np.empty(window, np.float32)
    pixels.run_shade_face(*args, out, tables.degamma, params, (x0, y0, x1, y1))
    return out
