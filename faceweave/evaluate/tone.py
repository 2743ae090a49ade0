"""Skin tone of the swapped face against its surroundings, as the judge
(``../shared/eval``, ``tone_err``) measures it.  Pure functions on arrays.

The value is the excess face-vs-surroundings contrast, a CIELAB vector of
medians::

    (cheeks_result - around_result) - (cheeks_target - around_target)

- **cheeks**: the two under-eye polygons (:data:`RIGHT_CHEEK` and its mirror),
  from each image's own mesh (the target's when the result has none);
- **around**: boxes along the face's own axes just outside it (neck below the
  chin, beside both temples/ears, above the mesh top), from the target mesh,
  kept where the target shows skin there (close to its cheeks' colour).

``tone_error`` is its length, ΔE76: 0 when the face sits in its surroundings
as the target's face did.  With untouched surroundings it is the ΔE between
the result's and the target's cheeks; a consistent regrade of the whole
picture scores 0.  Both images are first cut to the same crop around the
target face and scaled so that the face is ``face_width`` pixels wide, so
every size below is in face widths and a small face is judged like a big one.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from faceweave.evaluate.metrics import rgb_to_lab
from faceweave.evaluate.regions import polygon_mask
from faceweave.geometry import topology as topo

#: the subject's right cheek below the eye (image left); the left one is its mirror
RIGHT_CHEEK = (117, 118, 101, 36, 205, 187, 123, 116)
#: outermost mesh points of the face at the temples: image left, image right
TEMPLE_IMAGE_LEFT, TEMPLE_IMAGE_RIGHT = 234, 454
#: the face mesh proper (the refined mesh's iris points follow)
FACE_POINTS = 468


@dataclass(frozen=True)
class ToneSettings:
    """Constants of the tone metric (the judge's); saved with the report."""

    face_width: int = 200  #: face width in the canonical crop, pixels
    crop_margin: float = 0.6  #: crop = target mesh box grown by this many face widths on each side
    skin_ab: float = 12.0  #: surrounding pixels count as skin within this a*b* distance of the cheeks
    skin_lightness: tuple[float, float] = (-40.0, 25.0)  #: ... and with L* this much below/above theirs
    min_pixels: float = 0.01  #: least pixels of a region, as a fraction of face_width ** 2


@dataclass(frozen=True)
class _Box:
    """A box just outside the face, along its axes: centred at mesh point
    ``anchor`` moved by ``across`` face widths towards the image right and
    ``up`` face heights towards the forehead; ``half_across`` face widths
    wide and ``half_up`` face heights tall, each on both sides of the centre."""

    anchor: int
    across: float
    up: float
    half_across: float
    half_up: float


#: neck below the chin, beside both temples/ears, above the mesh top
SURROUNDINGS = (
    _Box(topo.CHIN, 0.0, -0.22, 0.18, 0.10),
    _Box(TEMPLE_IMAGE_LEFT, -0.08, -0.05, 0.05, 0.12),
    _Box(TEMPLE_IMAGE_RIGHT, 0.08, -0.05, 0.05, 0.12),
    _Box(topo.FOREHEAD_TOP, 0.0, 0.06, 0.15, 0.04),
)


@dataclass(frozen=True, eq=False)
class CanonicalCrop:
    """The same crop of result and target around the target face, scaled to
    the canonical face width: ``(h, w, 3)`` uint8 images and ``(N, 2)`` mesh
    points in the crop's pixels (``result_points`` ``None`` without a mesh)."""

    result: np.ndarray
    target: np.ndarray
    target_points: np.ndarray
    result_points: np.ndarray | None


def canonical_crop(
    result: np.ndarray,
    target: np.ndarray,
    target_mesh: np.ndarray,
    result_mesh: np.ndarray | None = None,
    *,
    face_width: int = 200,
    margin: float = 0.6,
) -> CanonicalCrop:
    """Cut ``(H, W, 3)`` result and target to the target mesh's box grown by
    ``margin`` face widths (clipped to the image) and scale them so that the
    face (the x extent of the ``(478, 2+)`` target mesh) is ``face_width``
    pixels wide; meshes are mapped the same way."""
    pts = np.asarray(target_mesh, np.float64)[:FACE_POINTS, :2]
    width = max(float(np.ptp(pts[:, 0])), 1.0)
    h, w = target.shape[:2]
    x0, y0 = np.maximum(pts.min(axis=0) - margin * width, 0).astype(int)
    x1, y1 = np.minimum(pts.max(axis=0) + margin * width, (w, h)).astype(int)
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"target mesh lies outside the {w}x{h} image")
    scale = face_width / width
    size = (max(1, round((x1 - x0) * scale)), max(1, round((y1 - y0) * scale)))
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    factors = np.array([size[0] / (x1 - x0), size[1] / (y1 - y0)])

    def cut(pixels: np.ndarray) -> np.ndarray:
        return cv2.resize(np.ascontiguousarray(pixels[y0:y1, x0:x1]), size, interpolation=interpolation)

    def move(mesh: np.ndarray) -> np.ndarray:
        return (np.asarray(mesh, np.float64)[:, :2] - (x0, y0)) * factors

    return CanonicalCrop(
        cut(result), cut(target), move(target_mesh), None if result_mesh is None else move(result_mesh)
    )


def cheek_mask(points: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``(H, W)`` bool mask of both under-eye cheek polygons of ``(478, 2)`` points."""
    right = np.asarray(RIGHT_CHEEK)
    left = topo.mirror()[right]
    return polygon_mask(shape, points[right]) | polygon_mask(shape, points[left])


def surroundings_mask(points: np.ndarray, shape: tuple[int, ...], *, face_width: float) -> np.ndarray:
    """``(H, W)`` bool mask of the :data:`SURROUNDINGS` boxes of ``(478, 2)``
    points, oriented along the face's chin-to-forehead axis; ``face_width`` in
    pixels, the face height is the chin-to-forehead distance."""
    p = np.asarray(points, np.float64)
    axis = p[topo.FOREHEAD_TOP] - p[topo.CHIN]
    height = max(float(np.linalg.norm(axis)), 1.0)
    up = axis / height
    across = np.array([-up[1], up[0]])
    across = across if across[0] > 0 else -across  # towards the image right
    mask = np.zeros(shape[:2], bool)
    for box in SURROUNDINGS:
        centre = p[box.anchor] + box.across * face_width * across + box.up * height * up
        half_a, half_u = box.half_across * face_width * across, box.half_up * height * up
        corners = [centre + sa * half_a + su * half_u for sa, su in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        mask |= polygon_mask(shape, np.array(corners))
    return mask


def skin_like(lab: np.ndarray, reference: np.ndarray, *, settings: ToneSettings) -> np.ndarray:
    """``(H, W)`` bool: pixels of the ``(H, W, 3)`` Lab image within
    ``settings.skin_ab`` of the ``(3,)`` Lab ``reference`` in a*b* and within
    ``settings.skin_lightness`` of it in L*."""
    d_ab = np.linalg.norm(lab[..., 1:] - reference[1:], axis=-1)
    d_l = lab[..., 0] - reference[0]
    low, high = settings.skin_lightness
    return (d_ab < settings.skin_ab) & (d_l > low) & (d_l < high)


def _check_inputs(result: np.ndarray, target: np.ndarray, meshes: tuple[np.ndarray | None, ...]) -> None:
    for name, pixels in (("result", result), ("target", target)):
        if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
            raise ValueError(f"{name}: expected uint8 (H, W, 3), got {pixels.dtype} {pixels.shape}")
    if result.shape != target.shape:
        raise ValueError(f"result and target differ in shape: {result.shape} vs {target.shape}")
    for mesh in meshes:
        if mesh is not None and (mesh.ndim != 2 or mesh.shape[0] < FACE_POINTS or mesh.shape[1] < 2):
            raise ValueError(f"mesh: expected ({FACE_POINTS}+, 2+), got {mesh.shape}")


def tone_shift(
    result: np.ndarray,
    target: np.ndarray,
    target_mesh: np.ndarray,
    result_mesh: np.ndarray | None = None,
    *,
    settings: ToneSettings = ToneSettings(),
) -> np.ndarray | None:
    """``(3,)`` float64 excess contrast (dL*, da*, db*) of the result's cheeks
    against the surroundings over the target's (+ paler, + redder, +
    yellower), see the module docstring.

    Args: ``(H, W, 3)`` uint8 RGB result and target, ``(478, 2+)`` meshes in
    image pixels (the result's ``None`` when it has none: the target's is
    used).  ``None`` when the cheeks or the skin around are too small to
    measure (fewer than ``settings.min_pixels`` face widths squared)."""
    _check_inputs(result, target, (target_mesh, result_mesh))
    crop = canonical_crop(
        result, target, target_mesh, result_mesh, face_width=settings.face_width, margin=settings.crop_margin
    )
    least = settings.min_pixels * settings.face_width**2
    lab_r, lab_t = rgb_to_lab(crop.result), rgb_to_lab(crop.target)
    result_points = crop.target_points if crop.result_points is None else crop.result_points
    cheeks_r = cheek_mask(result_points, lab_r.shape)
    cheeks_t = cheek_mask(crop.target_points, lab_t.shape)
    if min(cheeks_r.sum(), cheeks_t.sum()) < least:
        return None
    skin_r = np.median(lab_r[cheeks_r], axis=0).astype(np.float64)
    skin_t = np.median(lab_t[cheeks_t], axis=0).astype(np.float64)
    around = surroundings_mask(crop.target_points, lab_t.shape, face_width=settings.face_width)
    around &= skin_like(lab_t, skin_t, settings=settings)
    if around.sum() < least:
        return None
    contrast_r = skin_r - np.median(lab_r[around], axis=0)
    contrast_t = skin_t - np.median(lab_t[around], axis=0)
    return np.asarray(contrast_r - contrast_t, np.float64)


def tone_error(
    result: np.ndarray,
    target: np.ndarray,
    target_mesh: np.ndarray,
    result_mesh: np.ndarray | None = None,
    *,
    settings: ToneSettings = ToneSettings(),
) -> float | None:
    """ΔE76 length of :func:`tone_shift`; ``None`` when it cannot be measured."""
    shift = tone_shift(result, target, target_mesh, result_mesh, settings=settings)
    return None if shift is None else float(np.linalg.norm(shift))
