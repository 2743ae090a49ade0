"""The skin-colour model of a face and the masks it gives: soft ``(H, W)``
float32 maps in ``[0, 1]``, 1 where a pixel looks like the face's bare skin.

The model is robust (median and scaled MAD of CIELAB colour under a region
of reliable skin), so hair, a hand or a shadow in that region does not pull
it.  Pure functions on float32 CIELAB images (:func:`faceweave.compositing.colour.to_lab`)."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

#: colour tolerance (robust spreads) of the skin test in the middle of a
#: target face (and of the skin whose colour is measured)
CENTRE_TOLERANCE = 6.0
#: the scale of the hair test's texture (:func:`occluder_free`), a fraction of the face size
HAIR_TEXTURE_SCALE = 0.06


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


def hue_likelihood(
    lab: np.ndarray, region: np.ndarray, *, tolerance: float = 3.0, stats: tuple[float, float] | None = None
) -> np.ndarray:
    """Soft ``[0, 1]`` mask: 1 where a pixel's hue angle (``atan2(b, a)``) is
    within ``tolerance`` robust spreads of the skin's hue under ``region``
    (or ``stats``, its :func:`hue_statistics` when known).  Separates blond
    or brown hair (yellower) from skin of similar lightness."""
    hue = np.degrees(np.arctan2(lab[..., 2], lab[..., 1]))
    found = stats if stats is not None else _hue_statistics(hue, region)
    if found is None:
        return np.ones(lab.shape[:2], np.float32)
    med, spread = found
    return np.clip(2.0 - np.abs(hue - med) / spread / tolerance, 0.0, 1.0).astype(np.float32)


def hue_statistics(lab: np.ndarray, region: np.ndarray) -> tuple[float, float] | None:
    """The skin's hue angle under ``region > 0.5`` (degrees): its median and
    robust spread (at least 2.5), or ``None`` for too little skin."""
    return _hue_statistics(np.degrees(np.arctan2(lab[..., 2], lab[..., 1])), region)


def _hue_statistics(hue: np.ndarray, region: np.ndarray) -> tuple[float, float] | None:
    sel = region > 0.5
    if sel.sum() < 16:
        return None
    med = float(np.median(hue[sel]))
    return med, max(float(np.median(np.abs(hue[sel] - med))) * 1.4826, 2.5)


def texture_likelihood(
    lightness: np.ndarray, region: np.ndarray, *, scale: float, tolerance: float = 2.5, reference: float | None = None
) -> np.ndarray:
    """Soft ``[0, 1]`` mask: 1 where the local fine texture (mean absolute
    difference from a Gaussian low-pass, pooled over ``scale`` pixels) is
    within ``tolerance`` times the skin's median texture under ``region``
    (or ``reference``, its :func:`texture_reference` when known).  Hair
    strands are far more textured than skin."""
    pooled = _pooled_texture(lightness, scale)
    ref = reference if reference is not None else _texture_reference(pooled, region)
    return np.clip(2.0 - pooled / ref / tolerance, 0.0, 1.0).astype(np.float32)


def texture_reference(lightness: np.ndarray, region: np.ndarray, *, scale: float) -> float:
    """The skin's median fine texture under ``region`` (:func:`texture_likelihood`'s measure, at least 0.25)."""
    return _texture_reference(_pooled_texture(lightness, scale), region)


def _pooled_texture(lightness: np.ndarray, scale: float) -> np.ndarray:
    light = lightness.astype(np.float32)
    fine = np.abs(light - cv2.GaussianBlur(light, (0, 0), max(scale / 6.0, 0.8)))
    return np.asarray(cv2.GaussianBlur(fine, (0, 0), max(scale / 2.0, 1.0)))


def _texture_reference(pooled: np.ndarray, region: np.ndarray) -> float:
    sel = region > 0.5
    return max(float(np.median(pooled[sel])) if sel.sum() >= 16 else 1.0, 0.25)


@dataclass(frozen=True, eq=False)
class SkinModel:
    """A face's bare-skin model, measured under its reliable skin (medians,
    so slow to change: a track's face plan holds one over several frames):
    ``centre`` and ``spread`` ``(3,)`` float32, the CIELAB colour
    (:func:`skin_statistics`); ``hue``, the hue angle's median and spread
    (:func:`hue_statistics`; ``None``: too little skin to say); ``texture``,
    the median fine texture at the hair test's scale (:func:`texture_reference`)."""

    centre: np.ndarray
    spread: np.ndarray
    hue: tuple[float, float] | None
    texture: float


def skin_model(lab: np.ndarray, region: np.ndarray, *, face_size: float) -> SkinModel:
    """The :class:`SkinModel` of the CIELAB crop ``lab`` under ``region``
    (what :func:`occluder_free` measures for a face of ``face_size`` pixels)."""
    centre, spread = skin_statistics(lab, region)
    return SkinModel(
        centre=centre,
        spread=spread,
        hue=hue_statistics(lab, region),
        texture=texture_reference(lab[..., 0], region, scale=HAIR_TEXTURE_SCALE * face_size),
    )


def occluder_free(
    lab: np.ndarray,
    region: np.ndarray,
    *,
    face_size: float,
    hair_zone: np.ndarray | None = None,
    distance: np.ndarray | None = None,
    model: SkinModel | None = None,
) -> np.ndarray:
    """Soft ``[0, 1]`` mask of bare skin in a face crop, low over hair, hands,
    glasses and other things in front of the face.  Skin colour is tested
    everywhere; hue and texture (which tell hair strands from skin, but also
    flag stubble and wrinkles) only where ``hair_zone`` is high (everywhere
    when it is ``None``).  The skin model is learnt under ``region``, or is
    ``model`` (:func:`skin_model`) when given; ``distance``: its
    :func:`skin_distance` map, when the caller has it."""
    if distance is None:
        centre, spread = (model.centre, model.spread) if model is not None else skin_statistics(lab, region)
        distance = skin_distance(lab, centre, spread)
    scale = HAIR_TEXTURE_SCALE * face_size
    if model is None:
        hue, texture = hue_likelihood(lab, region), texture_likelihood(lab[..., 0], region, scale=scale)
    else:
        hue = hue_likelihood(lab, region, stats=model.hue)
        texture = texture_likelihood(lab[..., 0], region, scale=scale, reference=model.texture)
    hair_free = np.minimum(hue, texture)
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
