"""The multi-band blend, paste-back into the frame, and matching the new
face's fine detail and blur to the photo's.  Pure functions."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from faceweave.compositing.resample import HALF_RES_SIGMA, gaussian_lowpass
from faceweave.kernels import detail_grain, mix_band, paste_warped, put_detail, reference


def per_channel(mask: np.ndarray, channels: int) -> np.ndarray:
    """``(H, W)`` ``mask`` repeated into ``(H, W, channels)`` (its dtype kept).

    Products and sums with an ``(H, W, channels)`` image give exactly what
    broadcasting ``mask[..., None]`` gives, several times faster: NumPy runs
    such a broadcast as an inner loop over the short last axis."""
    if channels == 1:
        return mask[..., None]
    if mask.dtype == np.bool_:  # not an OpenCV type
        return np.repeat(mask[..., None], channels, axis=2)
    return np.asarray(cv2.merge([np.ascontiguousarray(mask)] * channels))


def laplacian_blend(front: np.ndarray, back: np.ndarray, mask: np.ndarray, *, levels: int = 5) -> np.ndarray:
    """Multi-band blend of two float32 ``(H, W, C)`` images with a ``(H, W)``
    mask in ``[0, 1]`` (1 = ``front``): each band of the Laplacian pyramid is
    mixed with the mask's Gaussian pyramid at that scale, so low frequencies
    blend over wide regions and fine detail over narrow ones."""
    h, w = mask.shape
    levels = max(1, min(levels, int(np.log2(max(1, min(h, w) // 8))) + 1))
    # the pyramid is linear: mixing the bands of front and back by the mask
    # is back plus the bands of (front - back) times the mask, so one pyramid
    # (of the difference) does the work of two
    back = back.astype(np.float32)
    gm: list[np.ndarray] = [mask.astype(np.float32)]
    gd: list[np.ndarray] = [front.astype(np.float32) - back]
    for _ in range(levels - 1):
        gm.append(cv2.pyrDown(gm[-1]))
        gd.append(cv2.pyrDown(gd[-1]))
    channels = gd[0].shape[2]
    out = gd[-1] * per_channel(gm[-1], channels)
    if levels == 1:
        out += back
        return out
    for i in range(levels - 2, -1, -1):
        size = (gd[i].shape[1], gd[i].shape[0])
        # out + (level - the next one up) * mask, and back on the last level, in one pass
        up = np.asarray(cv2.pyrUp(out, dstsize=size)).reshape(gd[i].shape)
        coarse = np.asarray(cv2.pyrUp(gd[i + 1], dstsize=size)).reshape(gd[i].shape)
        out = mix_band(up, gd[i], coarse, gm[i], back if i == 0 else None)
    return out


def _crop_roi(
    frame_shape: tuple[int, ...], crop_size: tuple[int, int], matrix: np.ndarray
) -> tuple[int, int, int, int, np.ndarray]:
    """The frame region ``(x1, y1, x2, y2)`` under a crop, and the crop->ROI matrix."""
    w, h = crop_size
    inv: np.ndarray = np.asarray(cv2.invertAffineTransform(matrix))
    corners = np.array([[0, 0], [w, 0], [0, h], [w, h]], np.float64) @ inv[:, :2].T + inv[:, 2]
    fh, fw = frame_shape[:2]
    x1, y1 = np.floor(corners.min(0)).astype(int)
    x2, y2 = np.ceil(corners.max(0)).astype(int)
    x1, y1, x2, y2 = max(x1, 0), max(y1, 0), min(x2, fw), min(y2, fh)
    inv_roi = inv.copy()
    inv_roi[:, 2] -= (x1, y1)
    return x1, y1, x2, y2, inv_roi


def _smallest_step(qa: float, qb: float, qc: float) -> float:
    """The smallest ``c >= 0`` with ``qa c^2 + qb c + qc = 0`` (``qa > 0``); when
    there is none, the ``c >= 0`` that comes closest (the parabola's vertex).
    Clipped to ``[0, 2]``."""
    disc = qb * qb - 4.0 * qa * qc
    if disc >= 0.0:
        roots = [r for r in ((-qb - np.sqrt(disc)) / (2.0 * qa), (-qb + np.sqrt(disc)) / (2.0 * qa)) if r >= 0.0]
        if roots:
            return float(min(min(roots), 2.0))
    return float(np.clip(-qb / (2.0 * qa), 0.0, 2.0))


def _luma(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(np.ascontiguousarray(rgb, dtype=np.float32), cv2.COLOR_RGB2GRAY)


#: blur levels (frame pixels) tried to soften a new face that is sharper than its photo
_BLUR_STEPS = (0.6, 0.9, 1.3, 1.8, 2.5, 3.5)
#: how much sharper (ratio of fine to coarse detail) the new face must be before it is softened
_SHARPER = 1.25
#: unsharp-mask radius (frame pixels) and amounts tried to sharpen a new face
#: that is softer than its photo
_SHARPEN_SIGMA = 1.2
_SHARPEN_STEPS = (0.25, 0.5, 0.75, 1.0, 1.5)
#: side of the window in the middle of a face where its blur is measured
_BLUR_WINDOW = 160


def _sharpness(luma: np.ndarray, sel: np.ndarray) -> float:
    """Fine structure over coarse structure of a luma patch under ``sel``:
    the energy of the band from 1 to 3 px over that of the band from 3 to
    8 px.  Defocus and motion blur lower it whatever the content; the finest
    band (sensor noise, compression blocks) is left out, as it says nothing
    about blur (:func:`match_detail` matches it separately).  The coarse band
    is smooth, so it is measured at a quarter of the resolution."""
    g1 = cv2.GaussianBlur(luma, (0, 0), 1.0)
    g3 = cv2.GaussianBlur(luma, (0, 0), 3.0)
    fine = float(np.mean((g1 - g3)[sel] ** 2))
    h, w = luma.shape[:2]
    if h >= 32 and w >= 32:
        small = cv2.resize(g3, (w // 4, h // 4), interpolation=cv2.INTER_AREA)
        keep = cv2.resize(sel.astype(np.uint8), (w // 4, h // 4), interpolation=cv2.INTER_NEAREST) > 0
        # 3 -> 8 px at full size is 0.75 -> 2 px here: blur by sqrt(2^2 - 0.75^2)
        band = small - cv2.GaussianBlur(small, (0, 0), 1.85)
        coarse = float(np.mean(band[keep] ** 2)) if keep.any() else 0.0
    else:
        coarse = float(np.mean((g3 - cv2.GaussianBlur(luma, (0, 0), 8.0))[sel] ** 2))
    return fine / max(coarse, 1e-6)


def match_blur(
    original: np.ndarray, new: np.ndarray, mask: np.ndarray, sel: np.ndarray, *, sharpen: bool = False
) -> np.ndarray:
    """``new`` (float32 RGB patch) softened under ``mask`` to the blur of
    ``original`` (the photo at the same place), when the photo is clearly
    softer: a sharp source face pasted into a defocused or motion-blurred
    picture looks cut out.  The blur is the smallest Gaussian that brings the
    new face's fine-to-coarse detail ratio down to the photo's.  With
    ``sharpen``, a face clearly softer than the photo is sharpened towards it
    (:func:`_sharpen`; photos only: in a video the amount would change from
    frame to frame).  Otherwise unchanged."""
    found = _blur_measure(original, new, sel)
    if found is None:
        return new
    want, have, n_luma, w_sel = found
    if sharpen and have * _SHARPER < want:
        return _sharpen(new, n_luma, mask, w_sel, want)
    return soften(new, mask, _blur_sigma(want, have, n_luma, w_sel))


def _blur_measure(
    original: np.ndarray, new: np.ndarray, sel: np.ndarray
) -> tuple[float, float, np.ndarray, np.ndarray] | None:
    """The photo's and the new face's detail ratios (:func:`_sharpness`),
    the new face's luma and the selection, in a window in the middle of the
    face; ``None`` for an empty selection."""
    # blur is even over a face: on a large face a window in its middle says
    # as much as the whole, for a fraction of the cost
    moments = cv2.moments(sel.astype(np.uint8), binaryImage=True)
    if moments["m00"] <= 0:
        return None
    cy, cx = int(moments["m01"] / moments["m00"]), int(moments["m10"] / moments["m00"])
    half = _BLUR_WINDOW // 2
    win = (slice(max(cy - half, 0), cy + half), slice(max(cx - half, 0), cx + half))
    o_luma, n_luma, w_sel = _luma(original[win]), _luma(new[win]), sel[win]
    if w_sel.sum() < 64:
        o_luma, n_luma, w_sel = _luma(original), _luma(new), sel
    return _sharpness(o_luma, w_sel), _sharpness(n_luma, w_sel), n_luma, w_sel


def _blur_sigma(want: float, have: float, n_luma: np.ndarray, w_sel: np.ndarray) -> float:
    """The smallest of :data:`_BLUR_STEPS` that softens the new face to the
    photo's detail ratio ``want`` (the largest when none does), or 0 when it
    is not clearly sharper."""
    if have <= want * _SHARPER:
        return 0.0
    sigma = 0.0
    for sigma in _BLUR_STEPS:
        if _sharpness(cv2.GaussianBlur(n_luma, (0, 0), sigma), w_sel) <= want * _SHARPER:
            break
    return sigma


def soften(new: np.ndarray, mask: np.ndarray, sigma: float) -> np.ndarray:
    """``new`` (float32 RGB) blurred at ``sigma`` under ``mask`` (unchanged at 0)."""
    if sigma <= 0.0:
        return new
    blurred = gaussian_lowpass(new, sigma)
    # a little beyond the mask too, so the face's own outline (the jaw, the
    # hairline) is softened like the rest; the photo there is as soft anyway
    weight = np.clip(gaussian_lowpass(mask, 2.0 * sigma) * 2.0, 0.0, 1.0)
    return new + (blurred - new) * per_channel(weight, new.shape[2])


def _sharpen(new: np.ndarray, n_luma: np.ndarray, mask: np.ndarray, w_sel: np.ndarray, want: float) -> np.ndarray:
    """``new`` sharpened under ``mask`` by the smallest unsharp mask (radius
    :data:`_SHARPEN_SIGMA`, amounts :data:`_SHARPEN_STEPS`) that brings its
    fine-to-coarse detail ratio up towards the photo's ``want``: a face
    resampled from a smaller source, or through the working crop, looks
    waxy beside the photo's own detail."""
    amount = 0.0
    soft = cv2.GaussianBlur(n_luma, (0, 0), _SHARPEN_SIGMA)
    for amount in _SHARPEN_STEPS:
        if _sharpness(n_luma + amount * (n_luma - soft), w_sel) * _SHARPER >= want:
            break
    # on luma alone: sharpening colour would only add coloured fringes
    luma = _luma(new)
    detail = (luma - cv2.GaussianBlur(luma, (0, 0), _SHARPEN_SIGMA)) * (amount * np.clip(mask, 0.0, 1.0))
    return new + per_channel(detail, new.shape[2])


@dataclass(frozen=True)
class DetailPlan:
    """How a video face's detail is matched, measured on one frame of its
    track and reused by the next ones (:mod:`faceweave.compositing.plans`):
    the blur that softens it to the photo's (``blur``, frame pixels; 0: not
    softened), and the step of its grain match (``grain``, towards the
    photo's grain when ``add_grain``, else away from its own detail)."""

    blur: float
    grain: float
    add_grain: bool


def match_detail(
    original: np.ndarray,
    frame: np.ndarray,
    mask: np.ndarray,
    matrix: np.ndarray,
    *,
    sigma: float = 0.6,
    out: np.ndarray | None = None,
    blur_mask: np.ndarray | None = None,
    sharpen: bool = False,
) -> np.ndarray:
    """Match the swapped face's fine detail to the photo's, at full resolution.

    Resampling into and out of the working crop, and a source photo sharper
    or softer than the target, leave the new face with more or less
    pixel-level detail (grain, pores, sensor noise) than the skin around it.
    Under ``mask`` (crop coordinates: the new face's bare skin) the detail
    band (image minus its Gaussian low-pass at ``sigma``) is measured in
    ``frame`` and in ``original``; too much is attenuated, too little is made
    up with the original's own grain.  With ``blur_mask`` (crop
    coordinates: the whole new face, features included) the new face is
    first softened to the photo's own blur where the photo is clearly softer
    (:func:`match_blur`).
    Returns a new frame, or writes into ``out`` (which may be ``frame``
    itself) and returns it."""
    unchanged = frame if out is None else out
    window = _detail_window(frame.shape, mask, blur_mask, matrix)
    if window is None:
        return unchanged
    (x1, y1, x2, y2), m, whole = window
    orig = original[y1:y2, x1:x2].astype(np.float32)
    new = _matched_detail(orig, frame[y1:y2, x1:x2].astype(np.float32), m, whole, sigma=sigma, sharpen=sharpen)
    if new is None:
        return unchanged
    out = frame.copy() if out is None else out
    _put(out, (x1, y1, x2, y2), new)
    return out


def match_detail_planned(
    original: np.ndarray,
    frame: np.ndarray,
    mask: np.ndarray,
    matrix: np.ndarray,
    *,
    blur_mask: np.ndarray,
    plan: DetailPlan | None,
    sigma: float = 0.6,
) -> DetailPlan | None:
    """:func:`match_detail` into ``frame`` (no sharpening: video) with the
    blur and grain step of ``plan`` when given (measured here otherwise);
    returns the plan used, or ``None`` when too little of the face is there
    to measure (nothing is changed then)."""
    # the whole face's mask is for the blur alone: a reused plan that softens
    # nothing warps the detail mask only (one channel instead of two, the same values)
    softens = plan is None or plan.blur > 0.0
    if plan is not None and not softens and _fused_grain(original, frame, mask, matrix, plan, sigma):
        return plan
    window = _detail_window(frame.shape, mask, blur_mask if softens else None, matrix)
    if window is None:
        return None
    (x1, y1, x2, y2), m, whole = window
    sel = (m > 0.5).astype(np.uint8)
    if cv2.countNonZero(sel) < 64:
        return None
    orig = original[y1:y2, x1:x2].astype(np.float32)
    new = frame[y1:y2, x1:x2].astype(np.float32)
    whole_sel = whole is not None and cv2.countNonZero((whole > 0.5).astype(np.uint8)) >= 64
    if plan is None:
        blur = 0.0
        if whole is not None and whole_sel:
            found = _blur_measure(orig, new, whole > 0.5)
            blur = 0.0 if found is None else _blur_sigma(*found)
        new = soften(new, whole, blur) if whole is not None and whole_sel else new
        grain, add_grain = _grain_step(orig, new, m, sel, sigma)
        plan = DetailPlan(blur=blur, grain=grain, add_grain=add_grain)
    elif whole is not None and whole_sel:
        new = soften(new, whole, plan.blur)
    _put_grain_step(frame, (x1, y1), new, orig, m, plan.grain, plan.add_grain, sigma)
    return plan


def _fused_grain(
    original: np.ndarray, frame: np.ndarray, mask: np.ndarray, matrix: np.ndarray, plan: DetailPlan, sigma: float
) -> bool:
    """:func:`match_detail_planned` with a plan that softens nothing, in one
    compiled pass over the frame (:func:`~faceweave.kernels.pixels.detail_grain`:
    the mask warped, the band's low-pass and the step, with no float copy of
    the window); ``True`` when done, ``False`` when the frames are not of the
    kernel's kind (the NumPy steps run then) or too little of the mask lands
    in the frame (nothing is changed then, as those steps would change nothing).
    The values of those steps within one level: the low-pass sums its taps
    in its own order (see the kernel)."""
    if sigma >= HALF_RES_SIGMA or frame.dtype != np.uint8 or frame.ndim != 3 or not frame.flags.c_contiguous:
        return False
    if original.shape != frame.shape or original.dtype != np.uint8:
        return False
    footprint = _mask_footprint(frame.shape, mask, matrix)
    if footprint is None:
        return False
    window, box, inv_roi = footprint
    sign = 1 if plan.add_grain else -1
    taps = cv2.getGaussianKernel(_gaussian_size(sigma), sigma, cv2.CV_32F)
    return detail_grain(original, frame, mask, window, box, inv_roi, taps=taps, step=plan.grain, sign=sign) is not None


def _gaussian_size(sigma: float) -> int:
    """The kernel size ``cv2.GaussianBlur`` takes for a float picture at
    ``sigma`` when given none: ``cvRound(sigma * 8 + 1) | 1``."""
    return int(np.rint(sigma * 8.0 + 1.0)) | 1


def _put_grain_step(
    out: np.ndarray,
    corner: tuple[int, int],
    new: np.ndarray,
    orig: np.ndarray,
    m: np.ndarray,
    c: float,
    add_grain: bool,
    sigma: float,
) -> None:
    """:func:`_add_grain_step` then :func:`_put` (the window's first pixel at
    ``corner``) in one pass over the pixels (:func:`faceweave.kernels.put_detail`),
    to the same values."""
    if c == 0.0:
        put_detail(out, corner, new, m)
        return
    src = orig if add_grain else new
    band = (src, gaussian_lowpass(src, sigma))
    put_detail(out, corner, new, m, band=band, step=c, sign=1 if add_grain else -1)


def _put(out: np.ndarray, box: tuple[int, int, int, int], new: np.ndarray) -> None:
    """Write the float32 window ``new`` into ``out`` at ``box``, rounded to the nearest level."""
    x1, y1, x2, y2 = box
    if out.flags.c_contiguous and out.ndim == 3 and out.dtype == np.uint8:
        put_detail(out, (x1, y1), new)
        return
    new += 0.5
    out[y1:y2, x1:x2] = np.clip(new, 0, 255).astype(np.uint8)


def _matched_detail(
    orig: np.ndarray, new: np.ndarray, m: np.ndarray, whole: np.ndarray | None, *, sigma: float, sharpen: bool
) -> np.ndarray | None:
    """:func:`match_detail` on float32 windows of the photo and the new face
    (``m``: the bare-skin mask there, ``whole``: the whole face's or
    ``None``): the new window (``new`` may be changed in place), or ``None``
    when too little of the mask is there to measure."""
    sel = (m > 0.5).astype(np.uint8)
    if cv2.countNonZero(sel) < 64:
        return None
    if whole is not None and cv2.countNonZero((whole > 0.5).astype(np.uint8)) >= 64:
        new = match_blur(orig, new, whole, whole > 0.5, sharpen=sharpen)
    c, add_grain = _grain_step(orig, new, m, sel, sigma)
    _add_grain_step(new, orig, m, c, add_grain, sigma)
    return new


def _add_grain_step(new: np.ndarray, orig: np.ndarray, m: np.ndarray, c: float, add_grain: bool, sigma: float) -> None:
    """Move ``new``'s detail band (in place) by ``c`` under ``m``: towards
    ``orig``'s grain when ``add_grain``, else away from its own detail."""
    if c == 0.0:
        return
    # (-band) * w added is band * w taken away, exactly
    step = per_channel(c * m, new.shape[2])
    if add_grain:
        new += _band(orig, sigma) * step
    else:
        new -= _band(new, sigma) * step


def restore_detail(
    original: np.ndarray, frame: np.ndarray, mask: np.ndarray, matrix: np.ndarray, *, sigma: float, out: np.ndarray
) -> np.ndarray:
    """Give a new face that is softer than the photo the photo's own detail at
    the scale of skin texture (``sigma``: frame pixels, a fraction of the face
    size), in ``out``: a source face smaller than the target, or resampled
    through the working crop, looks waxy beside the photo.  Under ``mask``
    (crop coordinates: the new face's bare skin) the detail band (image minus
    its low-pass at ``sigma``) of the target ``original`` is added, just
    enough that the band's energy matches the original's; a new face as
    detailed as the photo, or more, is left as it is.  Returns ``out``."""
    window = _detail_window(frame.shape, mask, None, matrix)
    if window is None:
        return out
    (x1, y1, x2, y2), m, _ = window
    orig = original[y1:y2, x1:x2].astype(np.float32)
    new = _restored_detail(orig, frame[y1:y2, x1:x2].astype(np.float32), m, sigma=sigma)
    if new is not None:
        _put(out, (x1, y1, x2, y2), new)
    return out


def _restored_detail(orig: np.ndarray, new: np.ndarray, m: np.ndarray, *, sigma: float) -> np.ndarray | None:
    """:func:`restore_detail` on float32 windows: ``new`` with the photo's
    texture band added (in place), or ``None`` when nothing is added."""
    sel = (m > 0.5).astype(np.uint8)
    if cv2.countNonZero(sel) < 64:
        return None
    # the texture is the photo's luma band, added to the three channels
    # alike: the skin's fine grain of light and shade, not its colour blotches
    band = _band(_luma(orig), sigma)
    c, add = _grain_step(orig, new, m, sel, sigma, orig_band=band)
    if not add or c <= 0.0:
        return None
    # the band of (new + c * band) is less than c times the band: c may pass 1; at most twice the photo's
    new += per_channel(band * (min(c, 2.0) * m), new.shape[2])
    return new


#: the face width (pixels) at which :func:`sharpen_to_photo` compares detail,
#: the share of the photo's detail it makes up to, and the amounts it tries
CANONICAL_FACE = 200.0
DETAIL_GOAL = 0.95
_UNSHARP_STEPS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


def sharpen_to_photo(
    original: np.ndarray, frame: np.ndarray, mask: np.ndarray, matrix: np.ndarray, *, face_width: float, out: np.ndarray
) -> np.ndarray:
    """Sharpen a new face that is softer than the photo's face, at the scale
    of the face, in ``out``: the detail of a face is judged relative to its
    size (a 1500 px face shows pores where a 200 px face shows wrinkles), so
    both faces are compared at :data:`CANONICAL_FACE` pixels wide, by the
    energy of a 3x3 Laplacian under ``mask`` (crop coordinates: the whole new
    face).  Where the new face has less than :data:`DETAIL_GOAL` of the
    photo's, the smallest unsharp mask on luma (radius: one pixel of that
    scale) that makes it up is applied under ``mask``.  Returns ``out``."""
    window = _detail_window(frame.shape, mask, None, matrix)
    if window is None:
        return out
    (x1, y1, x2, y2), m, _ = window
    orig = original[y1:y2, x1:x2].astype(np.float32)
    new = _sharpened_to_photo(orig, frame[y1:y2, x1:x2].astype(np.float32), m, face_width=face_width)
    if new is not None:
        _put(out, (x1, y1, x2, y2), new)
    return out


def _sharpened_to_photo(orig: np.ndarray, new: np.ndarray, m: np.ndarray, *, face_width: float) -> np.ndarray | None:
    """:func:`sharpen_to_photo` on float32 windows: ``new`` sharpened (in
    place), or ``None`` when it is as detailed as the photo already."""
    scale = min(1.0, CANONICAL_FACE / max(face_width, 1.0))
    sel = _small(m, scale) > 0.9
    if cv2.countNonZero(sel.astype(np.uint8)) < 64:
        return None
    luma = _luma(new)
    want = _laplacian_energy(_small(_luma(orig), scale), sel)
    have = _laplacian_energy(_small(luma, scale), sel)
    if have >= DETAIL_GOAL**2 * want:
        return None
    detail = luma - gaussian_lowpass(luma, max(1.0, 1.0 / scale))
    # resizing is linear: the sharpened face at the compared scale is the
    # small face plus the amount times the small detail
    small_luma, small_detail = _small(luma, scale), _small(detail, scale)
    amount = _UNSHARP_STEPS[-1]
    for amount in _UNSHARP_STEPS:
        if _laplacian_energy(small_luma + amount * small_detail, sel) >= DETAIL_GOAL**2 * want:
            break
    new += per_channel(detail * (amount * np.clip(m, 0.0, 1.0)), new.shape[2])
    return new


def refine_photo_face(
    original: np.ndarray,
    frame: np.ndarray,
    detail: np.ndarray,
    face: np.ndarray,
    matrix: np.ndarray,
    *,
    face_width: float,
    texture_sigma: float | None,
    out: np.ndarray,
) -> np.ndarray:
    """A photo's new face given the photo's detail, in ``out``, in one pass
    over one window: :func:`match_detail` (with ``blur_mask=face`` and
    ``sharpen``), then :func:`restore_detail` at ``texture_sigma`` (when
    given), then :func:`sharpen_to_photo`, as those three in turn would,
    but converted to float and rounded back once instead of three times,
    and with the blur matching over the whole face's box rather than cut
    at the bare skin's.
    ``detail``: the new face's bare skin, ``face``: the whole new face, both
    in crop coordinates.  Returns ``out``."""
    window = _face_window(frame.shape, detail, face, matrix)
    if window is None:
        return out
    box, m, whole = window
    x1, y1, x2, y2 = box
    orig = original[y1:y2, x1:x2].astype(np.float32)
    new = frame[y1:y2, x1:x2].astype(np.float32)
    # over the whole face's box: the single steps cut the blur matching (and
    # the sharpening in it) at the bare skin's box, which left a straight edge
    # where the face reaches beyond it (brows, jaw)
    matched = _matched_detail(orig, new, m, whole, sigma=0.6, sharpen=True)
    if matched is not None:
        new = matched
    restored = None if texture_sigma is None else _restored_detail(orig, new, m, sigma=texture_sigma)
    sharpened = _sharpened_to_photo(orig, new, whole, face_width=face_width)
    if matched is not None or restored is not None or sharpened is not None:
        _put(out, box, new)
    return out


def _face_window(
    shape: tuple[int, ...], detail: np.ndarray, face: np.ndarray, matrix: np.ndarray
) -> tuple[tuple[int, int, int, int], np.ndarray, np.ndarray] | None:
    """The frame box ``(x1, y1, x2, y2)`` under both crop masks (warped in
    one go), and the two masks there; ``None`` when too little of them
    lands in the frame."""
    footprint = _mask_footprint(shape, np.maximum(detail, face), matrix)
    if footprint is None:
        return None
    (cx1, cy1, cw, ch), (x1, y1, x2, y2), inv_roi = footprint
    window = (slice(cy1, cy1 + ch), slice(cx1, cx1 + cw))
    masks_in = cv2.merge([detail[window].astype(np.float32), face[window].astype(np.float32)])
    warped = cv2.warpAffine(masks_in, inv_roi, (x2 - x1, y2 - y1), flags=cv2.INTER_LINEAR, borderValue=(0.0,))
    # (a reduction over a last axis of two is slow in NumPy: the two planes instead)
    bx1, by1, bw, bh = cv2.boundingRect((np.maximum(warped[..., 0], warped[..., 1]) > 0.01).astype(np.uint8))
    if bw * bh < 64:
        return None
    cut = (slice(by1, by1 + bh), slice(bx1, bx1 + bw))
    box = (x1 + bx1, y1 + by1, x1 + bx1 + bw, y1 + by1 + bh)
    return box, np.ascontiguousarray(warped[cut][..., 0]), np.ascontiguousarray(warped[cut][..., 1])


def _small(image: np.ndarray, scale: float) -> np.ndarray:
    if scale >= 1.0:
        return image
    h, w = image.shape[:2]
    size = (max(1, int(round(w * scale))), max(1, int(round(h * scale))))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)


def _laplacian_energy(luma: np.ndarray, sel: np.ndarray) -> float:
    return float(np.mean(cv2.Laplacian(luma, cv2.CV_32F, ksize=3)[sel] ** 2))


def _detail_window(
    shape: tuple[int, ...], mask: np.ndarray, blur_mask: np.ndarray | None, matrix: np.ndarray
) -> tuple[tuple[int, int, int, int], np.ndarray, np.ndarray | None] | None:
    """Where in the frame the detail is matched: the box ``(x1, y1, x2, y2)``
    of the warped ``mask`` (only the footprint of its bounding box is warped),
    the mask there and, with ``blur_mask``, that mask there; ``None`` when
    too little of it lands in the frame."""
    footprint = _mask_footprint(shape, mask, matrix)
    if footprint is None:
        return None
    (cx1, cy1, cw, ch), (x1, y1, x2, y2), inv_roi = footprint
    # both masks in one warp (two channels)
    window = (slice(cy1, cy1 + ch), slice(cx1, cx1 + cw))
    masks_in: np.ndarray = (
        np.ascontiguousarray(mask[window], np.float32)
        if blur_mask is None
        else cv2.merge([mask[window].astype(np.float32), blur_mask[window].astype(np.float32)])
    )
    warped = cv2.warpAffine(masks_in, inv_roi, (x2 - x1, y2 - y1), flags=cv2.INTER_LINEAR, borderValue=(0.0,))
    m = warped if blur_mask is None else warped[..., 0]
    bx1, by1, bw, bh = cv2.boundingRect((m > 0.01).astype(np.uint8))
    if bw * bh < 64:
        return None
    bx2, by2 = bx1 + bw, by1 + bh
    whole = None if blur_mask is None else np.ascontiguousarray(warped[by1:by2, bx1:bx2, 1])
    box = (x1 + bx1, y1 + by1, x1 + bx2, y1 + by2)
    return box, np.ascontiguousarray(m[by1:by2, bx1:bx2]), whole


def _mask_footprint(
    shape: tuple[int, ...], mask: np.ndarray, matrix: np.ndarray
) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int], np.ndarray] | None:
    """Of a crop ``mask`` whose values over 0.01 matter: their box in the
    crop ``(x, y, w, h)``, the frame box ``(x1, y1, x2, y2)`` it lands on
    (``matrix``: frame -> crop) and the ``(2, 3)`` matrix taking the one to
    the other; ``None`` when there is none or it lands outside the frame."""
    cx1, cy1, cw, ch = cv2.boundingRect((mask > 0.01).astype(np.uint8))
    if cw * ch == 0:
        return None
    sub = matrix.astype(np.float64).copy()
    sub[:, 2] -= (cx1, cy1)
    x1, y1, x2, y2, inv_roi = _crop_roi(shape, (cw, ch), sub)
    if x2 <= x1 or y2 <= y1:
        return None
    return (cx1, cy1, cw, ch), (x1, y1, x2, y2), inv_roi


def _band(x: np.ndarray, sigma: float) -> np.ndarray:
    """The detail band: ``x`` minus its Gaussian low-pass at ``sigma``
    (:func:`~faceweave.compositing.resample.gaussian_lowpass`)."""
    return x - gaussian_lowpass(x, sigma)


def _grain_step(
    orig: np.ndarray,
    new: np.ndarray,
    m: np.ndarray,
    sel: np.ndarray,
    sigma: float,
    *,
    orig_band: np.ndarray | None = None,
) -> tuple[float, bool]:
    """How far to move the new face's detail band, and whether towards the
    original's grain (``True``) or away from its own detail, so that the band
    energy under ``sel`` matches the original's.  Measured on luma: the band
    is linear, so the band of the luma is the luma of the band, and so is the
    luma of a band times the mask.  The result's band is ``band_n + c *
    band(direction)``, a quadratic in ``c``.  ``orig_band``: the original's
    luma band when the caller has it already."""

    def mean_under(x: np.ndarray) -> float:
        return float(cv2.mean(x, mask=sel)[0])

    bo_luma = _band(_luma(orig), sigma) if orig_band is None else orig_band
    bn_luma = _band(_luma(new), sigma)
    e_o = mean_under(bo_luma * bo_luma)
    e_n = mean_under(bn_luma * bn_luma)
    add_grain = e_n < e_o
    bd = _band(bo_luma * m if add_grain else bn_luma * -m, sigma)
    qa, qb, qc = mean_under(bd * bd), 2.0 * mean_under(bn_luma * bd), e_n - e_o
    return (0.0 if qa <= 1e-9 else _smallest_step(qa, qb, qc)), add_grain


#: offsets (crop pixels) below which the frame is not warped
_STILL = 0.1


def warp_frame(frame: np.ndarray, offsets: np.ndarray, matrix: np.ndarray, *, out: np.ndarray) -> None:
    """Apply a crop's reshaping warp to the frame at the frame's own resolution.

    ``offsets`` ``(S, S, 2)`` float32: the crop at ``q`` shows the crop at
    ``q + offsets[q]`` (crop pixels); ``matrix`` the ``(2, 3)`` frame->crop
    transform.  Writes into ``out`` (which may be ``frame``) only where the
    offsets move something, so what does not move keeps its exact pixels
    instead of a copy resampled through the working crop.  The offsets are
    smooth: they are carried to the frame at half its resolution."""
    dx, dy = offsets[..., 0], offsets[..., 1]
    moving = ((dx > _STILL) | (dx < -_STILL) | (dy > _STILL) | (dy < -_STILL)).astype(np.uint8)
    bx, by, bw, bh = cv2.boundingRect(moving)
    if bw == 0 or bh == 0:
        return
    sub = matrix.astype(np.float64).copy()
    sub[:, 2] -= (bx, by)
    x1, y1, x2, y2, inv_roi = _crop_roi(frame.shape, (bw, bh), sub)
    if x2 <= x1 or y2 <= y1:
        return
    # crop offsets -> frame offsets (the inverse of the matrix's linear part), at half size
    linear = np.linalg.inv(matrix[:, :2].astype(np.float64))
    window = (np.ascontiguousarray(offsets[by : by + bh, bx : bx + bw]).reshape(-1, 2) @ linear.T).astype(np.float32)
    half = inv_roi / 2.0
    half[:, 2] -= 0.25  # pixel centres of the half-size grid
    size = (x2 - x1, y2 - y1)
    small = cv2.warpAffine(
        window.reshape(bh, bw, 2), half, ((size[0] + 1) // 2, (size[1] + 1) // 2), flags=cv2.INTER_LINEAR
    )
    shift = np.asarray(cv2.resize(small, size, interpolation=cv2.INTER_LINEAR), np.float32)
    shift[..., 0] += np.arange(x1, x2, dtype=np.float32)[None, :]
    shift[..., 1] += np.arange(y1, y2, dtype=np.float32)[:, None]
    fixed, fraction = cv2.convertMaps(shift, None, cv2.CV_16SC2)  # type: ignore[call-overload]
    out[y1:y2, x1:x2] = cv2.remap(frame, fixed, fraction, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def paste_back(
    frame: np.ndarray, crop: np.ndarray, mask: np.ndarray, matrix: np.ndarray, *, out: np.ndarray | None = None
) -> np.ndarray:
    """Put a working crop back into the frame.

    ``matrix`` is the ``(2, 3)`` frame->crop transform used to cut the crop;
    ``mask`` ``(h, w)`` in ``[0, 1]`` says where the crop replaces the frame.
    Only the frame's region under the mask is touched; returns a new frame,
    or writes into ``out`` (which may be ``frame`` itself) and returns it.
    """
    bx1, by1, bw, bh = cv2.boundingRect((mask > 1e-3).astype(np.uint8))
    if out is None:
        out = frame.copy()
    elif out is not frame:
        np.copyto(out, frame)
    if bw == 0 or bh == 0:
        return out
    # the footprint of the mask's bounding box, not of the whole crop
    bx2, by2 = bx1 + bw, by1 + bh
    sub = matrix.astype(np.float64).copy()
    sub[:, 2] -= (bx1, by1)
    x1, y1, x2, y2, inv_roi = _crop_roi(frame.shape, (int(bx2 - bx1), int(by2 - by1)), sub)
    if x2 <= x1 or y2 <= y1:
        return out
    window, box = (bx1, by1, bw, bh), (x1, y1, x2, y2)
    if out.ndim == 3 and out.dtype == np.uint8 and crop.dtype == np.uint8 and out.flags.c_contiguous:
        paste_warped(out, crop, mask, window, box, inv_roi)  # the frame's pixels are out's by now
    else:
        reference.paste_warped(out, crop, mask, window, box, inv_roi)
    return out
