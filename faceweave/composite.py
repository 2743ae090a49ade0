"""Composite a swapper's output into the target crop: masks, colour,
multi-band blend, and the region to paste back.  Pure functions; sizes are
relative to the face size so results do not depend on the working size."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from faceweave import color, masks
from faceweave.blend import laplacian_blend
from faceweave.geometry import topology as topo
from faceweave.options import MaskOptions
from faceweave.swappers.base import AlignedCrop, SwapOutput

#: sizes as fractions of the face size: erosion and feather of the face edge,
#: length of the fade from the top of the forehead, scale of the shading.
#: (No erosion of the face edge: the side inset and the trust ramp on the
#: coverage keep it off the mesh's very edge; an erosion also widened the
#: line between the lips where the target shows, which cost identity.)
EDGE_ERODE = 0.0
EDGE_FEATHER = 0.015
FOREHEAD_FADE = 0.08
SHADING_SIGMA = 0.12
#: limit on the per-channel contrast change of the colour transfer
MAX_CONTRAST_GAIN = 1.6
#: fraction by which the swapped region is narrowed at the sides of the face
SIDE_INSET = 0.06
#: the rim of the face where hair hangs (and is looked for by hue and
#: texture): outside the outline scaled by this, for the source (whose hair
#: must not travel) and the target (whose hair must stay in front)
SOURCE_HAIR_RIM = 0.65
TARGET_HAIR_RIM = 0.75
#: covered parts of the source face that reach its edge (hair coming in from
#: outside) are grown by this much, so the dark rims of strands and the gaps
#: between them do not show as streaks
SOURCE_HAIR_GROW = 0.025
#: colour tolerance (robust spreads) of the occluder test in the middle of the target face
CENTRE_TOLERANCE = 6.0
#: the same test in the middle of the source face, tighter: a strand of blond
#: hair across a cheek is skin-light but far from skin in hue
SOURCE_CENTRE_TOLERANCE = 4.0
#: a face cover (mask, scarf) shows lips no redder than this (CIELAB a*) over
#: the lower face's colour, and a lower face at least this light
COVER_LIP_CONTRAST = 3.0
COVER_MIN_LIGHTNESS = 55.0
#: ... and differs from the middle of the forehead by at least this much (L or a*b*)
COVER_MIN_DIFFERENCE = 8.0
#: mesh point in the middle of the forehead
FOREHEAD_CENTRE = 151
#: a difference in side lighting (lightness units) between source and target
#: that makes the shading transfer complete
SIDE_LIGHT_SPAN = 20.0
#: glasses: the middle part of the gap between the inner eye corners that is
#: sampled for the bridge, and the part of one line across it that must be dark
GLASSES_SPAN = 0.6
GLASSES_COVER = 0.85
#: bands of the multi-band blend
BLEND_LEVELS = 5
#: non-skin spots inside the face that touch nothing outside it and are
#: smaller than this fraction of the face's area are not occluders
ISLAND_MAX = 0.03


@dataclass(frozen=True, eq=False)
class Composite:
    """``pixels`` ``(S, S, 3)`` uint8 result crop; ``mask`` the blend mask;
    ``paste`` ``(S, S)`` float32: where the crop replaces the frame;
    ``detail`` ``(S, S)`` float32: the bare skin of the new face, where the
    target's own fine grain may be added back at full resolution."""

    pixels: np.ndarray
    mask: np.ndarray
    paste: np.ndarray
    detail: np.ndarray


def _face_axis(mesh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The top of the forehead and the unit vector down the face (towards
    the chin), both ``(2,)`` float32."""
    top, chin = mesh[topo.FOREHEAD_TOP, :2].astype(np.float32), mesh[topo.CHIN, :2].astype(np.float32)
    return top, (chin - top) / (np.linalg.norm(chin - top) + 1e-6)


def _along(size: tuple[int, int], origin: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """``(H, W)`` float32: each pixel's coordinate along ``direction`` from ``origin``."""
    w, h = size
    across_x = (np.arange(w, dtype=np.float32) - np.float32(origin[0])) * np.float32(direction[0])
    across_y = (np.arange(h, dtype=np.float32) - np.float32(origin[1])) * np.float32(direction[1])
    return across_y[:, None] + across_x[None, :]


def _above(size: tuple[int, int], mesh: np.ndarray, points: np.ndarray, *, lowest: bool, soft: float) -> np.ndarray:
    """1 above the lowest (or highest) of ``points`` along the face's own
    vertical axis, 0 below, with a ``soft`` pixel ramp."""
    top, down = _face_axis(mesh)
    along = (points.astype(np.float32) - top) @ down
    level = float(along.max() if lowest else along.min())
    t = (_along(size, top, down) - level) / max(soft, 1e-3)
    return np.clip(0.5 - t, 0.0, 1.0).astype(np.float32)


def forehead_fade(size: tuple[int, int], mesh: np.ndarray, *, length: float) -> np.ndarray:
    """0 above the mesh's top (landmark 10), rising smoothly to 1 over
    ``length`` pixels down the face's own vertical axis: the forehead is cut
    where hair usually starts, with no line."""
    top, down = _face_axis(mesh)
    t = np.clip(_along(size, top, down) / max(length, 1e-3), 0.0, 1.0)
    return (t * t * (3.0 - 2.0 * t)).astype(np.float32)


def below_nose(size: tuple[int, int], mesh: np.ndarray, *, soft: float) -> np.ndarray:
    """The moustache, mouth, beard and chin: 1 below the base of the nose
    along the face's own vertical axis and within the mouth's width widened
    by half on each side, 0 elsewhere, with a ``soft`` pixel ramp.  (Hair
    hanging past the cheeks and jaw is outside it.)"""
    _, down = _face_axis(mesh)
    base = mesh[topo.NOSE_BASE, :2].astype(np.float32)
    across = np.array([-down[1], down[0]], np.float32)
    left, right = mesh[topo.MOUTH_CORNER_RIGHT, :2], mesh[topo.MOUTH_CORNER_LEFT, :2]
    centre = (left + right) / 2.0
    half_width = float(np.linalg.norm(right - left)) * 0.5 * 2.0
    soft = max(soft, 1e-3)
    t = _along(size, base, down) / soft + 0.5
    u = (half_width - np.abs(_along(size, centre, across))) / soft + 0.5
    return (np.clip(t, 0.0, 1.0) * np.clip(u, 0.0, 1.0)).astype(np.float32)


def lower_face_cover(lab: np.ndarray, mesh: np.ndarray, skin: np.ndarray, face_size: float) -> np.ndarray | None:
    """Where a face mask or a scarf covers the lower face: ``[0, 1]``
    float32 over the face below the eyes, or ``None`` when the lower face is
    bare (almost always).

    A cover is recognised by two things a bare face does not show together:
    the lips are no redder than the skin around them (on a mask, the mesh's
    "lips" are mask too), and that lower face is light (a bearded chin with
    hidden lips is dark).  The cover is then the part of the face below the
    eyes whose colour is close to the lower face's own."""
    size = (lab.shape[1], lab.shape[0])
    lips = masks.polygon_mask(size, mesh[topo.lips_outer(), :2])
    lower = skin * below_nose(size, mesh, soft=0.05 * face_size)
    if lips.sum() < 8 or lower.sum() < 32:
        return None
    centre, spread = masks.skin_statistics(lab, lower)
    lip_red = float(np.median(lab[lips > 0.5][:, 1]))
    if lip_red - float(centre[1]) > COVER_LIP_CONTRAST or float(centre[0]) < COVER_MIN_LIGHTNESS:
        return None
    # and it is not the skin: compared with the middle of the forehead, the
    # lower face is clearly lighter or of another colour
    forehead = np.zeros(lab.shape[:2], np.uint8)
    cx, cy = (int(round(v)) for v in mesh[FOREHEAD_CENTRE, :2])
    cv2.circle(forehead, (cx, cy), max(2, int(round(0.06 * face_size))), 1, -1)
    if forehead.sum() < 8:
        return None
    ref = np.median(lab[forehead > 0], axis=0)
    lighter = float(centre[0] - ref[0])
    chroma = float(np.hypot(centre[1] - ref[1], centre[2] - ref[2]))
    if lighter < COVER_MIN_DIFFERENCE and chroma < COVER_MIN_DIFFERENCE:
        return None
    zone = 1.0 - above_eyes(size, mesh, soft=0.05 * face_size)
    near = masks.skin_likelihood(lab, centre, spread)
    return masks.feather(near * zone, erode=0, blur=0.02 * face_size)


def above_eyes(size: tuple[int, int], mesh: np.ndarray, *, soft: float) -> np.ndarray:
    """1 above the lowest point of the eyes along the face's own vertical
    axis, 0 below, with a ``soft`` pixel ramp."""
    return _above(size, mesh, mesh[np.concatenate([topo.right_eye(), topo.left_eye()]), :2], lowest=True, soft=soft)


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


def inner_face(size: tuple[int, int], mesh: np.ndarray, face_size: float) -> np.ndarray:
    """The face outline narrowed by :data:`SIDE_INSET` towards its vertical
    axis (the sides of a face are where other things show), soft-edged."""
    oval = mesh[topo.face_oval(), :2].astype(np.float32)
    centre = oval.mean(axis=0)
    _, down = _face_axis(mesh)
    across = np.array([-down[1], down[0]], np.float32)
    rel = oval - centre
    along_across = rel @ across
    narrowed = oval - np.outer(along_across * SIDE_INSET, across)
    return masks.feather(masks.polygon_mask(size, narrowed), erode=0, blur=0.01 * face_size)


def face_rim(size: tuple[int, int], mesh: np.ndarray, face_size: float, *, inner_scale: float = 0.75) -> np.ndarray:
    """Where hair falls over a face: the outer band (outside the face outline
    shrunk by ``inner_scale`` about its centre) and the forehead above the
    brows (bangs); 1 there, 0 elsewhere, soft-edged."""
    oval = mesh[topo.face_oval(), :2].astype(np.float32)
    centre = oval.mean(axis=0)
    inner = masks.polygon_mask(size, centre + (oval - centre) * inner_scale)
    rim = 1.0 - masks.feather(inner, erode=0, blur=0.03 * face_size)
    return np.maximum(rim, above_brows(size, mesh, soft=0.03 * face_size)).astype(np.float32)


def above_brows(size: tuple[int, int], mesh: np.ndarray, *, soft: float) -> np.ndarray:
    """1 above the highest point of the eyebrows along the face's own
    vertical axis, 0 below, with a ``soft`` pixel ramp."""
    brows = np.concatenate([topo.right_eyebrow(), topo.left_eyebrow()])
    return _above(size, mesh, mesh[brows, :2], lowest=False, soft=soft)


def darker_than_skin(
    lab: np.ndarray, region: np.ndarray, stats: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """Soft ``[0, 1]``: pixels clearly darker than the skin under ``region``
    (beard, moustache, stubble shadow), 0 for skin and anything lighter.
    ``stats``: the region's :func:`masks.skin_statistics`, when known."""
    centre, spread = stats if stats is not None else masks.skin_statistics(lab, region)
    return np.clip((centre[0] - lab[..., 0]) / spread[0] - 0.5, 0.0, 1.0).astype(np.float32)


def source_clean_map(crop: AlignedCrop) -> np.ndarray:
    """``(S, S)`` float32 in ``[0, 1]``: where the source crop shows its own
    bare face.  Low over hair at the rim of the face and over the forehead,
    and over background at its very edge; the middle of the face, the eyes,
    brows, lips and a beard (darker than the skin, below the nose) count as
    clean.  Covered parts that reach the edge of the face (hair coming in
    from outside) are grown by :data:`SOURCE_HAIR_GROW`.  Built at half
    resolution (it is smooth) and resized."""
    full = crop.size
    size, fs = (full[0] // 2, full[1] // 2), crop.face_size / 2.0
    mesh = crop.mesh.copy()
    mesh[:, :2] = (mesh[:, :2] + 0.5) / 2.0 - 0.5
    lab = color.to_lab(_half(crop.pixels))
    region = skin_region(size, mesh, fs)
    rim = face_rim(size, mesh, fs, inner_scale=SOURCE_HAIR_RIM)
    centre, spread = masks.skin_statistics(lab, region)
    distance = masks.skin_distance(lab, centre, spread)
    free = masks.occluder_free(lab, region, face_size=fs, hair_zone=rim, distance=distance)
    dark = darker_than_skin(lab, region, (centre, spread))
    beard = below_nose(size, mesh, soft=0.05 * fs) * dark
    # the middle of the source face is trusted unless its colour is far from
    # skin (its shadows are not occluders, a strand of hair across the cheek
    # is); the eyes, brows and lips are kept, but at the rim only where they
    # are darker than skin (a brow's tail, not the hair beside it)
    middle = (1.0 - rim) * masks.likelihood_from_distance(distance, SOURCE_CENTRE_TOLERANCE)
    features = masks.feature_mask(size, mesh, grow=0.02 * fs) * np.maximum(1.0 - rim, dark)
    keep = np.maximum(np.maximum(features, beard), middle)
    # the mesh outline runs along the very edge of the face, where background,
    # ears or hair show in the source: only the face well inside it is trusted
    inside = masks.feather(masks.polygon_mask(size, mesh[topo.face_oval()]), erode=0.0235 * fs, blur=0.015 * fs)
    bare = np.maximum(free, keep)
    if ISLAND_MAX > 0:
        bare = _without_islands(bare, mesh, fs)
    r = SOURCE_HAIR_GROW * fs
    if r > 0:
        # hair comes in from outside the face: the covered parts that reach
        # the edge of the face are grown, so a strand's own dark rim and the
        # gaps between strands go with it (isolated specks are left alone)
        edge = 1 - masks.polygon_mask(size, mesh[topo.face_oval()]).astype(np.uint8)
        hair = masks.edge_connected((bare < 0.5).astype(np.uint8), edge)
        k = int(round(r)) * 2 + 1
        hair = cv2.dilate(hair, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
        bare = np.minimum(bare, 1.0 - hair.astype(np.float32))
    clean = (bare * inside).astype(np.float32)
    return cv2.resize(clean, full, interpolation=cv2.INTER_LINEAR)


def _without_islands(skin: np.ndarray, mesh: np.ndarray, face_size: float) -> np.ndarray:
    """``skin`` (soft, 1 = bare skin) with small non-skin islands inside the
    face cleared.  Hair, hands and microphones come in from beyond the face;
    small dark spots that touch nothing outside it are the face's own
    (nostrils, eyeliner wings, eye corners, moles) and go with the source."""
    size = (skin.shape[1], skin.shape[0])
    edge = 1 - masks.polygon_mask(size, mesh[topo.face_oval()]).astype(np.uint8)
    covered = ((skin < 0.5) & (edge == 0)).astype(np.uint8)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(covered, connectivity=8)
    if n <= 1:
        return skin
    reaching = masks.edge_connected(covered, edge)
    small = stats[:, cv2.CC_STAT_AREA] < ISLAND_MAX * face_size * face_size
    small[0] = False
    islands = small[labels] & (reaching == 0)
    if not islands.any():
        return skin
    k = max(3, int(round(0.02 * face_size)) * 2 + 1)
    islands = cv2.dilate(islands.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    return np.maximum(skin, islands.astype(np.float32))


def wears_glasses(size: tuple[int, int], mesh: np.ndarray, frames: np.ndarray, face_size: float) -> bool:
    """Whether a thin dark bar runs across the nose bridge between the eyes,
    as the bridge of a pair of glasses does.

    Lines across the face are sampled at several heights around the top of
    the nose bridge, over the middle :data:`GLASSES_SPAN` of the gap between
    the inner eye corners; glasses cover nearly all of one such line with
    ``frames``.  Frown lines and wrinkles run along the face or are short,
    so they cover only part of every line."""
    del size  # the sample points are clipped to ``frames`` itself
    _, down = _face_axis(mesh)
    across = np.array([-down[1], down[0]], np.float32)
    gap = abs(float((mesh[topo.LEFT_EYE_INNER, :2] - mesh[topo.RIGHT_EYE_INNER, :2]) @ across))
    t = np.linspace(-0.5, 0.5, 24, dtype=np.float32) * gap * GLASSES_SPAN
    levels = np.linspace(-0.10, 0.02, 9, dtype=np.float32) * face_size
    slack = np.linspace(-0.015, 0.015, 5, dtype=np.float32) * face_size
    bridge = mesh[topo.NOSE_BRIDGE_TOP, :2].astype(np.float32)
    # (levels, slack, samples, 2) points; a bar counts where it is dark within the slack
    pts = (
        bridge
        + levels[:, None, None, None] * down
        + slack[None, :, None, None] * down
        + t[None, None, :, None] * across
    )
    h, w = frames.shape
    xi = np.clip(np.round(pts[..., 0]).astype(int), 0, w - 1)
    yi = np.clip(np.round(pts[..., 1]).astype(int), 0, h - 1)
    dark = frames[yi, xi].max(axis=1) > 0.5  # (levels, samples)
    return bool(dark.mean(axis=1).max() >= GLASSES_COVER)


def skin_region(size: tuple[int, int], mesh: np.ndarray, face_size: float) -> np.ndarray:
    """Reliable bare skin of a face: inside the outline, away from its edge,
    eyes, brows, lips and the top of the forehead.  ``{0, 1}`` float32."""
    outline = mesh[topo.face_oval(), :2].astype(np.float32)
    centre = outline.mean(axis=0)
    radius = np.linalg.norm(outline - centre, axis=1, keepdims=True)
    # the outline moved inwards by 6 % of the face size (a cheap erosion)
    inset = centre + (outline - centre) * np.clip(1.0 - 0.06 * face_size / np.maximum(radius, 1e-6), 0.0, 1.0)
    oval = masks.polygon_mask(size, inset)
    features = masks.feature_mask(size, mesh, grow=0.04 * face_size)
    top = forehead_fade(size, mesh, length=0.25 * face_size) > 0.99
    return (oval * (1.0 - features) * top).astype(np.float32)


def skin_colour(crop: AlignedCrop, weight: np.ndarray | None = None) -> color.SkinColour:
    """The colour of a face's bare skin (:func:`skin_region`) in a crop,
    optionally weighted by a ``(S, S)`` map in ``[0, 1]`` (a source's clean
    map: low under hair and hands)."""
    region = skin_region(crop.size, crop.mesh, crop.face_size)
    if weight is not None:
        region = region * weight
    lab = color.to_lab(crop.pixels)
    # only skin-coloured pixels count: a strand of hair or a hand in the
    # region would pull the mean
    centre, spread = masks.skin_statistics(lab, region)
    region = region * masks.skin_likelihood(lab, centre, spread, tolerance=CENTRE_TOLERANCE)
    mean, std = color.masked_stats(lab, region)
    return color.SkinColour(mean=mean, std=std)


def _half(image: np.ndarray) -> np.ndarray:
    return cv2.resize(image, (image.shape[1] // 2, image.shape[0] // 2), interpolation=cv2.INTER_AREA)


def _upsampled(half: np.ndarray, full: tuple[int, int], box: tuple[int, int, int, int]) -> np.ndarray:
    """The window ``box = (x0, y0, x1, y1)`` of ``cv2.resize(half, full)``
    (a map made at half resolution, brought back to the crop's ``full =
    (W, H)``), without resizing the rest."""
    x0, y0, x1, y1 = box
    sx, sy = half.shape[1] / full[0], half.shape[0] / full[1]
    # window pixel (u, v) is crop pixel (x0 + u, y0 + v), which resize samples at (x + 0.5) * s - 0.5
    m = np.array([[sx, 0.0, (x0 + 0.5) * sx - 0.5], [0.0, sy, (y0 + 0.5) * sy - 0.5]], np.float64)
    return cv2.warpAffine(
        half, m, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE
    )


def composite(  # noqa: C901 - to be split into steps (issue 14)
    target: AlignedCrop,
    out: SwapOutput,
    *,
    mask_options: MaskOptions,
    shading: float,
    person_mask: np.ndarray | None = None,
    colour: color.ColourMatch | None = None,
    hands_mask: np.ndarray | None = None,
) -> Composite:
    """Blend ``out.face`` into ``out.background`` and say where to paste.

    Masks are smooth, so they are built at half resolution and resized;
    colour and the multi-band blend run at full resolution.  ``colour``: a
    fixed skin-colour mapping (video holds one per face over a shot);
    without it the mapping is measured on this crop.  ``hands_mask``: ``(S,
    S)`` in ``[0, 1]``, hands in front of the face; they keep the target
    crop's own pixels (not the reshaped ones) and are left out of the paste
    mask, so the photo's own pixels show there."""
    full = target.size
    behind = out.background
    if hands_mask is not None:
        # hands in front of the face stay in front, and exactly where they
        # are: the reshaping warp moves only the face behind them
        hold = np.clip(hands_mask, 0.0, 1.0)
        mixed = out.background * (1.0 - hold[..., None]) + target.pixels * hold[..., None]
        behind = np.clip(mixed + 0.5, 0, 255).astype(np.uint8)
        person_mask = 1.0 - hold if person_mask is None else np.minimum(person_mask, 1.0 - hold)
    face_lab_h = color.to_lab(_half(out.face))
    bg_lab_h = color.to_lab(_half(behind))

    # -- masks at half resolution -------------------------------------------------
    size = (full[0] // 2, full[1] // 2)
    fs = target.face_size / 2.0
    mesh = out.mesh.copy()
    mesh[:, :2] = (mesh[:, :2] + 0.5) / 2.0 - 0.5
    # a partly covered pixel (a faded silhouette or stretched sliver) is not
    # trusted: only confident coverage counts, ramped over its upper half
    coverage = np.clip(_half(out.coverage) * 2.0 - 1.0, 0.0, 1.0)
    mouth = masks.mouth_mask(size, mesh, grow=0.012 * fs)
    region = coverage * mouth if mask_options.mouth else coverage
    # the mesh's outline runs along the very edge of the face, where a turned
    # source shows ear, hair or background: keep to the face inside it
    region = region * inner_face(size, mesh, fs)
    region = (
        masks.feather(region, erode=EDGE_ERODE * fs, blur=EDGE_FEATHER * fs)
        if mask_options.region
        else np.ones_like(region)
    )
    fade = forehead_fade(size, mesh, length=FOREHEAD_FADE * fs)
    skin = skin_region(size, mesh, fs)
    occlusion = None
    if mask_options.occlusion:
        # the target's own hair, hands or glasses in front of its face stay in
        # front; its brows, eyes, lips and beard are not occluders
        rim = face_rim(size, mesh, fs, inner_scale=TARGET_HAIR_RIM)
        # in the middle of the face only colours far from skin count (a
        # shadow beside the nose is not an occluder, a microphone is)
        distance = masks.skin_distance(bg_lab_h, *masks.skin_statistics(bg_lab_h, skin))
        middle = masks.likelihood_from_distance(distance, CENTRE_TOLERANCE)
        free = masks.occluder_free(bg_lab_h, skin, face_size=fs, hair_zone=rim, distance=distance)
        target_skin = rim * free + (1.0 - rim) * middle
        if ISLAND_MAX > 0:
            target_skin = _without_islands(target_skin, mesh, fs)
        # the target's moustache and beard are not occluders: the source's
        # mouth and chin replace them
        below = below_nose(size, mesh, soft=0.05 * fs)
        frames = masks.thin_dark(bg_lab_h[..., 0], width=0.08 * fs)
        if wears_glasses(size, mesh, frames, fs):
            # keep the whole frame: thin dark lines count as occluders, and
            # around the eyes too, but not the eye openings and brows themselves
            target_skin = np.minimum(target_skin, 1.0 - frames)
            not_tested = masks.feature_mask(size, mesh, grow=0.01 * fs)
        else:
            not_tested = masks.feature_mask(size, mesh, grow=0.05 * fs)
        occ = np.maximum(target_skin, np.maximum(not_tested, below))
        # a face mask or a scarf over the nose, mouth and chin stays in front
        covered = lower_face_cover(bg_lab_h, mesh, skin, fs)
        if covered is not None:
            occ = np.minimum(occ, 1.0 - covered)
        if out.source_clean is not None:
            occ = np.minimum(occ, _half(out.source_clean))
        occ = cv2.morphologyEx(occ, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3)))
        occlusion = masks.feather(occ, erode=0.008 * fs, blur=0.012 * fs)
    if person_mask is not None:
        person = _half(person_mask)
        occlusion = masks.combine(occlusion, person) if occlusion is not None else person
    box = masks.box_mask(size, inset=0.02, blur=mask_options.box_blur) if mask_options.box else None
    mask_h = masks.combine(region, fade, occlusion, box)
    stat_mask = skin if occlusion is None else skin * (occlusion > 0.5)
    grow = int(round(0.05 * fs)) * 2 + 1
    touched = cv2.dilate(
        (mask_h > 0.002).astype(np.float32), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (grow, grow))
    )
    paste_h = masks.feather(touched, erode=0, blur=0.015 * fs)
    if box is not None:
        paste_h = np.minimum(paste_h, masks.box_mask(size, inset=0.0, blur=0.04))
    mask = cv2.resize(mask_h, full, interpolation=cv2.INTER_LINEAR)
    bare = 1.0 - masks.feather(masks.feature_mask(size, mesh, grow=0.02 * fs), erode=0, blur=0.01 * fs)
    detail = cv2.resize(mask_h * bare, full, interpolation=cv2.INTER_LINEAR)
    paste = np.maximum(cv2.resize(paste_h, full, interpolation=cv2.INTER_LINEAR), out.changed)
    if hands_mask is not None:
        # the photo's own pixels of a hand, not their copy through the working crop
        paste = paste * (1.0 - np.clip(hands_mask, 0.0, 1.0))

    # -- colour: statistics on skin both sides can see, then low-frequency shading --
    if colour is None:
        s_stats = color.masked_stats(face_lab_h, stat_mask)
        t_stats = color.masked_stats(bg_lab_h, stat_mask)
    else:  # a mapping held steady over a video shot
        s_stats, t_stats = colour.source.stats, colour.target.stats
    # a light from one side on the source but not on the target (or the other
    # way round) is lighting, not identity: then take more of the target's shading
    gap = abs(side_lighting(face_lab_h, mesh, stat_mask) - side_lighting(bg_lab_h, mesh, stat_mask))
    amount = float(np.clip(shading + gap / SIDE_LIGHT_SPAN, shading, 1.0))
    # the target's low-frequency shading in place of the new face's: learnt
    # on bare skin only (a beard, brows or hair would darken it), spread
    # smoothly over the rest of the face; smooth, so found at half resolution
    matched_h = color.apply_statistics(face_lab_h, s_stats, t_stats, max_gain=MAX_CONTRAST_GAIN)
    shade_h = color.shading_offset(matched_h, stat_mask, bg_lab_h, stat_mask, sigma=SHADING_SIGMA * fs)

    # -- full resolution, only around the face: the blend's support is the mask
    # grown by the coarsest pyramid level --
    x, y, w, h = cv2.boundingRect((mask > 0.002).astype(np.uint8))
    pixels = behind.copy()
    if w > 0 and h > 0:
        margin = 2**BLEND_LEVELS
        x0, y0 = max(x - margin, 0), max(y - margin, 0)
        x1, y1 = min(x + w + margin, full[0]), min(y + h + margin, full[1])
        roi = (slice(y0, y1), slice(x0, x1))
        face_lab = color.to_lab(out.face[roi])
        matched = color.apply_statistics(face_lab, s_stats, t_stats, max_gain=MAX_CONTRAST_GAIN)
        shaded = matched + amount * _upsampled(shade_h, full, (x0, y0, x1, y1))
        background = behind[roi].astype(np.float32)
        front = np.where(out.coverage[roi][..., None] > 0.5, color.to_rgb(shaded), background).astype(np.float32)
        blended = laplacian_blend(front, background, mask[roi], levels=BLEND_LEVELS)
        if hands_mask is not None:
            # the blend's low frequencies spread over wide regions: a hand
            # must not take on the face's colour
            held = np.clip(hands_mask[roi], 0.0, 1.0)[..., None]
            blended = blended * (1.0 - held) + background * held
        pixels[roi] = np.clip(blended + 0.5, 0, 255).astype(np.uint8)
    return Composite(pixels=pixels, mask=mask, paste=np.clip(paste, 0.0, 1.0), detail=detail)
