"""The optional steps after a swap: :class:`Enhancers`.

Which enhancers run, and how much of their result is kept, come from
:class:`~faceweave.options.EnhancerOptions`; their models come from the
owner's :class:`~faceweave.sessions.ModelSessions` (so the enhancers hold
nothing to close).  With none asked for, nothing is imported or loaded.

The order: the deep swapper, the expression restorer (which needs the frame
as it was before the swap), the age modifier, the face editor, the lip
syncer, the face enhancer, the background remover, the frame colorizer,
the frame enhancer.  The lip syncer follows a frame's
window of speech (:class:`~faceweave.audio.speech.Speech`, which
:meth:`FaceSwapper.read_speech <faceweave.pipeline.FaceSwapper.read_speech>`
makes); a photo or a live frame without one gets silence, as in FaceFusion.
The background remover's mask comes back beside the pixels
(:meth:`Enhancers.finish`), for a photo's alpha.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from faceweave.options import EnhancerOptions, MaskOptions
from faceweave.sessions import ModelSessions
from faceweave.timing import timed
from faceweave.types import Face

if TYPE_CHECKING:
    from faceweave.enhancers import BackgroundRemover, FaceEnhancer, FrameColorizer, FrameEnhancer
    from faceweave.enhancers.age import AgeModifier
    from faceweave.enhancers.deep import DeepSwapper
    from faceweave.enhancers.editor import FaceEditor
    from faceweave.enhancers.lips import LipSyncer
    from faceweave.enhancers.restorer import ExpressionRestorer


@dataclass(frozen=True)
class Finished:
    """A swapped frame after the enhancers: ``pixels`` (a frame enhancer
    may have scaled them) and the background remover's foreground ``mask``
    (uint8, at the size the remover saw the frame; ``None`` without one)."""

    pixels: np.ndarray
    mask: np.ndarray | None = None


@dataclass(frozen=True)
class Enhancers:
    """The deep swapper, expression restorer, age modifier, face editor, lip
    syncer, face enhancer, background remover, frame colorizer and frame
    enhancer of a swap (``None``: not used), applied in that
    order."""

    face: FaceEnhancer | None = None
    frame: FrameEnhancer | None = None
    face_blend: float = 0.8
    frame_blend: float = 1.0
    colorizer: FrameColorizer | None = None
    colorizer_blend: float = 1.0
    background: BackgroundRemover | None = None
    lips: LipSyncer | None = None
    age: AgeModifier | None = None
    restorer: ExpressionRestorer | None = None
    editor: FaceEditor | None = None
    deep: DeepSwapper | None = None

    @classmethod
    def load(
        cls,
        options: EnhancerOptions,
        sessions: ModelSessions,
        *,
        facefusion: bool = False,
        masks: MaskOptions | None = None,
    ) -> Enhancers:
        """The enhancers ``options`` ask for, their models loaded from
        ``sessions`` (``facefusion``: the face enhancer cuts, pastes and
        blends as FaceFusion does; ``masks``: the face mask blur and padding
        of EDTalk's box mask)."""
        face = frame = colorizer = background = None
        lips = _lip_syncer(options, sessions, masks or MaskOptions())
        age = _age_modifier(options, sessions, masks or MaskOptions())
        restorer = _expression_restorer(options, sessions, masks or MaskOptions())
        editor = _face_editor(options, sessions, masks or MaskOptions())
        deep = _deep_swapper(options, sessions, masks or MaskOptions())
        if options.face is not None or options.frame is not None:
            from faceweave.enhancers.factory import load_enhancers

            face, frame = load_enhancers(
                options, pool=sessions.open(), provider=sessions.provider, facefusion=facefusion
            )
        if options.background is not None:
            from faceweave.enhancers.background import BackgroundRemover

            model = sessions.open().get(options.background, sessions.provider)
            background = BackgroundRemover(
                model, name=options.background, fill=options.background_fill, despill=options.background_despill
            )
        if options.colorizer is not None:
            from faceweave.enhancers.colorizer import FrameColorizer

            model = sessions.open().get(options.colorizer, sessions.provider)
            colorizer = FrameColorizer(model, name=options.colorizer, size=options.colorizer_size)
        return cls(
            face=face,
            frame=frame,
            face_blend=options.face_blend,
            frame_blend=options.frame_blend,
            colorizer=colorizer,
            colorizer_blend=options.colorizer_blend,
            background=background,
            lips=lips,
            age=age,
            restorer=restorer,
            editor=editor,
            deep=deep,
        )

    @property
    def whole_frame(self) -> bool:
        """Whether a step changes whole frames, faces or not (the frame
        enhancer, colorizer or background remover): a frame with no face
        to swap goes through them too."""
        return any(step is not None for step in (self.frame, self.colorizer, self.background))

    @property
    def any(self) -> bool:
        """Whether any step runs."""
        steps = (
            self.deep,
            self.restorer,
            self.age,
            self.editor,
            self.lips,
            self.face,
            self.frame,
            self.colorizer,
            self.background,
        )
        return any(step is not None for step in steps)

    def apply(
        self,
        pixels: np.ndarray,
        faces: Sequence[Face],
        timings: dict[str, float] | None = None,
        *,
        speech: np.ndarray | None = None,
        original: np.ndarray | None = None,
    ) -> np.ndarray:
        """The steps on a swapped ``(H, W, 3)`` frame (the background
        remover's mask left out: a video frame has no alpha): ``pixels``
        itself when there are none, else a new frame (a frame enhancer may
        change its size).  ``speech``: the frame's ``(80, 16)`` mel window
        for the lip syncer (``None``: silence); ``original``: the frame
        before the swap, for the expression restorer (``None``: ``pixels``)."""
        return self.finish(pixels, faces, timings, speech=speech, original=original).pixels

    def finish(
        self,
        pixels: np.ndarray,
        faces: Sequence[Face],
        timings: dict[str, float] | None = None,
        *,
        speech: np.ndarray | None = None,
        original: np.ndarray | None = None,
    ) -> Finished:
        """The steps on a swapped frame, and the background remover's mask."""
        if not self.any:
            return Finished(pixels)
        mask = None
        timings = {} if timings is None else timings
        out = pixels
        if self.deep is not None and len(faces) > 0:
            with timed(timings, "deep"):
                out = self.deep.swap(out, list(faces))
        if self.restorer is not None and len(faces) > 0:
            with timed(timings, "restore"):
                out = self.restorer.restore(out, pixels if original is None else original, list(faces))
        if self.age is not None and len(faces) > 0:
            with timed(timings, "age"):
                out = self.age.modify(out, list(faces))
        if self.editor is not None and len(faces) > 0:
            with timed(timings, "edit"):
                out = self.editor.apply(out, list(faces))
        if self.lips is not None and len(faces) > 0:
            with timed(timings, "lips"):
                out = self.lips.sync(out, list(faces), speech)
        with timed(timings, "enhance"):
            if self.face is not None and len(faces) > 0:
                out = self.face.enhance(out, list(faces), blend=self.face_blend)
            if self.background is not None:
                removed = self.background.remove(out)
                out, mask = removed.pixels, removed.mask
            if self.colorizer is not None:
                out = self.colorizer.colorize(out, blend=self.colorizer_blend)
            if self.frame is not None:
                out = self.frame.enhance(out, blend=self.frame_blend)
        return Finished(out, mask)


def _lip_syncer(options: EnhancerOptions, sessions: ModelSessions, masks: MaskOptions) -> LipSyncer | None:
    """The lip syncer ``options`` ask for (``None``: none)."""
    if options.lip_syncer is None:
        return None
    from faceweave.enhancers.lips import LipSyncer

    return LipSyncer(
        sessions.open().get(options.lip_syncer, sessions.provider),
        name=options.lip_syncer,
        weight=options.lip_syncer_weight,
        mask_blur=masks.face_mask_blur,
        mask_padding=masks.face_mask_padding,
    )


def _age_modifier(options: EnhancerOptions, sessions: ModelSessions, masks: MaskOptions) -> AgeModifier | None:
    """The age modifier ``options`` ask for, with FRAN's face classifier (``None``: none)."""
    if options.age_modifier is None:
        return None
    from faceweave.analysis.face_classifier import FaceClassifier
    from faceweave.enhancers.age import AgeModifier
    from faceweave.models.needed import age_models

    pool = sessions.open()
    classifier = None
    if len(age_models(options.age_modifier)) > 1:
        classifier = FaceClassifier(pool.get(age_models(options.age_modifier)[0], sessions.provider))
    return AgeModifier(
        pool.get(options.age_modifier, sessions.provider),
        name=options.age_modifier,
        direction=options.age_modifier_direction,
        classifier=classifier,
        mask_blur=masks.face_mask_blur,
    )


def _expression_restorer(
    options: EnhancerOptions, sessions: ModelSessions, masks: MaskOptions
) -> ExpressionRestorer | None:
    """The expression restorer ``options`` ask for, with LivePortrait's models (``None``: none)."""
    if options.expression_restorer is None:
        return None
    from faceweave.enhancers.restorer import ExpressionRestorer, LivePortrait
    from faceweave.names import LIVE_PORTRAIT, RESTORER_PARTS

    pool = sessions.open()
    features, motion, generator = (pool.get(LIVE_PORTRAIT[part], sessions.provider) for part in RESTORER_PARTS)
    return ExpressionRestorer(
        LivePortrait(features, motion, generator),
        factor=options.expression_restorer_factor,
        areas=options.expression_restorer_areas,
        mask_blur=masks.face_mask_blur,
    )


def _face_editor(options: EnhancerOptions, sessions: ModelSessions, masks: MaskOptions) -> FaceEditor | None:
    """The face editor ``options`` ask for, with LivePortrait's six models (``None``: none)."""
    if options.edit.model is None:
        return None
    from faceweave.enhancers.editor import FaceEditor
    from faceweave.enhancers.restorer import LivePortrait
    from faceweave.names import LIVE_PORTRAIT

    pool = sessions.open()
    parts = {part: pool.get(name, sessions.provider) for part, name in LIVE_PORTRAIT.items()}
    portrait = LivePortrait(
        parts["feature_extractor"],
        parts["motion_extractor"],
        parts["generator"],
        eye=parts["eye_retargeter"],
        lip=parts["lip_retargeter"],
        stitcher=parts["stitcher"],
    )
    return FaceEditor(portrait, options.edit, mask_blur=masks.face_mask_blur)


def _deep_swapper(options: EnhancerOptions, sessions: ModelSessions, masks: MaskOptions) -> DeepSwapper | None:
    """The deep swapper ``options`` ask for (``None``: none)."""
    if options.deep_swapper is None:
        return None
    from faceweave.enhancers.deep import DeepSwapper
    from faceweave.models.deepfacelive import catalog_name

    return DeepSwapper(
        sessions.open().get(catalog_name(options.deep_swapper), sessions.provider),
        name=options.deep_swapper,
        morph=options.deep_swapper_morph,
        mask_blur=masks.face_mask_blur,
        mask_padding=masks.face_mask_padding,
        areas=masks.face_mask_areas,
    )
