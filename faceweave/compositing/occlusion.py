"""What covers a face, found by heuristics on the crop's colour and the mesh:
``(H, W)`` float32 maps in ``[0, 1]``, 1 where the face itself shows.

Two sides: the source's clean map (where the source photo shows its own bare
face, so that its hair and hands do not travel with it) and the target's
occluders (its hair, hands, glasses, a face mask in front of the face, which
stay in front).  A beard, brows, eyes and lips are part of a face, not
occluders.  Pure functions; sizes are fractions of the face size."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from faceweave.compositing.colour import to_lab
from faceweave.compositing.masks import edge_connected, edge_reaching, feather, polygon_mask, thin_dark
from faceweave.compositing.regions import (
    above_eyes,
    across_face,
    below_nose,
    face_axis,
    face_rim,
    feature_mask,
    outside_face,
    skin_region,
)
from faceweave.compositing.resample import half, half_mesh
from faceweave.compositing.skin import (
    CENTRE_TOLERANCE,
    SkinModel,
    darker_than_skin,
    likelihood_from_distance,
    occluder_free,
    skin_distance,
    skin_likelihood,
    skin_model,
    skin_statistics,
    texture_likelihood,
)
from faceweave.geometry import topology as topo
from faceweave.swappers.base import AlignedCrop
from faceweave.types import checked_array

#: the rim of the face where hair hangs (and is looked for by hue and
#: texture): outside the outline scaled by this, for the source (whose hair
#: must not travel) and the target (whose hair must stay in front)
SOURCE_HAIR_RIM = 0.65
TARGET_HAIR_RIM = 0.75
#: covered parts of the source face that reach its edge (hair coming in from
#: outside) are grown by this much, so the dark rims of strands and the gaps
#: between them do not show as streaks
SOURCE_HAIR_GROW = 0.025
#: the skin test in the middle of the source face, tighter than the target's
#: (:data:`~faceweave.compositing.skin.CENTRE_TOLERANCE`): a strand of blond
#: hair across a cheek is skin-light but far from skin in hue
SOURCE_CENTRE_TOLERANCE = 4.0
#: the scale (of the face size) of the texture test for strands of hair at
#: the rim of the source face, finer than :func:`~faceweave.compositing.skin.
#: occluder_free`'s: blond hair over a cheek has the skin's colour and hue
SOURCE_STRAND_SCALE = 0.03
#: a face cover (mask, scarf) shows lips no redder than this (CIELAB a*) over
#: the lower face's colour, and a lower face at least this light
COVER_LIP_CONTRAST = 3.0
COVER_MIN_LIGHTNESS = 55.0
#: ... and differs from the middle of the forehead by at least this much (L or a*b*)
COVER_MIN_DIFFERENCE = 8.0
#: mesh point in the middle of the forehead
FOREHEAD_CENTRE = 151
#: glasses: the middle part of the gap between the inner eye corners that is
#: sampled for the bridge, and the part of one line across it that must be dark
GLASSES_SPAN = 0.6
GLASSES_COVER = 0.85
#: :func:`beard_presence`: the mesh point in the middle of the lower lip's
#: outer edge; the chin strip's half-width over the mouth's width; the share
#: of it darker than the skin below which there is no beard, and the span
#: over which one grows in
LOWER_LIP_EDGE = 17
BEARD_CHIN_WIDTH = 0.3
BEARD_CHIN_BARE = 0.25
BEARD_CHIN_SPAN = 0.2
#: non-skin spots inside the face that touch nothing outside it and are
#: smaller than this fraction of the face's area are not occluders
ISLAND_MAX = 0.03


@dataclass(frozen=True, eq=False)
class OcclusionPlan:
    """What :func:`target_occlusion` finds from the face's mesh and its slow
    looks, reusable over the next frames of its track (all ``(H, W)``
    float32 on its grid): ``rim``, the face's rim where hair is looked
    for; ``below``, below the nose (a moustache or beard is not an
    occluder); ``not_tested``, the features left out of the test (closer
    around the eyes when the face wears ``glasses``); ``covered``, a face
    mask or a scarf over the lower face, or ``None`` (almost always)."""

    rim: np.ndarray
    below: np.ndarray
    not_tested: np.ndarray
    glasses: bool
    covered: np.ndarray | None = None
    #: the face's bare-skin model, measured on the frame that made the plan
    #: (``None``: measured on each frame)
    skin: SkinModel | None = None

    def __post_init__(self) -> None:
        shape = (int(self.rim.shape[0]), int(self.rim.shape[1]))
        for name in ("rim", "below", "not_tested"):
            object.__setattr__(self, name, checked_array(getattr(self, name), shape=shape, dtype=np.float32, name=name))
        if self.covered is not None:
            object.__setattr__(
                self, "covered", checked_array(self.covered, shape=shape, dtype=np.float32, name="covered")
            )

    def fits(self, size: tuple[int, int]) -> bool:
        """Whether the plan is made for a grid of ``size = (W, H)``."""
        return (int(self.rim.shape[1]), int(self.rim.shape[0])) == size


def occlusion_plan(lab: np.ndarray, mesh: np.ndarray, skin: np.ndarray, face_size: float) -> OcclusionPlan:
    """The slow part of :func:`target_occlusion` (arguments as there)."""
    size = (lab.shape[1], lab.shape[0])
    # its brows, eyes, lips and beard are not occluders
    rim = face_rim(size, mesh, face_size, inner_scale=TARGET_HAIR_RIM)
    below = below_nose(size, mesh, soft=0.05 * face_size)
    glasses = wears_glasses(size, mesh, thin_dark(lab[..., 0], width=0.08 * face_size), face_size)
    # with glasses, thin dark lines count as occluders around the eyes too
    # (but not the eye openings and brows themselves)
    not_tested = feature_mask(size, mesh, grow=(0.01 if glasses else 0.05) * face_size)
    covered = lower_face_cover(lab, mesh, skin, face_size)
    model = skin_model(lab, skin, face_size=face_size)
    return OcclusionPlan(rim=rim, below=below, not_tested=not_tested, glasses=glasses, covered=covered, skin=model)


def target_occlusion(
    lab: np.ndarray,
    mesh: np.ndarray,
    skin: np.ndarray,
    face_size: float,
    source_clean: np.ndarray | None,
    plan: OcclusionPlan | None = None,
) -> np.ndarray:
    """``(H, W)`` float32: where the target face itself shows, low under its
    own hair, hands, glasses or face mask (which stay in front).  ``lab``:
    the target crop in CIELAB; ``skin``: its :func:`skin_region`;
    ``source_clean``: the source's clean map on the same grid, when known
    (what the source cannot give is not taken from it); ``plan``: its slow
    part made on an earlier frame of the face's track
    (:func:`occlusion_plan`, made here without it), with the skin's colour,
    hue and texture model measured on that frame.  What is in front is
    looked for on this frame's pixels."""
    size = (lab.shape[1], lab.shape[0])
    if plan is None or not plan.fits(size):
        plan = occlusion_plan(lab, mesh, skin, face_size)
    # in the middle of the face only colours far from skin count (a
    # shadow beside the nose is not an occluder, a microphone is)
    model = plan.skin if plan.skin is not None else skin_model(lab, skin, face_size=face_size)
    distance = skin_distance(lab, model.centre, model.spread)
    middle = likelihood_from_distance(distance, CENTRE_TOLERANCE)
    free = occluder_free(lab, skin, face_size=face_size, hair_zone=plan.rim, distance=distance, model=model)
    target_skin = plan.rim * free + (1.0 - plan.rim) * middle
    if ISLAND_MAX > 0:
        target_skin = without_islands(target_skin, mesh, face_size)
    if plan.glasses:
        # keep the whole frame: thin dark lines count as occluders
        target_skin = np.minimum(target_skin, 1.0 - thin_dark(lab[..., 0], width=0.08 * face_size))
    # the target's moustache and beard are not occluders: the source's
    # mouth and chin replace them
    occ = np.maximum(target_skin, np.maximum(plan.not_tested, plan.below))
    # a face mask or a scarf over the nose, mouth and chin stays in front
    if plan.covered is not None:
        occ = np.minimum(occ, 1.0 - plan.covered)
    if source_clean is not None:
        occ = np.minimum(occ, source_clean)
    occ = cv2.morphologyEx(occ, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3)))
    return feather(occ, erode=0.008 * face_size, blur=0.012 * face_size)


#: the target's beard: below the nose and this many skin spreads of
#: lightness darker than its bare skin (:func:`target_beard`)
BEARD_DARKER = 1.0


def target_beard(lab: np.ndarray, mesh: np.ndarray, skin: np.ndarray, face_size: float) -> np.ndarray:
    """``(H, W)`` float32 in ``[0, 1]``: the target's beard, moustache or
    stubble, where the new face's mouth and chin go (so it is not an
    occluder, :func:`target_occlusion`): below the nose and clearly darker
    than its bare skin under ``skin``.  Neither its darkness nor its
    texture is the light or the skin of the face: the new face's shading is
    learnt, and the photo's texture restored, away from it (otherwise a
    ghost of the beard grows on a smooth-skinned source's chin)."""
    size = (lab.shape[1], lab.shape[0])
    below = below_nose(size, mesh, soft=0.05 * face_size)
    # darker than the skin above the beard (a full beard would darken its own measure)
    dark = darker_than_skin(lab, skin * (below < 0.5), margin=BEARD_DARKER)
    return feather(below * dark, erode=0, blur=0.01 * face_size)


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
    lips = polygon_mask(size, mesh[topo.lips_outer(), :2])
    lower = skin * below_nose(size, mesh, soft=0.05 * face_size)
    if lips.sum() < 8 or lower.sum() < 32:
        return None
    centre, spread = skin_statistics(lab, lower)
    lip_red = float(np.median(lab[lips > 0.5][:, 1]))
    if lip_red - float(centre[1]) > COVER_LIP_CONTRAST or float(centre[0]) < COVER_MIN_LIGHTNESS:
        return None
    # and it is not the skin: compared with the middle of the forehead, the
    # lower face is clearly lighter or of another colour
    forehead = np.zeros(lab.shape[:2], np.uint8)
    cx, cy = (int(round(v)) for v in mesh[FOREHEAD_CENTRE, :2])
    cv2.circle(forehead, (cx, cy), max(2, int(round(0.06 * face_size))), (1,), -1)
    if forehead.sum() < 8:
        return None
    ref = np.median(lab[forehead > 0], axis=0)
    lighter = float(centre[0] - ref[0])
    chroma = float(np.hypot(centre[1] - ref[1], centre[2] - ref[2]))
    if lighter < COVER_MIN_DIFFERENCE and chroma < COVER_MIN_DIFFERENCE:
        return None
    zone = 1.0 - above_eyes(size, mesh, soft=0.05 * face_size)
    near = skin_likelihood(lab, centre, spread)
    return feather(near * zone, erode=0, blur=0.02 * face_size)


def source_clean_map(crop: AlignedCrop) -> np.ndarray:
    """``(S, S)`` float32 in ``[0, 1]``: where the source crop shows its own
    bare face.  Low over hair at the rim of the face and over the forehead,
    and over background at its very edge; the middle of the face, the eyes,
    brows, lips and a beard (darker than the skin, below the nose, on a
    face whose chin is dark too: :func:`beard_presence`) count as clean.
    Covered parts that reach the edge of the face (hair coming in
    from outside) are grown by :data:`SOURCE_HAIR_GROW`.  Built at half
    resolution (it is smooth) and resized."""
    full = crop.size
    size, fs = (full[0] // 2, full[1] // 2), crop.face_size / 2.0
    mesh = half_mesh(crop.mesh)
    lab = to_lab(half(crop.pixels))
    region = skin_region(size, mesh, fs)
    rim = face_rim(size, mesh, fs, inner_scale=SOURCE_HAIR_RIM)
    centre, spread = skin_statistics(lab, region)
    distance = skin_distance(lab, centre, spread)
    free = occluder_free(lab, region, face_size=fs, hair_zone=rim, distance=distance)
    # at the rim, fine streaks are hair even in the skin's own colour (blond
    # hair over the side of a face): texture at the scale of strands
    strands = texture_likelihood(lab[..., 0], region, scale=SOURCE_STRAND_SCALE * fs)
    free = np.minimum(free, np.maximum(strands, 1.0 - rim))
    dark = darker_than_skin(lab, region, (centre, spread))
    beard = below_nose(size, mesh, soft=0.05 * fs) * dark * beard_presence(dark, mesh)
    # the middle of the source face is trusted unless its colour is far from
    # skin (its shadows are not occluders, a strand of hair across the cheek
    # is); the eyes, brows and lips are kept, but at the rim only where they
    # are darker than skin (a brow's tail, not the hair beside it)
    middle = (1.0 - rim) * likelihood_from_distance(distance, SOURCE_CENTRE_TOLERANCE)
    features = feature_mask(size, mesh, grow=0.02 * fs) * np.maximum(1.0 - rim, dark)
    keep = np.maximum(np.maximum(features, beard), middle)
    # the mesh outline runs along the very edge of the face, where background,
    # ears or hair show in the source: only the face well inside it is trusted
    inside = feather(polygon_mask(size, mesh[topo.face_oval()]), erode=0.0235 * fs, blur=0.015 * fs)
    bare = np.maximum(free, keep)
    if ISLAND_MAX > 0:
        bare = without_islands(bare, mesh, fs)
    bare = _without_edge_hair(bare, mesh, SOURCE_HAIR_GROW * fs)
    clean = (bare * inside).astype(np.float32)
    return np.asarray(cv2.resize(clean, full, interpolation=cv2.INTER_LINEAR))


def beard_presence(dark: np.ndarray, mesh: np.ndarray) -> float:
    """How surely a face wears a beard, in ``[0, 1]``, from ``dark`` (its
    :func:`~faceweave.compositing.skin.darker_than_skin` map): the share of
    the chin (from the lower lip's edge down to the chin's point, a
    :data:`BEARD_CHIN_WIDTH` of the mouth's width each side of the middle)
    that is darker than the skin, from :data:`BEARD_CHIN_BARE` (nothing)
    over :data:`BEARD_CHIN_SPAN` more (all).  A beard covers the chin; long
    hair hanging past the cheeks is as dark below the nose but leaves the
    chin bare (a shaven chin reads about 0.03 to 0.23, a beard 0.5 to 0.8)."""
    size = (dark.shape[1], dark.shape[0])
    top, bottom = mesh[LOWER_LIP_EDGE, :2].astype(np.float32), mesh[topo.CHIN, :2].astype(np.float32)
    mouth = float(np.linalg.norm(mesh[topo.MOUTH_CORNER_RIGHT, :2] - mesh[topo.MOUTH_CORNER_LEFT, :2]))
    down = bottom - top
    side = np.array([-down[1], down[0]], np.float32) / max(float(np.linalg.norm(down)), 1e-6)
    side *= BEARD_CHIN_WIDTH * mouth
    chin = polygon_mask(size, np.stack([top + side, bottom + side, bottom - side, top - side]))
    area = float(chin.sum())
    if area < 1.0:
        return 1.0  # no chin to look at: as before, the dark lower face counts as beard
    share = float((dark * chin).sum()) / area
    return float(np.clip((share - BEARD_CHIN_BARE) / BEARD_CHIN_SPAN, 0.0, 1.0))


def _without_edge_hair(bare: np.ndarray, mesh: np.ndarray, radius: float) -> np.ndarray:
    """``bare`` with the covered parts that reach the edge of the face grown
    by ``radius`` pixels: hair comes in from outside the face, and a strand's
    own dark rim and the gaps between strands go with it (isolated specks
    are left alone)."""
    if radius <= 0:
        return bare
    size = (bare.shape[1], bare.shape[0])
    hair = edge_connected((bare < 0.5).astype(np.uint8), outside_face(size, mesh))
    k = int(round(radius)) * 2 + 1
    hair = cv2.dilate(hair, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    return np.minimum(bare, 1.0 - hair.astype(np.float32))


def without_islands(skin: np.ndarray, mesh: np.ndarray, face_size: float) -> np.ndarray:
    """``skin`` (soft, 1 = bare skin) with small non-skin islands inside the
    face cleared.  Hair, hands and microphones come in from beyond the face;
    small dark spots that touch nothing outside it are the face's own
    (nostrils, eyeliner wings, eye corners, moles) and go with the source."""
    size = (skin.shape[1], skin.shape[0])
    edge = outside_face(size, mesh)
    covered = ((skin < 0.5) & (edge == 0)).astype(np.uint8)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(covered, connectivity=8)
    if n <= 1:
        return skin
    small = stats[:, cv2.CC_STAT_AREA] < ISLAND_MAX * face_size * face_size
    small[0] = False
    inside = small & ~edge_reaching(labels, n, edge)  # per part, then per pixel
    if not inside.any():
        return skin
    islands = inside[labels]
    k = max(3, int(round(0.02 * face_size)) * 2 + 1)
    grown = cv2.dilate(islands.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    return np.maximum(skin, grown.astype(np.float32))


def wears_glasses(size: tuple[int, int], mesh: np.ndarray, frames: np.ndarray, face_size: float) -> bool:
    """Whether a thin dark bar runs across the nose bridge between the eyes,
    as the bridge of a pair of glasses does.

    Lines across the face are sampled at several heights around the top of
    the nose bridge, over the middle :data:`GLASSES_SPAN` of the gap between
    the inner eye corners; glasses cover nearly all of one such line with
    ``frames``.  Frown lines and wrinkles run along the face or are short,
    so they cover only part of every line."""
    del size  # the sample points are clipped to ``frames`` itself
    _, down = face_axis(mesh)
    across = across_face(mesh)
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
