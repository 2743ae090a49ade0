"""Masks in the working crop: float32 ``(H, W)`` arrays in ``[0, 1]``,
combined by minimum.  Pure functions (the segmentation model is a small
class that the caller owns)."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from faceweave.analysis.native_log import QuietGraph
from faceweave.errors import ModelError
from faceweave.geometry import topology as topo


def combine(*masks: np.ndarray | None) -> np.ndarray:
    """Pixel-wise minimum of the given masks (``None`` entries are skipped)."""
    present = [m for m in masks if m is not None]
    if not present:
        raise ValueError("combine() needs at least one mask")
    out = present[0]
    for m in present[1:]:
        out = np.minimum(out, m)
    return out.astype(np.float32)


def _erode(mask: np.ndarray, radius: int) -> np.ndarray:
    if radius <= 0:
        return mask
    k = radius * 2 + 1
    return cv2.erode(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))


def feather(mask: np.ndarray, *, erode: float, blur: float) -> np.ndarray:
    """Erode by ``erode`` pixels, then Gaussian-blur with sigma ``blur``.

    A fractional ``erode`` blends the erosions by the two whole radii around
    it, so the result changes smoothly with the size of the crop instead of
    in steps of a pixel (at a small working size a 1.4 px erosion would
    otherwise be 1 px, and a 1.6 px one 2 px)."""
    m = mask.astype(np.float32)
    if erode > 0:
        low = int(np.floor(erode))
        frac = float(erode - low)
        m = _erode(m, low)
        if frac > 1e-3:
            m = m + frac * (_erode(m, 1) - m)
    if blur > 0:
        m = cv2.GaussianBlur(m, (0, 0), blur)
    return np.clip(m, 0.0, 1.0)


def box_mask(size: tuple[int, int], *, inset: float, blur: float) -> np.ndarray:
    """Feathered box: 0 at the crop border, rising smoothly over ``blur`` of
    the half side after an ``inset`` margin (both fractions of the side) to 1."""
    w, h = size

    def ramp(n: int) -> np.ndarray:
        x = np.arange(n, dtype=np.float32) + 0.5
        edge = np.minimum(x, n - x) / n  # distance to the nearest border, fraction of the side
        if blur <= 0:
            return (edge >= inset).astype(np.float32)
        t = np.clip((edge - inset) / (blur / 2.0), 0.0, 1.0)
        return t * t * (3.0 - 2.0 * t)

    return np.outer(ramp(h), ramp(w)).astype(np.float32)


def polygon_mask(size: tuple[int, int], points: np.ndarray) -> np.ndarray:
    """Filled polygon as a ``{0, 1}`` float mask."""
    w, h = size
    m = np.zeros((h, w), np.uint8)
    cv2.fillPoly(m, [np.round(np.asarray(points)[:, :2] * 16).astype(np.int32)], 1, lineType=cv2.LINE_AA, shift=4)
    return m.astype(np.float32)


def mouth_mask(size: tuple[int, int], mesh: np.ndarray, *, grow: float) -> np.ndarray:
    """1 except inside the mouth opening (inner lip line, grown by ``grow``
    pixels and softened), where the target's teeth and tongue are kept."""
    inner = polygon_mask(size, mesh[topo.lips_inner()])
    if grow >= 1:
        k = int(round(grow)) * 2 + 1
        inner = cv2.dilate(inner, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
        inner = cv2.GaussianBlur(inner, (0, 0), grow / 2.0)
    return 1.0 - np.clip(inner, 0.0, 1.0)


def feature_mask(size: tuple[int, int], mesh: np.ndarray, *, grow: float) -> np.ndarray:
    """1 over the eyes, eyebrows and lips (grown by ``grow`` pixels): the
    parts of a face that are not skin-coloured."""
    w, h = size
    m = np.zeros((h, w), np.float32)
    for idx in (topo.right_eye(), topo.left_eye(), topo.lips_outer()):
        m = np.maximum(m, polygon_mask(size, mesh[idx]))
    for idx in (topo.right_eyebrow(), topo.left_eyebrow()):
        hull = cv2.convexHull(np.ascontiguousarray(mesh[idx][:, :2], np.float32))
        m = np.maximum(m, polygon_mask(size, hull.reshape(-1, 2)))
    k = int(round(grow)) * 2 + 1
    return cv2.dilate(m, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))


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
    d = np.abs(lab - centre) / spread
    return np.maximum(d[..., 0] / 1.6, np.hypot(d[..., 1], d[..., 2])).astype(np.float32)


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


def edge_connected(covered: np.ndarray, edge: np.ndarray) -> np.ndarray:
    """``{0, 1}`` uint8: the parts of ``covered`` (``{0, 1}``) that touch
    ``edge`` (``{0, 1}``), 8-connected (``edge`` itself counts as covered,
    so parts joined only through it are kept too; it is not in the result)."""
    joined = np.maximum(covered, edge).astype(np.uint8)
    _, labels = cv2.connectedComponents(joined, connectivity=8)
    touching = np.unique(labels[edge > 0])
    return (np.isin(labels, touching[touching > 0]) & (edge == 0)).astype(np.uint8)


def thin_dark(lightness: np.ndarray, *, width: float, contrast: float = 14.0) -> np.ndarray:
    """Soft ``[0, 1]`` mask of thin dark structures narrower than ``width``
    pixels (glasses frames, hair strands) on a CIELAB lightness image: the
    morphological black-hat, ramped from ``contrast / 2`` to ``contrast``
    lightness units."""
    k = max(3, int(round(width)) | 1)
    closed = cv2.morphologyEx(
        lightness.astype(np.float32), cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    )
    hat = closed - lightness
    return np.clip((hat - contrast / 2.0) / (contrast / 2.0), 0.0, 1.0).astype(np.float32)


class SelfieSegmenter:
    """mediapipe selfie segmentation: person (1) versus background (0).
    Used as an occlusion mask: a non-person object in front of the face
    (a ball, a microphone) stays in front of the swapped face."""

    name = "mediapipe_selfie_segmentation"

    def __init__(self) -> None:
        self._model = None

    def prepare(self) -> None:
        if self._model is None:
            try:
                import mediapipe as mp

                # made and first run with its native log lines kept off stderr
                self._model = QuietGraph(lambda: mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=0))
            except Exception as exc:  # pragma: no cover - broken install
                raise ModelError(f"cannot load mediapipe selfie segmentation: {exc}") from exc

    def person_mask(self, rgb: np.ndarray) -> np.ndarray:
        """``(H, W)`` float32 probability that each pixel belongs to a person."""
        self.prepare()
        result = self._model.process(np.ascontiguousarray(rgb))
        return np.clip(result.segmentation_mask.astype(np.float32), 0.0, 1.0)

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None


#: a hand's fingers are drawn this thick, and the whole hand grown by this
#: much, as fractions of the length from the wrist to the middle finger's knuckle
HAND_FINGER_WIDTH = 0.3
HAND_MARGIN = 0.08
#: hand landmarks (mediapipe's 21-point hand): the wrist and the knuckles, the palm's outline
_PALM = (0, 1, 2, 5, 9, 13, 17)


def hand_mask(size: tuple[int, int], hands: Sequence[np.ndarray]) -> np.ndarray:
    """``(H, W)`` float32 in ``[0, 1]``: 1 over the hands drawn from their
    ``(21, 2)`` landmark pixel coordinates (mediapipe's hand model: palm
    polygon, thick lines along the finger bones), grown by
    :data:`HAND_MARGIN` and softened at the edge."""
    from mediapipe.python.solutions.hands_connections import HAND_CONNECTIONS

    w, h = size
    out = np.zeros((h, w), np.uint8)
    soft = 1.0
    for points in hands:
        p = np.asarray(points, np.float32).reshape(21, 2)
        palm = float(np.linalg.norm(p[9] - p[0]))
        if not np.isfinite(palm) or palm < 1.0:
            continue
        width = max(2, int(round(HAND_FINGER_WIDTH * palm)))
        q = np.round(p * 16.0).astype(np.int32)  # 4 bits of sub-pixel precision
        cv2.fillPoly(out, [q[list(_PALM)]], 255, lineType=cv2.LINE_8, shift=4)
        for a, b in HAND_CONNECTIONS:
            cv2.line(out, tuple(map(int, q[a])), tuple(map(int, q[b])), 255, width, lineType=cv2.LINE_8, shift=4)
        for k in range(21):
            cv2.circle(out, tuple(map(int, q[k])), width * 8, 255, -1, lineType=cv2.LINE_8, shift=4)
        grow = int(round(HAND_MARGIN * palm))
        if grow > 0:
            kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1))
            out = cv2.dilate(out, kernel)
        soft = max(soft, 0.05 * palm)
    mask = out.astype(np.float32) / 255.0
    return cv2.GaussianBlur(mask, (0, 0), soft) if mask.any() else mask


class HandDetector:
    """mediapipe's hand landmarks (palm detector + 21-point hand model).
    Used as an occlusion mask: a hand in front of the face, which has the
    colour of skin and so passes the skin-colour test, stays in front."""

    name = "mediapipe_hands"

    def __init__(self, *, max_hands: int = 2, min_confidence: float = 0.5) -> None:
        self.max_hands = max_hands
        self.min_confidence = min_confidence
        self._model = None

    def prepare(self) -> None:
        if self._model is None:
            try:
                import mediapipe as mp

                # made and first run with its native log lines kept off stderr
                self._model = QuietGraph(
                    lambda: mp.solutions.hands.Hands(
                        static_image_mode=True,
                        max_num_hands=self.max_hands,
                        model_complexity=1,
                        min_detection_confidence=self.min_confidence,
                    )
                )
            except Exception as exc:  # pragma: no cover - broken install
                raise ModelError(f"cannot load mediapipe hand landmarks: {exc}") from exc

    def hands(self, rgb: np.ndarray) -> list[np.ndarray]:
        """``(21, 2)`` float32 pixel coordinates of each hand found in an RGB image."""
        self.prepare()
        h, w = rgb.shape[:2]
        result = self._model.process(np.ascontiguousarray(rgb))
        found = []
        for lm in result.multi_hand_landmarks or ():
            found.append(np.array([(p.x * w, p.y * h) for p in lm.landmark], np.float32))
        return found

    def hand_mask(self, rgb: np.ndarray) -> np.ndarray | None:
        """``(H, W)`` float32 in ``[0, 1]``, 1 over the hands, or ``None`` when
        there is no hand."""
        found = self.hands(rgb)
        if not found:
            return None
        return hand_mask((rgb.shape[1], rgb.shape[0]), found)

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None
