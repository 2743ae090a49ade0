"""Colour statistics and transfer between a swapped face and its target.
Pure functions on float32 CIELAB images (L in 0..100, a/b around 0), as
produced by :func:`to_lab`; :func:`skin_colour` and :func:`side_lighting`
measure a face's bare skin."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from faceweave.compositing.blend import per_channel
from faceweave.compositing.regions import skin_region
from faceweave.compositing.skin import CENTRE_TOLERANCE, skin_likelihood, skin_statistics
from faceweave.geometry import topology as topo
from faceweave.kernels import to_uint8
from faceweave.kernels.lab import ChromaMap, LabMap
from faceweave.swappers.base import AlignedCrop
from faceweave.types import checked_array


def to_lab(rgb: np.ndarray) -> np.ndarray:
    """uint8 RGB ``(H, W, 3)`` -> float32 CIELAB."""
    return cv2.cvtColor(rgb.astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)


def to_rgb(lab: np.ndarray) -> np.ndarray:
    """float32 CIELAB -> uint8 RGB (rounded and clipped)."""
    rgb = cv2.cvtColor(lab.astype(np.float32), cv2.COLOR_LAB2RGB)
    return to_uint8(np.asarray(rgb, np.float32) * np.float32(255.0))


def masked_stats(lab: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean and standard deviation ``(3,)`` of a LAB image under a
    ``[0, 1]`` mask."""
    sel = mask > 0.0
    if sel.sum() < 16:
        flat = lab.reshape(-1, 3)
        return flat.mean(0).astype(np.float32), flat.std(0).astype(np.float32)
    w = mask[sel].astype(np.float32)[:, None]
    px = lab[sel]
    total = float(w.sum())
    mean = (px * w).sum(0) / total
    var = (((px - mean) ** 2) * w).sum(0) / total
    return mean.astype(np.float32), np.sqrt(var).astype(np.float32)


@dataclass(frozen=True, eq=False)
class SkinColour:
    """Mean and standard deviation ``(3,)`` float32 of a face's bare skin in
    CIELAB: what colour matching maps from (the new face) and to (the target)."""

    mean: np.ndarray
    std: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", checked_array(self.mean, shape=(3,), dtype=np.float32, name="skin mean"))
        object.__setattr__(self, "std", checked_array(self.std, shape=(3,), dtype=np.float32, name="skin std"))

    @property
    def stats(self) -> tuple[np.ndarray, np.ndarray]:
        return self.mean, self.std

    def towards(self, other: SkinColour, amount: float) -> SkinColour:
        """This colour moved ``amount`` (0..1) of the way to ``other``
        (an exponential moving average step)."""
        a = float(np.clip(amount, 0.0, 1.0))
        return SkinColour(
            mean=((1.0 - a) * self.mean + a * other.mean).astype(np.float32),
            std=((1.0 - a) * self.std + a * other.std).astype(np.float32),
        )


@dataclass(frozen=True, eq=False)
class ColourMatch:
    """A fixed colour mapping for :func:`faceweave.compositing.composite.composite`:
    from the new face's skin colour to the target's.  Video keeps one per
    face over a shot (see :class:`faceweave.video.pipeline.VideoSwapper`), so
    the correction does not follow per-frame noise."""

    source: SkinColour
    target: SkinColour


#: chroma more than this many skin spreads beyond the skin's mean is shifted, not scaled
TINT_SPREADS = 1.0


def apply_statistics(
    lab: np.ndarray,
    own: tuple[np.ndarray, np.ndarray],
    ref: tuple[np.ndarray, np.ndarray],
    *,
    max_gain: float = 1.6,
    max_chroma_gain: float = 2.5,
) -> np.ndarray:
    """Map the per-channel statistics ``own`` = ``(mean, std)`` onto ``ref``
    (:func:`statistics_map`, which says how) in float32 CIELAB ``lab``."""
    return statistics_map(own, ref, max_gain=max_gain, max_chroma_gain=max_chroma_gain).apply(lab)


def statistics_map(
    own: tuple[np.ndarray, np.ndarray],
    ref: tuple[np.ndarray, np.ndarray],
    *,
    max_gain: float = 1.6,
    max_chroma_gain: float = 2.5,
    share: float = 1.0,
) -> LabMap:
    """The mapping of the per-channel statistics ``own`` = ``(mean, std)``
    onto ``ref`` (``share`` of it taken).

    Lightness: shift and scale to the reference mean and spread (gain limited
    to ``[1/max_gain, max_gain]``).  Chroma (a, b): scaled about neutral grey
    by the ratio of the means (limited to ``[1/max_chroma_gain,
    max_chroma_gain]``), then shifted by what is left, so a neutral colour
    (the white of an eye, a grey shadow) stays neutral instead of taking the
    opposite tint of the skin-colour change.  On an achromatic reference
    (a black-and-white photo) the chroma is scaled down to the reference's
    spread, so lips and eyes lose their colour too."""
    (mu_s, sd_s), (mu_r, sd_r) = own, ref
    gain = float(np.clip(sd_r[0] / max(float(sd_s[0]), 1e-3), 1.0 / max_gain, max_gain))
    achromatic = bool(np.all(np.abs(mu_r[1:]) < 3.0) and np.all(sd_r[1:] < 2.0))
    chroma = []
    for c in (1, 2):
        if achromatic:
            # a black-and-white (or nearly) target: the new face loses its colour too
            g = float(np.clip(sd_r[c] / max(float(sd_s[c]), 1e-3), 0.0, 1.0))
        elif mu_s[c] * mu_r[c] > 0 and abs(float(mu_s[c])) > 1.0:
            g = float(np.clip(mu_r[c] / mu_s[c], 1.0 / max_chroma_gain, max_chroma_gain))
        else:
            g = 1.0
        shift = float(np.float32(mu_r[c] - g * mu_s[c]))
        if g > 1.0 and not achromatic and mu_s[c] * mu_r[c] > 0:
            # beyond the skin's own range of tint (brows, lips, a flush) a
            # stronger tint is shifted, not scaled: scaling would turn light-brown
            # brows orange and pink lips red on a warmer target
            sign = float(np.sign(mu_s[c]))
            edge = sign * (abs(float(mu_s[c])) + TINT_SPREADS * float(sd_s[c]))  # the skin's own range ends here
            add = float(g * edge + (mu_r[c] - g * mu_s[c]) - edge)
            chroma.append(ChromaMap(gain=g, shift=shift, sign=sign, edge=abs(edge), add=add))
        else:
            chroma.append(ChromaMap(gain=g, shift=shift))
    return LabMap(gain=gain, own=float(mu_s[0]), ref=float(mu_r[0]), a=chroma[0], b=chroma[1], share=share)


def masked_blur(image: np.ndarray, mask: np.ndarray, sigma: float) -> np.ndarray:
    """Normalized convolution: a Gaussian blur that only averages pixels under
    ``mask``, so that the background does not bleed into the face's shading.
    Computed at reduced resolution for large sigmas (the result is smooth)."""
    h, w = mask.shape
    factor = max(1, min(int(sigma // 4), h, w))
    small = (w // factor, h // factor)
    # shrunk by exactly ``factor`` (OpenCV's fast path): the last rows and
    # columns that do not fill a block take the nearest result
    even = (slice(0, small[1] * factor), slice(0, small[0] * factor))
    channels = image.shape[2]
    m = cv2.resize(mask[even].astype(np.float32, copy=False), small, interpolation=cv2.INTER_AREA)
    weighted = (image[even] * per_channel(mask[even], channels)).astype(np.float32, copy=False)
    x = cv2.resize(weighted, small, interpolation=cv2.INTER_AREA)
    s = sigma / factor
    num = cv2.GaussianBlur(x, (0, 0), s)
    den = cv2.GaussianBlur(m, (0, 0), s)
    blurred = np.asarray(num / per_channel(np.maximum(den, 1e-4), channels), np.float32)
    out = np.asarray(
        cv2.resize(blurred, (small[0] * factor, small[1] * factor), interpolation=cv2.INTER_LINEAR), np.float32
    )
    if out.shape[:2] != (h, w):
        out = np.asarray(cv2.copyMakeBorder(out, 0, h - out.shape[0], 0, w - out.shape[1], cv2.BORDER_REPLICATE))
    return out.reshape(h, w, -1)


def transfer_shading(
    lab: np.ndarray, mask: np.ndarray, ref_lab: np.ndarray, ref_mask: np.ndarray, *, sigma: float, amount: float
) -> np.ndarray:
    """Give ``lab`` the reference's low-frequency shading: replace (by
    ``amount``) its own Gaussian low-pass at ``sigma`` with the reference's,
    keeping everything finer than ``sigma`` (the identity's mid frequencies)."""
    return (lab + amount * shading_offset(lab, mask, ref_lab, ref_mask, sigma=sigma)).astype(np.float32)


def shading_offset(
    lab: np.ndarray, mask: np.ndarray, ref_lab: np.ndarray, ref_mask: np.ndarray, *, sigma: float
) -> np.ndarray:
    """The reference's low-frequency shading minus ``lab``'s (each a
    :func:`masked_blur` at ``sigma`` under its mask): what
    :func:`transfer_shading` adds.  Smooth, so it may be computed at a
    lower resolution and resized."""
    return masked_blur(ref_lab, ref_mask, sigma) - masked_blur(lab, mask, sigma)


def chroma_spread(lab: np.ndarray, region: np.ndarray, sigma: float) -> float:
    """How much a face's skin colour varies at the scale ``sigma``: the
    length (ΔE) of the 5 to 95 percentile ranges of a* and b* of ``lab``'s
    :func:`masked_blur` under ``region``, over ``region`` above a half; 0
    with fewer than 16 such pixels."""
    if int(np.count_nonzero(region > 0.5)) < 16:
        return 0.0
    # the blur is smooth: measured on a grid shrunk to a few pixels per sigma
    h, w = region.shape
    factor = max(1, min(int(sigma // 2), h // 4, w // 4))
    small = (max(1, w // factor), max(1, h // factor))
    weight = cv2.resize(region.astype(np.float32, copy=False), small, interpolation=cv2.INTER_AREA)
    chroma = cv2.resize(lab.astype(np.float32, copy=False), small, interpolation=cv2.INTER_AREA)[..., 1:]
    sel = weight > 0.5
    if int(sel.sum()) < 16:
        return 0.0
    values = masked_blur(chroma, weight, sigma / factor)[sel]
    low, high = np.percentile(values, [5, 95], axis=0)
    return float(np.linalg.norm(high - low))


def skin_colour(crop: AlignedCrop, weight: np.ndarray | None = None) -> SkinColour:
    """The colour of a face's bare skin (:func:`~faceweave.compositing.regions.skin_region`)
    in a crop, optionally weighted by a ``(S, S)`` map in ``[0, 1]`` (a
    source's clean map: low under hair and hands)."""
    region = skin_region(crop.size, crop.mesh, crop.face_size)
    if weight is not None:
        region = region * weight
    lab = to_lab(crop.pixels)
    # only skin-coloured pixels count: a strand of hair or a hand in the
    # region would pull the mean
    centre, spread = skin_statistics(lab, region)
    region = region * skin_likelihood(lab, centre, spread, tolerance=CENTRE_TOLERANCE)
    mean, std = masked_stats(lab, region)
    return SkinColour(mean=mean, std=std)


def side_lighting(lab: np.ndarray, mesh: np.ndarray, skin: np.ndarray) -> float:
    """Mean lightness of the face's image-right half minus its image-left
    half over ``skin`` (halves split by the line from the top of the forehead
    to the chin): how much a light from one side brightens the face."""
    h, w = skin.shape
    top, chin = mesh[topo.FOREHEAD_TOP, :2], mesh[topo.CHIN, :2]
    xx, yy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    side = (xx - top[0]) * (chin[1] - top[1]) - (yy - top[1]) * (chin[0] - top[0])
    light = lab[..., 0]
    right, left = (skin > 0.5) & (side > 0), (skin > 0.5) & (side < 0)
    if right.sum() < 16 or left.sum() < 16:
        return 0.0
    return float(light[right].mean() - light[left].mean())
