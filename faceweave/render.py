"""The faces of one frame made and pasted in: :class:`FaceRenderer`.

For each ``(face, source)``: cut the working crop, let the swapper make the
new face, look at its expression (photos only), composite it with the masks
and colour of the options, and paste it back with the frame's own detail.
A swapper that ``batches`` gets every crop of a frame (per source) in one
call; any other swaps face by face, each face cut from the frame as swapped
so far, so a nearer face ends on top.

A neural swapper cuts no working crop: each face goes from the frame onto
the model's template in one warp (:meth:`NeuralSwapper.swap_frame
<faceweave.swappers.neural.base.NeuralSwapper.swap_frame>`) and comes back
from there in one inverse warp, composited as ``SwapOptions.compositing``
says: FaceFusion's masks and paste-back
(:mod:`faceweave.compositing.facefusion`), or faceweave's compositing on
the template crop (:func:`~faceweave.crops.template_crop`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from faceweave.analysis.occluders import Occluders
from faceweave.compositing.blend import DetailPlan, match_detail_planned, paste_back, refine_photo_face, warp_frame
from faceweave.compositing.colour import ColourMatch
from faceweave.compositing.composite import composite
from faceweave.compositing.facefusion import (
    area_mask,
    crop_points,
    move_mask,
    occlusion_mask,
    paste_face,
    paste_mask,
    smooth_occlusion,
)
from faceweave.compositing.plans import PlanUse
from faceweave.compositing.skintone import skin_tone_steps
from faceweave.compositing.values import Composite, FacePlan
from faceweave.crops import cut_crop, template_crop, working_face_size
from faceweave.expression import ExpressionChecker
from faceweave.maskers import FaceMaskModels
from faceweave.options import SwapOptions
from faceweave.profiles import RenderKind, RenderProfile, resolve_profiles
from faceweave.swappers import AlignedCrop, SourceFace, SwapOutput, Swapper
from faceweave.swappers.neural.base import NeuralSwapper, TemplateSwap
from faceweave.timing import timed
from faceweave.types import Face

#: one face to swap and the source to swap it with
Pair = tuple[Face, SourceFace]
#: the scale of skin texture restored from the photo under a softer new face
#: (:func:`~faceweave.compositing.blend.restore_detail`), as a fraction of the
#: face size; photos only, and skipped below :data:`MIN_TEXTURE_SIGMA` pixels,
#: where the grain match of ``match_detail`` already covers it
TEXTURE_SCALE = 0.006
MIN_TEXTURE_SIGMA = 1.0


@dataclass(frozen=True, eq=False)
class FrameFaces:
    """One frame of :meth:`FaceRenderer.render_frames`: ``pixels`` ``(H, W,
    3)`` uint8 RGB, its ``(face, source)`` pairs in the order they are
    pasted, and per pair a fixed colour mapping (or ``None``) and its face
    plan use (or ``None``); empty ``colours`` and ``plans`` mean ``None``
    for every pair; ``speech``: the frame's mel window for the lip syncer
    (``None``: silence)."""

    pixels: np.ndarray
    chosen: tuple[Pair, ...]
    colours: tuple[ColourMatch | None, ...] = ()
    plans: tuple[PlanUse | None, ...] = ()
    speech: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("colours", "plans"):
            value = getattr(self, name)
            if not value:
                object.__setattr__(self, name, (None,) * len(self.chosen))
            elif len(value) != len(self.chosen):
                raise ValueError(f"FrameFaces: {len(self.chosen)} faces but {len(value)} {name}")


def _scale(matrix: np.ndarray) -> float:
    """The scale of a ``(2, 3)`` similarity (frame -> crop)."""
    return float(np.sqrt(abs(np.linalg.det(np.asarray(matrix, np.float64)[:, :2]))))


class FaceRenderer:
    """Cuts, swaps, checks and finishes faces for one owner's options.

    ``occluders``: the person and hand models of the masks (owned by the
    caller); ``expression``: the photo's expression check; ``face_masks``:
    FaceFusion's occluder and face parser when the options name them (neural
    swappers).  The swapper is given per call: the renderer holds no model
    of its own."""

    def __init__(
        self,
        options: SwapOptions,
        *,
        occluders: Occluders,
        expression: ExpressionChecker,
        face_masks: FaceMaskModels | None = None,
    ) -> None:
        self.options = options
        self.occluders = occluders
        self.expression = expression
        self.face_masks = face_masks if face_masks is not None else FaceMaskModels()
        #: the steps of each kind of output (:mod:`faceweave.profiles`)
        self.profiles = resolve_profiles(options.masks)
        #: how much of the target's skin the new faces take (:mod:`faceweave.compositing.skintone`)
        self.skin_tone = skin_tone_steps(options.skin_tone)

    def render(
        self,
        swapper: Swapper,
        pixels: np.ndarray,
        chosen: Sequence[Pair],
        timings: dict[str, float],
        colours: Sequence[ColourMatch | None],
        *,
        profile: RenderProfile | None = None,
        plans: Sequence[PlanUse | None] | None = None,
    ) -> np.ndarray:
        """A new ``(H, W, 3)`` frame with each face of ``chosen`` swapped in
        order (``colours``: a fixed colour mapping per face, or ``None``;
        ``profile``: the steps of the output, default the video's
        (:meth:`profile`); ``plans``: per face, whether it makes or reuses
        its track's face plan, or ``None``)."""
        held = list(plans) if plans is not None else [None] * len(chosen)
        how = profile if profile is not None else self.profile("video")
        if isinstance(swapper, NeuralSwapper):
            return self._from_template(swapper, pixels, chosen, timings, colours, held, profile=how)
        if len(chosen) > 1 and swapper.batches:
            return self._batched(swapper, pixels, chosen, timings, colours, held, profile=how)
        return self._in_turn(swapper, pixels, chosen, timings, colours, held, profile=how)

    def profile(self, kind: RenderKind) -> RenderProfile:
        """The steps of ``kind``'s output under this renderer's options (resolved once)."""
        return self.profiles[kind]

    def _batched(
        self,
        swapper: Swapper,
        pixels: np.ndarray,
        chosen: Sequence[Pair],
        timings: dict[str, float],
        colours: Sequence[ColourMatch | None],
        plans: Sequence[PlanUse | None],
        *,
        profile: RenderProfile,
    ) -> np.ndarray:
        """One inference per source for all its faces (crops are cut from the
        frame before any face is pasted), then each face is finished in order."""
        with timed(timings, "crop"):
            crops = [cut_crop(pixels, face, face_size=self.face_size(face)) for face, _ in chosen]
        outputs: dict[int, SwapOutput] = {}
        groups = _by_source(chosen)
        with timed(timings, "swap"):
            for members in groups:
                results = swapper.swap_batch(chosen[members[0]][1], [crops[k] for k in members])
                outputs.update(zip(members, results, strict=False))
        out = pixels.copy()
        for k, (crop, colour) in enumerate(zip(crops, colours, strict=False)):
            self.finish(pixels, crop, outputs[k], timings, into=out, colour=colour, profile=profile, plan=plans[k])
        return out

    def render_frames(
        self,
        swapper: Swapper,
        frames: Sequence[FrameFaces],
        timings: dict[str, float],
        *,
        profile: RenderProfile | None = None,
    ) -> list[np.ndarray]:
        """:meth:`render` for several frames, in order: a neural swapper
        whose model takes a dynamic batch swaps the faces of all of them in
        one inference per source (faces from several frames in one call),
        then each frame is composited in turn, as :meth:`render` would have
        done (the same frames).  Any other swapper renders frame by frame."""
        how = profile if profile is not None else self.profile("video")
        if not (isinstance(swapper, NeuralSwapper) and swapper.dynamic_batch):
            return [
                self.render(swapper, f.pixels, f.chosen, timings, f.colours, profile=how, plans=f.plans) for f in frames
            ]
        with timed(timings, "swap"):
            swaps = _template_swaps(swapper, frames)
        return [
            self._paste_templates(f.pixels, f.chosen, found, timings, f.colours, f.plans, profile=how)
            for f, found in zip(frames, swaps, strict=True)
        ]

    def _from_template(
        self,
        swapper: NeuralSwapper,
        pixels: np.ndarray,
        chosen: Sequence[Pair],
        timings: dict[str, float],
        colours: Sequence[ColourMatch | None],
        plans: Sequence[PlanUse | None],
        *,
        profile: RenderProfile,
    ) -> np.ndarray:
        """A neural swapper's faces: one inference per source, each face warped
        once from the frame onto the model's template, then pasted back in
        order the way ``options.compositing`` says (a face kept without a
        mesh always FaceFusion's way: faceweave's masks are drawn from the
        mesh)."""
        with timed(timings, "swap"):
            swaps = _template_swaps(swapper, [FrameFaces(pixels, tuple(chosen))])[0]
        return self._paste_templates(pixels, chosen, swaps, timings, colours, plans, profile=profile)

    def _paste_templates(
        self,
        pixels: np.ndarray,
        chosen: Sequence[Pair],
        swaps: Sequence[TemplateSwap],
        timings: dict[str, float],
        colours: Sequence[ColourMatch | None],
        plans: Sequence[PlanUse | None],
        *,
        profile: RenderProfile,
    ) -> np.ndarray:
        """A copy of ``pixels`` with each swapped face (``swaps``, in the
        order of ``chosen``) pasted back in order."""
        facefusion = self.options.neural_compositing() == "facefusion"
        out = pixels.copy()
        for k, ((face, _), colour) in enumerate(zip(chosen, colours, strict=False)):
            if facefusion or face.mesh is None:  # faceweave's compositing reads the mesh
                self.paste_facefusion(swaps[k], timings, into=out, face=face)
            else:
                crop, result = template_crop(pixels, face, swaps[k], face_size=self.face_size(face))
                keep = self.kept_face(swaps[k], crop, timings, face=face)
                self.finish(
                    pixels, crop, result, timings, into=out, colour=colour, profile=profile, keep=keep, plan=plans[k]
                )
        return out

    def paste_facefusion(
        self, swap: TemplateSwap, timings: dict[str, float], *, into: np.ndarray, face: Face | None = None
    ) -> None:
        """FaceFusion's compositing of one face into ``into`` (the frame as
        swapped so far): the swapper's box mask, the occluder models' masks
        and the face mask areas of ``face`` when the mask options turn them
        on, one inverse warp."""
        found = self.occluders.find(swap.target, timings)
        occluded = self.face_masks.occluded(swap.target, timings)
        region = self.face_masks.region(swap.face, timings)
        area = self.area(swap, face, timings)
        with timed(timings, "paste"):
            mask = paste_mask(swap.mask, [occlusion_mask(found.person, found.hands, occluded), region, area])
            paste_face(into, swap.face, mask, swap.matrix, out=into)

    def area(self, swap: TemplateSwap, face: Face | None, timings: dict[str, float]) -> np.ndarray | None:
        """FaceFusion's area mask of ``face`` on the template crop of ``swap``
        (``MaskOptions.face_mask_areas``, from the face's 68 landmarks);
        ``None`` when no area is chosen or the face has no 68 landmarks."""
        areas = self.options.masks.face_mask_areas
        if not areas or face is None or face.landmarks68 is None:
            return None
        with timed(timings, "area"):
            return area_mask(int(swap.face.shape[0]), crop_points(face.landmarks68, swap.matrix), areas)

    def kept_face(
        self, swap: TemplateSwap, crop: AlignedCrop, timings: dict[str, float], *, face: Face | None = None
    ) -> np.ndarray | None:
        """For faceweave's compositing of a neural face: where FaceFusion's
        occluder (on the target's template crop), face parser (on the
        swapped face) and face mask areas (``face``'s 68 landmarks) let the
        new face show, each smoothed as FaceFusion does, their minimum moved
        onto the working ``crop``; ``None`` when none is on.  It joins
        faceweave's occlusion mask as the person mask does (what it calls
        not face stays in front)."""
        area = self.area(swap, face, timings)
        if not self.face_masks.active and area is None:
            return None
        occluded = self.face_masks.occluded(swap.target, timings)
        parts = [smooth_occlusion(occluded)] if occluded is not None else []
        region = self.face_masks.region(swap.face, timings)
        parts += [m for m in (region, area) if m is not None]
        keep = np.minimum.reduce(parts)
        return move_mask(keep, swap.matrix, crop.matrix, int(crop.pixels.shape[0]))

    def _in_turn(
        self,
        swapper: Swapper,
        pixels: np.ndarray,
        chosen: Sequence[Pair],
        timings: dict[str, float],
        colours: Sequence[ColourMatch | None],
        plans: Sequence[PlanUse | None],
        *,
        profile: RenderProfile,
    ) -> np.ndarray:
        """Face by face into one copy of the frame, each cut from the frame
        as swapped so far."""
        out = pixels.copy()
        for (face, source), colour, plan in zip(chosen, colours, plans, strict=False):
            with timed(timings, "crop"):
                crop = cut_crop(out, face, face_size=self.face_size(face))
            with timed(timings, "swap"):
                result = swapper.swap(source, crop)
            if profile.expression_check and self.expression.wanted(face.size):
                result = self.expression.check(swapper, crop, source, result, timings, colour)
            self.finish(pixels, crop, result, timings, into=out, colour=colour, profile=profile, plan=plan)
        return out

    def face_size(self, face: Face) -> int:
        """Face size in the working crop (:func:`~faceweave.crops.working_face_size`)."""
        return working_face_size(face, self.options.working_size)

    def finish(
        self,
        pixels: np.ndarray,
        crop: AlignedCrop,
        out: SwapOutput,
        timings: dict[str, float],
        *,
        into: np.ndarray,
        colour: ColourMatch | None = None,
        profile: RenderProfile | None = None,
        keep: np.ndarray | None = None,
        plan: PlanUse | None = None,
    ) -> None:
        """Masks, colour and blending of a swapper's output, pasted into
        ``into``: a caller-owned copy of ``pixels`` that the frame's faces are
        pasted into (so a frame with many faces is copied once), while the
        grain and blur to match are read off ``pixels``, the target's own
        (``keep``: where the mask models let the new face show, see
        :meth:`kept_face`; ``profile``: the steps of the output, default
        the video's; ``plan``: this face makes its track's face plan, or
        reuses it, :mod:`faceweave.compositing.plans`)."""
        how = profile if profile is not None else self.profile("video")
        held = self._reused(plan, timings)
        making = plan.slot if plan is not None and plan.makes else None  # this face makes its track's plan
        try:
            comp = self._composite(crop, out, timings, colour, profile=how, keep=keep, plan=held)
            if making is not None:  # the later frames composite while this one pastes
                making.put(comp.plan)
            with timed(timings, "paste"):
                if comp.warp is not None:
                    warp_frame(into, comp.warp, crop.matrix, out=into)
                paste_back(into, comp.pixels, comp.paste, crop.matrix, out=into)
                if not how.photo_detail:  # a video keeps its frame rate: grain and blur only
                    detail = self._reused_detail(plan, held, timings)
                    detail = match_detail_planned(
                        pixels, into, comp.detail, crop.matrix, blur_mask=comp.mask, plan=detail
                    )
                    if making is not None:
                        making.put_detail(detail)
                    return
                self._refine_photo(pixels, crop, comp, into=into)
        finally:
            if making is not None:  # what was not handed over when this face failed: the later frames make their own
                making.give_up()

    def _refine_photo(self, pixels: np.ndarray, crop: AlignedCrop, comp: Composite, *, into: np.ndarray) -> None:
        """A photo's grain, blur and sharpness, and the skin's texture when
        the face is large enough."""
        width = crop.face_size / _scale(crop.matrix)
        sigma = TEXTURE_SCALE * width
        texture = sigma if sigma >= MIN_TEXTURE_SIGMA else None
        refine_photo_face(
            pixels, into, comp.detail, comp.mask, crop.matrix, face_width=width, texture_sigma=texture, out=into
        )

    @staticmethod
    def _reused(plan: PlanUse | None, timings: dict[str, float]) -> FacePlan | None:
        """The track's face plan when this face reuses it (waiting for the
        earlier frame's render to hand over its masks and tone), else ``None``."""
        if plan is None or plan.makes:
            return None
        with timed(timings, "plan"):
            return plan.slot.get()

    @staticmethod
    def _reused_detail(plan: PlanUse | None, held: FacePlan | None, timings: dict[str, float]) -> DetailPlan | None:
        """How the track's plan matches the detail, when this face reuses a
        plan it got (waiting for the earlier frame's paste), else ``None``."""
        if plan is None or plan.makes or held is None:
            return None
        with timed(timings, "plan"):
            return plan.slot.get_detail()

    def _composite(
        self,
        crop: AlignedCrop,
        out: SwapOutput,
        timings: dict[str, float],
        colour: ColourMatch | None,
        *,
        profile: RenderProfile,
        keep: np.ndarray | None = None,
        plan: FacePlan | None = None,
    ) -> Composite:
        found = self.occluders.find(crop.pixels, timings)
        person = found.person
        if keep is not None:
            person = keep if person is None else np.minimum(person, keep).astype(np.float32)
        with timed(timings, "blend"):
            return composite(
                crop,
                out,
                mask_options=self.options.masks,
                shading=self.options.shading,
                person_mask=person,
                colour=colour,
                hands_mask=found.hands,
                target_lips=profile.target_lips,
                folds=profile.folds,
                warp_frame=profile.warp_frame,
                plan=plan,
                skin_tone=self.skin_tone,
            )


def _template_swaps(swapper: NeuralSwapper, frames: Sequence[FrameFaces]) -> list[list[TemplateSwap]]:
    """Per frame, its faces swapped on the template (in the order of its
    ``chosen``): one :meth:`~NeuralSwapper.swap_frames` per source for the
    faces of all ``frames``."""
    owners = [(n, k) for n, f in enumerate(frames) for k in range(len(f.chosen))]
    pairs = [frames[n].chosen[k] for n, k in owners]
    found: dict[tuple[int, int], TemplateSwap] = {}
    for members in _by_source(pairs):
        faces = [(frames[owners[i][0]].pixels, pairs[i][0].kps5) for i in members]
        found.update(zip((owners[i] for i in members), swapper.swap_frames(pairs[members[0]][1], faces), strict=True))
    return [[found[(n, k)] for k in range(len(f.chosen))] for n, f in enumerate(frames)]


def _by_source(chosen: Sequence[Pair]) -> list[list[int]]:
    """The indices of ``chosen`` grouped by source (one inference per source), in first-seen order."""
    groups: dict[int, list[int]] = {}
    for k, (_, source) in enumerate(chosen):
        groups.setdefault(id(source), []).append(k)
    return list(groups.values())
