"""The NumPy formulations of the compiled kernels (``_raster.c``): the
same arithmetic in the same order, so the same values to the bit; they run
where the kernels were not built, and the tests hold the kernels to them."""

from __future__ import annotations

import cv2
import numpy as np

#: candidate pixels tested at once by :func:`rasterize` (bounds its memory)
_CHUNK = 1 << 20


def rasterize(
    points: np.ndarray, triangles: np.ndarray, order: np.ndarray, size: tuple[int, int], *, reach: float
) -> np.ndarray:
    """:func:`faceweave.kernels.raster.rasterize` (float64 ``points`` ``(N,
    2)``, int64 ``triangles`` ``(T, 3)`` and ``order``): every triangle's
    box of pixels tested at once, the latest in ``order`` kept per pixel."""
    w, h = size
    rank = np.full(h * w, -1, np.int64)
    corners = points[triangles[order]]  # (K, 3, 2)
    a, b, c = corners[:, 0], corners[:, 1].copy(), corners[:, 2].copy()
    flip = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0]) < 0.0
    b[flip], c[flip] = corners[flip, 2], corners[flip, 1]
    lo, hi = np.minimum(np.minimum(a, b), c) - reach, np.maximum(np.maximum(a, b), c) + reach
    on = (
        np.isfinite(corners).all(axis=(1, 2))
        & (hi[:, 0] >= 0.0)
        & (hi[:, 1] >= 0.0)
        & (lo[:, 0] <= w - 1)
        & (lo[:, 1] <= h - 1)
    )
    kept = np.flatnonzero(on)
    start = np.maximum(np.floor(lo[kept]), 0).astype(np.int64)
    stop = np.minimum(np.ceil(hi[kept]), (w - 1, h - 1)).astype(np.int64)
    spans = stop - start + 1
    edges = [(b, c), (c, a), (a, b)]  # each edge's start and end
    limits = [-reach * (np.hypot(q[:, 0] - p[:, 0], q[:, 1] - p[:, 1]) + 1e-12) for p, q in edges]
    for part in _chunks(spans):
        ks, x0, n = kept[part], start[part], spans[part]
        dy, dx = np.mgrid[: int(n[:, 1].max()), : int(n[:, 0].max())]
        x, y = x0[:, 0, None, None] + dx, x0[:, 1, None, None] + dy
        inside = (dx < n[:, 0, None, None]) & (dy < n[:, 1, None, None])
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        for (p, q), limit in zip(edges, limits, strict=True):
            px, py = p[ks, 0, None, None], p[ks, 1, None, None]
            qx, qy = q[ks, 0, None, None], q[ks, 1, None, None]
            inside &= (qx - px) * (yf - py) - (qy - py) * (xf - px) >= limit[ks, None, None]
        np.maximum.at(rank, (y * w + x)[inside], np.broadcast_to(ks[:, None, None], inside.shape)[inside])
    ids = np.where(rank >= 0, order[np.maximum(rank, 0)], -1).astype(np.int32)
    return ids.reshape(h, w)


def _chunks(spans: np.ndarray) -> list[np.ndarray]:
    """Groups of rows of ``spans`` ``(K, 2)`` with boxes of about one size
    (sorted by area), each group's count times its largest box at most
    :data:`_CHUNK` pixels."""
    byarea = np.argsort(spans[:, 0] * spans[:, 1], kind="stable")
    groups, first = [], 0
    while first < len(byarea):
        # boxes grow along byarea: the group's last box bounds its others' area
        count = 128
        while count > 1:
            box = spans[byarea[first : first + count]].max(axis=0)
            if count * int(box[0] * box[1]) <= _CHUNK:
                break
            count //= 2
        groups.append(byarea[first : first + count])
        first += count
    return groups


def affine_maps(ids: np.ndarray, affines: np.ndarray, *, origin: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`faceweave.kernels.raster.affine_maps` (int32 ``ids``, float32
    ``affines`` ``(T, 2, 3)``), by gathering each pixel's affine."""
    h, w = ids.shape
    # one more "affine" for pixels with no triangle: everything to -1
    table = np.concatenate([affines.reshape(-1, 6), np.array([[0, 0, -1, 0, 0, -1]], np.float32)]).astype(np.float32)
    a = table[np.where(ids >= 0, ids, len(table) - 1)]  # (H, W, 6)
    xf = np.arange(origin[0], origin[0] + w, dtype=np.float32)[None, :]
    yf = np.arange(origin[1], origin[1] + h, dtype=np.float32)[:, None]
    map_x = a[..., 0] * xf + a[..., 1] * yf + a[..., 2]
    map_y = a[..., 3] * xf + a[..., 4] * yf + a[..., 5]
    return map_x.astype(np.float32), map_y.astype(np.float32)


def put_detail(
    out: np.ndarray,
    box: tuple[int, int],
    new: np.ndarray,
    band: tuple[np.ndarray, np.ndarray] | None,
    mask: np.ndarray | None,
    step: np.float32,
    sign: int,
) -> None:
    """:func:`faceweave.kernels.pixels.put_detail` (float32 windows): the
    band ``src - low`` times ``step * mask`` added to (``sign`` 1) or taken
    from (-1) ``new``, rounded into ``out`` at ``box = (x0, y0)``."""
    x0, y0 = box
    v = new.copy()
    if band is not None and mask is not None and sign != 0:
        src, low = band
        moved = (src - low) * (step * mask)[..., None]
        v = v + moved if sign > 0 else v - moved
    v += np.float32(0.5)
    h, w = new.shape[:2]
    out[y0 : y0 + h, x0 : x0 + w] = np.clip(np.nan_to_num(v, nan=0.0), 0, 255).astype(np.uint8)


def paste_warped(
    out: np.ndarray,
    crop: np.ndarray,
    mask: np.ndarray,
    window: tuple[int, int, int, int],
    box: tuple[int, int, int, int],
    matrix: np.ndarray,
) -> None:
    """:func:`faceweave.kernels.pixels.paste_warped` with OpenCV: the crop's
    ``window`` and its mask warped by ``matrix`` onto the frame's ``box``,
    blended there by ``cv2.blendLinear``."""
    bx, by, bw, bh = window
    x1, y1, x2, y2 = box
    size = (x2 - x1, y2 - y1)
    part = crop[by : by + bh, bx : bx + bw]
    big = cv2.warpAffine(part, matrix, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    weights = np.ascontiguousarray(mask[by : by + bh, bx : bx + bw], np.float32)
    m = cv2.warpAffine(weights, matrix, size, flags=cv2.INTER_LINEAR, borderValue=(0.0,))
    blended = cv2.blendLinear(big, out[y1:y2, x1:x2], m, 1.0 - m)
    out[y1:y2, x1:x2] = blended.reshape(out[y1:y2, x1:x2].shape)


def add_under(out: np.ndarray, values: np.ndarray, mask: np.ndarray, share: np.float32) -> np.ndarray:
    """:func:`faceweave.kernels.pixels.add_under` in NumPy (``out`` changed in place)."""
    part = values * mask[..., None]
    out += part if share == 1.0 else share * part
    return out


def mix_band(
    out: np.ndarray, fine: np.ndarray, coarse: np.ndarray, mask: np.ndarray, back: np.ndarray | None
) -> np.ndarray:
    """:func:`faceweave.kernels.pixels.mix_band` in NumPy (``out`` changed in place)."""
    band = fine - coarse
    band *= mask[..., None]
    np.add(out, band, out=out)
    if back is not None:
        out += back
    return out


def reflect101(p: int, n: int) -> int:
    """OpenCV's ``borderInterpolate`` for ``BORDER_REFLECT_101``: the index
    inside ``0 .. n - 1`` that position ``p`` mirrors to."""
    if n == 1:
        return 0
    while not 0 <= p < n:
        p = -p if p < 0 else 2 * n - 2 - p
    return p


def separable_lowpass(src: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """``src`` (float32 ``(h, w, C)``) filtered by ``taps`` (odd count)
    along its rows, then its columns, mirrored beyond its edges
    (``BORDER_REFLECT_101``), summed tap after tap in float32: the low-pass
    of :func:`faceweave.kernels.pixels.detail_grain`."""
    h, w = src.shape[:2]
    k = len(taps)
    r = k // 2
    f = [np.float32(t) for t in np.asarray(taps, np.float32).ravel()]
    rows = np.asarray([reflect101(p, h) for p in range(-r, h + r)])
    cols = np.asarray([reflect101(p, w) for p in range(-r, w + r)])
    padded = src[rows][:, cols]
    along = f[0] * padded[:, 0:w]
    for t in range(1, k):
        along += f[t] * padded[:, t : t + w]
    low = f[0] * along[0:h]
    for t in range(1, k):
        low += f[t] * along[t : t + h]
    return low


def detail_grain(
    original: np.ndarray,
    out: np.ndarray,
    mask: np.ndarray,
    window: tuple[int, int, int, int],
    box: tuple[int, int, int, int],
    matrix: np.ndarray,
    taps: np.ndarray,
    step: np.float32,
    sign: int,
    least: int,
) -> tuple[int, int, int, int] | None:
    """:func:`faceweave.kernels.pixels.detail_grain` with OpenCV and NumPy:
    the mask's ``window`` warped onto ``box`` by ``warpAffine``, the box of
    its values over 0.01, the band of the original (``sign`` 1) or of
    ``out`` (-1) there moved by ``step`` times the mask."""
    bx, by, bw, bh = window
    x1, y1, x2, y2 = box
    part = np.ascontiguousarray(mask[by : by + bh, bx : bx + bw], np.float32)
    m = cv2.warpAffine(part, matrix, (x2 - x1, y2 - y1), flags=cv2.INTER_LINEAR, borderValue=(0.0,))
    lx, ly, w, h = cv2.boundingRect((m > 0.01).astype(np.uint8))
    if w * h == 0 or w * h < least or cv2.countNonZero((m > 0.5).astype(np.uint8)) < least:
        return None
    cx, cy = x1 + lx, y1 + ly
    src = (original if sign > 0 else out)[cy : cy + h, cx : cx + w].astype(np.float32)
    new = out[cy : cy + h, cx : cx + w].astype(np.float32)
    low = separable_lowpass(src, taps)
    put_detail(out, (cx, cy), new, (src, low), np.ascontiguousarray(m[ly : ly + h, lx : lx + w]), step, sign)
    return cx, cy, cx + w, cy + h


def warp_by_grid(pixels: np.ndarray, grid: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`faceweave.kernels.pixels.warp_by_grid` with OpenCV: the grid
    resampled to every pixel by ``warpAffine``, the picture by ``remap``."""
    h, w = pixels.shape[:2]
    m = np.array([[1.0 / step, 0.0, 0.0], [0.0, 1.0 / step, 0.0]], np.float64)
    field = cv2.warpAffine(
        grid, m, (w, h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE
    )
    dx, dy, changed = cv2.split(field)
    offsets = cv2.merge([dx, dy])
    dx += np.arange(w, dtype=np.float32)[None, :]
    dy += np.arange(h, dtype=np.float32)[:, None]
    moved = cv2.remap(pixels, dx, dy, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return moved.reshape(pixels.shape), offsets, changed


def _table(table: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``table`` (samples over [0, 1]) at float32 ``values`` in [0, 1], linearly interpolated."""
    steps = table.shape[0] - 1
    t = values * np.float32(steps)
    i = np.minimum(t.astype(np.int32), steps - 1)
    frac = t - i.astype(np.float32)
    return table[i] + frac * (table[i + 1] - table[i])


def _map_lab(lab: np.ndarray, map_: np.ndarray) -> list[np.ndarray]:
    """:meth:`faceweave.kernels.lab.LabMap.apply` on channels, from the kernel's parameters."""
    out = [(lab[..., 0] - map_[1]) * map_[0] + map_[2]]
    for c, q in ((1, map_[3:8]), (2, map_[8:13])):
        v = lab[..., c]
        scaled = v * q[0] + q[1]
        out.append(np.where(v * q[2] > q[3], v + q[4], scaled) if q[2] != 0.0 else scaled)
    if map_[13] >= 1.0:
        return out
    return [lab[..., c] + map_[13] * (m - lab[..., c]) for c, m in enumerate(out)]


def _lab_to_levels(lab: list[np.ndarray], inverse: np.ndarray, degamma: np.ndarray) -> np.ndarray:
    """``[L, a, b]`` -> RGB ``(..., 3)`` float32 8-bit levels, rounded and clipped (OpenCV's float formulas)."""
    light, a, b = lab
    f32 = np.float32
    dark = light <= f32(7.9996248)
    y_dark = light * f32(1.0 / 903.3)
    fy = np.where(dark, f32(7.787) * y_dark + f32(16.0 / 116.0), (light + f32(16.0)) * f32(1.0 / 116.0))
    y = np.where(dark, y_dark, fy * fy * fy)
    x, z = (
        np.where(f > f32(0.206893), f * f * f, (f - f32(16.0 / 116.0)) * f32(1.0 / 7.787))
        for f in (a * f32(1.0 / 500.0) + fy, fy - b * f32(1.0 / 200.0))
    )
    out = []
    for k in range(3):
        v = x * inverse[3 * k] + y * inverse[3 * k + 1] + z * inverse[3 * k + 2]
        v = np.where(v > f32(1.0), f32(1.0), v)
        v = np.where(v >= f32(0.0), v, f32(0.0))
        level = _table(degamma, v) * f32(255.0) + f32(0.5)
        out.append(np.minimum(level, f32(255.0)).astype(np.int32).astype(np.float32))
    return np.stack(out, axis=-1)


def shade_face(
    lab: np.ndarray,
    offset: np.ndarray,
    coverage: np.ndarray,
    behind: np.ndarray,
    box: tuple[int, int, int, int],
    params: np.ndarray,
    degamma: np.ndarray,
) -> np.ndarray:
    """:func:`faceweave.kernels.lab.shade_face` (``params`` from
    :meth:`~faceweave.kernels.lab.LabMap.params`)."""
    x0, y0, x1, y1 = box
    shaded = [v + offset[..., k] for k, v in enumerate(_map_lab(lab, params[9:]))]
    levels = _lab_to_levels(shaded, params[:9], degamma)
    window = (slice(y0, y1), slice(x0, x1))
    return np.where((coverage[window] > np.float32(0.5))[..., None], levels, behind[window].astype(np.float32))


def _linear_taps(n_out: int, n_in: int, *, cols: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First taps, second taps and float32 second weights of an upscale from
    ``n_in`` to ``n_out`` samples (OpenCV's INTER_LINEAR coordinates; see
    ``linear_taps`` in ``_pixels.c``)."""
    scale = 1.0 / (n_out / n_in)
    f = ((np.arange(n_out, dtype=np.float64) + 0.5) * scale - 0.5).astype(np.float32)
    s = np.floor(f).astype(np.int64)
    f = f - s.astype(np.float32)
    if cols:
        pinned = (s < 0) | (s >= n_in - 1)
        s = np.clip(s, 0, n_in - 1)
        f = np.where(pinned, np.float32(0.0), f).astype(np.float32)
        return s, np.minimum(s + 1, n_in - 1), f
    return np.clip(s, 0, n_in - 1), np.clip(s + 1, 0, n_in - 1), f


def mark_luma(luma: np.ndarray, pattern: np.ndarray, mask: np.ndarray) -> None:
    """:func:`faceweave.kernels.pixels.mark_luma`: ``luma`` changed in place."""
    h, w = luma.shape
    x0, x1, ax = _linear_taps(w, mask.shape[1], cols=True)
    r0, r1, by = _linear_taps(h, mask.shape[0], cols=False)
    one = np.float32(1.0)
    rows = mask[:, x0] * (one - ax) + mask[:, x1] * ax
    full = rows[r0] * (one - by)[:, None] + rows[r1] * by[:, None]
    delta = np.clip(np.rint(pattern * full), -32768, 32767).astype(np.int32)
    luma[...] = np.clip(luma.astype(np.int32) + delta, 0, 255).astype(np.uint8)


def mark_pixels(pixels: np.ndarray, tile: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """:func:`faceweave.kernels.pixels.mark_pixels` by OpenCV: the tile
    repeated to the picture's size, ``cv2.multiply`` by the mask to int16,
    and the sum saturated (the rises and the falls as two uint8 planes: a
    pixel has one or the other, so two saturating passes give exactly the
    saturated sum)."""
    h, w = pixels.shape[:2]
    t = tile.shape[0]
    pattern = np.ascontiguousarray(np.tile(tile, (-(-h // t), -(-w // t)))[:h, :w])
    delta = cv2.multiply(pattern, mask, dtype=cv2.CV_16S)
    if pixels.ndim == 2:
        return np.asarray(cv2.add(pixels, delta, dtype=cv2.CV_8U))
    rgb = np.ascontiguousarray(pixels[..., :3])
    up, down = cv2.convertScaleAbs(np.maximum(delta, 0)), cv2.convertScaleAbs(np.minimum(delta, 0))
    out = cv2.add(rgb, cv2.merge([up, up, up]))
    cv2.subtract(out, cv2.merge([down, down, down]), dst=out)
    return np.dstack([out, pixels[..., 3]]) if pixels.shape[2] == 4 else np.asarray(out)


def rgb_to_i420(pixels: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """:func:`faceweave.kernels.pixels.rgb_to_i420` as OpenCV does it: Y
    from ``cv2.transform`` of the frame, Cb and Cr from ``cv2.transform``
    of the frame halved by ``cv2.resize`` (INTER_AREA: each 2x2 block's
    mean)."""
    h, w = pixels.shape[:2]
    out = np.empty((h * 3 // 2, w), np.uint8)
    # (OpenCV's 3 -> 3 channel transform is the vectorised one)
    out[:h] = cv2.extractChannel(cv2.transform(pixels, matrix), 0)
    ycc = cv2.transform(cv2.resize(pixels, (w // 2, h // 2), interpolation=cv2.INTER_AREA), matrix)
    q = (h // 2) * (w // 2)
    chroma = out[h:].reshape(-1)
    chroma[:q] = cv2.extractChannel(ycc, 1).reshape(-1)
    chroma[q:] = cv2.extractChannel(ycc, 2).reshape(-1)
    return out
