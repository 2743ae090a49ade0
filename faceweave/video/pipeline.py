"""Video face swap: :class:`VideoSwapper` wires a :class:`FaceTracker`, a
:class:`~faceweave.video.planning.FramePlanner` and a :class:`FaceSwapper`'s
renderer into a :class:`~faceweave.video.stream.FrameStream` (decoder thread,
tracking in the calling thread, render threads, encoder thread, bounded
queues), and makes single-frame previews.

A little over the usual length: the public entry points (preview, people
map, the whole video) each need their options resolved the same way.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast
from weakref import WeakKeyDictionary

import numpy as np

from faceweave.compositing.plans import PlanPolicy
from faceweave.errors import InputError, InvalidOptionError, NoFaceError, NoMatchingFaceError, TooSmallToMarkError
from faceweave.io import write_image
from faceweave.pipeline import FaceSwapper, ImageInput
from faceweave.profiles import RenderKind
from faceweave.provenance.stamp import Provenance, image_metadata, stamp_image, writer_stamp
from faceweave.render import FrameFaces
from faceweave.swappers import SourceFace
from faceweave.threads import frame_parallel_threads
from faceweave.timing import timed
from faceweave.types import Face
from faceweave.video.io import VideoFrame, VideoInfo, VideoReader, VideoWriter
from faceweave.video.planning import FramePlanner, PeopleMap, PlannedFace, TrackStates
from faceweave.video.stream import FrameStream
from faceweave.video.swap_work import SwapWork
from faceweave.video.tracker import FaceTracker

if TYPE_CHECKING:
    from faceweave.audio.speech import Speech

__all__ = ["PeopleMap", "PlannedFace", "SwapWork", "VideoOptions", "VideoSwapReport", "VideoSwapper"]


@dataclass(frozen=True)
class VideoSwapReport:
    """What a video swap did.  ``broken_at`` is the time (seconds) where the
    input could no longer be decoded, or ``None``."""

    output: Path
    frames: int
    frames_with_swap: int
    faces_swapped: int
    scene_cuts: int
    seconds: float
    broken_at: float | None
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0


#: frames per inference of a neural swapper with a dynamic batch, by default:
#: on the CPU stand-in of inswapper_128 (``benchmarks/neural_frame.py``) a
#: whole video swap runs 0-30 % faster at 4 frames than at 1, and no faster
#: at 8 (whose batch fills the whole default queue)
NEURAL_BATCH = 4


@dataclass(frozen=True)
class VideoOptions:
    """How the video is read and written (the face options are the swapper's)."""

    start: float = 0.0
    end: float | None = None
    fps: float | None = None
    scale: float = 1.0
    audio: bool = True
    codec: str = "h264"
    crf: int = 18
    preset: str = "veryfast"
    detect_every: int = 8
    queue_size: int = 8
    #: threads that render planned frames while the next ones are tracked
    #: (OpenCV and NumPy release the GIL for most of the work)
    workers: int = 2
    #: frames whose faces go through one inference call, when the swapper's
    #: model takes a dynamic batch (a neural swapper: :attr:`FaceSwapper.batches_frames`;
    #: others render frame by frame); from 1 to ``queue_size``; ``None``:
    #: :data:`NEURAL_BATCH`, or ``queue_size`` when that is smaller
    neural_batch: int | None = None
    #: refuse videos longer than this (seconds) or with more frames than this:
    #: from the header before any work, and while decoding when it does not say
    max_seconds: float | None = None
    max_frames: int | None = None
    #: how outputs are marked (watermark in every frame, label); ``None``:
    #: the swapper's (:meth:`FaceSwapper.run_provenance`: by default a new run
    #: for each video, watermark on); ``Provenance.new(watermark=False)``: the
    #: label without the watermark, as the CLI's ``--no-watermark``
    provenance: Provenance | None = None

    def __post_init__(self) -> None:
        if self.neural_batch is not None and not 1 <= self.neural_batch <= self.queue_size:
            raise InvalidOptionError(
                f"neural_batch must be from 1 to queue_size ({self.queue_size}); got {self.neural_batch}"
            )

    @property
    def frames_per_inference(self) -> int:
        """``neural_batch``, or its default for this ``queue_size``."""
        return self.neural_batch if self.neural_batch is not None else max(1, min(NEURAL_BATCH, self.queue_size))


def check_markable(size: tuple[int, int], provenance: Provenance | None) -> None:
    """Refuse up front frames too small for the invisible watermark (when it
    is on), rather than failing at the first frame written."""
    from faceweave.provenance.watermark import MIN_SIDE

    width, height = size
    if provenance is not None and provenance.watermark and min(width, height) < MIN_SIDE:
        raise TooSmallToMarkError(
            f"the video's frames are {width}x{height}: the invisible watermark needs at least {MIN_SIDE} pixels"
            " on each side (a smaller --scale makes them smaller still)"
        )


class VideoSwapper:
    """Swap faces in a video with a :class:`FaceSwapper`'s models and
    options; ``plans``: when a track's face plan is made anew
    (:mod:`faceweave.compositing.plans`; ``PlanPolicy(every=1)``: on every
    frame); ``kind``: the output its frames are rendered for, a file
    (``"video"``) or a live stream (``"live"``: :mod:`faceweave.profiles`)."""

    def __init__(self, swapper: FaceSwapper, *, plans: PlanPolicy = PlanPolicy(), kind: RenderKind = "video") -> None:
        self.swapper = swapper
        self.kind = kind
        self.planner = FramePlanner(swapper, plans)
        #: the track states of trackers planned without states of their own
        #: (:meth:`plan_frame`), held while the tracker lives
        self._states: WeakKeyDictionary[FaceTracker, TrackStates] = WeakKeyDictionary()

    # -- per frame ------------------------------------------------------------
    def plan_frame(
        self,
        frame: VideoFrame,
        tracker: FaceTracker,
        sources: Sequence[SourceFace],
        reference: np.ndarray | None,
        timings: dict[str, float],
        mapping: PeopleMap | None = None,
        found: list[Face] | None = None,
        *,
        states: TrackStates | None = None,
    ) -> list[PlannedFace]:
        """Track the faces of ``frame`` (in frame order: the tracker holds
        state) and decide which face gets which source, smaller faces first
        so that a nearer, larger face ends on top.  ``found``: the frame's
        scheduled detection, made ahead (:meth:`FaceTracker.detect_ahead`).
        ``states``: what is held per track (a run's); by default one kept
        for ``tracker``."""
        with timed(timings, "track"):
            tracks = tracker.update(frame.pixels, frame.time, found=found)
        if states is None:
            states = self._states.setdefault(tracker, TrackStates())
        return self.planner.plan(frame, tracks, states, sources, reference, timings, mapping)

    def render(
        self,
        pixels: np.ndarray,
        plan: Sequence[PlannedFace],
        timings: dict[str, float],
        *,
        speech: np.ndarray | None = None,
    ) -> np.ndarray:
        """Apply a frame's plan; frames are independent here, so several
        frames may be rendered at once on different threads.  ``speech``:
        the frame's mel window for the lip syncer (``None``: silence)."""
        if self.swapper.keeps_faces:
            return self.swapper.keep_many(pixels, [p.face for p in plan], timings, speech=speech)
        return self.swapper.swap_many(
            pixels,
            _pairs(plan),
            timings,
            colours=[p.colour for p in plan],
            plans=[p.plan for p in plan],
            kind=self.kind,
            speech=speech,
        )

    def render_batch(
        self,
        frames: Sequence[tuple[np.ndarray, Sequence[PlannedFace]]],
        timings: dict[str, float],
        *,
        speech: Sequence[np.ndarray | None] | None = None,
    ) -> list[np.ndarray]:
        """:meth:`render` for several frames, in order, their faces in one
        inference where the swapper batches frames
        (:meth:`FaceSwapper.swap_frames`); ``speech``: each frame's window."""
        windows = list(speech) if speech is not None else [None] * len(frames)
        if self.swapper.keeps_faces:
            return [
                self.swapper.keep_many(pixels, [p.face for p in plan], timings, speech=window)
                for (pixels, plan), window in zip(frames, windows, strict=True)
            ]
        return self.swapper.swap_frames(
            [
                FrameFaces(
                    pixels,
                    tuple(_pairs(plan)),
                    tuple(p.colour for p in plan),
                    tuple(p.plan for p in plan),
                    window,
                )
                for (pixels, plan), window in zip(frames, windows, strict=True)
            ],
            timings,
            kind=self.kind,
        )

    def swap_frame(
        self,
        frame: VideoFrame,
        tracker: FaceTracker,
        sources: Sequence[SourceFace],
        reference: np.ndarray | None,
        timings: dict[str, float],
        mapping: PeopleMap | None = None,
    ) -> tuple[np.ndarray, int]:
        """The swapped pixels of one frame and how many faces were swapped."""
        plan = self.plan_frame(frame, tracker, sources, reference, timings, mapping)
        return self.render(frame.pixels, plan, timings), len(plan)

    # -- preview --------------------------------------------------------------
    def preview(
        self,
        sources: Sequence[ImageInput] | Sequence[SourceFace],
        target: str | os.PathLike[str],
        output: str | Path,
        *,
        reference: ImageInput | None = None,
        frame_index: int | None = None,
        options: VideoOptions = VideoOptions(),
        mapping: PeopleMap | None = None,
    ) -> int:
        """Write one swapped frame: ``frame_index`` or the first frame with a
        face to swap (with ``mapping``: a face of a mapped person), marked as
        ``options.provenance`` says (see :class:`VideoOptions`).  Returns the
        index of the frame written."""
        provenance = self.marked(options).provenance
        prepared = self.prepare_sources(sources) if mapping is None else []
        ref = self._reference(reference) if mapping is None else None
        small = self._small_faces() or mapping is not None
        tracker = FaceTracker(self.swapper.analyser, detect_every=1, small_faces=small)
        last = None
        with tracker, self._reader(target, options) as reader:
            for frame in reader:
                last = frame
                if frame_index is not None and frame.index != frame_index:
                    continue
                pixels, count = self.swap_frame(frame, tracker, prepared, ref, {}, mapping)
                if count or frame_index is not None:
                    marked = stamp_image(pixels, provenance)
                    write_image(output, marked, xmp=image_metadata(provenance, output).get("xmp"))
                    return frame.index
        if frame_index is not None:
            raise NoMatchingFaceError(
                f"the video has no frame {frame_index} (it has {0 if last is None else last.index + 1})"
            )
        raise NoFaceError(f"no face to swap found in any frame of {target}", role="target", path=str(target))

    def people_map(
        self, video: str | Path, assignments: Mapping[int, Sequence[ImageInput]], *, options: VideoOptions | None = None
    ) -> PeopleMap:
        """Find the people of ``video`` and prepare a source for each person
        index in ``assignments``; an index the video does not have is an error
        that lists the people found.  ``options``: its length limits apply."""
        from faceweave.errors import InvalidOptionError
        from faceweave.video.people import find_people

        limits = options or VideoOptions()
        people = find_people(
            video,
            self.swapper.analyser,
            max_pixels=self.swapper.options.max_pixels,
            max_frames=limits.max_frames,
            max_seconds=limits.max_seconds,
        )
        for index in assignments:
            if not 0 <= index < len(people):
                found = f"people 0-{len(people) - 1}" if people else "no people"
                raise InvalidOptionError(f"--map {index}: the video has {found} (see 'faceweave people {video}')")
        centres = np.array([p.centre for p in people], np.float32).reshape(len(people), -1)
        return PeopleMap(
            centres=centres, sources={i: self.prepare_sources(list(srcs)) for i, srcs in assignments.items()}
        )

    def prepare_sources(self, sources: Sequence[ImageInput] | Sequence[SourceFace]) -> list[SourceFace]:
        """Source photos prepared once (already prepared ones pass through),
        so a preview and the whole run share them."""
        prepared = [s for s in sources if isinstance(s, SourceFace)]
        if sources and len(prepared) == len(sources):
            return prepared
        return self.swapper.load_sources(cast("Sequence[ImageInput]", sources))  # not all prepared: load them

    def _reader(self, target: str | os.PathLike[str], options: VideoOptions) -> VideoReader:
        """A reader of ``target`` with the trim, rate and scale of ``options``,
        under the swapper's pixel limit and the video's length limits."""
        return VideoReader(
            target,
            start=options.start,
            end=options.end,
            fps=options.fps,
            scale=options.scale,
            max_pixels=self.swapper.options.max_pixels,
            max_frames=options.max_frames,
            max_seconds=options.max_seconds,
        )

    def _small_faces(self) -> bool:
        """Whether detection needs the tiled small-face pass: not when only
        the largest face is swapped."""
        sel = self.swapper.options.selection
        only_largest = sel.mode == "one" and sel.order == "large-small"
        return self.swapper.options.analysis.small_faces and not only_largest

    def _reference(self, reference: ImageInput | None) -> np.ndarray | None:
        if self.swapper.options.selection.mode != "reference":
            return None
        if reference is None:
            raise InputError("selection mode 'reference' needs a reference face image")
        return self.swapper.reference_embedding(reference)

    def marked(self, options: VideoOptions) -> VideoOptions:
        """``options`` with the provenance its outputs are marked with: its
        own, or else the swapper's for this run (:meth:`FaceSwapper.run_provenance`)."""
        if options.provenance is not None:
            return options
        return replace(options, provenance=self.swapper.run_provenance())

    # -- whole video ----------------------------------------------------------
    def swap_video(
        self,
        sources: Sequence[ImageInput] | Sequence[SourceFace],
        target: str | os.PathLike[str],
        output: str | os.PathLike[str],
        *,
        reference: ImageInput | None = None,
        options: VideoOptions | None = None,
        progress: Callable[[int, int | None], None] | None = None,
        stop: threading.Event | None = None,
        mapping: PeopleMap | None = None,
    ) -> VideoSwapReport:
        """Swap the selected faces in every frame of ``target`` into ``output``.

        Frames flow decoder thread (decoding, and the scheduled face
        detections) -> bounded queue -> this thread (tracking and planning)
        -> render threads -> bounded queue -> encoder thread
        (:class:`~faceweave.video.stream.FrameStream`), with one BLAS thread:
        the pipeline's own threads already use the cores.  Frames without a
        face pass through untouched.  Every frame gets the watermark and the
        file the label of ``options.provenance`` (:meth:`marked`: the default
        options mark too).  ``progress(frames, expected or None)`` after each
        frame.  On any error, or when ``stop`` is set (raised as
        KeyboardInterrupt; the event is only read), or on KeyboardInterrupt,
        the output is abandoned: nothing is left under its name."""
        marked = self.marked(options or VideoOptions())
        with frame_parallel_threads():
            return self._swap_video(sources, target, Path(output), reference, marked, progress, stop, mapping)

    def _swap_video(
        self,
        sources: Sequence[ImageInput] | Sequence[SourceFace],
        target: str | os.PathLike[str],
        output: Path,
        reference: ImageInput | None,
        options: VideoOptions,
        progress: Callable[[int, int | None], None] | None,
        stop: threading.Event | None,
        mapping: PeopleMap | None,
    ) -> VideoSwapReport:
        started = time.perf_counter()
        prepared = self.prepare_sources(sources) if mapping is None else []
        ref = self._reference(reference) if mapping is None else None
        # with a map any person may be wanted: look for every face
        small = self._small_faces() or mapping is not None
        tracker = FaceTracker(self.swapper.analyser, detect_every=options.detect_every, small_faces=small)
        reader = self._reader(target, options)
        try:
            check_markable(reader.frame_size, options.provenance)
            speech = self.speech(target, reader.info, options)
        except BaseException:
            reader.close()
            tracker.close()
            raise
        work = SwapWork(self, tracker, prepared, ref, mapping, speech)
        open_writer = partial(self._writer, target, output, reader.info, options)
        batch = options.frames_per_inference if self.swapper.batches_frames else 1
        stream = FrameStream(
            reader, open_writer, work, queue_size=options.queue_size, workers=options.workers, stop=stop, batch=batch
        )
        total = reader.expected_frames
        try:
            frames = stream.run(None if progress is None else lambda done: progress(done, total))
        finally:
            tracker.close()
        return VideoSwapReport(
            output=output,
            frames=frames,
            frames_with_swap=work.frames_with_swap,
            faces_swapped=work.faces_swapped,
            scene_cuts=tracker.scene_cuts,
            seconds=time.perf_counter() - started,
            broken_at=reader.broken_at,
            timings_ms=work.timings_ms() | stream.timings_ms(),
        )

    def speech(self, target: str | os.PathLike[str], info: VideoInfo, options: VideoOptions) -> Speech | None:
        """What the lip syncer follows in a run over ``target`` (``None``
        without one): the lip syncer audio from its start, or the video's
        own audio, from the trim's start to its end (or the video's)."""
        enhance = self.swapper.options.enhance
        if enhance.lip_syncer is None:
            return None
        fps = float(options.fps or info.fps)
        end = options.end if options.end is not None else info.duration
        if enhance.lip_syncer_audio is not None:
            length = None if end is None else max(0.0, end - options.start)
            return self.swapper.read_speech(
                enhance.lip_syncer_audio, fps=fps, start=0.0, end=length, offset=options.start
            )
        if not info.has_audio:
            raise InputError(
                f"the video {os.fspath(target)!r} has no audio for the lip syncer to follow; give one with "
                "--lip-syncer-audio (lip_syncer_audio)"
            )
        return self.swapper.read_speech(target, fps=fps, start=options.start, end=end, offset=options.start)

    def _writer(
        self, target: str | os.PathLike[str], output: Path, info: VideoInfo, options: VideoOptions
    ) -> VideoWriter:
        """The writer of ``output`` (opened on the encoder thread), with the
        audio of ``target`` (or the lip syncer's audio, from its start) when
        ``options`` keep it, marked as they say."""
        fps = Fraction(options.fps).limit_denominator(1001) if options.fps else None
        dub = self.swapper.options.enhance.lip_syncer_audio
        audio_from, start, end = os.fspath(target) if options.audio else None, options.start, options.end
        if dub is not None and options.audio:
            audio_from, start, end = dub, 0.0, None if options.end is None else options.end - options.start
        return VideoWriter(
            output,
            info=info,
            fps=fps,
            codec=options.codec,
            quality=options.crf,
            preset=options.preset,
            audio_from=audio_from,
            audio_start=start,
            audio_end=end,
            audio_at_start=dub is not None,
            **writer_stamp(options.provenance),
        )


def _pairs(plan: Sequence[PlannedFace]) -> list[tuple[Face, SourceFace]]:
    """The ``(face, source)`` of each planned face to swap."""
    pairs = []
    for p in plan:
        if p.source is None:
            raise InvalidOptionError("a face planned without a source can only be kept (swapper 'none')")
        pairs.append((p.face, p.source))
    return pairs
