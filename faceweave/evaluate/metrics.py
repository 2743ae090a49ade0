"""Pure quality metrics of a face swap, computed on arrays.

Conventions: images are ``(H, W, 3)`` uint8 RGB; masks are ``(H, W)`` bool
arrays of the same height and width; meshes are ``(478, 3)`` float arrays in
image pixels.  Colours are compared in CIELAB as OpenCV computes it from float32
RGB in ``[0, 1]`` (L in ``0..100``), with the CIE76 colour difference ΔE
(Euclidean distance in Lab).

A metric that cannot be measured (an empty mask, no reference photos) returns
``None`` rather than a made-up number.  The skin-tone metric is in
:mod:`faceweave.evaluate.tone`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cv2
import numpy as np

from faceweave.geometry.expression import ExpressionRatios, expression_ratios
from faceweave.types import Pose

#: PSNR reported when two images are identical over the compared pixels
PSNR_CAP_DB = 99.0


# ----------------------------------------------------------------- helpers


def _check_image(name: str, pixels: np.ndarray) -> None:
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"{name}: expected uint8 (H, W, 3), got {pixels.dtype} {pixels.shape}")


def _check_mask(name: str, mask: np.ndarray, shape: tuple[int, ...]) -> None:
    if mask.dtype != np.bool_ or mask.shape != tuple(shape[:2]):
        raise ValueError(f"{name}: expected bool {tuple(shape[:2])}, got {mask.dtype} {mask.shape}")


def _check_pair(result: np.ndarray, target: np.ndarray) -> None:
    _check_image("result", result)
    _check_image("target", target)
    if result.shape != target.shape:
        raise ValueError(f"result and target differ in shape: {result.shape} vs {target.shape}")


def rgb_to_lab(pixels: np.ndarray) -> np.ndarray:
    """CIELAB of RGB colours.

    Args:
        pixels: ``(..., 3)`` uint8 RGB (any leading shape, e.g. ``(H, W, 3)``
            or ``(N, 3)``).

    Returns:
        ``(..., 3)`` float32 Lab, L in ``0..100``.
    """
    arr = np.asarray(pixels)
    if arr.shape[-1] != 3:
        raise ValueError(f"expected (..., 3) RGB, got {arr.shape}")
    flat = arr.reshape(-1, 1, 3).astype(np.float32) / 255.0
    return cv2.cvtColor(flat, cv2.COLOR_RGB2Lab).reshape(arr.shape)


def delta_e(lab_a: np.ndarray, lab_b: np.ndarray) -> np.ndarray:
    """CIE76 colour difference of ``(..., 3)`` Lab colours, shape ``(...)``."""
    diff = np.asarray(lab_a, dtype=np.float64) - np.asarray(lab_b, dtype=np.float64)
    return np.sqrt(np.sum(diff * diff, axis=-1))


def _gray(pixels: np.ndarray) -> np.ndarray:
    """``(H, W)`` float32 luma in ``0..255``."""
    return cv2.cvtColor(pixels, cv2.COLOR_RGB2GRAY).astype(np.float32)


def _mask_bounds(mask: np.ndarray, margin: int) -> tuple[slice, slice]:
    """Row and column slices of the mask's bounding box grown by ``margin``."""
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    return (
        slice(max(int(ys.min()) - margin, 0), min(int(ys.max()) + margin + 1, h)),
        slice(max(int(xs.min()) - margin, 0), min(int(xs.max()) + margin + 1, w)),
    )


# ------------------------------------------------------------- whole image


def psnr(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None, *, cap: float = PSNR_CAP_DB) -> float | None:
    """Peak signal-to-noise ratio in dB of two ``(H, W, 3)`` uint8 images over
    the pixels where ``mask`` ``(H, W)`` is true (all pixels when ``None``).

    ``10 * log10(255^2 / MSE)`` with the MSE over every channel of the chosen
    pixels; ``cap`` when the pixels are identical (or the PSNR exceeds it);
    ``None`` when the mask selects no pixel.
    """
    _check_pair(a, b)
    if mask is not None:
        _check_mask("mask", mask, a.shape)
        if not mask.any():
            return None
        diff = a[mask].astype(np.int32) - b[mask].astype(np.int32)
    else:
        diff = a.astype(np.int32) - b.astype(np.int32)
    mse = float(np.sum(diff * diff, dtype=np.int64)) / diff.size
    if mse == 0.0:
        return float(cap)
    return float(min(cap, 10.0 * np.log10(255.0**2 / mse)))


# ------------------------------------------------------------ geometry


def pose_error(result: Pose, target: Pose) -> float:
    """Largest absolute difference, in degrees, of yaw, pitch and roll."""
    return float(max(abs(result.yaw - target.yaw), abs(result.pitch - target.pitch), abs(result.roll - target.roll)))


def expression_differences(result_mesh: np.ndarray, target_mesh: np.ndarray) -> ExpressionRatios:
    """Absolute differences of the :class:`ExpressionRatios` of two
    ``(478, 2+)`` meshes, ratio by ratio."""
    a, b = expression_ratios(result_mesh), expression_ratios(target_mesh)
    return ExpressionRatios(
        mouth_open=abs(a.mouth_open - b.mouth_open),
        mouth_width=abs(a.mouth_width - b.mouth_width),
        eye_open=abs(a.eye_open - b.eye_open),
    )


def expression_error(result_mesh: np.ndarray, target_mesh: np.ndarray) -> float:
    """Largest absolute difference of the three :class:`ExpressionRatios` of
    two ``(478, 2+)`` meshes (unitless, a fraction of the inter-eye distance)."""
    return float(max(expression_differences(result_mesh, target_mesh).as_tuple()))


# ------------------------------------------------------------- identity


def embedding_distance(a: np.ndarray, b: np.ndarray) -> float:
    """L2 distance of two ``(128,)`` dlib embeddings (same person below ~0.6)."""
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a64.shape != b64.shape or a64.ndim != 1:
        raise ValueError(f"embeddings: expected two (D,) vectors, got {a64.shape} and {b64.shape}")
    return float(np.linalg.norm(a64 - b64))


def mean_embedding(embeddings: Sequence[np.ndarray]) -> np.ndarray | None:
    """``(128,)`` float32 mean of ``N`` embeddings, ``None`` when ``N == 0``."""
    if len(embeddings) == 0:
        return None
    return np.mean(np.stack([np.asarray(e, dtype=np.float64) for e in embeddings]), axis=0).astype(np.float32)


def nearest_identity(embedding: np.ndarray, centroids: Mapping[str, np.ndarray]) -> str | None:
    """Name of the centroid ``(128,)`` nearest to ``embedding`` ``(128,)``;
    ties go to the name that sorts first; ``None`` without centroids."""
    best: tuple[float, str] | None = None
    for name in sorted(centroids):
        d = embedding_distance(embedding, centroids[name])
        if best is None or d < best[0]:
            best = (d, name)
    return None if best is None else best[1]


# ------------------------------------------------------------- blotches


def _gaussian(values: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur (zero outside) of a ``(H, W)`` or ``(H, W, C)`` float32
    array; a wide blur runs on a copy shrunk to ``sigma ~ 8`` px and is scaled
    back, which changes a smooth result little and keeps the cost flat."""
    h, w = values.shape[:2]
    factor = sigma / 8.0
    if factor <= 1.5:
        return cv2.GaussianBlur(values, (0, 0), sigma, borderType=cv2.BORDER_CONSTANT)
    small = cv2.resize(values, (max(1, round(w / factor)), max(1, round(h / factor))), interpolation=cv2.INTER_AREA)
    small = cv2.GaussianBlur(small, (0, 0), sigma / factor, borderType=cv2.BORDER_CONSTANT)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


def blotch_fraction(pixels: np.ndarray, mask: np.ndarray, *, sigma: float, threshold: float = 12.0) -> float | None:
    """Fraction of the mask's pixels whose Lab colour is more than
    ``threshold`` ΔE away from a Gaussian-smoothed (``sigma`` pixels) version of
    the masked region.

    The smoothing is a normalised convolution restricted to the mask
    (``blur(lab * m) / blur(m)``), so colours outside the mask (eyes, hair,
    background) do not leak in.  Args: ``(H, W, 3)`` uint8 image and ``(H, W)``
    bool mask.  ``None`` when the mask is empty.
    """
    _check_image("pixels", pixels)
    _check_mask("mask", mask, pixels.shape)
    if not mask.any():
        return None
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    rows, cols = _mask_bounds(mask, int(np.ceil(3 * sigma)))
    m = mask[rows, cols].astype(np.float32)
    lab = rgb_to_lab(pixels[rows, cols])
    num = _gaussian(lab * m[..., None], sigma)
    den = _gaussian(m, sigma)
    smooth = num / np.maximum(den, 1e-6)[..., None]
    inside = m > 0
    far = delta_e(lab[inside], smooth[inside]) > threshold
    return float(np.mean(far))


def blotch_excess(
    result: np.ndarray,
    target: np.ndarray,
    *,
    result_mask: np.ndarray,
    target_mask: np.ndarray,
    sigma: float,
    threshold: float = 12.0,
) -> float | None:
    """``max(0, blotch_fraction(result) - blotch_fraction(target))``: the share
    of the inner skin covered by odd-coloured patches that the target did not
    have.  ``None`` when a mask is empty."""
    _check_pair(result, target)
    r = blotch_fraction(result, result_mask, sigma=sigma, threshold=threshold)
    t = blotch_fraction(target, target_mask, sigma=sigma, threshold=threshold)
    if r is None or t is None:
        return None
    return float(max(0.0, r - t))


# ---------------------------------------------------------- edges, detail


def gradient_magnitude(pixels: np.ndarray) -> np.ndarray:
    """``(H, W)`` float32 colour gradient magnitude of a ``(H, W, 3)`` uint8
    image: the 3x3 Sobel magnitude of each RGB channel divided by 8 (so in
    levels per pixel), the largest of the three.  Unlike the luma gradient it
    also sees an edge between colours of equal brightness (a skin-tone seam)."""
    _check_image("pixels", pixels)
    f = pixels.astype(np.float32)
    gx = cv2.Sobel(f, cv2.CV_32F, 1, 0, ksize=3) / 8.0
    gy = cv2.Sobel(f, cv2.CV_32F, 0, 1, ksize=3) / 8.0
    return np.sqrt(gx * gx + gy * gy).max(axis=2)


def seam_ratio(result: np.ndarray, target: np.ndarray, border: np.ndarray, *, eps: float = 0.5) -> float:
    """Visible-seam measure along the border of the changed region.

    ``(mean |∇result| + eps) / (mean |∇target| + eps)`` over the ``(H, W)``
    bool ``border`` pixels, gradients from :func:`gradient_magnitude` (grey
    levels per pixel).  1.0 means the result is no edgier there than the target
    was; a pasted patch with a hard edge gives well above 1.  1.0 when the
    border is empty (nothing changed, so there is no seam).
    """
    _check_pair(result, target)
    _check_mask("border", border, result.shape)
    if not border.any():
        return 1.0
    rows, cols = _mask_bounds(border, 2)
    b = border[rows, cols]
    gr = gradient_magnitude(np.ascontiguousarray(result[rows, cols]))[b]
    gt = gradient_magnitude(np.ascontiguousarray(target[rows, cols]))[b]
    return float((gr.mean() + eps) / (gt.mean() + eps))


def high_frequency_energy(pixels: np.ndarray, mask: np.ndarray) -> float | None:
    """Mean squared 3x3 Laplacian of the luma (grey levels) of a ``(H, W, 3)``
    uint8 image over the ``(H, W)`` bool mask; ``None`` when it is empty."""
    _check_image("pixels", pixels)
    _check_mask("mask", mask, pixels.shape)
    if not mask.any():
        return None
    rows, cols = _mask_bounds(mask, 2)
    lap = cv2.Laplacian(_gray(np.ascontiguousarray(pixels[rows, cols])), cv2.CV_32F, ksize=1)
    vals = lap[mask[rows, cols]].astype(np.float64)
    return float(np.mean(vals * vals))


def face_sharpness_ratio(
    result: np.ndarray, target: np.ndarray, target_mesh: np.ndarray, *, face_width: int = 200, erode_by: float = 0.04
) -> float | None:
    """The judge's sharpness: RMS of the grey 3x3 Laplacian inside the target's
    face oval eroded by ``erode_by`` face widths, result over target, with both
    images cut around the face and scaled so that it is ``face_width`` pixels
    wide (so a 1500 px face is judged like a 200 px one: its pixel grain does
    not count, the skin's texture does).  ``None`` when the oval is empty."""
    from faceweave.evaluate.regions import erode, polygon_mask
    from faceweave.evaluate.tone import canonical_crop
    from faceweave.geometry import topology as topo

    _check_pair(result, target)
    crop = canonical_crop(result, target, target_mesh, face_width=face_width)
    oval = polygon_mask(crop.target.shape, crop.target_points[topo.face_oval()])
    mask = erode(oval, erode_by * face_width)
    er = high_frequency_energy(crop.result, mask) if mask.any() else None
    et = high_frequency_energy(crop.target, mask) if mask.any() else None
    if er is None or et is None or et <= 0:
        return None
    return float(np.sqrt(er / et))


def sharpness_ratio(
    result: np.ndarray,
    target: np.ndarray,
    *,
    result_mask: np.ndarray,
    target_mask: np.ndarray,
    eps: float = 1e-6,
) -> float | None:
    """``(E(result) + eps) / (E(target) + eps)`` with ``E`` the
    :func:`high_frequency_energy` over each image's own inner-skin mask: below
    1 the swapped face is blurrier than the target's, above 1 sharper (or
    noisier).  ``None`` when a mask is empty."""
    _check_pair(result, target)
    er = high_frequency_energy(result, result_mask)
    et = high_frequency_energy(target, target_mask)
    if er is None or et is None:
        return None
    return float((er + eps) / (et + eps))
