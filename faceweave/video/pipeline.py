"""Video face swap as a stream: a decoder thread, tracking in the calling
thread, a small pool of render threads, and an encoder thread, joined by
bounded queues so that memory does not grow with the length of the video."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

import numpy as np

from faceweave.compositing.colour import ColourMatch, SkinColour, skin_colour
from faceweave.errors import NoFaceError, NoMatchingFaceError, TooSmallToMarkError
from faceweave.io import write_image
from faceweave.pipeline import FaceSwapper, ImageInput, cut_crop
from faceweave.provenance.stamp import Provenance, image_metadata, stamp_image, writer_stamp
from faceweave.selection import order_faces, select_faces
from faceweave.swappers import SourceFace
from faceweave.threads import single_threaded_blas
from faceweave.timing import timed
from faceweave.types import Face
from faceweave.video.io import VideoFrame, VideoReader, VideoWriter
from faceweave.video.tracker import FaceTracker, Track

_END = object()


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
    #: refuse videos longer than this (seconds) or with more frames than this:
    #: from the header before any work, and while decoding when it does not say
    max_seconds: float | None = None
    max_frames: int | None = None
    #: how outputs are marked (watermark in every frame, label); ``None``:
    #: the swapper's (:meth:`FaceSwapper.run_provenance`: by default a new run
    #: for each video, watermark on); ``Provenance.new(watermark=False)``: the
    #: label without the watermark, as the CLI's ``--no-watermark``
    provenance: Provenance | None = None


@dataclass(frozen=True, eq=False)
class PeopleMap:
    """A source per person of the video (``faceweave people`` indices):
    ``centres`` ``(P, 128)`` the people's mean embeddings, ``sources`` the
    prepared sources of the mapped people."""

    centres: np.ndarray
    sources: dict[int, list[SourceFace]]
    threshold: float = 0.65

    def person_of(self, embedding: np.ndarray) -> int | None:
        """The index of the nearest person within the threshold, or None."""
        if len(self.centres) == 0:
            return None
        distances = np.linalg.norm(self.centres - embedding[None, :], axis=1)
        best = int(np.argmin(distances))
        return best if distances[best] < self.threshold else None


#: seconds over which a face's target skin colour follows the picture
COLOUR_TIME = 0.5
#: face size of the small crop the target skin colour is measured on
COLOUR_FACE_SIZE = 64
#: the target skin colour is measured again at most this often (seconds)
COLOUR_INTERVAL = 0.1


class PlannedFace(NamedTuple):
    """One face of a frame to swap: where, with which source, and the colour
    mapping held for its track."""

    face: Face
    source: SourceFace
    colour: ColourMatch | None = None


class _Stop(Exception):
    """Raised inside the encoder to abandon the output."""


def _check_markable(size: tuple[int, int], provenance: Provenance | None) -> None:
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
    """Swap faces in a video with a :class:`FaceSwapper`'s models and options."""

    def __init__(self, swapper: FaceSwapper) -> None:
        self.swapper = swapper
        #: each source's skin colour, measured once per run
        self._source_colours: dict[SourceFace, SkinColour] = {}

    # -- per frame ------------------------------------------------------------
    def _selected(
        self, tracks: Sequence[Track], pixels: np.ndarray, reference: np.ndarray | None
    ) -> tuple[list[Face], list[int], list[Track]]:
        """The faces in selection order, the selected indices, and the track
        of each face (same order)."""
        faces = [t.face for t in tracks]
        if reference is not None:
            for track in tracks:
                if track.embedding is None:
                    track.embedding = self.swapper.analyser.embed(pixels, track.face).embedding
            faces = [t.face.with_embedding(t.embedding) for t in tracks]
        order = order_faces(faces, self.swapper.options.selection.order)
        faces, ordered = [faces[i] for i in order], [tracks[i] for i in order]
        try:
            return faces, select_faces(faces, self.swapper.options.selection, reference=reference), ordered
        except NoMatchingFaceError:
            return faces, [], ordered

    def _plan_mapped(
        self, frame: VideoFrame, tracks: Sequence[Track], mapping: PeopleMap, timings: dict[str, float]
    ) -> list[PlannedFace]:
        """Each tracked face that belongs to a mapped person gets that
        person's source (the track's identity is found once)."""
        plan = []
        for track in sorted(tracks, key=lambda t: t.face.bbox.area):
            if "person" not in track.extra:
                with timed(timings, "embed"):
                    embedding = self.swapper.analyser.embed(frame.pixels, track.face).embedding
                track.extra["person"] = mapping.person_of(embedding)
            sources = mapping.sources.get(track.extra["person"])
            if sources:
                source = self.swapper.choose_source(sources, track.face)
                plan.append(PlannedFace(track.face, source, self._colour(frame, track, source, timings)))
        return plan

    def _source_colour(self, source: SourceFace) -> SkinColour:
        colour = self._source_colours.get(source)
        if colour is None:
            colour = self._source_colours[source] = skin_colour(source.crop, source.clean)
        return colour

    def _colour(self, frame: VideoFrame, track: Track, source: SourceFace, timings: dict[str, float]) -> ColourMatch:
        """The colour mapping of a tracked face, held steady over the shot:
        the source's skin colour is measured once, the target's follows the
        face's skin with an exponential moving average (time constant
        ``COLOUR_TIME`` seconds, measured every ``COLOUR_INTERVAL``),
        restarted for a new track (a new face, or any face after a scene cut)
        and when the track's source changes."""
        held = track.extra.get("colour")
        if held is not None and held[0] is source and frame.time - held[2] < COLOUR_INTERVAL:
            return ColourMatch(source=self._source_colour(source), target=held[1])
        with timed(timings, "colour"):
            crop = cut_crop(frame.pixels, track.face, face_size=COLOUR_FACE_SIZE)
            now = skin_colour(crop)
            if held is not None and held[0] is source:
                step = 1.0 - float(np.exp(-max(frame.time - held[2], 0.0) / COLOUR_TIME))
                now = held[1].towards(now, step)
            track.extra["colour"] = (source, now, frame.time)
            return ColourMatch(source=self._source_colour(source), target=now)

    def plan_frame(
        self,
        frame: VideoFrame,
        tracker: FaceTracker,
        sources: Sequence[SourceFace],
        reference: np.ndarray | None,
        timings: dict[str, float],
        mapping: PeopleMap | None = None,
        found: list[Face] | None = None,
    ) -> list[PlannedFace]:
        """Track the faces of ``frame`` (in frame order: the tracker holds
        state) and decide which face gets which source, smaller faces first
        so that a nearer, larger face ends on top.  ``found``: the frame's
        scheduled detection, made ahead (:meth:`FaceTracker.detect_ahead`)."""
        with timed(timings, "track"):
            tracks = tracker.update(frame.pixels, frame.time, found=found)
        if not tracks:
            return []
        if mapping is not None:
            return self._plan_mapped(frame, tracks, mapping, timings)
        faces, indices, picked = self._selected(tracks, frame.pixels, reference)
        plan = []
        for i in sorted(indices, key=lambda k: faces[k].bbox.area):
            source = self.swapper.choose_source(sources, faces[i])
            plan.append(PlannedFace(faces[i], source, self._colour(frame, picked[i], source, timings)))
        return plan

    def render(self, pixels: np.ndarray, plan: Sequence[PlannedFace], timings: dict[str, float]) -> np.ndarray:
        """Apply a frame's plan; frames are independent here, so several
        frames may be rendered at once on different threads."""
        return self.swapper.swap_many(
            pixels, [(p.face, p.source) for p in plan], timings, colours=[p.colour for p in plan]
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
        target: str | Path,
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
                    write_image(output, marked, **image_metadata(provenance, output))
                    return frame.index
        if frame_index is not None:
            raise NoMatchingFaceError(
                f"the video has no frame {frame_index} (it has {0 if last is None else last.index + 1})"
            )
        raise NoFaceError(f"no face to swap found in any frame of {target}", role="target", path=str(target))

    def people_map(
        self, video: str | Path, assignments: dict[int, Sequence[ImageInput]], *, options: VideoOptions | None = None
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
        if sources and all(isinstance(s, SourceFace) for s in sources):
            return list(sources)
        return self.swapper.load_sources(sources)

    def _reader(self, target: str | Path, options: VideoOptions) -> VideoReader:
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
            from faceweave.errors import InputError

            raise InputError("selection mode 'reference' needs a reference face image")
        return self.swapper.reference_embedding(reference)

    def marked(self, options: VideoOptions) -> VideoOptions:
        """``options`` with the provenance its outputs are marked with: its
        own, or else the swapper's for this run (:meth:`FaceSwapper.run_provenance`)."""
        if options.provenance is not None:
            return options
        return replace(options, provenance=self.swapper.run_provenance())

    # -- whole video ----------------------------------------------------------
    def swap_video(self, *args, **kwargs) -> VideoSwapReport:
        """Swap the selected faces in every frame of ``target`` into ``output``
        (see :meth:`_swap_video` for the arguments), with one BLAS thread:
        the pipeline's own threads already use the cores.  Every frame gets
        the watermark and the file the label of ``options.provenance``
        (:meth:`marked`: the default options mark too)."""
        kwargs["options"] = self.marked(kwargs.get("options") or VideoOptions())
        with single_threaded_blas():
            return self._swap_video(*args, **kwargs)

    def _swap_video(  # noqa: C901 - to be split into steps (issue 14)
        self,
        sources: Sequence[ImageInput] | Sequence[SourceFace],
        target: str | Path,
        output: str | Path,
        *,
        reference: ImageInput | None = None,
        options: VideoOptions = VideoOptions(),
        progress: Callable[[int, int | None], None] | None = None,
        stop: threading.Event | None = None,
        mapping: PeopleMap | None = None,
    ) -> VideoSwapReport:
        """Swap the selected faces in every frame of ``target`` into ``output``.

        Frames flow decoder thread (decoding, and the scheduled face
        detections) -> bounded queue -> this thread (tracking and planning)
        -> render threads -> bounded queue -> encoder thread.  Frames without a face
        pass through untouched.  On any error, or when ``stop`` is set, or on
        KeyboardInterrupt, the output is abandoned: nothing is left under its
        name."""
        started = time.perf_counter()
        output = Path(output)
        prepared = self.prepare_sources(sources) if mapping is None else []
        ref = self._reference(reference) if mapping is None else None
        # with a map any person may be wanted: look for every face
        small = self._small_faces() or mapping is not None
        tracker = FaceTracker(self.swapper.analyser, detect_every=options.detect_every, small_faces=small)
        stop = stop or threading.Event()  # the caller's: a stop it asked for
        halt = threading.Event()  # ours: set by the caller's stop or by an error in any thread

        def halted() -> bool:
            return halt.is_set() or stop.is_set()

        def fail(exc: BaseException) -> None:
            errors.append(exc)
            halt.set()

        timings: dict[str, float] = {}
        frames_in: queue.Queue = queue.Queue(maxsize=options.queue_size)
        frames_out: queue.Queue = queue.Queue(maxsize=options.queue_size)
        errors: list[BaseException] = []

        reader = self._reader(target, options)
        try:
            _check_markable(reader.frame_size, options.provenance)
        except BaseException:
            reader.close()
            tracker.close()
            raise
        info = reader.info
        total = reader.expected_frames

        def put(q: queue.Queue, item) -> bool:
            while not halted():
                try:
                    q.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        detect_timings: dict[str, float] = {}  # only the decoder thread writes it

        def decode() -> None:
            """Decode, and run the scheduled detections here, ahead of the
            tracking thread (the schedule depends only on the frame index)."""
            try:
                with reader:
                    for frame in reader:
                        found = None
                        if tracker.due(frame.index):
                            with timed(detect_timings, "detect"):
                                found = tracker.detect_ahead(frame.pixels)
                        if not put(frames_in, (frame, found)):
                            return
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                fail(exc)
            finally:
                put(frames_in, _END)

        written = {"frames": 0}
        render_timings: dict[str, float] = {}  # only the encoder thread writes it

        def render(pixels: np.ndarray, plan: list) -> tuple[np.ndarray, dict[str, float]]:
            frame_timings: dict[str, float] = {}
            return self.render(pixels, plan, frame_timings), frame_timings

        def encode() -> None:
            fps = Fraction(options.fps).limit_denominator(1001) if options.fps else None
            try:
                with VideoWriter(
                    output,
                    info=info,
                    fps=fps,
                    codec=options.codec,
                    quality=options.crf,
                    preset=options.preset,
                    audio_from=str(target) if options.audio else None,
                    audio_start=options.start,
                    audio_end=options.end,
                    **writer_stamp(options.provenance),
                ) as writer:
                    while True:
                        try:
                            item = frames_out.get(timeout=0.1)
                        except queue.Empty:
                            if halted():
                                raise _Stop() from None
                            continue
                        if item is _END:
                            if halted():
                                raise _Stop()
                            break
                        pixels, t = item
                        if isinstance(pixels, Future):
                            try:
                                pixels, frame_timings = pixels.result()
                            except CancelledError:
                                raise _Stop() from None
                            for key, value in frame_timings.items():
                                render_timings[key] = render_timings.get(key, 0.0) + value
                        writer.write(pixels, t)
                        written["frames"] += 1
            except _Stop:
                pass
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                fail(exc)

        decoder = threading.Thread(target=decode, name="faceweave-decode", daemon=True)
        encoder = threading.Thread(target=encode, name="faceweave-encode", daemon=True)
        pool = ThreadPoolExecutor(max_workers=max(1, options.workers), thread_name_prefix="faceweave-render")
        decoder.start()
        encoder.start()
        frames = with_swap = faces = 0
        try:
            while True:
                try:
                    item = frames_in.get(timeout=0.1)
                except queue.Empty:
                    if halted():
                        break
                    continue
                if item is _END:
                    break
                item, found = item
                plan = self.plan_frame(item, tracker, prepared, ref, timings, mapping, found)
                frames += 1
                with_swap += bool(plan)
                faces += len(plan)
                # a frame enhancer changes every frame (and its size), faces or not
                busy = plan or self.swapper.frame_enhancer is not None
                pixels = pool.submit(render, item.pixels, plan) if busy else item.pixels
                if not put(frames_out, (pixels, item.time)):
                    break
                if progress is not None:
                    progress(frames, total)
        except BaseException:
            halt.set()
            raise
        finally:
            if not halted():
                put(frames_out, _END)
            else:
                pool.shutdown(wait=False, cancel_futures=True)
            decoder.join()
            encoder.join()
            pool.shutdown(wait=True)
            tracker.close()
        for key, value in [*render_timings.items(), *detect_timings.items()]:
            timings[key] = timings.get(key, 0.0) + value
        if errors:
            raise errors[0]
        if stop.is_set():
            raise KeyboardInterrupt("video swap stopped")
        return VideoSwapReport(
            output=output,
            frames=frames,
            frames_with_swap=with_swap,
            faces_swapped=faces,
            scene_cuts=tracker.scene_cuts,
            seconds=time.perf_counter() - started,
            broken_at=reader.broken_at,
            timings_ms=timings,
        )
