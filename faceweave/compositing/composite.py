"""Composite a swapper's output into the target crop: masks, colour,
multi-band blend, and the region to paste back.

:func:`composite` runs the steps in order; each step is a pure function
that returns a frozen value (:mod:`faceweave.compositing.values`).  Masks
and shading are smooth, so they are built at half resolution and resized;
colour and the multi-band blend run at full resolution.  Sizes are
relative to the face size so results do not depend on the working size."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from faceweave.compositing.blend import laplacian_blend, per_channel
from faceweave.compositing.colour import (
    ColourMatch,
    SkinColour,
    chroma_spread,
    masked_stats,
    shading_offset,
    side_lighting,
    statistics_map,
    to_lab,
)
from faceweave.compositing.masks import box_mask, combine, feather, polygon_mask
from faceweave.compositing.occlusion import OcclusionPlan, occlusion_plan, target_beard, target_occlusion
from faceweave.compositing.regions import (
    brow_mask,
    eye_mask,
    feature_mask,
    fold_zone,
    forehead_fade,
    inner_face,
    lips_zone,
    mouth_mask,
    skin_region,
)
from faceweave.compositing.resample import gaussian_lowpass, half, half_mesh, upsample, upsampled_window
from faceweave.compositing.skin import CENTRE_TOLERANCE, skin_likelihood, skin_statistics
from faceweave.compositing.skintone import ANCHOR_CHROMA, DEFAULT_SKIN_TONE, SkinTone
from faceweave.compositing.values import (
    ColourPlan,
    Composite,
    CompositeMasks,
    FacePlan,
    HalfCrop,
    MaskPlan,
    TonePlan,
)
from faceweave.geometry import topology as topo
from faceweave.kernels import add_under, to_uint8
from faceweave.kernels.lab import LabMap, shade_face
from faceweave.options import MaskOptions
from faceweave.swappers.base import AlignedCrop, SwapOutput
from faceweave.types import checked_array

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
#: a difference in side lighting (lightness units) between source and target
#: that makes the shading transfer complete
SIDE_LIGHT_SPAN = 20.0
#: bands of the multi-band blend
BLEND_LEVELS = 5
#: the target's skin tint (:func:`skin_tint`): its scale, the margin kept
#: from the eyes and brows, and the feather of where it applies
TINT_SIGMA = 0.03
TINT_EYE_MARGIN = 0.06
TINT_FEATHER = 0.03
#: how much of the target's fine lightness and colour pattern the tint
#: takes by default (the rest is the source's modelling of its cheeks and
#: its own blush, which carry identity; ``SwapOptions.skin_tone`` moves
#: them, :mod:`faceweave.compositing.skintone`).  Since the cheeks are
#: settled to the target's after the blend (:func:`settle_cheeks`),
#: lightness adds nothing to the tone: on the judge's 24 pairs (no
#: watermark) lightness 0.3 -> 0 and colour 1 -> 0.6 moved d_src by -0.007 /
#: -0.005 per pair (seeds 0 / 1), blotch by 0.0 / -0.18 and tone by +0.01 /
#: +0.15 dE
TINT_LIGHTNESS = 0.0
TINT_CHROMA = ANCHOR_CHROMA
#: a coloured light (:func:`coloured_light`): the excess of the target's
#: skin-colour spread over the new face's (ΔE, at the shading's scale) from
#: which the target's colour pattern is taken in full.  On the judge's 24
#: pairs (no watermark) it moved blotch by +0.10 / +0.31 per pair (seeds
#: 0 / 1; the output's skin had come out evener than the target's), tone by
#: +0.016 / +0.017 dE and d_src by -0.0000 / +0.0001
COLOUR_LIGHT_SPAN = 3.0
#: the excess below which it is no coloured light at all (measurement noise:
#: an evenly lit talking head varies by up to about 0.1 dE more than the
#: new face on it)
COLOUR_LIGHT_MARGIN = 1.0
#: the target's lips kept (``MaskOptions.target_lips``): how far around the
#: outer lip line, and the feather (fractions of the face size)
LIPS_GROW = 0.07
LIPS_FEATHER = 0.03
#: :func:`target_folds`: the band along each nasolabial fold that takes the
#: target's creases, its feather, and the scale below which its detail is
#: the target's (fractions of the face size)
FOLD_WIDTH = 0.10
FOLD_FEATHER = 0.025
FOLD_SIGMA = 0.04
#: :func:`sclera_tone`: the largest change of the whites' lightness (L*),
#: and the least eye it looks at: pixels of the half grid, and the lid gap
#: as a share of the eye's width (below it the eye is nearly shut)
SCLERA_MAX_CHANGE = 20.0
SCLERA_MIN_PIXELS = 12
SCLERA_MIN_OPEN = 0.15
#: the spread of the cheeks' correction around them (:func:`cheek_spread`, a
#: fraction of the face size)
CHEEK_SPREAD = 0.06
#: the skin around the eyes that :func:`eyelid_lift` may lighten: between
#: these distances from the eye (fractions of the face size), and the lift
#: (L* units) from which it takes the target's tint there in full
EYELID_INNER = 0.015
EYELID_OUTER = 0.07
EYELID_FULL = 4.0


def composite(
    target: AlignedCrop,
    out: SwapOutput,
    *,
    mask_options: MaskOptions,
    shading: float,
    person_mask: np.ndarray | None = None,
    colour: ColourMatch | None = None,
    hands_mask: np.ndarray | None = None,
    target_lips: bool = False,
    folds: bool = False,
    warp_frame: bool = True,
    plan: FacePlan | None = None,
    skin_tone: SkinTone = DEFAULT_SKIN_TONE,
) -> Composite:
    """Blend ``out.face`` into ``out.background`` and say where to paste.

    ``colour``: a fixed skin-colour mapping (video holds one per face over a
    shot); without it the mapping is measured on this crop.  ``person_mask``
    ``(S, S)`` in ``[0, 1]``: the person segmentation (what is not person
    stays in front).  ``hands_mask``: ``(S, S)`` in ``[0, 1]``, hands in
    front of the face; they keep the target crop's own pixels (not the
    reshaped ones) and are left out of the paste mask, so the photo's own
    pixels show there.  Both masks are float32 of the crop's size
    (``ValueError`` otherwise).  ``target_lips``: the target's own lips and
    the skin just around them stay (:data:`LIPS_GROW`), so the mouth moves
    as the target's did; ``folds``: the target's creases along the
    nasolabial folds stay (:func:`target_folds`; with its lips, as their
    mouth follows the target's).  ``warp_frame``: the frame is to be warped at its
    own resolution by the swapper's reshaping (``Composite.warp``; photos),
    rather than the reshaped crop pasted over it (video, which keeps its
    frame rate; at a working size close to the face's the two look alike).
    ``plan``: the slow masks and colour made on an earlier frame of the
    face's track (:class:`~faceweave.compositing.values.FacePlan`), reused;
    the mouth, the lips, what is in front, the whites of the eyes and the
    blend are this frame's.  ``Composite.plan`` is the one used (made here
    without it).  ``skin_tone``: how much of the target's skin the new face
    takes (:class:`~faceweave.compositing.skintone.SkinTone`; the default
    is ``SwapOptions.skin_tone``'s default)."""
    person_mask = crop_mask(person_mask, target, name="person mask")
    hands = crop_mask(hands_mask, target, name="hands mask")
    hands = None if hands is None else np.clip(hands, 0.0, 1.0)
    behind, person = hold_hands(out.background, target.pixels, hands, person_mask)
    view = half_crop(out, behind, face_size=target.face_size)
    warp = frame_warp(out, hands) if warp_frame else None
    held = plan if plan is not None and plan.fits(view.size) else None
    made = held.masks if held is not None else mask_plan(view, options=mask_options)
    masks = blend_masks(
        view,
        out,
        options=mask_options,
        person_mask=person,
        hands=hands,
        full=target.size,
        target_lips=target_lips,
        pasted_change=None if warp is not None else out.changed,
        plan=made,
    )
    tone = held.tone if held is not None else None
    colours, tone = colour_plan(view, masks.skin, shading=shading, colour=colour, tone=tone, skin_tone=skin_tone)
    pixels = blend_face(
        out,
        behind,
        masks.mask,
        colours,
        hands=hands,
        face_size=target.face_size,
        target=target,
        folds=folds,
        cheeks=skin_tone.cheeks,
    )
    used = held if held is not None else FacePlan(masks=made, tone=tone)
    return Composite(pixels=pixels, mask=masks.mask, paste=masks.paste, detail=masks.detail, warp=warp, plan=used)


def frame_warp(out: SwapOutput, hands: np.ndarray | None) -> np.ndarray | None:
    """The swapper's reshaping offsets, held still under ``hands`` (which
    keep the photo's own pixels), or ``None`` when nothing moves."""
    if out.displacement is None or not bool(out.changed.any()):
        return None
    if hands is None:
        return out.displacement
    return (out.displacement * (1.0 - hands)[..., None]).astype(np.float32)


def crop_mask(mask: np.ndarray | None, target: AlignedCrop, *, name: str) -> np.ndarray | None:
    """``mask`` checked to be ``(S, S)`` float32 like the crop (a read-only
    view; ``ValueError`` otherwise), or ``None``."""
    if mask is None:
        return None
    return checked_array(mask, shape=(target.size[1], target.size[0]), dtype=np.float32, name=name)


def hold_hands(
    background: np.ndarray, pixels: np.ndarray, hands: np.ndarray | None, person_mask: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """The crop behind the new face ``(S, S, 3)`` uint8, and the person mask.

    Hands in front of the face stay in front, and exactly where they are:
    the reshaping warp moves only the face behind them, so under ``hands``
    the target crop's own ``pixels`` replace the reshaped ``background``, and
    the hands are left out of the person mask."""
    if hands is None:
        return background, person_mask
    mixed = background * (1.0 - hands[..., None]) + pixels * hands[..., None]
    behind = np.clip(mixed + 0.5, 0, 255).astype(np.uint8)
    person = 1.0 - hands if person_mask is None else np.minimum(person_mask, 1.0 - hands)
    return behind, person


def half_crop(out: SwapOutput, behind: np.ndarray, *, face_size: float) -> HalfCrop:
    """The new face, the crop behind it and the mesh at half resolution."""
    return HalfCrop(
        face_lab=to_lab(half(out.face)),
        behind_lab=to_lab(half(behind)),
        mesh=half_mesh(out.mesh),
        face_size=face_size / 2.0,
    )


def face_region(
    view: HalfCrop, coverage: np.ndarray, options: MaskOptions, *, inner: np.ndarray | None = None
) -> np.ndarray:
    """``(s, s)`` float32: where the swapper's new face is trusted, feathered.

    A partly covered pixel (a faded silhouette or stretched sliver) is not
    trusted: only confident coverage counts, ramped over its upper half.
    The mesh's outline runs along the very edge of the face, where a turned
    source shows ear, hair or background: the region keeps to the face
    inside it (:func:`~faceweave.compositing.regions.inner_face`)."""
    size, fs, mesh = view.size, view.face_size, view.mesh
    trusted = np.clip(half(coverage) * 2.0 - 1.0, 0.0, 1.0)
    region = trusted * mouth_mask(size, mesh, grow=0.012 * fs) if options.mouth else trusted
    region = region * (inner_face(size, mesh, fs) if inner is None else inner)
    if not options.region:
        return np.ones_like(region)
    return feather(region, erode=EDGE_ERODE * fs, blur=EDGE_FEATHER * fs)


def occlusion_mask(
    view: HalfCrop,
    skin: np.ndarray,
    source_clean: np.ndarray | None,
    *,
    options: MaskOptions,
    person_mask: np.ndarray | None,
    plan: OcclusionPlan | None = None,
) -> np.ndarray | None:
    """``(s, s)`` float32: where nothing is in front of the target face (its
    own hair, hands or glasses, and what the person segmentation calls not
    person), or ``None`` when neither test is on (``plan``: the test's slow
    part, :func:`~faceweave.compositing.occlusion.occlusion_plan`)."""
    occlusion = None
    if options.occlusion:
        clean = None if source_clean is None else half(source_clean)
        occlusion = target_occlusion(view.behind_lab, view.mesh, skin, view.face_size, clean, plan)
    if person_mask is None:
        return occlusion
    person = half(person_mask)
    return person if occlusion is None else combine(occlusion, person)


def mask_plan(view: HalfCrop, *, options: MaskOptions) -> MaskPlan:
    """The masks of :func:`blend_masks` that follow the face's mesh and its
    slow looks (:class:`~faceweave.compositing.values.MaskPlan`)."""
    size, fs, mesh = view.size, view.face_size, view.mesh
    skin = skin_region(size, mesh, fs)
    occlusion = occlusion_plan(view.behind_lab, mesh, skin, fs) if options.occlusion else None
    return MaskPlan(
        skin=skin,
        fade=forehead_fade(size, mesh, length=FOREHEAD_FADE * fs),
        inner=inner_face(size, mesh, fs),
        bare=1.0 - feather(feature_mask(size, mesh, grow=0.02 * fs), erode=0, blur=0.01 * fs),
        # the target's beard is neither light nor skin texture for the new face
        shaven=1.0 - target_beard(view.behind_lab, mesh, skin, fs),
        occlusion=occlusion,
    )


def blend_masks(
    view: HalfCrop,
    out: SwapOutput,
    *,
    options: MaskOptions,
    person_mask: np.ndarray | None,
    hands: np.ndarray | None,
    full: tuple[int, int],
    target_lips: bool = False,
    pasted_change: np.ndarray | None = None,
    plan: MaskPlan | None = None,
) -> CompositeMasks:
    """The blend, paste and detail masks at the crop's ``full = (W, H)``,
    and the skin where colour is measured (half resolution);
    ``pasted_change``: where the reshaped crop is pasted as well (the
    swapper's ``changed``; ``None`` when the frame itself is warped);
    ``plan``: the masks that follow the mesh (:func:`mask_plan`, made here
    without it)."""
    size, fs, mesh = view.size, view.face_size, view.mesh
    if plan is None or not plan.fits(size):
        plan = mask_plan(view, options=options)
    occlusion = occlusion_mask(
        view, plan.skin, out.source_clean, options=options, person_mask=person_mask, plan=plan.occlusion
    )
    box = box_mask(size, inset=0.02, blur=options.box_blur) if options.box else None
    region = face_region(view, out.coverage, options, inner=plan.inner)
    if target_lips:
        region = region * (1.0 - lips_zone(size, mesh, grow=LIPS_GROW * fs, soft=LIPS_FEATHER * fs))
    mask_h = combine(region, plan.fade, occlusion, box)
    shaven = plan.shaven
    measured = shaven > 0.5 if occlusion is None else (shaven > 0.5) & (occlusion > 0.5)
    return CompositeMasks(
        mask=upsample(mask_h, full),
        # where the crop was reshaped is pasted too, unless the frame itself
        # is warped (``pasted_change`` None: :func:`frame_warp`)
        paste=paste_mask(mask_h, fs, boxed=box is not None, changed=pasted_change, hands=hands, full=full),
        detail=upsample(mask_h * plan.bare * shaven, full),
        skin=plan.skin * measured,
    )


def paste_mask(
    mask_h: np.ndarray,
    face_size: float,
    *,
    boxed: bool,
    changed: np.ndarray | None,
    hands: np.ndarray | None,
    full: tuple[int, int],
) -> np.ndarray:
    """``(S, S)`` float32 in ``[0, 1]``: where the crop replaces the frame.

    The blend mask ``mask_h`` (half resolution) grown and softened, so the
    blend's soft edge is pasted whole; everywhere the reshaping warp
    ``changed`` the crop (``None``: the frame is warped instead), at the
    crop's ``full = (W, H)``; never over ``hands``, where the
    photo's own pixels show (not their copy through the working crop)."""
    size = (mask_h.shape[1], mask_h.shape[0])
    grow = int(round(0.05 * face_size)) * 2 + 1
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (grow, grow))
    # a {0, 1} mask: dilated as uint8 (OpenCV's SIMD path), the same values as in float
    touched = cv2.dilate((mask_h > 0.002).astype(np.uint8), kernel).astype(np.float32)
    paste_h = feather(touched, erode=0, blur=0.015 * face_size)
    if boxed:
        paste_h = np.minimum(paste_h, box_mask(size, inset=0.0, blur=0.04))
    paste = upsample(paste_h, full)
    if changed is not None:
        paste = np.maximum(paste, changed)
    if hands is not None:
        paste = paste * (1.0 - hands)
    return np.clip(paste, 0.0, 1.0)


def colour_plan(
    view: HalfCrop,
    skin: np.ndarray,
    *,
    shading: float,
    colour: ColourMatch | None,
    tone: TonePlan | None = None,
    skin_tone: SkinTone = DEFAULT_SKIN_TONE,
) -> tuple[ColourPlan, TonePlan]:
    """The colour mapping (measured on ``skin`` both faces show, unless a
    fixed ``colour`` is given; ``skin_tone.colour`` of it is taken), the
    target's low-frequency shading and skin tint (:func:`tone_plan`;
    ``tone``: one made on an earlier frame of the face's track, reused as it
    is), and the whites of the eyes, made on this frame.  Returns the plan
    and the tone plan it holds."""
    if colour is None:
        colour = ColourMatch(
            source=SkinColour(*masked_stats(view.face_lab, skin)),
            target=SkinColour(*masked_stats(view.behind_lab, skin)),
        )
    mapping = colour_map(colour, skin_tone.colour)
    if tone is None or not tone.fits(view.size):
        tone = tone_plan(
            view, matched_colour(view.face_lab, colour, skin_tone.colour), skin, shading=shading, skin_tone=skin_tone
        )
    # the whites of the eyes last: what the shading does to them is made up
    # too (the cheeks are settled after the blend, :func:`settle_cheeks`)
    shaded = ShadedLab(lab=view.face_lab, mapping=mapping, tint=tone.tint, amount=tone.amount, shading=tone.shading)
    regional = tone.tint + sclera_tone(shaded, view.behind_lab, view.mesh)
    plan = ColourPlan(match=colour, shading=tone.shading, amount=tone.amount, regional=regional, share=skin_tone.colour)
    return plan, tone


@dataclass(frozen=True, eq=False)
class ShadedLab:
    """The new face's CIELAB ``lab`` through the skin-colour ``mapping``,
    plus the ``tint`` and ``amount`` of the ``shading``, worked out only
    where it is read (``shaded[box]``; :func:`sclera_tone` reads the eyes'
    boxes): element by element, the values the whole picture would hold."""

    lab: np.ndarray
    mapping: LabMap
    tint: np.ndarray
    amount: float
    shading: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.lab.shape)

    def __getitem__(self, box: tuple[slice, slice]) -> np.ndarray:
        return np.asarray(self.mapping.apply(self.lab[box]) + self.tint[box] + self.amount * self.shading[box])


def matched_colour(lab: np.ndarray, colour: ColourMatch, share: float = 1.0) -> np.ndarray:
    """``lab`` (float32 CIELAB) with ``share`` of the skin-colour mapping
    ``colour`` (:func:`colour_map`; 1: all of it, 0: the colour kept)."""
    return colour_map(colour, share).apply(lab)


def colour_map(colour: ColourMatch, share: float = 1.0) -> LabMap:
    """The skin-colour mapping ``colour`` as a
    :class:`~faceweave.kernels.lab.LabMap` (``share`` of it taken):
    :func:`~faceweave.compositing.colour.statistics_map` with this
    module's contrast limit."""
    return statistics_map(colour.source.stats, colour.target.stats, max_gain=MAX_CONTRAST_GAIN, share=share)


def tone_plan(
    view: HalfCrop, matched: np.ndarray, skin: np.ndarray, *, shading: float, skin_tone: SkinTone = DEFAULT_SKIN_TONE
) -> TonePlan:
    """The target's low-frequency shading and its skin tint for the new
    face ``matched`` (its colour already mapped to the target's).

    The shading is learnt on bare skin only (a beard, brows or hair would
    darken it) and spread smoothly over the rest of the face.  A light from
    one side on the source but not on the target (or the other way round)
    is lighting, not identity: then more of the target's shading is taken
    than ``shading`` asks.  ``skin_tone`` gives the tint's shares and the
    least shading."""
    shading = skin_tone.shading_amount(shading)
    gap = abs(side_lighting(view.face_lab, view.mesh, skin) - side_lighting(view.behind_lab, view.mesh, skin))
    amount = float(np.clip(shading + gap / SIDE_LIGHT_SPAN, shading, 1.0))
    sigma = SHADING_SIGMA * view.face_size
    light = coloured_light(matched, view.behind_lab, skin, sigma=sigma)
    chroma = skin_tone.chroma + (1.0 - skin_tone.chroma) * light
    tint = skin_tint(view, matched, skin, chroma=chroma, lightness=skin_tone.lightness, lids=skin_tone.lids)
    offset = shading_offset(matched + tint, skin, view.behind_lab, skin, sigma=sigma)
    # under a coloured light the rest of the shading's chroma comes too (as
    # part of the tint, which is added whole)
    tint[..., 1:] += ((1.0 - amount) * light) * offset[..., 1:]
    return TonePlan(shading=offset, amount=amount, tint=tint)


def coloured_light(face: np.ndarray, behind: np.ndarray, skin: np.ndarray, *, sigma: float) -> float:
    """0..1: how much the target's skin colour varies over its face beyond
    the new face's (:func:`~faceweave.compositing.colour.chroma_spread` at
    ``sigma`` over ``skin``, beyond :data:`COLOUR_LIGHT_MARGIN`, in
    :data:`COLOUR_LIGHT_SPAN` units): a coloured
    light (a magenta stage light on one side, a warm lamp and a cool window)
    or a flush, which belong to the photo, not to the person.  A source
    whose skin varies more than the target's gets 0: its own pattern is
    what the usual share of the tint evens out."""
    excess = chroma_spread(behind, skin, sigma) - chroma_spread(face, skin, sigma) - COLOUR_LIGHT_MARGIN
    return float(np.clip(excess / COLOUR_LIGHT_SPAN, 0.0, 1.0))


def skin_tint(
    view: HalfCrop,
    matched: np.ndarray,
    skin: np.ndarray,
    *,
    chroma: float = TINT_CHROMA,
    lightness: float = TINT_LIGHTNESS,
    lids: float = 1.0,
) -> np.ndarray:
    """``(s, s, 3)`` float32 CIELAB offset: the target's skin tint
    (``chroma`` of a*, b*, default :data:`TINT_CHROMA`, and ``lightness``
    of L*, default :data:`TINT_LIGHTNESS`) where its skin shows it, at a
    fine scale, and ``lids`` of the lids' lift (:func:`eyelid_lift`).

    The skin's hue and saturation vary over a face (pinker cheeks, a warmer
    jaw, a cooler shaded side) with the light and the person's skin, not with
    identity; a whole-face colour match keeps the source's pattern, which
    sits on the target's neck as a mask.  Measured only on pixels that look
    like skin in both faces (not makeup, stubble or a strand of hair), and
    applied on the skin away from the eyes and brows, so neither eye shadow
    nor a tinted sclera comes across."""
    # smooth at its scale: measured at half the grid's resolution, then resized
    small = (max(1, view.size[0] // 2), max(1, view.size[1] // 2))
    behind, face, on = _shrunk(view.behind_lab, small), _shrunk(matched, small), _shrunk(skin, small)
    mesh, fs = half_mesh(view.mesh), view.face_size / 2.0
    like = on * _skin_like(behind, on) * _skin_like(face, on)
    fine = shading_offset(face, like, behind, like, sigma=TINT_SIGMA * fs)
    eyes = feature_mask(small, mesh, grow=TINT_EYE_MARGIN * fs)
    weight = feather(on * (1.0 - eyes), erode=0, blur=TINT_FEATHER * fs)
    tint = np.zeros((small[1], small[0], 3), np.float32)
    tint[..., 1:] = fine[..., 1:] * (chroma * weight)[..., None]
    tint[..., 0] = lightness * fine[..., 0] * weight
    if lids >= 1.0:
        tint += eyelid_lift(face, behind, mesh, fs)
    elif lids > 0.0:
        tint += np.float32(lids) * eyelid_lift(face, behind, mesh, fs)
    return cv2.resize(tint, view.size, interpolation=cv2.INTER_LINEAR).astype(np.float32)


def sclera_tone(face: np.ndarray | ShadedLab, behind: np.ndarray, mesh: np.ndarray) -> np.ndarray:
    """``(s, s, 3)`` float32 CIELAB offset (L* only) that gives the whites
    of the new eyes the brightness of the target's (its light), while the
    iris keeps the source's colour: in each eye opening, the lighter half of
    the pixels is taken for the white in either face; the new eye's pixels
    take the difference of the two whites' medians in proportion to how far
    they are from the iris's darkness to the white's (so the iris and the
    lashes do not change).  A glassy grey or over-bright white under a
    differently lit target is what it undoes; the whites' tint stays the
    source's (a target's pink or bloodshot whites do not come across).
    Closed or tiny eyes are left alone."""
    h, w = face.shape[:2]
    out = np.zeros((h, w, 3), np.float32)
    for loop, (outer, inner), (upper, lower) in topo.eyes():
        width = float(np.linalg.norm(mesh[outer, :2] - mesh[inner, :2]))
        gap = float(np.linalg.norm(mesh[upper, :2] - mesh[lower, :2]))
        box = _points_box(mesh[loop, :2], (w, h), margin=1)
        if box is None or gap < SCLERA_MIN_OPEN * width:
            continue
        x0, y0, x1, y1 = box
        opening = polygon_mask((x1 - x0, y1 - y0), mesh[loop, :2] - (x0, y0)) > 0.5
        if int(opening.sum()) < SCLERA_MIN_PIXELS:
            continue
        near, near_behind = face[y0:y1, x0:x1], behind[y0:y1, x0:x1]
        new_l, old_l = near[..., 0][opening], near_behind[..., 0][opening]
        new_white = near[opening][new_l >= np.median(new_l)]
        old_white = near_behind[opening][old_l >= np.median(old_l)]
        change = float(
            np.clip(np.median(old_white[:, 0]) - np.median(new_white[:, 0]), -SCLERA_MAX_CHANGE, SCLERA_MAX_CHANGE)
        )
        # from halfway between the iris's darkness and the white up to the white
        white = float(np.median(new_white[:, 0]))
        iris = (float(np.percentile(new_l, 10)) + white) / 2.0
        share = np.clip((near[..., 0] - iris) / max(white - iris, 1.0), 0.0, 1.0) * opening
        out[y0:y1, x0:x1, 0] += share * change
    return out


def _points_box(points: np.ndarray, size: tuple[int, int], *, margin: int) -> tuple[int, int, int, int] | None:
    """``(x0, y0, x1, y1)``: the grid's box around ``points`` ``(N, 2)``
    grown by ``margin`` pixels and clipped to ``size = (W, H)``; ``None``
    when nothing of it is on the grid."""
    w, h = size
    x0, y0 = np.floor(points.min(axis=0)).astype(int) - margin
    x1, y1 = np.ceil(points.max(axis=0)).astype(int) + margin + 1
    x0, y0, x1, y1 = max(int(x0), 0), max(int(y0), 0), min(int(x1), w), min(int(y1), h)
    return None if x1 <= x0 or y1 <= y0 else (x0, y0, x1, y1)


def cheek_shift(
    face: np.ndarray, behind: np.ndarray, skin: np.ndarray, mesh: np.ndarray, *, target_mesh: np.ndarray | None = None
) -> np.ndarray | None:
    """``(3,)`` float32 CIELAB: the target's cheeks' median (``behind`` where
    ``target_mesh``, default ``mesh``, puts them) minus the new face's
    (``face`` where ``mesh`` puts them), over ``skin`` above a half;
    ``None`` when either has fewer than 16 such pixels.

    The cheeks are where a face is seen against its neck: a source's cheeks
    lit brighter or darker than the rest of its face (its light, its
    make-up) would sit on the target as a pale or grey mask, which the
    face-wide colour match and the broad shading do not undo.  One change
    for both cheeks: a light from one side stays the broad shading's to
    carry.  The target's cheeks are read where its own mesh puts them: a
    source with a longer or wider face puts its cheeks over a different,
    often shaded, part of the target's face."""
    h, w = face.shape[:2]
    cheeks = cheek_polygons((w, h), mesh)
    theirs = cheeks if target_mesh is None else cheek_polygons((w, h), target_mesh)
    sel, sel_t = (cheeks > 0) & (skin > 0.5), (theirs > 0) & (skin > 0.5)
    if int(sel.sum()) < 16 or int(sel_t.sum()) < 16:
        return None
    return np.asarray(np.median(behind[sel_t], axis=0) - np.median(face[sel], axis=0), np.float32)


def cheek_spread(size: tuple[int, int], mesh: np.ndarray, face_size: float) -> np.ndarray:
    """``(H, W)`` float32 in ``[0, 1]``: 1 over the cheek polygons of
    ``mesh`` grown by :data:`CHEEK_SPREAD` of ``face_size``, fading around
    them (``size = (W, H)``)."""
    sigma = CHEEK_SPREAD * face_size
    grown = cv2.dilate(
        cheek_polygons(size, mesh), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * int(sigma) + 1,) * 2)
    )
    return np.clip(2.0 * cv2.GaussianBlur(grown.astype(np.float32), (0, 0), sigma), 0.0, 1.0)


def cheek_polygons(size: tuple[int, int], mesh: np.ndarray) -> np.ndarray:
    """``(H, W)`` uint8, 1 inside both cheek polygons of ``mesh`` (``size = (W, H)``)."""
    cheeks = np.zeros((size[1], size[0]), np.uint8)
    for polygon in (topo.RIGHT_CHEEK, topo.LEFT_CHEEK):
        cv2.fillPoly(cheeks, [np.round(mesh[polygon, :2]).astype(np.int32)], (1,))
    return cheeks


def eyelid_lift(face: np.ndarray, behind: np.ndarray, mesh: np.ndarray, face_size: float) -> np.ndarray:
    """``(s, s, 3)`` float32 CIELAB offset that lifts a source's dark eye
    makeup or shadowed lids to the target's lids: over the skin around the
    eyes (not the eyes and lashes, not the brows), where the new face is
    darker than the target there, its lightness is brought up to the
    target's and its tint with it.  Never darker: a target's own eye
    shadow does not come across."""
    size = (face.shape[1], face.shape[0])
    eyes = eye_mask(size, mesh)
    inner = eye_mask(size, mesh, grow=EYELID_INNER * face_size)
    outer = eye_mask(size, mesh, grow=EYELID_OUTER * face_size)
    brows = cv2.dilate(brow_mask(size, mesh), np.ones((3, 3), np.uint8))
    ring = np.clip(outer - inner - brows, 0.0, 1.0)
    if float(ring.sum()) < 16:
        return np.zeros_like(face)
    offset = shading_offset(face, ring, behind, ring, sigma=TINT_SIGMA * face_size)
    lift = np.clip(offset[..., 0], 0.0, None)
    share = np.clip(lift / EYELID_FULL, 0.0, 1.0)
    weight = feather(ring, erode=0, blur=TINT_FEATHER * face_size) * (1.0 - eyes)
    out = np.zeros_like(face)
    out[..., 0] = lift * weight
    out[..., 1:] = offset[..., 1:] * (share * weight)[..., None]
    return out


def _shrunk(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)


def _skin_like(lab: np.ndarray, region: np.ndarray) -> np.ndarray:
    centre, spread = skin_statistics(lab, region)
    return skin_likelihood(lab, centre, spread, tolerance=CENTRE_TOLERANCE)


def settle_cheeks(
    blended: np.ndarray,
    background: np.ndarray,
    mesh: np.ndarray,
    mask: np.ndarray,
    face_size: float,
    *,
    target_mesh: np.ndarray | None = None,
) -> np.ndarray:
    """``(h, w, 3)`` float32 RGB change that gives the blended face's cheeks
    the target's cheek colour, under ``mask``: :func:`cheek_change` times
    the mask (zeros where there is no change).  ``blended``: float32 RGB
    window; ``background``: the target's float32 RGB window the colour is
    read off; ``mesh``: ``(N, 2+)``, the new face's, and ``target_mesh``,
    the target's in ``background`` (default: ``mesh``), in window pixels."""
    change = cheek_change(blended, background, mesh, face_size, target_mesh=target_mesh)
    if change is None:
        return np.zeros_like(blended)
    return change * per_channel(mask, 3)


def cheek_change(
    blended: np.ndarray,
    background: np.ndarray,
    mesh: np.ndarray,
    face_size: float,
    *,
    target_mesh: np.ndarray | None = None,
) -> np.ndarray | None:
    """The change of :func:`settle_cheeks` before its mask, or ``None``
    when the cheeks need none: the two medians (:func:`cheek_shift`) read
    at full resolution (on a small face a quarter-resolution cheek is a few
    dozen pixels, half of them mixed with the folds beside it), the change
    spread (:func:`cheek_spread`) and converted at a quarter of it."""
    h, w = blended.shape[:2]
    points = np.asarray(mesh, np.float32)[:, :2]
    theirs = points if target_mesh is None else np.asarray(target_mesh, np.float32)[:, :2]
    shift = _full_cheek_shift(blended, background, points, theirs)
    if shift is None or not shift.any():
        return None
    small = (max(1, w // 4), max(1, h // 4))
    scale = np.array([small[0] / w, small[1] / h], np.float32)
    lab = to_lab(np.clip(_shrunk(blended, small), 0, 255))
    # the cheeks are below the eyes: only the eye openings are kept out
    bare = 1.0 - eye_mask(small, points * scale)
    fix = cheek_spread(small, points * scale, face_size / 4.0)[..., None] * shift
    change = _lab_to_rgb(lab + fix * bare[..., None]) - _lab_to_rgb(lab)
    return np.asarray(cv2.resize(change, (w, h), interpolation=cv2.INTER_LINEAR), np.float32)


def _full_cheek_shift(
    blended: np.ndarray, background: np.ndarray, points: np.ndarray, theirs: np.ndarray
) -> np.ndarray | None:
    """:func:`cheek_shift` of two float32 RGB windows at full resolution,
    converted to CIELAB only within the box around both faces' cheeks."""
    polygons = np.concatenate(
        [points[topo.RIGHT_CHEEK], points[topo.LEFT_CHEEK], theirs[topo.RIGHT_CHEEK], theirs[topo.LEFT_CHEEK]]
    )
    box = _points_box(polygons, (blended.shape[1], blended.shape[0]), margin=2)
    if box is None:
        return None
    x0, y0, x1, y1 = box
    cut = (slice(y0, y1), slice(x0, x1))
    offset = np.array([x0, y0], np.float32)
    bare = 1.0 - eye_mask((x1 - x0, y1 - y0), points - offset)
    face = to_lab(np.clip(blended[cut], 0, 255))
    behind = to_lab(np.clip(background[cut], 0, 255))
    return cheek_shift(face, behind, bare, points - offset, target_mesh=theirs - offset)


def _lab_to_rgb(lab: np.ndarray) -> np.ndarray:
    """float32 CIELAB -> float32 RGB in 8-bit levels (not rounded)."""
    return np.asarray(cv2.cvtColor(lab.astype(np.float32), cv2.COLOR_LAB2RGB), np.float32) * 255.0


def blend_window(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """``(x0, y0, x1, y1)``: the blend's support, the mask's bounding box
    grown by the coarsest pyramid level and clipped to the crop; ``None``
    for an empty mask."""
    x, y, w, h = cv2.boundingRect((mask > 0.002).astype(np.uint8))
    if w <= 0 or h <= 0:
        return None
    margin = 2**BLEND_LEVELS
    rows, cols = mask.shape
    return max(x - margin, 0), max(y - margin, 0), min(x + w + margin, cols), min(y + h + margin, rows)


def target_folds(front: np.ndarray, behind: np.ndarray, mesh: np.ndarray, face_size: float) -> np.ndarray:
    """``front`` (float32 RGB) with the detail of ``behind`` (the reshaped
    target crop, the same size) along the nasolabial folds (:func:`fold_zone`):
    below :data:`FOLD_SIGMA` of the face size the creases there are the
    target's, above it the new face's colour and shading.  A smiling
    source's deep folds would otherwise set a smile on a target who is
    speaking or at rest (and a resting source's none on a smiling one); the
    mesh's mouth follows the target's, its creases must too.  ``mesh``:
    ``(N, 2)`` in the arrays' coordinates.  Worked in the zone's box only."""
    width, soft = FOLD_WIDTH * face_size, FOLD_FEATHER * face_size
    points = mesh[np.concatenate([topo.RIGHT_FOLD, topo.LEFT_FOLD])]
    reach = int(np.ceil(width / 2.0 + 3.0 * soft + 2.0))
    found = _points_box(points, (front.shape[1], front.shape[0]), margin=reach)
    if found is None:
        return front
    x0, y0, x1, y1 = found
    zone = fold_zone((x1 - x0, y1 - y0), mesh - (x0, y0), width=width, soft=soft)
    sigma = FOLD_SIGMA * face_size
    box = (slice(y0, y1), slice(x0, x1))
    mine, theirs = front[box], behind[box]
    folded = gaussian_lowpass(mine, sigma) + (theirs - gaussian_lowpass(theirs, sigma))
    out = front.copy()
    out[box] = mine + per_channel(zone, 3) * (folded - mine)
    return out


def blend_face(
    out: SwapOutput,
    behind: np.ndarray,
    mask: np.ndarray,
    plan: ColourPlan,
    *,
    hands: np.ndarray | None,
    face_size: float | None = None,
    target: AlignedCrop | None = None,
    folds: bool = False,
    cheeks: float = 1.0,
) -> np.ndarray:
    """``(S, S, 3)`` uint8: the new face, colour-matched and shaded, blended
    into ``behind`` under ``mask`` by the multi-band blend (full resolution,
    only around the face).  Under ``hands`` the crop behind is kept: the
    blend's low frequencies spread over wide regions, and a hand must not
    take on the face's colour.  With ``face_size`` (crop pixels) the
    cheeks are given the target's cheek colour once more after the blend
    (:func:`settle_cheeks`): its coarsest bands mix in what lies around the
    face (dark hair, a bright wall) over a fifth of the face's width.
    ``target``: the target's crop, whose own cheeks (its pixels where its
    mesh puts them) give that colour; without it, ``behind`` under the new
    face's cheeks does (the reshaped crop there need not hold the target's
    cheeks: its warp fades out towards the face's edge).  ``folds`` (with
    ``face_size``): the creases along the nasolabial folds are the target's
    (:func:`target_folds`; for a face whose target lips are kept, as in
    video, where the mouth follows the speech and its folds must follow
    it; a photo's mouth is the source's, corrected by the expression check,
    and its folds carry much of the likeness: taken from the target they
    cost 0.04 of the judge's d_src).  ``cheeks``: the share of that
    settling taken (``SkinTone.cheeks``); ``plan.share``, of the colour
    mapping."""
    pixels = behind.copy()
    box = blend_window(mask)
    if box is None:
        return pixels
    x0, y0, x1, y1 = box
    roi = (slice(y0, y1), slice(x0, x1))
    offset = upsampled_window(plan.regional + plan.amount * plan.shading, (mask.shape[1], mask.shape[0]), box)
    # the new face colour-matched and shaded where it covers the crop, the
    # crop elsewhere, in 8-bit levels (one compiled pass)
    front = shade_face(to_lab(out.face[roi]), offset, out.coverage, behind, box, colour_map(plan.match, plan.share))
    background = behind[roi].astype(np.float32)
    if folds and face_size is not None:
        front = target_folds(front, background, out.mesh[:, :2] - (x0, y0), face_size)
    blended = laplacian_blend(front, background, mask[roi], levels=BLEND_LEVELS)
    if face_size is not None and cheeks > 0.0:
        reference = background if target is None else target.pixels[roi].astype(np.float32)
        theirs = None if target is None else target.mesh[:, :2] - (x0, y0)
        change = cheek_change(blended, reference, out.mesh[:, :2] - (x0, y0), face_size, target_mesh=theirs)
        if change is not None:  # under the blend's mask, ``cheeks`` of it, in one pass
            add_under(blended, change, mask[roi], 1.0 if cheeks >= 1.0 else cheeks)
    if hands is not None:
        held = hands[roi][..., None]
        blended = blended * (1.0 - held) + background * held
    return to_uint8(np.asarray(blended, np.float32), out=pixels, corner=(x0, y0))
