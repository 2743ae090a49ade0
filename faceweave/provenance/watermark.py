"""Invisible watermark: embed a :class:`Payload` in every image and video frame, and find it again.

Public API (stable; other provenance code builds on it)::

    from faceweave.provenance import Payload, Watermarker

    marker = Watermarker(key="faceweave", strength=2.4)     # both optional
    payload = Payload(run_id=Payload.new_run_id())          # tool id and version default to faceweave's
    marked = marker.embed(pixels, payload)          # uint8 (H, W, 3) RGB / (H, W, 4) RGBA / (H, W) grey -> same
    reading = marker.detect(marked)                 # WatermarkReading
    reading.found, reading.payload, reading.confidence, reading.scale, reading.offset

    frames = marker.frame_marker(width, height, payload)   # video: the payload's tile made once
    out = frames.mark(frame)                                 # per frame, about 4 ms at 1080p
    frames.mark_luma(y_plane)                                # or a frame's Y plane, in place (video encoders)
    reading = marker.detect_frames(decoded_frames)           # several frames of one video together

``embed``/``frame_marker`` refuse images under 64 pixels a side and
``detect`` under 32 (:class:`~faceweave.errors.InputError`).

Method: a documented spread-spectrum luminance mark (see
:mod:`faceweave.provenance.pattern`): a keyed 128 x 128 tile carrying a sync
pattern and the 210 sign-modulated coded bits of the 64-bit payload
(:mod:`faceweave.provenance.payload`, rate-1/3 convolutional code in
:mod:`faceweave.provenance.coding`), band-limited to middle frequencies,
repeated over the image and scaled by a perceptual mask
(:func:`~faceweave.provenance.pattern.perceptual_mask`, settings in
:class:`~faceweave.provenance.pattern.Masking`): the local amplitude follows
the picture's own mid-frequency activity, so smooth backdrops, sky and skin
(where the eye sees mid-frequency grain best) get about a fifth (large
pictures) to two fifths (small ones, which need them to be found) of what
texture gets.  The same amount is added to R, G and B, so only luma changes and
colour is kept.  ``strength`` is the RMS change of luma over the whole
picture in 8-bit levels (PSNR is about ``20 log10(255 / strength)`` dB:
40.5 dB at the default 2.4); a picture that is mostly flat gets less (its
flat regions are capped at ``Masking.flat_max`` x ``strength``).

Detection whitens the luma (dividing by the local noise level to the power
1.5, so busy regions, where the picture is loud, count less), folds it into
one tile for each candidate period (embedding scale x 1, 1/2, 3/4, 2/3, 3/2,
2, 1/4, so halving the size is undone), finds the tile's phase by FFT cross-correlation with the sync
pattern (so crops and shifts are undone), reads the coded bits there and
Viterbi-decodes them.  It reports ``found`` only when the sync peak reaches
``min_confidence`` (a z-score), the payload's CRC-16 checks AND the tool id
is faceweave's (``tool_id=None`` accepts any), so random pictures pass with
probability about 2**-32 per peak tried.  The key is public in the default
set-up: this is a provenance label for honest tools, not a tamper-proof seal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import cv2
import numpy as np

from faceweave.errors import InputError, InvalidOptionError, TooSmallToMarkError
from faceweave.kernels.pixels import mark_luma, mark_pixels
from faceweave.provenance import coding
from faceweave.provenance import pattern as pat
from faceweave.provenance.payload import FACEWEAVE_TOOL_ID, PAYLOAD_BITS, Payload

DEFAULT_KEY = "faceweave"
DEFAULT_STRENGTH = 2.4
#: the perceptual mask's settings (frozen): how the mark is shared out between flat and textured regions
DEFAULT_MASKING = pat.Masking()
#: smallest side accepted by embed (detect accepts half of it, for halved copies)
MIN_SIDE = 64
#: sizes tried by detect, as factors of the embedding scale: unchanged, halved, then other common resizes
DEFAULT_SCALES = (1.0, 0.5, 0.75, 2.0 / 3.0, 1.5, 2.0, 0.25)
#: sync z-score from which bits are read (unmarked pictures peak at about 4-5.5; the CRC and tool id decide)
DEFAULT_MIN_CONFIDENCE = 4.0
#: sync peaks per scale whose bits are read
PEAKS_PER_SCALE = 3
#: limited-range Y levels per level of full-range luma (Y spans 16..235)
Y_LEVELS = 219.0 / 255.0


@dataclass(frozen=True)
class WatermarkReading:
    """What :meth:`Watermarker.detect` found.

    ``found`` is true only with a valid ``payload``; ``confidence`` is the
    z-score of the best sync peak (about 4 on unmarked pictures, 10+ on
    marked ones); ``scale`` is the detected size relative to the embedded one
    (0.5 for a halved copy); ``offset`` ``(x, y)`` is where a tile starts in
    the given image, in its pixels.
    """

    found: bool
    payload: Payload | None
    confidence: float
    scale: float | None = None
    offset: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.found and self.payload is None:
            raise ValueError("a found mark needs a payload")


class FrameMarker:
    """Marks frames of one size with one payload; the full-frame pattern is built once.

    ``mark(frame)``: ``(H, W, 3)`` RGB, ``(H, W, 4)`` RGBA (alpha kept) or
    ``(H, W)`` grey uint8 -> a new array of the same shape and dtype.
    """

    def __init__(
        self, tile: np.ndarray, *, width: int, height: int, strength: float, masking: pat.Masking = DEFAULT_MASKING
    ) -> None:
        if min(width, height) < MIN_SIDE:
            raise TooSmallToMarkError(
                f"image is {width}x{height}: a watermark needs at least {MIN_SIDE} pixels on each side"
            )
        self.width, self.height = int(width), int(height)
        self._tile = np.ascontiguousarray(tile * np.float32(strength), np.float32)  # repeated over the frame
        self._luma_pattern: np.ndarray | None = None  # the whole pattern in Y levels, made by the first mark_luma
        self._masking = masking
        #: the masking's activity thresholds in Y levels (:meth:`mark_luma`)
        self._luma_masking = replace(masking, flat=masking.flat * Y_LEVELS, busy=masking.busy * Y_LEVELS)

    def mark(self, frame: np.ndarray) -> np.ndarray:
        pixels = _check_pixels(frame, "frame")
        if pixels.shape[:2] != (self.height, self.width):
            raise InputError(
                f"frame is {pixels.shape[1]}x{pixels.shape[0]}, this marker is for {self.width}x{self.height}"
            )
        # the tile under the mask added to every colour channel in one pass (a compiled kernel)
        return mark_pixels(pixels, self._tile, pat.perceptual_mask(pat.gray(pixels), self._masking))

    def mark_luma(self, luma: np.ndarray) -> None:
        """Mark a frame's limited-range (16..235) ``(H, W)`` uint8 Y plane in
        place, as a video encoder gets it: the mark :meth:`mark` adds to R, G
        and B alike changes Y by 219/255 of a level per level and leaves the
        colour planes alone, so the decoded frame carries the same mark
        without an RGB round trip.  The perceptual mask is read off Y with its
        activity thresholds scaled alike (the same mask, up to the rounding of
        Y and its BT.601 or BT.709 weights)."""
        if luma.dtype != np.uint8 or luma.shape != (self.height, self.width) or not luma.flags.c_contiguous:
            raise InputError(
                f"luma plane must be a contiguous {self.width}x{self.height} uint8 array, "
                f"got {luma.dtype} {luma.shape[::-1]}"
            )
        if self._luma_pattern is None:
            self._luma_pattern = pat.tiled(self._tile, self.height, self.width) * np.float32(Y_LEVELS)
        # the mask's upscale, the product and the sum in one pass (a compiled kernel)
        mark_luma(luma, self._luma_pattern, pat.coarse_mask(luma, self._luma_masking))


class Watermarker:
    """Embeds and detects faceweave's invisible watermark for one ``key``.

    ``strength``: RMS luma change in 8-bit levels.  ``min_confidence``: the
    sync z-score below which no bits are read.  ``scales``: the sizes
    (relative to the embedded one) that detection tries.  ``tool_id``: the
    only tool id a detection accepts (``None``: any), which multiplies the
    CRC's protection against false positives by another 2**16.
    """

    def __init__(
        self,
        *,
        key: str | bytes = DEFAULT_KEY,
        strength: float = DEFAULT_STRENGTH,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        scales: tuple[float, ...] = DEFAULT_SCALES,
        tool_id: int | None = FACEWEAVE_TOOL_ID,
        masking: pat.Masking = DEFAULT_MASKING,
    ) -> None:
        if not (0.0 < strength <= 16.0):
            raise InvalidOptionError(f"watermark strength must be in (0, 16], got {strength}")
        if not scales or any(not (0.05 <= s <= 8.0) for s in scales):
            raise InvalidOptionError(f"watermark scales must lie in [0.05, 8], got {scales}")
        self.key = key
        self.strength = float(strength)
        self.min_confidence = float(min_confidence)
        self.scales = tuple(float(s) for s in scales)
        self.tool_id = tool_id
        self.masking = masking
        self._components = pat.make_components(key, n_bits=coding.coded_length(PAYLOAD_BITS))

    # ------------------------------------------------------------- embedding

    def frame_marker(self, width: int, height: int, payload: Payload) -> FrameMarker:
        """A :class:`FrameMarker` for ``width`` x ``height`` frames carrying ``payload``."""
        tile = pat.tile_for(self._components, coding.encode(payload.to_bits()))
        return FrameMarker(tile, width=width, height=height, strength=self.strength, masking=self.masking)

    def embed(self, pixels: np.ndarray, payload: Payload) -> np.ndarray:
        """``pixels`` (``(H, W, 3)`` RGB, ``(H, W, 4)`` RGBA or ``(H, W)`` grey uint8) with ``payload`` marked in."""
        arr = _check_pixels(pixels, "image")
        return self.frame_marker(arr.shape[1], arr.shape[0], payload).mark(arr)

    # ------------------------------------------------------------- detection

    def detect(self, pixels: np.ndarray) -> WatermarkReading:
        """Look for a mark in ``pixels`` (same layouts as :meth:`embed`; any size from 32 pixels)."""
        arr = _check_pixels(pixels, "image", min_side=MIN_SIDE // 2)
        return self._read(pat.whiten(pat.luminance(arr)))

    def detect_frames(self, frames: Iterable[np.ndarray]) -> WatermarkReading:
        """Look for one mark in several frames of one video (all the same size).

        The whitened frames are summed before folding, so the mark (fixed in
        frame coordinates) adds up while the pictures average out: a mark
        too weak in any single re-encoded frame is found in a few of them.
        """
        total: np.ndarray | None = None
        for frame in frames:
            arr = _check_pixels(frame, "frame", min_side=MIN_SIDE // 2)
            residual = pat.whiten(pat.luminance(arr))
            if total is None:
                total = residual
            elif residual.shape != total.shape:
                raise InputError(f"frames differ in size: {residual.shape[::-1]} after {total.shape[::-1]}")
            else:
                total += residual
        if total is None:
            raise InputError("no frames to look for a watermark in")
        return self._read(total)

    def _read(self, residual: np.ndarray) -> WatermarkReading:
        candidates = []
        for scale in self.scales:
            period = pat.TILE * scale
            if period < 16 or period > 2 * max(residual.shape):
                continue
            spectrum = pat.whiten_spectrum(np.fft.fft2(pat.fold(residual, period)))
            surface = pat.sync_surface(spectrum, self._components)
            for z, shift in _peaks(surface, count=PEAKS_PER_SCALE):
                candidates.append((z, scale, shift, spectrum))
        candidates.sort(key=lambda c: -c[0])
        best = candidates[0][0] if candidates else 0.0
        for z, scale, shift, spectrum in candidates:
            if z < self.min_confidence:
                break
            scores = pat.bit_scores(spectrum, self._components, shift)
            payload = Payload.from_bits(coding.decode(scores, PAYLOAD_BITS))
            if payload is not None and (self.tool_id is None or payload.tool_id == self.tool_id):
                period = pat.TILE * scale
                offset = ((shift[1] * scale) % period, (shift[0] * scale) % period)
                return WatermarkReading(found=True, payload=payload, confidence=float(z), scale=scale, offset=offset)
        return WatermarkReading(found=False, payload=None, confidence=float(best))


# ------------------------------------------------------------------ helpers


def _check_pixels(pixels: np.ndarray, what: str, *, min_side: int = MIN_SIDE) -> np.ndarray:
    arr = np.asarray(pixels)
    if arr.dtype != np.uint8:
        raise InputError(f"{what} must be uint8, got {arr.dtype}")
    if not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] in (3, 4))):
        raise InputError(f"{what} must be (H, W), (H, W, 3) or (H, W, 4), got shape {arr.shape}")
    if min(arr.shape[:2]) < min_side:
        raise TooSmallToMarkError(
            f"{what} is {arr.shape[1]}x{arr.shape[0]}: a watermark needs at least {min_side} pixels on each side"
        )
    return arr


def _peaks(surface: np.ndarray, *, count: int) -> list[tuple[float, tuple[float, float]]]:
    """The ``count`` highest local maxima of a periodic ``(T, T)`` surface as ``(z-score, (dy, dx))``, sub-pixel."""
    mean, std = float(surface.mean()), float(surface.std()) + 1e-12
    wrapped = np.pad(surface, 1, mode="wrap")
    local = cv2.dilate(wrapped, np.ones((3, 3), np.uint8))[1:-1, 1:-1]
    ys, xs = np.nonzero(surface >= local)
    order = np.argsort(-surface[ys, xs])[:count]
    out = []
    size = surface.shape[0]
    for y, x in zip(ys[order], xs[order], strict=False):
        dy = _vertex(surface[(y - 1) % size, x], surface[y, x], surface[(y + 1) % size, x])
        dx = _vertex(surface[y, (x - 1) % size], surface[y, x], surface[y, (x + 1) % size])
        out.append(((float(surface[y, x]) - mean) / std, (float(y) + dy, float(x) + dx)))
    return out


def _vertex(left: float, mid: float, right: float) -> float:
    """Sub-sample offset in ``[-0.5, 0.5]`` of a parabola's vertex through three samples."""
    den = left - 2.0 * mid + right
    return 0.0 if den >= 0 else float(np.clip(0.5 * (left - right) / den, -0.5, 0.5))
