"""The skin-colour model of a face and the masks it gives: soft ``(H, W)``
float32 maps in ``[0, 1]``, 1 where a pixel looks like the face's bare skin.

The model is robust (median and scaled MAD of CIELAB colour under a region
of reliable skin), so hair, a hand or a shadow in that region does not pull
it.  Pure functions on float32 CIELAB images (:func:`faceweave.compositing.colour.to_lab`)."""

from __future__ import annotations

import cv2
import numpy as np

#: colour tolerance (robust spreads) of the skin test in the middle of a
#: target face (and of the skin whose colour is measured)
CENTRE_TOLERANCE = 6.0


def skin_statistics(lab: np.ndarray, region: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Robust centre (median) and spread (1.4826·MAD) of LAB skin colour over
    ``region > 0.5``; ``(3,)`` each."""
    px = lab[region > 0.5]
    if len(px) < 16:
        return np.array([60.0, 10.0, 15.0], np.float32), np.array([15.0, 5.0, 5.0], np.float32)
    med = np.median(px, axis=0)
    mad = np.median(np.abs(px - med), axis=0) * 1.4826
    return med.astype(np.float32), np.maximum(mad, [4.0, 2.0, 2.0]).astype(np.float32)


def skin_distance(lab: np.ndarray, centre: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """``(H, W)`` float32: how many spreads each LAB pixel lies from the skin
    colour (:func:`skin_statistics`); lightness counts for less (shading
    changes it) than the chroma."""
    # channel by channel, in the dtype the whole-array expression would have
    # (NumPy broadcasts a (3,) vector over a last axis of 3 slowly)
    dtype = np.result_type(lab.dtype, np.asarray(centre).dtype, np.asarray(spread).dtype)
    centre, spread = np.asarray(centre, dtype), np.asarray(spread, dtype)
    d = [np.abs(lab[..., k].astype(dtype) - centre[k]) / spread[k] for k in range(3)]
    return np.maximum(d[0] / 1.6, np.hypot(d[1], d[2])).astype(np.float32)


def likelihood_from_distance(dist: np.ndarray, tolerance: float) -> np.ndarray:
    """1 within ``tolerance`` (a :func:`skin_distance`), falling to 0 at twice that."""
    return np.clip(2.0 - dist / np.float32(tolerance), 0.0, 1.0).astype(np.float32)


def skin_likelihood(lab: np.ndarray, centre: np.ndarray, spread: np.ndarray, *, tolerance: float = 3.5) -> np.ndarray:
    """Soft ``[0, 1]`` mask: 1 where a LAB pixel is within ``tolerance``
    spreads of the skin colour, falling to 0 at twice that.  Lightness gets a
    looser test (shading changes it) than the chroma."""
    return likelihood_from_distance(skin_distance(lab, centre, spread), tolerance)


def hue_likelihood(lab: np.ndarray, region: np.ndarray, *, tolerance: float = 3.0) -> np.ndarray:
    """Soft ``[0, 1]`` mask: 1 where a pixel's hue angle (``atan2(b, a)``) is
    within ``tolerance`` robust spreads of the skin's hue under ``region``.
    Separates blond or brown hair (yellower) from skin of similar lightness."""
    hue = np.degrees(np.arctan2(lab[..., 2], lab[..., 1]))
    sel = region > 0.5
    if sel.sum() < 16:
        return np.ones(lab.shape[:2], np.float32)
    med = float(np.median(hue[sel]))
    spread = max(float(np.median(np.abs(hue[sel] - med))) * 1.4826, 2.5)
    return np.clip(2.0 - np.abs(hue - med) / spread / tolerance, 0.0, 1.0).astype(np.float32)


def texture_likelihood(
    lightness: np.ndarray, region: np.ndarray, *, scale: float, tolerance: float = 2.5
) -> np.ndarray:
    """Soft ``[0, 1]`` mask: 1 where the local fine texture (mean absolute
    difference from a Gaussian low-pass, pooled over ``scale`` pixels) is
    within ``tolerance`` times the skin's median texture under ``region``.
    Hair strands are far more textured than skin."""
    light = lightness.astype(np.float32)
    fine = np.abs(light - cv2.GaussianBlur(light, (0, 0), max(scale / 6.0, 0.8)))
    pooled = cv2.GaussianBlur(fine, (0, 0), max(scale / 2.0, 1.0))
    sel = region > 0.5
    ref = max(float(np.median(pooled[sel])) if sel.sum() >= 16 else 1.0, 0.25)
    return np.clip(2.0 - pooled / ref / tolerance, 0.0, 1.0).astype(np.float32)


def occluder_free(
    lab: np.ndarray,
    region: np.ndarray,
    *,
    face_size: float,
    hair_zone: np.ndarray | None = None,
    distance: np.ndarray | None = None,
) -> np.ndarray:
    """Soft ``[0, 1]`` mask of bare skin in a face crop, low over hair, hands,
    glasses and other things in front of the face.  Skin colour is tested
    everywhere; hue and texture (which tell hair strands from skin, but also
    flag stubble and wrinkles) only where ``hair_zone`` is high (everywhere
    when it is ``None``).  The skin model is learnt under ``region``;
    ``distance``: its :func:`skin_distance` map, when the caller has it."""
    if distance is None:
        distance = skin_distance(lab, *skin_statistics(lab, region))
    hair_free = np.minimum(hue_likelihood(lab, region), texture_likelihood(lab[..., 0], region, scale=0.06 * face_size))
    if hair_zone is not None:
        hair_free = np.maximum(hair_free, 1.0 - hair_zone)
    return np.minimum(likelihood_from_distance(distance, 3.5), hair_free).astype(np.float32)


def darker_than_skin(
    lab: np.ndarray, region: np.ndarray, stats: tuple[np.ndarray, np.ndarray] | None = None, *, margin: float = 0.5
) -> np.ndarray:
    """Soft ``[0, 1]``: pixels clearly darker than the skin under ``region``
    (beard, moustache, stubble shadow), 0 for skin and anything lighter:
    rising from ``margin`` lightness spreads below the skin's to one spread
    more.  ``stats``: the region's :func:`skin_statistics`, when known."""
    centre, spread = stats if stats is not None else skin_statistics(lab, region)
    return np.clip((centre[0] - lab[..., 0]) / spread[0] - margin, 0.0, 1.0).astype(np.float32)
