"""The image face-swap pipeline: :class:`FaceSwapper`.

It wires components that do not know about it, the way a diffusers pipeline
registers its modules: the face analyser; a swapper from the registry, built
from a :class:`~faceweave.swappers.SwapperContext`; the
:class:`~faceweave.sources.SourceCache` (decoding, prepared sources, the
reference face); the :class:`~faceweave.expression.ExpressionChecker`; the
:class:`~faceweave.enhancement.Enhancers`; the
:class:`~faceweave.sessions.ModelSessions` the neural ones load from; and the
pure crop, compositing and paste-back functions.  Video reuses
:meth:`FaceSwapper.load_sources`, :meth:`FaceSwapper.choose_source` and
:meth:`FaceSwapper.swap_many` frame by frame.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import cv2
import numpy as np

from faceweave.analysis import FaceAnalyser
from faceweave.analysis.occluders import Occluders
from faceweave.compositing.colour import ColourMatch
from faceweave.compositing.plans import PlanUse
from faceweave.crops import cut_crop
from faceweave.enhancement import Enhancers
from faceweave.errors import InputError, InvalidOptionError, MeshlessFaceError
from faceweave.expression import ExpressionChecker
from faceweave.maskers import FaceMaskModels
from faceweave.models.needed import NeededModel, check_present, needed_models
from faceweave.options import SwapOptions
from faceweave.profiles import RenderKind
from faceweave.provenance.stamp import Provenance, stamp_image
from faceweave.render import FaceRenderer, FrameFaces
from faceweave.sessions import ModelSessions
from faceweave.sources import SOURCE_CACHE, ImageInput, SourceCache
from faceweave.swappers import AlignedCrop, SourceFace, SwapOutput, Swapper, SwapperContext
from faceweave.swappers.keep import KeepSwapper
from faceweave.swappers.neural.base import NeuralSwapper
from faceweave.swappers.registry import create_swapper
from faceweave.targets import TargetFaces
from faceweave.threads import photo_threads
from faceweave.timing import timed
from faceweave.types import Face, Image, PhotoSwap, SkippedFace, SwappedFace, SwapResult

if TYPE_CHECKING:
    from faceweave.audio.speech import Speech
    from faceweave.enhancers import FaceEnhancer, FrameEnhancer
    from faceweave.runtime import ProviderConfig, SessionPool

__all__ = ["FaceSwapper", "ImageInput", "cut_crop"]

log = logging.getLogger("faceweave")


class FaceSwapper:
    """Swap faces in images.

    >>> swapper = FaceSwapper()
    >>> result = swapper.swap(["me.jpg"], "photo.jpg")   # doctest: +SKIP
    >>> result.image.shape, [s.target_index for s in result.swapped]  # doctest: +SKIP
    >>> result.save("out.png")  # watermarked pixels, "AI-generated" label  # doctest: +SKIP

    Owns its models; call :meth:`close` or use it as a context manager.
    Its components: ``analyser``, ``swapper``, ``sources``
    (:class:`~faceweave.sources.SourceCache`), ``targets``
    (:class:`~faceweave.targets.TargetFaces`), ``expression``
    (:class:`~faceweave.expression.ExpressionChecker`), ``occluders``,
    ``renderer`` (:class:`~faceweave.render.FaceRenderer`), ``enhancers``
    (:class:`~faceweave.enhancement.Enhancers`) and ``sessions``
    (:class:`~faceweave.sessions.ModelSessions`).
    """

    def __init__(
        self,
        options: SwapOptions = SwapOptions(),
        *,
        analyser: FaceAnalyser | None = None,
        swapper: Swapper | None = None,
        enhancers: Enhancers | None = None,
        face_masks: FaceMaskModels | None = None,
        occluders: Occluders | None = None,
        sources: SourceCache | None = None,
        source_cache: int = SOURCE_CACHE,
        provenance: Provenance | None = None,
        sessions: ModelSessions | None = None,
    ) -> None:
        """Each component defaults to the one ``options`` build; one given
        here is used instead and stays its caller's (not closed by
        :meth:`close`): ``analyser``, ``swapper`` (a registered
        :class:`~faceweave.swappers.Swapper` or any object of that protocol),
        ``enhancers``, ``face_masks`` (FaceFusion's occluder and parser),
        ``occluders`` (person segmentation and hands) and ``sources`` (a
        :class:`~faceweave.sources.SourceCache` over the same analyser and
        swapper, shared by several swappers) and ``sessions`` (the
        :class:`~faceweave.sessions.ModelSessions` the neural models are
        loaded from, shared by several swappers: a node's live sessions share
        one loaded copy of each model and batch their calls to it; its
        runtime must be ``options.runtime``, else :class:`InvalidOptionError`).

        ``source_cache``: how many prepared source faces to keep for
        reuse (0: none; a server handling other people's photos keeps none),
        when ``sources`` is not given.

        ``provenance`` marks what :meth:`swap` returns and the videos a
        :class:`~faceweave.video.pipeline.VideoSwapper` makes with this
        swapper.  ``None`` (the default): each swap and each video is a run of
        its own, ``Provenance.new()``: a new run id, the invisible watermark
        on.  ``Provenance.new(watermark=False)`` turns the watermark off, as
        the CLI's ``--no-watermark`` does: the label still says
        "AI-generated", the result's ``provenance`` keeps the choice, and each
        swap made so logs it (``faceweave`` logger, INFO)."""
        self.options = options
        self.provenance = provenance
        #: the components built here (closed by :meth:`close`), not given by the caller
        given = {
            "analyser": analyser,
            "swapper": swapper,
            "occluders": occluders,
            "sources": sources,
            "sessions": sessions,
        }
        self._owned = frozenset(name for name, value in given.items() if value is None)
        if sessions is not None and sessions.runtime != options.runtime:
            raise InvalidOptionError("the model sessions given run on other runtime options than the swap's")
        #: the ONNX sessions of the neural models (swapper, enhancers, a chosen face detector and
        #: landmarker), opened when one is used
        self.sessions = sessions if sessions is not None else ModelSessions(options.runtime)
        try:
            needed = needed_models(options)
            if needed:  # every file there before any model loads (ChosenModelMissingError)
                check_present(self.sessions.open().store, needed)
            self.analyser = analyser if analyser is not None else FaceAnalyser(options.analysis, sessions=self.sessions)
        except BaseException:
            self._close_sessions()
            raise
        try:
            self.swapper = (
                create_swapper(options.swapper, SwapperContext(options=options, sessions=self.sessions))
                if swapper is None
                else swapper
            )
            facefusion = isinstance(self.swapper, NeuralSwapper) and options.neural_compositing() == "facefusion"
            self.enhancers = (
                Enhancers.load(options.enhance, self.sessions, facefusion=facefusion, masks=options.masks)
                if enhancers is None
                else enhancers
            )
            #: FaceFusion's occluder and face parser, when the mask options name them
            self.face_masks = FaceMaskModels.load(options.masks, self.sessions) if face_masks is None else face_masks
        except BaseException:
            self.close()
            raise
        self.sources = (
            SourceCache(self.analyser, self.swapper, options=options, capacity=source_cache)
            if sources is None
            else sources
        )
        self.targets = TargetFaces(self.analyser, options)
        self.expression = ExpressionChecker(self.analyser, options)
        #: the person segmentation and hand models, when the mask options ask for them
        self.occluders = Occluders.from_options(options.masks) if occluders is None else occluders
        self.renderer = FaceRenderer(
            options, occluders=self.occluders, expression=self.expression, face_masks=self.face_masks
        )
        #: the last averaged sources: (their ids, the average, the sources, which keep the ids valid)
        self._average: tuple[tuple[int, ...], SourceFace, tuple[SourceFace, ...]] | None = None

    @property
    def pool(self) -> SessionPool | None:
        """The :class:`~faceweave.runtime.SessionPool` of the neural models, once one is loaded."""
        return self.sessions.pool

    @property
    def provider(self) -> ProviderConfig:
        """The :class:`~faceweave.runtime.ProviderConfig` of the runtime options."""
        return self.sessions.provider

    @property
    def face_enhancer(self) -> FaceEnhancer | None:
        return self.enhancers.face

    @property
    def frame_enhancer(self) -> FrameEnhancer | None:
        return self.enhancers.frame

    def model_loads(self) -> list[dict]:
        """The neural models loaded for this swapper: provider, load and
        warm-up milliseconds (empty for the classical swapper)."""
        return self.sessions.loads()

    def run_provenance(self) -> Provenance:
        """The :class:`Provenance` of one run (a photo, a video): the one
        given to the constructor, or a new one (watermark on)."""
        return self.provenance if self.provenance is not None else Provenance.new()

    # -- life cycle -------------------------------------------------------
    def prepare(self) -> float:
        """Load and warm up every model; returns the milliseconds it took."""
        start = time.perf_counter()
        self.analyser.prepare(embeddings=True)
        self.analyser.analyse(np.zeros((64, 64, 3), np.uint8))
        self.swapper.prepare()
        self.occluders.prepare()
        return (time.perf_counter() - start) * 1000.0

    def close(self) -> None:
        """Close the components built here (not those given to the constructor), the model sessions among them."""
        for name in ("analyser", "swapper", "occluders"):
            if name in self._owned and getattr(self, name, None) is not None:
                getattr(self, name).close()
        if "sources" in self._owned and getattr(self, "sources", None) is not None:
            self.sources.clear()
        self._close_sessions()

    def _close_sessions(self) -> None:
        """Close the model sessions, unless they were given (another owner's)."""
        if "sessions" in self._owned:
            self.sessions.close()

    def __enter__(self) -> FaceSwapper:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- inputs -----------------------------------------------------------
    def read(self, value: ImageInput, *, role: str) -> Image:
        """Decode a path, bytes, :class:`Image` or array into an :class:`Image`."""
        return self.sources.read(value, role=role)

    @property
    def keeps_faces(self) -> bool:
        """Whether the swapper is ``none`` (:class:`~faceweave.swappers.keep.KeepSwapper`):
        the faces are kept, the processors run alone, no source is needed."""
        return isinstance(self.swapper, KeepSwapper)

    def load_sources(self, sources: Sequence[ImageInput] | ImageInput) -> list[SourceFace]:
        """The prepared face of each source photo (see :meth:`SourceCache.load
        <faceweave.sources.SourceCache.load>`: a source given again is
        reused); none with swapper ``none``, which takes no source (one given
        is an :class:`InvalidOptionError`)."""
        if self.keeps_faces:
            given = [sources] if isinstance(sources, (str, os.PathLike, bytes, Image, np.ndarray)) else sources
            if len(given) > 0:
                raise InvalidOptionError("swapper 'none' keeps the faces: it takes no source photo")
            return []
        return self.sources.load(sources)

    def reference_embedding(self, reference: ImageInput) -> np.ndarray:
        """``(128,)`` embedding of the largest face of ``reference``
        (:class:`NoFaceError` without one)."""
        return self.sources.reference_embedding(reference)

    def find_faces(self, pixels: np.ndarray, timings: dict[str, float] | None = None) -> list[Face]:
        """The target's faces (:meth:`TargetFaces.find <faceweave.targets.TargetFaces.find>`)."""
        return self.targets.find(pixels, timings)

    # -- swapping ---------------------------------------------------------
    def choose_source(self, sources: Sequence[SourceFace], face: Face) -> SourceFace:
        """The source to swap ``face`` with: for a neural swapper with
        ``source_blend="average"`` (the default), all sources averaged into
        one (:meth:`NeuralSwapper.average_sources
        <faceweave.swappers.neural.base.NeuralSwapper.average_sources>`, made
        once per list of sources); otherwise the source whose head pose is
        closest to the target face's (or the first: ``multi_source``)."""
        if len(sources) > 1 and self.options.source_blend == "average" and isinstance(self.swapper, NeuralSwapper):
            return self._averaged(self.swapper, sources)
        if self.options.multi_source == "first" or len(sources) == 1:
            return sources[0]
        return min(sources, key=lambda s: s.face.pose.view_distance(face.pose))

    def _averaged(self, swapper: NeuralSwapper, sources: Sequence[SourceFace]) -> SourceFace:
        """The average of ``sources``, kept for the last list given (so the
        faces of a frame share one source, and one inference)."""
        key = tuple(id(s) for s in sources)
        known = self._average
        if known is not None and known[0] == key:
            return known[1]
        made = swapper.average_sources(sources)
        self._average = (key, made, tuple(sources))
        return made

    def working_size(self, face: Face) -> int:
        """Face size in the working crop (:func:`~faceweave.crops.working_face_size`)."""
        return self.renderer.face_size(face)

    def check_expression(
        self,
        crop: AlignedCrop,
        source: SourceFace,
        out: SwapOutput,
        timings: dict[str, float],
        colour: ColourMatch | None = None,
    ) -> SwapOutput:
        """Look at the new face and correct how its expression reads
        (:meth:`ExpressionChecker.check <faceweave.expression.ExpressionChecker.check>`
        with this swapper); returns the output to use."""
        return self.expression.check(self.swapper, crop, source, out, timings, colour)

    def enhance(
        self,
        pixels: np.ndarray,
        faces: Sequence[Face],
        timings: dict[str, float] | None = None,
        *,
        speech: np.ndarray | None = None,
        original: np.ndarray | None = None,
    ) -> np.ndarray:
        """The optional processors and enhancers on a swapped frame (a frame
        enhancer may change its size); ``speech``: the frame's mel window
        for the lip syncer (:meth:`read_speech`; ``None``: silence);
        ``original``: the frame before the swap (the expression restorer's)."""
        return self.enhancers.apply(pixels, faces, timings, speech=speech, original=original)

    def keep_many(
        self,
        pixels: np.ndarray,
        faces: Sequence[Face],
        timings: dict[str, float] | None = None,
        *,
        speech: np.ndarray | None = None,
    ) -> np.ndarray:
        """Swapper ``none``: the processors on ``faces`` of ``pixels``, kept
        as they are (``pixels`` itself when no step changes them)."""
        return self.enhance(pixels, faces, timings, speech=speech, original=pixels)

    def read_speech(
        self,
        audio: str | os.PathLike[str],
        *,
        fps: float,
        start: float = 0.0,
        end: float | None = None,
        offset: float = 0.0,
    ) -> Speech:
        """The speech of ``audio`` from ``start`` to ``end`` seconds of it,
        for the frames of a video at ``fps`` from time ``offset`` on, its
        voice kept by the options' voice extractor (whose file must be
        present: :class:`~faceweave.errors.ChosenModelMissingError`)."""
        from faceweave.audio.speech import read_speech
        from faceweave.audio.voice import VoiceExtractor

        name = self.options.enhance.voice_extractor
        extractor = None
        if name != "none":
            check_present(self.sessions.open().store, [NeededModel(name, f"voice extractor {name}")])
            extractor = VoiceExtractor(self.sessions.open().get(name, self.sessions.provider), name=name)
        return read_speech(audio, fps=fps, start=start, end=end, offset=offset, extractor=extractor)

    def swap_many(
        self,
        pixels: np.ndarray,
        chosen: Sequence[tuple[Face, SourceFace]],
        timings: dict[str, float] | None = None,
        *,
        colours: Sequence[ColourMatch | None] | None = None,
        plans: Sequence[PlanUse | None] | None = None,
        kind: RenderKind = "video",
        enhance: bool = True,
        speech: np.ndarray | None = None,
    ) -> np.ndarray:
        """Swap each ``(face, source)`` in order (later ones end on top), in
        one batch when the swapper ``batches``, then run the enhancers.
        ``colours``: a fixed colour mapping per face, or ``None`` entries;
        ``plans``: what each face does with its track's face plan (video:
        :mod:`faceweave.compositing.plans`), or ``None`` entries.
        ``kind``: the output the faces are rendered for
        (:class:`~faceweave.profiles.RenderProfile`): a ``"photo"``'s new
        faces are looked at once and their expression corrected
        (:meth:`check_expression`, when the options ask for it) and a face
        softer than the photo is sharpened (in a ``"video"`` or ``"live"``
        stream both would change from frame to frame).  ``enhance=False``
        leaves the enhancers to the caller (:meth:`finish`); ``speech``: the
        frame's mel window for the lip syncer (``None``: silence)."""
        timings = {} if timings is None else timings
        if self.keeps_faces:  # nothing to render: the processors get the frame as it is
            faces = [face for face, _ in chosen]
            return self.keep_many(pixels, faces, timings, speech=speech) if enhance else pixels
        colours = list(colours) if colours is not None else [None] * len(chosen)
        profile = self.renderer.profile(kind)
        out = self.renderer.render(self.swapper, pixels, chosen, timings, colours, profile=profile, plans=plans)
        if not enhance:
            return out
        return self.enhance(out, [face for face, _ in chosen], timings, speech=speech, original=pixels)

    def finish(
        self,
        pixels: np.ndarray,
        faces: Sequence[Face],
        alpha: np.ndarray | None,
        timings: dict[str, float] | None = None,
        *,
        original: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """A swapped photo through the enhancers, and its alpha: the
        target's ``alpha`` (or none), lowered to the background remover's
        mask where there is one and it removes something, at the size of
        the finished pixels (a frame enhancer scales them); ``original``: the
        photo before the swap (the expression restorer's)."""
        done = self.enhancers.finish(pixels, faces, timings, original=original)
        if done.mask is not None and (alpha is not None or int(done.mask.min()) < 255):
            alpha = done.mask if alpha is None else np.minimum(alpha, done.mask)
        if alpha is not None and alpha.shape[:2] != done.pixels.shape[:2]:
            alpha = cv2.resize(alpha, (done.pixels.shape[1], done.pixels.shape[0]), interpolation=cv2.INTER_LINEAR)
        return done.pixels, alpha

    def unswappable(self, face: Face) -> str | None:
        """Why this swapper cannot swap ``face``, or ``None`` when it can: a
        face kept without a mesh (:attr:`Face.mesh <faceweave.types.Face.mesh>`)
        can only be swapped by a neural swapper, which aligns on its five
        points; faceweave's mesh swapper reshapes the mesh."""
        if face.mesh is not None or isinstance(self.swapper, (NeuralSwapper, KeepSwapper)):
            return None
        return (
            f"no face mesh could be fitted to it and the {self.swapper.name!r} swapper needs one "
            "(a neural swapper, --swapper, swaps it from its five points)"
        )

    def skipped_faces(self, faces: Sequence[Face], indices: Sequence[int]) -> list[SkippedFace]:
        """The faces ``faces[i]`` (``i`` in ``indices``) this swapper cannot swap, each with why."""
        found = [(i, self.unswappable(faces[i])) for i in indices]
        return [SkippedFace(target_index=i, bbox=faces[i].bbox, reason=why) for i, why in found if why is not None]

    def swap_frames(
        self, frames: Sequence[FrameFaces], timings: dict[str, float] | None = None, *, kind: RenderKind = "video"
    ) -> list[np.ndarray]:
        """:meth:`swap_many` for several frames, in order: a neural swapper
        whose model takes a dynamic batch makes the faces of all of them in
        one inference (:meth:`FaceRenderer.render_frames`); the same frames
        as :meth:`swap_many` one by one."""
        timings = {} if timings is None else timings
        profile = self.renderer.profile(kind)
        if self.keeps_faces:
            out = [f.pixels for f in frames]
        else:
            out = self.renderer.render_frames(self.swapper, frames, timings, profile=profile)
        return [
            self.enhance(px, [face for face, _ in f.chosen], timings, speech=f.speech, original=f.pixels)
            for px, f in zip(out, frames, strict=True)
        ]

    @property
    def batches_frames(self) -> bool:
        """Whether :meth:`swap_frames` gains by batching: a neural swapper with a dynamic batch."""
        return isinstance(self.swapper, NeuralSwapper) and self.swapper.dynamic_batch

    def swap_faces(
        self,
        pixels: np.ndarray,
        faces: Sequence[Face],
        indices: Sequence[int],
        sources: Sequence[SourceFace],
        timings: dict[str, float] | None = None,
        *,
        alpha: np.ndarray | None = None,
    ) -> PhotoSwap:
        """Swap the faces ``faces[i]`` for ``i`` in ``indices``; smaller faces
        first so that a nearer, larger face ends on top; then the enhancers
        (:meth:`finish`, with the photo's ``alpha``).  A face the swapper
        cannot swap (:meth:`unswappable`) is left as it is; when that is
        every face, :class:`~faceweave.errors.MeshlessFaceError` is raised."""
        timings = {} if timings is None else timings
        skipped = {s.target_index for s in self.skipped_faces(faces, indices)}
        if indices and len(skipped) == len(indices):
            raise MeshlessFaceError(
                f"none of the {len(indices)} selected face(s) can be swapped: {self.unswappable(faces[indices[0]])}"
            )
        order = sorted((i for i in indices if i not in skipped), key=lambda k: faces[k].bbox.area)
        if self.keeps_faces:
            return self._keep_faces(pixels, faces, order, timings, alpha=alpha)
        chosen = [(faces[i], self.choose_source(sources, faces[i])) for i in order]
        out = self.swap_many(pixels, chosen, timings, kind="photo", enhance=False)
        out, alpha = self.finish(out, [face for face, _ in chosen], alpha, timings, original=pixels)
        swapped = []
        for i, (face, source) in zip(order, chosen, strict=False):
            gap = source.face.pose.view_distance(face.pose)
            swapped.append(
                SwappedFace(
                    target_index=i, bbox=face.bbox, source_index=source.index, source_path=source.path, pose_gap=gap
                )
            )
        swapped.sort(key=lambda s: s.target_index)
        return PhotoSwap(pixels=out, alpha=alpha, swapped=tuple(swapped))

    def _keep_faces(
        self,
        pixels: np.ndarray,
        faces: Sequence[Face],
        order: Sequence[int],
        timings: dict[str, float],
        *,
        alpha: np.ndarray | None,
    ) -> PhotoSwap:
        """Swapper ``none``: the faces ``faces[i]`` (``i`` in ``order``) through the processors alone."""
        out, alpha = self.finish(pixels, [faces[i] for i in order], alpha, timings, original=pixels)
        kept = (
            SwappedFace(target_index=i, bbox=faces[i].bbox, source_index=None, source_path=None, pose_gap=0.0)
            for i in sorted(order)
        )
        return PhotoSwap(pixels=out, alpha=alpha, swapped=tuple(kept))

    def swap(
        self,
        sources: Sequence[ImageInput] | ImageInput,
        target: ImageInput,
        *,
        reference: ImageInput | None = None,
        provenance: Provenance | None = None,
    ) -> SwapResult:
        """Swap the source identity onto the selected faces of ``target``.

        Faces in the result are numbered in the selection order
        (``options.selection.order``); ``SwapResult.swapped`` says which
        target faces were swapped and with which source photo.  The result's
        pixels carry the invisible watermark of ``provenance`` (default: the
        swapper's, see the constructor), after any enhancer, and
        :meth:`SwapResult.save` writes its label.  (:meth:`swap_faces` and
        :meth:`swap_many`, the steps that batch and video compose, return
        unmarked pixels: those callers mark what they write.)
        Raises :class:`NoFaceError` (``role`` says which image) or
        :class:`NoMatchingFaceError` when nothing can be swapped, and
        :class:`InputError` when the watermark is on and the picture is under
        64 pixels on a side.
        """
        mark = provenance if provenance is not None else self.run_provenance()
        with photo_threads():
            return self._swap(sources, target, reference=reference, provenance=mark)

    def _swap(
        self,
        sources: Sequence[ImageInput] | ImageInput,
        target: ImageInput,
        *,
        reference: ImageInput | None = None,
        provenance: Provenance,
    ) -> SwapResult:
        """The work of :meth:`swap`."""
        timings: dict[str, float] = {}
        with timed(timings, "decode"):
            target_image = self.read(target, role="target")
        with timed(timings, "sources"):
            prepared = self.load_sources(sources)
        ref = None
        if self.options.selection.mode == "reference":
            if reference is None:
                raise InputError("selection mode 'reference' needs a reference face image")
            ref = self.reference_embedding(reference)
        faces, indices = self.targets.select(target_image, timings, reference=ref)
        done = self.swap_faces(target_image.pixels, faces, indices, prepared, timings, alpha=target_image.alpha)
        image, alpha, swapped = done.pixels, done.alpha, done.swapped
        skipped = self.skipped_faces(faces, indices)
        for face in skipped:
            log.info("face %d not swapped: %s", face.target_index, face.reason)
        with timed(timings, "mark"):
            image = stamp_image(image, provenance)  # last: nothing changes the pixels after it
        if not provenance.watermark:
            log.info("swap of run %s: the invisible watermark is off, as the caller asked", provenance.run_hex)
        return SwapResult(
            image=image,
            alpha=alpha,
            faces=tuple(faces),
            swapped=tuple(swapped),
            timings_ms=timings,
            provenance=provenance,
            skipped=tuple(skipped),
        )
