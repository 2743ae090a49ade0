"""Pure functions behind the spread-spectrum watermark: keyed tile patterns,
the perceptual mask, pre-whitening, folding and correlation.

The mark is a ``T x T`` luminance tile (``T = 128`` pixels at embedding
scale) repeated over the whole image from the image's top-left corner.  The
tile is built from an ``N x N`` grid of keyed pseudo-random +-1 chips
(``N = 32``, 4 x 4 pixels per chip): a key-chosen 20 % of the chips form the
synchronisation pattern, the others are shared out evenly among the 210
coded bits (:mod:`faceweave.provenance.coding`) and multiplied by their
bit's sign (+1 for 1, -1 for 0).  The chip image is band-pass filtered in
the Fourier domain (0.05-0.25 cycles per pixel) so that its energy lies in
the middle frequencies that JPEG, H.264 and halving the size keep and that
pre-whitening passes.

Detection undoes the attacks in order: whiten (remove the picture, keep the
noise-like mark), fold the image into one tile (sum every tile-sized block, so
a crop only shifts the phase), resample a candidate period to ``T`` (scale),
whiten the folded tile's spectrum, cross-correlate with the sync pattern by
FFT (phase), then correlate each coded bit's chips at the phase found; those
soft values go to the Viterbi decoder.

References: Cox et al., "Secure spread spectrum watermarking for
multimedia" (IEEE TIP 1997); Kalker et al., "A video watermarking system for
broadcast monitoring" (SPIE 1999, the JAWS tiled mark with folding and a
symmetric phase-only matched filter); Depovere, Kalker and Linnartz,
"Improved watermark detection reliability using filtering before
correlation" (ICIP 1998).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import cv2
import numpy as np

#: tile side at embedding scale, pixels
TILE = 128
#: chips per tile side
CHIPS = 32
#: band kept in the tile, cycles per pixel at embedding scale
BAND = (0.05, 0.25)


@dataclass(frozen=True)
class Components:
    """The keyed layout of one key.

    ``pn``: ``(N*N,)`` float32 +-1 chip signs; ``owner``: ``(N*N,)`` int64,
    -1 for a sync chip, else the index of the coded bit the chip carries;
    ``keep``: ``(T, T)`` float32 band-pass mask of FFT bins; ``sync_fft``:
    ``(T, T)`` complex64 FFT of the band-limited sync pattern.
    """

    pn: np.ndarray
    owner: np.ndarray
    keep: np.ndarray
    sync_fft: np.ndarray
    n_bits: int


def key_seed(key: str | bytes) -> int:
    """64-bit seed derived from the key by SHA-256."""
    raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    return int.from_bytes(hashlib.sha256(b"faceweave-watermark-v1:" + raw).digest()[:8], "big")


def band_filter(size: int, band: tuple[float, float] = BAND) -> np.ndarray:
    """``(size, size)`` float32 mask of the FFT bins whose radial frequency lies in ``band``."""
    f = np.fft.fftfreq(size)
    radius = np.hypot(f[:, None], f[None, :])
    return ((radius >= band[0]) & (radius <= band[1])).astype(np.float32)


def make_components(
    key: str | bytes, *, n_bits: int, sync_share: float = 0.2, band: tuple[float, float] = BAND
) -> Components:
    """The chip layout of ``key`` for ``n_bits`` coded bits (pure: same key, same layout)."""
    rng = np.random.Generator(np.random.PCG64(key_seed(key)))
    chips = CHIPS * CHIPS
    pn = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=chips)
    n_sync = round(chips * sync_share)
    # every coded bit gets an equal share (to one chip) of the non-sync chips, spread by a keyed permutation
    owner = rng.permutation(np.concatenate([np.full(n_sync, -1), np.arange(chips - n_sync) % n_bits]))
    keep = band_filter(TILE, band)
    sync = _band_limited(np.where(owner == -1, pn, 0.0), keep)
    return Components(pn=pn, owner=owner, keep=keep, sync_fft=np.fft.fft2(sync).astype(np.complex64), n_bits=n_bits)


def _band_limited(chip_values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``(T, T)`` float32: ``(N*N,)`` chip values spread over their cells, band-pass filtered."""
    cell = TILE // CHIPS
    tile = np.kron(chip_values.reshape(CHIPS, CHIPS).astype(np.float32), np.ones((cell, cell), dtype=np.float32))
    return np.real(np.fft.ifft2(np.fft.fft2(tile) * keep)).astype(np.float32)


def tile_for(components: Components, coded: np.ndarray) -> np.ndarray:
    """``(T, T)`` float32 tile carrying ``coded`` (``(n_bits,)`` 0/1), unit RMS."""
    signs = np.where(np.asarray(coded).reshape(-1) > 0, 1.0, -1.0).astype(np.float32)
    chip_signs = np.where(components.owner < 0, 1.0, signs[np.maximum(components.owner, 0)])
    tile = _band_limited(components.pn * chip_signs, components.keep)
    return (tile / np.sqrt(np.mean(tile**2))).astype(np.float32)


def tiled(tile: np.ndarray, height: int, width: int) -> np.ndarray:
    """``(height, width)`` float32: ``tile`` repeated from the top-left corner."""
    t = tile.shape[0]
    reps = (-(-height // t), -(-width // t))
    return np.ascontiguousarray(np.tile(tile, reps)[:height, :width])


def luminance(pixels: np.ndarray) -> np.ndarray:
    """``(H, W)`` float32 luma (BT.601) of ``(H, W, 3)`` RGB or ``(H, W)`` grey uint8."""
    return gray(pixels).astype(np.float32)


def gray(pixels: np.ndarray) -> np.ndarray:
    """``(H, W)`` uint8 luma (BT.601) of ``(H, W, 3|4)`` RGB(A) or ``(H, W)`` grey uint8."""
    if pixels.ndim == 2:
        return pixels
    return cv2.cvtColor(np.ascontiguousarray(pixels[..., :3]), cv2.COLOR_RGB2GRAY)


@dataclass(frozen=True)
class Masking:
    """Settings of :func:`perceptual_mask` (activities in 8-bit luma levels).

    ``flat``: the local activity (mid-frequency RMS of the picture) below
    which a region counts as flat and gets the least mark; ``busy``: the
    activity from which more texture adds no more mark; the mark's local
    amplitude grows as ``activity ** exponent`` in between (contrast
    masking).  The exponent is ``exponent`` on pictures of ``large_area``
    pixels and more, ``small_exponent`` on those of ``small_area`` and less
    (a small picture has few tiles to fold, and its flat regions, where the
    detector sees the mark best, must carry more of it), log-interpolated in
    between.  ``flat_max``: the most a flat region may get (a multiple of
    ``strength``), also on pictures that are nearly all flat, where the mark
    is then weaker than ``strength`` rather than visible; ``max_gain``: the
    most any region may get.  ``step``: the mask is computed at ``1/step``
    size; ``smooth``: Gaussian sigma of the mask at that size, so it has no
    visible edges.
    """

    flat: float = 1.0
    busy: float = 12.0
    exponent: float = 0.6
    small_exponent: float = 0.35
    large_area: int = 1_000_000
    small_area: int = 150_000
    flat_max: float = 0.7
    max_gain: float = 3.0
    step: int = 4
    smooth: float = 1.5

    def exponent_for(self, area: int) -> float:
        """The activity exponent for a picture of ``area`` pixels."""
        t = np.log(max(area, 1) / self.small_area) / np.log(self.large_area / self.small_area)
        return float(self.small_exponent + (self.exponent - self.small_exponent) * np.clip(t, 0.0, 1.0))


def perceptual_mask(luma: np.ndarray, masking: Masking = Masking()) -> np.ndarray:
    """``(H, W)`` float32 per-pixel amplitude factor of ``(H, W)`` uint8/float32 luma, mean square 1 at most.

    A JND-style contrast mask (after Watson's DCT-domain contrast masking):
    the mid-frequency activity of the picture (RMS of the luma minus its
    3 x 3 box blur at half size, i.e. in the mark's own band, pooled over
    12 x 12 pixels) sets the local amplitude, as ``activity ** exponent``
    between ``masking.flat`` and ``masking.busy``, so smooth skin, sky and
    backdrops get ``(flat / busy) ** exponent`` (0.22 on a large picture) of
    what texture gets.  The mask is smoothed, then scaled to mean square 1
    (the total energy, hence PSNR, is kept), but flat regions never get more
    than ``masking.flat_max``: on a picture that is mostly flat the mark is
    weaker than ``strength`` rather than visible.  Luma itself does not
    scale it: by Weber's law and Chou and Li's JND profile dark and bright
    regions hide at least as much as mid-grey ones, and a mark clipped at
    0 or 255 still carries its other half.  Computed at ``1/masking.step``
    size: about a millisecond at 1080p.
    """
    h, w = luma.shape
    return cv2.resize(coarse_mask(luma, masking), (w, h), interpolation=cv2.INTER_LINEAR)


def coarse_mask(luma: np.ndarray, masking: Masking = Masking()) -> np.ndarray:
    """:func:`perceptual_mask` at ``1/masking.step`` of ``luma``'s size, before
    its bilinear upscale to the picture (float32 ``(H // step, W // step)``)."""
    h, w = luma.shape
    half = cv2.resize(luma, (max(1, w // 2), max(1, h // 2)), interpolation=cv2.INTER_AREA).astype(np.float32)
    detail = half - cv2.blur(half, (3, 3))
    small_size = (max(1, w // masking.step), max(1, h // masking.step))
    energy = cv2.resize(detail * detail, small_size, interpolation=cv2.INTER_AREA)
    activity = np.sqrt(cv2.blur(energy, (3, 3)))
    raw = (np.clip(activity, masking.flat, masking.busy) / masking.flat) ** masking.exponent_for(h * w)
    smooth = cv2.GaussianBlur(raw, (0, 0), masking.smooth)
    gain = min(1.0 / max(float(np.sqrt(np.mean(smooth * smooth))), 1e-6), masking.flat_max)
    return np.minimum(smooth * np.float32(gain), np.float32(masking.max_gain)).astype(np.float32)


def whiten(luma: np.ndarray, *, sigma: float = 2.5, window: float = 2.0, power: float = 1.5) -> np.ndarray:
    """``(H, W)`` float32 residual: luma minus its blur, divided by the local noise level to ``power``.

    A Wiener-style pre-whitening: the picture (smooth, predictable) goes,
    the mark (noise-like) stays, and busy regions count less than flat ones
    (``power`` above 1 weights them down further, towards the matched
    filter's ``1 / noise**2``: the mark is stronger in texture, but texture is
    noisier still).
    """
    blur = cv2.GaussianBlur(luma, (0, 0), sigma)
    residual = luma - blur
    local = np.sqrt(cv2.GaussianBlur(residual * residual, (0, 0), window)) + 1.0
    return residual / cv2.pow(local, power)


def whiten_spectrum(spectrum: np.ndarray) -> np.ndarray:
    """``(T, T)`` complex: a folded tile's FFT divided by its locally averaged magnitude (5 x 5 bins).

    Flattens what is left of the picture's spectrum so that every frequency
    of the mark counts by its signal-to-noise ratio (a smoothed
    phase-only matched filter).  The DC bin (never part of the mark) is dropped.
    """
    spectrum = spectrum.copy()
    spectrum[0, 0] = 0.0
    power = np.fft.fftshift(np.abs(spectrum) ** 2)
    smooth = np.maximum(np.fft.ifftshift(cv2.blur(power, (5, 5))), 0.0)
    return spectrum / np.sqrt(smooth + 1e-9 * (float(smooth.max()) + 1e-30))


def fold(residual: np.ndarray, period: float) -> np.ndarray:
    """``(T, T)`` float32: ``residual`` summed over blocks of ``period`` pixels, resampled to ``T``.

    An integer period is folded exactly and the folded block resampled to
    ``T`` in the Fourier domain (periodic); a fractional one resizes the
    residual first so that the period becomes ``T``.
    """
    if abs(period - round(period)) < 1e-6:
        p = round(period)
        block = _fold_exact(residual, p)
        return block if p == TILE else fourier_resample(block, TILE)
    h, w = residual.shape
    factor = TILE / period
    size = (max(1, round(w * factor)), max(1, round(h * factor)))
    interp = cv2.INTER_AREA if factor < 1 else cv2.INTER_LINEAR
    return _fold_exact(cv2.resize(residual, size, interpolation=interp), TILE)


def _fold_exact(residual: np.ndarray, p: int) -> np.ndarray:
    h, w = residual.shape
    ph, pw = -(-h // p) * p, -(-w // p) * p
    padded = np.zeros((ph, pw), dtype=np.float32)
    padded[:h, :w] = residual
    return padded.reshape(ph // p, p, pw // p, p).sum(axis=(0, 2))


def fourier_resample(block: np.ndarray, size: int) -> np.ndarray:
    """``(size, size)`` float32: the periodic ``(p, p)`` block resampled by zero-padding/cropping its spectrum."""
    p = block.shape[0]
    spec = np.fft.fftshift(np.fft.fft2(block))
    out = np.zeros((size, size), dtype=np.complex128)
    n = min(p, size)
    src0, dst0 = p // 2 - n // 2, size // 2 - n // 2
    out[dst0 : dst0 + n, dst0 : dst0 + n] = spec[src0 : src0 + n, src0 : src0 + n]
    return np.real(np.fft.ifft2(np.fft.ifftshift(out))).astype(np.float32) * (size * size) / (p * p)


def sync_surface(folded_fft: np.ndarray, components: Components) -> np.ndarray:
    """``(T, T)`` float32 cross-correlation of the folded tile with the sync pattern; peak = tile origin."""
    return np.real(np.fft.ifft2(folded_fft * np.conj(components.sync_fft))).astype(np.float32)


def bit_scores(folded_fft: np.ndarray, components: Components, shift: tuple[float, float]) -> np.ndarray:
    """``(n_bits,)`` float64 correlation of each coded bit's pattern with the folded tile at a (fractional) ``shift``.

    Computed in the chip domain: the shifted, band-passed folded tile is
    summed over each chip's cell, signed by the chip's pn, and summed per bit
    (the band-pass is self-adjoint, so this equals correlating with the
    band-limited bit patterns).
    """
    f = np.fft.fftfreq(TILE)
    phase = np.exp(2j * np.pi * (f[:, None] * shift[0] + f[None, :] * shift[1]))
    aligned = np.real(np.fft.ifft2(folded_fft * phase * components.keep))
    cell = TILE // CHIPS
    per_chip = aligned.reshape(CHIPS, cell, CHIPS, cell).sum(axis=(1, 3)).reshape(-1) * components.pn
    mine = components.owner >= 0
    return np.bincount(components.owner[mine], weights=per_chip[mine], minlength=components.n_bits)
