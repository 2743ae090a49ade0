"""Per-pixel chains of the video's paste-back fused into one pass: the
compiled kernels (``_pixels.c``) when they were built, else their NumPy
formulations (:mod:`faceweave.kernels.reference`), which give the same
values."""

from __future__ import annotations

import numpy as np

from faceweave.kernels import reference

try:  # built at install time; absent where no C compiler was there
    from faceweave.kernels import _pixels  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the install
    _pixels = None


def compiled() -> bool:
    """Whether the compiled per-pixel kernels are installed (else NumPy runs them)."""
    return _pixels is not None


def put_detail(
    out: np.ndarray,
    box: tuple[int, int],
    new: np.ndarray,
    mask: np.ndarray | None = None,
    *,
    band: tuple[np.ndarray, np.ndarray] | None = None,
    step: float = 0.0,
    sign: int = 0,
) -> None:
    """Write the float32 window ``new`` (``(h, w, C)``) into the uint8 frame
    ``out`` (``(H, W, C)``, C-contiguous) with its first pixel at ``box =
    (x0, y0)``, rounded to the nearest level and clipped to 0..255, after
    moving a detail band under ``mask`` (``(h, w)``, needed with the band only): ``band = (src, low)``,
    a picture of ``new``'s shape and its low-pass, whose difference times
    ``step * mask`` is added (``sign`` 1) or taken away (``sign`` -1);
    ``sign`` 0 or no ``band``: ``new`` as it is.  In float32, in NumPy's
    order: ``new + (src - low) * (float32(step) * mask) + 0.5``."""
    x0, y0 = int(box[0]), int(box[1])
    h, w = new.shape[:2]
    step32 = np.float32(step)
    sign = 0 if band is None or mask is None else int(np.sign(sign))
    if out.dtype != np.uint8 or not out.flags.c_contiguous or out.ndim != 3 or new.shape[2:] != out.shape[2:]:
        raise ValueError("out must be a C-contiguous (H, W, C) uint8 frame with new's channels")
    if x0 < 0 or y0 < 0 or x0 + w > out.shape[1] or y0 + h > out.shape[0]:
        raise ValueError(f"a {w}x{h} window at ({x0}, {y0}) does not fit a {out.shape[1]}x{out.shape[0]} frame")
    values = np.ascontiguousarray(new, np.float32)
    weights = values if sign == 0 or mask is None else np.ascontiguousarray(mask, np.float32)
    pair = None if band is None or sign == 0 else tuple(np.ascontiguousarray(b, np.float32) for b in band)
    if _pixels is None:
        reference.put_detail(out, (x0, y0), values, pair, weights, step32, sign)  # type: ignore[arg-type]
        return
    src, low = pair if pair is not None and sign != 0 else (values, values)
    channels, width = int(out.shape[2]), int(out.shape[1])
    _pixels.put_detail(values, src, low, weights, out, w, h, channels, width, x0, y0, float(step32), sign)


def paste_warped(
    out: np.ndarray,
    crop: np.ndarray,
    mask: np.ndarray,
    window: tuple[int, int, int, int],
    box: tuple[int, int, int, int],
    matrix: np.ndarray,
) -> None:
    """Paste the ``window = (x, y, w, h)`` of a uint8 ``crop`` (``(h, w, C)``)
    into the uint8 frame ``out`` (``(H, W, C)``, C-contiguous, changed in
    place) on its ``box = (x1, y1, x2, y2)``: the window warped by the
    ``(2, 3)`` ``matrix`` (window -> box pixels) with its edges replicated,
    and the float ``mask`` (the crop's size) warped alike with 0 outside,
    ``out = (crop * m + out * (1 - m)) / (m + (1 - m) + 1e-5)`` rounded.
    OpenCV's ``warpAffine`` (bilinear, in its 1/32-pixel fixed point) and
    ``blendLinear`` to the bit, in one pass that leaves the frame alone
    where the mask is 0."""
    bx, by, bw, bh = (int(v) for v in window)
    x1, y1, x2, y2 = (int(v) for v in box)
    if out.dtype != np.uint8 or not out.flags.c_contiguous or crop.dtype != np.uint8:
        raise ValueError("out must be a C-contiguous uint8 frame and crop uint8")
    if crop.shape[:2] != mask.shape[:2] or crop.shape[2:] != out.shape[2:] or out.ndim != 3:
        raise ValueError("crop and mask must be of one size, crop and out of the same channels")
    pixels = np.ascontiguousarray(crop)
    weights = np.ascontiguousarray(mask, np.float32)
    if _pixels is None:
        reference.paste_warped(out, pixels, weights, (bx, by, bw, bh), (x1, y1, x2, y2), matrix)
        return
    h, w, c = pixels.shape
    m = [float(v) for v in np.asarray(matrix, np.float64).reshape(6)]
    _pixels.paste_warped(pixels, weights, out, w, h, c, bx, by, bw, bh, out.shape[1], out.shape[0], x1, y1, x2, y2, *m)


def detail_grain(
    original: np.ndarray,
    out: np.ndarray,
    mask: np.ndarray,
    window: tuple[int, int, int, int],
    box: tuple[int, int, int, int],
    matrix: np.ndarray,
    *,
    taps: np.ndarray,
    step: float,
    sign: int,
    least: int = 64,
) -> tuple[int, int, int, int] | None:
    """A video face's grain matched in place, in one pass: the ``window =
    (x, y, w, h)`` of the crop's float ``mask`` warped by the ``(2, 3)``
    ``matrix`` (window -> ``box = (x1, y1, x2, y2)`` of the frame) as
    OpenCV's ``warpAffine`` does (bilinear, 0 outside; to the bit); over the
    bounding box of its values above 0.01 (``None`` and nothing changed
    when that box, or the count of values above 0.5 in it, is under
    ``least`` pixels), the detail band ``src - low`` of the uint8
    ``original`` frame (``sign`` 1) or of ``out`` as it is (-1), ``low``
    its low-pass by ``taps`` along rows and columns with mirrored edges,
    times ``float32(step) * mask`` is added to (taken from) ``out``
    (C-contiguous uint8 ``(H, W, C)``, like ``original``) and rounded.
    Returns the box written ``(X1, Y1, X2, Y2)``.  The float32 values of
    :func:`put_detail` with the band's low-pass summed tap after tap
    (:func:`faceweave.kernels.reference.separable_lowpass`; OpenCV's
    ``GaussianBlur`` by the same taps sums in its own order: within 1e-4 of
    a level)."""
    bx, by, bw, bh = (int(v) for v in window)
    x1, y1, x2, y2 = (int(v) for v in box)
    if out.dtype != np.uint8 or not out.flags.c_contiguous or out.ndim != 3 or original.shape != out.shape:
        raise ValueError("out must be a C-contiguous (H, W, C) uint8 frame of original's shape")
    if sign not in (1, -1):
        raise ValueError(f"sign must be 1 or -1; got {sign}")
    frame = np.ascontiguousarray(original, np.uint8)
    weights = np.ascontiguousarray(mask, np.float32)
    kernel = np.ascontiguousarray(taps, np.float32).ravel()
    step32 = np.float32(step)
    if _pixels is None:
        return reference.detail_grain(
            frame, out, weights, (bx, by, bw, bh), (x1, y1, x2, y2), matrix, kernel, step32, sign, int(least)
        )
    h, w, c = out.shape
    m = [float(v) for v in np.asarray(matrix, np.float64).reshape(6)]
    mh, mw = weights.shape[:2]
    found = _pixels.detail_grain(
        frame,
        out,
        weights,
        kernel,
        w,
        h,
        c,
        mw,
        mh,
        bx,
        by,
        bw,
        bh,
        x1,
        y1,
        x2,
        y2,
        *m,
        float(step32),
        sign,
        int(least),
    )
    return None if found is None else tuple(found)


def add_under(out: np.ndarray, values: np.ndarray, mask: np.ndarray, share: float = 1.0) -> np.ndarray:
    """``out += values * mask`` (``share`` below 1: ``out += share * (values
    * mask)``), float32 ``(h, w, C)`` pictures and a float32 ``(h, w)`` mask,
    in place and in one pass, NumPy's float32 values to the bit.  Returns
    ``out`` (C-contiguous float32)."""
    if out.dtype != np.float32 or not out.flags.c_contiguous or out.ndim != 3:
        raise ValueError("out must be a C-contiguous (h, w, C) float32 picture")
    if values.shape != out.shape or mask.shape != out.shape[:2]:
        raise ValueError(f"values must be {out.shape}, mask {out.shape[:2]}")
    v, m = np.ascontiguousarray(values, np.float32), np.ascontiguousarray(mask, np.float32)
    part = float(np.float32(share))
    if _pixels is None:
        return reference.add_under(out, v, m, np.float32(part))
    h, w, ch = out.shape
    _pixels.add_under(out, v, m, h * w, ch, part)
    return out


def mix_band(
    out: np.ndarray, fine: np.ndarray, coarse: np.ndarray, mask: np.ndarray, back: np.ndarray | None = None
) -> np.ndarray:
    """One level of a multi-band blend, in place: ``out + (fine - coarse) *
    mask`` (then ``+ back`` when given), float32 ``(h, w, C)`` pictures and a
    float32 ``(h, w)`` mask, element by element in NumPy's order (the same
    values to the bit as ``band = fine - coarse; band *= mask; out = out +
    band; out += back``).  Returns ``out`` (C-contiguous float32)."""
    if out.dtype != np.float32 or not out.flags.c_contiguous or out.ndim != 3:
        raise ValueError("out must be a C-contiguous (h, w, C) float32 picture")
    if fine.shape != out.shape or coarse.shape != out.shape or mask.shape != out.shape[:2]:
        raise ValueError(f"fine and coarse must be {out.shape}, mask {out.shape[:2]}")
    if back is not None and back.shape != out.shape:
        raise ValueError(f"back must be {out.shape}")
    f, c = np.ascontiguousarray(fine, np.float32), np.ascontiguousarray(coarse, np.float32)
    m = np.ascontiguousarray(mask, np.float32)
    b = None if back is None else np.ascontiguousarray(back, np.float32)
    if _pixels is None:
        return reference.mix_band(out, f, c, m, b)
    h, w, ch = out.shape
    _pixels.mix_band(out, f, c, m, f if b is None else b, h * w, ch, int(b is not None))
    return out


def to_uint8(values: np.ndarray, out: np.ndarray | None = None, corner: tuple[int, int] = (0, 0)) -> np.ndarray:
    """``np.clip(values + 0.5, 0, 255).astype(np.uint8)`` of float32
    ``(h, w, C)`` ``values`` (NaN: 0) in one pass: a new array, or written
    into the frame ``out`` (C-contiguous uint8 ``(H, W, C)``) with its first
    pixel at ``corner``, which is returned."""
    if out is None:
        out = np.empty(values.shape, np.uint8)
        corner = (0, 0)
    put_detail(out, corner, values)
    return out


def warp_by_grid(pixels: np.ndarray, grid: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A smooth field given every ``step`` pixels (``grid``: float32 ``(GH,
    GW, 3)``, sample ``(i, j)`` at pixel ``(j * step, i * step)``: the x and y
    offsets and how much the place moved) at every pixel of the uint8
    ``pixels`` (``(H, W, C)``), and the picture moved by it: ``(moved,
    offsets, changed)``, ``moved`` the picture sampled at ``(x + dx, y +
    dy)``, ``offsets`` ``(H, W, 2)`` and ``changed`` ``(H, W)`` float32.
    OpenCV's ``warpAffine`` of the grid by ``1 / step`` and ``remap`` of the
    picture (both bilinear, edges replicated) to the bit, in one pass."""
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or grid.ndim != 3 or grid.shape[2] != 3 or step < 1:
        raise ValueError("pixels must be (H, W, C) uint8, grid (GH, GW, 3), step at least 1")
    values = np.ascontiguousarray(pixels)
    field = np.ascontiguousarray(grid, np.float32)
    if _pixels is None:
        return reference.warp_by_grid(values, field, int(step))
    h, w, c = values.shape
    moved = np.empty_like(values)
    offsets = np.empty((h, w, 2), np.float32)
    changed = np.empty((h, w), np.float32)
    _pixels.warp_by_grid(field, values, offsets, changed, moved, field.shape[1], field.shape[0], w, h, c, int(step))
    return moved, offsets, changed


def run_shade_face(
    lab: np.ndarray,
    offset: np.ndarray,
    coverage: np.ndarray,
    behind: np.ndarray,
    out: np.ndarray,
    degamma: np.ndarray,
    params: np.ndarray,
    box: tuple[int, int, int, int],
) -> None:
    """The compiled :func:`faceweave.kernels.lab.shade_face` on its checked,
    contiguous arrays (``out``: float32, the window's, written)."""
    if _pixels is None:  # pragma: no cover - the caller runs the reference then
        raise RuntimeError("the compiled kernels are not installed")
    h, w = coverage.shape[:2]
    steps = int(degamma.shape[0]) - 1
    _pixels.shade_face(lab, offset, coverage, behind, out, degamma, params, w, h, *box, steps)


def mark_luma(luma: np.ndarray, pattern: np.ndarray, mask: np.ndarray) -> None:
    """Add a watermark to a frame's Y plane in place: ``luma`` (uint8 ``(H,
    W)``, C-contiguous) ``+= round(pattern * up(mask))``, clipped to 0..255,
    where ``pattern`` is float32 ``(H, W)`` in Y levels and ``up`` upscales
    the float32 perceptual ``mask`` (``(h, w)``, smaller) bilinearly to the
    frame.  OpenCV's ``resize`` (INTER_LINEAR), ``multiply`` to int16 and
    ``add`` to uint8 in one pass, to within one level where the upscaled
    mask's last bit decides a rounding."""
    if luma.dtype != np.uint8 or luma.ndim != 2 or not luma.flags.c_contiguous:
        raise ValueError("luma must be a C-contiguous (H, W) uint8 plane")
    if pattern.shape != luma.shape or mask.ndim != 2:
        raise ValueError("pattern must have luma's shape and mask be a 2-D array")
    values = np.ascontiguousarray(pattern, np.float32)
    weights = np.ascontiguousarray(mask, np.float32)
    if _pixels is None:
        reference.mark_luma(luma, values, weights)
        return
    h, w = luma.shape
    _pixels.mark_luma(luma, values, weights, w, h, weights.shape[1], weights.shape[0])


def mark_pixels(pixels: np.ndarray, tile: np.ndarray, mask: np.ndarray, *, wide: bool = True) -> np.ndarray:
    """A watermark added to a picture: ``pixels`` (uint8 ``(H, W)`` grey,
    ``(H, W, 3)`` RGB or ``(H, W, 4)`` RGBA) with ``round(pattern * mask)``
    added to every colour channel and clipped to 0..255 (the alpha kept),
    where ``pattern`` is the float32 ``(T, T)`` ``tile`` repeated from the
    top-left corner and ``mask`` float32 ``(H, W)``; the product is rounded
    to the nearest, ties to even, and clipped to int16 as ``cv2.multiply``
    to ``CV_16S`` does.  A new array; the tiled pattern is never made.
    Sixteen pixels at a time with SSE2 and SSSE3 (``wide=False``: RGB one
    pixel at a time, for the tests)."""
    if pixels.dtype != np.uint8 or not (pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[2] in (3, 4))):
        raise ValueError("pixels must be (H, W), (H, W, 3) or (H, W, 4) uint8")
    if tile.ndim != 2 or tile.shape[0] != tile.shape[1] or mask.shape != pixels.shape[:2]:
        raise ValueError("tile must be square and mask have the picture's height and width")
    values = np.ascontiguousarray(pixels)
    pattern = np.ascontiguousarray(tile, np.float32)
    weights = np.ascontiguousarray(mask, np.float32)
    if _pixels is None:
        return reference.mark_pixels(values, pattern, weights)
    out = np.empty_like(values)
    h, w = values.shape[:2]
    channels = 1 if values.ndim == 2 else int(values.shape[2])
    _pixels.mark_pixels(values, pattern, weights, out, w, h, channels, int(pattern.shape[0]), int(wide))
    return out


def rgb_to_i420(pixels: np.ndarray, matrix: np.ndarray, *, wide: bool = True) -> np.ndarray:
    """An RGB ``(H, W, 3)`` uint8 frame (even sides, C-contiguous) as planar
    YUV 4:2:0 ``(H * 3 // 2, W)`` uint8 (Y, then Cb, then Cr) by the float32
    ``(3, 4)`` ``matrix`` (RGB weights and offset per output channel, each
    weight under 32 in size), as :func:`cv2.transform` computes it on uint8:
    in 10-bit fixed point, ``(round(1024 * m) . rgb + round(1024 * (offset
    + 0.5))) >> 10``, the chroma on each 2x2 block's mean (``cv2.resize``
    INTER_AREA); the same values in one pass, sixteen pixels at a time with
    SSSE3 (``wide=False``: one pixel pair at a time, for the tests)."""
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3 or not pixels.flags.c_contiguous:
        raise ValueError("pixels must be a C-contiguous (H, W, 3) uint8 frame")
    h, w = pixels.shape[:2]
    if h % 2 or w % 2:
        raise ValueError(f"a {w}x{h} frame does not split into 4:2:0 planes: both sides must be even")
    m = np.asarray(matrix, np.float32)
    if m.shape != (3, 4) or not np.all(np.abs(m[:, :3]) < 32):
        raise ValueError("matrix must be (3, 4) float32 with RGB weights under 32 in size")
    if _pixels is None:
        return reference.rgb_to_i420(pixels, m)
    weights = np.rint(m[:, :3] * np.float32(1024.0))
    offsets = np.rint((m[:, 3] + np.float32(0.5)) * np.float32(1024.0))
    coefficients = np.ascontiguousarray(np.column_stack([weights, offsets]).astype(np.int32).reshape(-1))
    out = np.empty((h * 3 // 2, w), np.uint8)
    _pixels.rgb_to_i420(pixels, out, coefficients, w, h, wide)
    return out
