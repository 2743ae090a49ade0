"""Swap faces in a video by segments processed at once, then joined.

:func:`swap_segment` swaps one :class:`Segment` into a part with
:meth:`VideoSwapper.swap_video` (video only); :func:`swap_video_segmented`
plans the segments, runs them on a thread or process pool and joins the parts
with the input's audio.  A distributed deployment calls the three steps
itself: :func:`plan_segments` on the API node, :func:`swap_segment` on each
worker (parts on shared storage), :func:`join_segments` when all are done.

Tracking does not cross a segment boundary: each segment starts its own
:class:`FaceTracker`, which detects faces on the segment's first frame, so
the landmark smoothing restarts there (the swapped face may shift by the
smoothing's lag at a boundary; a cut at a keyframe often falls on a scene cut).

Models per worker: mediapipe graphs serve one thread at a time, so every
worker has its own.  With ``executor="thread"`` the first worker uses the
given :class:`VideoSwapper` and the others one each from ``make_swapper``
(default: a new :class:`FaceSwapper` with the same options), closed at the
end; with ``"process"`` each segment runs in a spawned process that builds
its models with ``make_swapper`` (which must then be picklable, e.g. a
:func:`functools.partial` of a module-level function), and sources and
reference are sent as given.
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import (
    FIRST_EXCEPTION,
    Executor,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from dataclasses import dataclass, replace
from functools import partial
from multiprocessing import get_context
from pathlib import Path

from faceweave.errors import InvalidOptionError, OutputError, UnreadableFileError
from faceweave.options import SwapOptions
from faceweave.pipeline import ImageInput
from faceweave.swappers import SourceFace
from faceweave.video.concat import join_kind, join_segments, part_suffix
from faceweave.video.pipeline import VideoOptions, VideoSwapper, VideoSwapReport
from faceweave.video.segments import MIN_FRAMES, Segment, SegmentPart, plan_segments

EXECUTORS = ("thread", "process")


@dataclass(frozen=True)
class SegmentedReport:
    """What :func:`swap_video_segmented` did: the joined ``output`` with
    ``frames`` frames, the ``segments`` planned, each segment's swap report
    (in segment order), the wall ``seconds`` and how the audio got in."""

    output: Path
    frames: int
    segments: tuple[Segment, ...]
    reports: tuple[VideoSwapReport, ...]
    seconds: float
    audio: str | None
    executor: str
    workers: int

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0


def swap_segment(
    video_swapper: VideoSwapper,
    sources: Sequence[ImageInput] | Sequence[SourceFace],
    target: str | os.PathLike[str],
    segment: Segment,
    output: str | os.PathLike[str],
    *,
    reference: ImageInput | None = None,
    options: VideoOptions = VideoOptions(),
    stop: threading.Event | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[SegmentPart, VideoSwapReport]:
    """Swap the frames of ``segment`` of ``target`` into the part ``output``
    (video only, written atomically), with a tracker of its own;
    ``progress(frames)`` as the segment's frames are written.

    ``options.start``/``end``/``audio`` are replaced by the segment's window
    and no audio; ``options.fps`` must be ``None`` (frames dropped to a lower
    rate would not line up at the boundaries).

    Raises:
        InvalidOptionError: ``options.fps`` is set.
        UnreadableFileError: the segment did not decode to its planned frames
            (the part is removed).
        and what :meth:`VideoSwapper.swap_video` raises.
    """
    if options.fps is not None:
        raise InvalidOptionError("--fps cannot be combined with segment-parallel video; leave the frame rate as it is")
    start, end = segment.window
    part_options = replace(options, start=start, end=end, audio=False)
    report = video_swapper.swap_video(
        sources,
        target,
        output,
        reference=reference,
        options=part_options,
        stop=stop,
        progress=None if progress is None else lambda done, _total: progress(done),
    )
    if report.frames != segment.frames or report.broken_at is not None:
        Path(output).unlink(missing_ok=True)
        broke = f", decoding broke at {report.broken_at:.3f} s" if report.broken_at is not None else ""
        raise UnreadableFileError(
            f"video '{target}': segment {segment.index} should hold frames"
            f" {segment.start_frame}-{segment.end_frame - 1}"
            f" ({segment.frames} frames) but {report.frames} were decoded{broke}; the file is damaged"
        )
    return SegmentPart(segment=segment, path=Path(output), frames=report.frames), report


def video_swapper_from_options(options: SwapOptions) -> VideoSwapper:
    """A new :class:`VideoSwapper` with its own models (the caller closes ``.swapper``)."""
    from faceweave.pipeline import FaceSwapper

    return VideoSwapper(FaceSwapper(options))


def _swap_in_process(make_swapper, sources, target, segment, output, *, reference, options):
    """One segment in a worker process: its own models, built and closed here."""
    video_swapper = make_swapper()
    try:
        return swap_segment(video_swapper, sources, target, segment, output, reference=reference, options=options)
    finally:
        video_swapper.swapper.close()


def swap_video_segmented(
    video_swapper: VideoSwapper,
    sources: Sequence[ImageInput] | Sequence[SourceFace],
    target: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    segments: int = 2,
    workers: int = 2,
    options: VideoOptions = VideoOptions(),
    reference: ImageInput | None = None,
    executor: str = "thread",
    make_swapper: Callable[[], VideoSwapper] | None = None,
    min_frames: int = MIN_FRAMES,
    stop: threading.Event | None = None,
) -> SegmentedReport:
    """Swap faces in ``target`` by ``segments`` segments run ``workers`` at a
    time, joined into ``output`` with the input's audio (unless ``options.audio``
    is off); ``options.start``/``end`` trim the video.

    ``executor`` ``"thread"`` or ``"process"``, and ``make_swapper``, give every
    worker its own models (see the module's note), and each segment tracks
    faces on its own.  Setting ``stop`` (threads only) abandons the run
    (:class:`KeyboardInterrupt`, as :meth:`VideoSwapper.swap_video` does).
    The parts live in a hidden folder beside ``output`` and are removed at
    the end; ``output`` appears only when complete.

    Raises:
        InvalidOptionError: ``workers`` below 1, an unknown ``executor``, an
            output a join cannot write, ``options.fps`` set, and what
            :func:`plan_segments` refuses (``segments`` below 1; more segments
            than frames are clamped).
        and what :func:`swap_segment` and :func:`join_segments` raise.
    """
    began = time.perf_counter()
    _check_run(workers, executor, options)
    kind = join_kind(output)
    output = Path(output)
    options = video_swapper.marked(options)  # one run: every segment carries the same mark
    plan = plan_segments(target, segments=segments, min_frames=min_frames, start=options.start, end=options.end)
    factory = make_swapper or partial(video_swapper_from_options, video_swapper.swapper.options)
    work = _parts_folder(output)
    try:
        names = [work / f"part_{s.index:05d}{part_suffix(kind)}" for s in plan]
        pool_size = min(workers, len(plan))
        if executor == "thread":
            threads = (video_swapper, factory, sources, target, plan, names, reference, options, pool_size)
            results = _run_threads(*threads, stop or threading.Event())
        else:
            results = _run_processes(factory, sources, target, plan, names, reference, options, pool_size)
        joined = join_segments(
            [part for part, _ in results],
            output,
            audio_from=target if options.audio else None,
            start=options.start,
            end=options.end,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return SegmentedReport(
        output=output,
        frames=joined.frames,
        segments=plan,
        reports=tuple(r for _, r in results),
        seconds=time.perf_counter() - began,
        audio=joined.audio,
        executor=executor,
        workers=pool_size,
    )


def _check_run(workers: int, executor: str, options: VideoOptions) -> None:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidOptionError(f"workers must be a whole number of at least 1; got {workers!r}")
    if executor not in EXECUTORS:
        raise InvalidOptionError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    if options.fps is not None:
        raise InvalidOptionError("--fps cannot be combined with segment-parallel video; leave the frame rate as it is")


def _parts_folder(output: Path) -> Path:
    """A hidden folder beside ``output`` for the parts (removed at the end)."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{output.name[:200]}.", suffix=".parts", dir=output.parent))
    except OSError as exc:
        raise OutputError(f"cannot write video '{output}': {exc.strerror or exc}") from exc


def _run_threads(video_swapper, factory, sources, target, plan, names, reference, options, size, stop):
    """Segments on ``size`` threads, each holding one :class:`VideoSwapper` while it works."""
    idle: queue.Queue = queue.Queue()
    idle.put(video_swapper)
    extra = []
    try:
        for _ in range(size - 1):
            extra.append(factory())
            idle.put(extra[-1])
        prepared = video_swapper.prepare_sources(sources)

        def run(segment: Segment, name: Path):
            swapper = idle.get()
            try:
                return swap_segment(
                    swapper, prepared, target, segment, name, reference=reference, options=options, stop=stop
                )
            finally:
                idle.put(swapper)

        return _collect(
            ThreadPoolExecutor(max_workers=size, thread_name_prefix="faceweave-segment"),
            [(run, s, n) for s, n in zip(plan, names, strict=False)],
            stop,
        )
    finally:
        for swapper in extra:
            swapper.swapper.close()


def _run_processes(factory, sources, target, plan, names, reference, options, size):
    """Segments on ``size`` spawned processes, each building its own models."""
    run = partial(_swap_in_process, factory, sources, target, reference=reference, options=options)
    pool = ProcessPoolExecutor(max_workers=size, mp_context=get_context("spawn"))
    return _collect(pool, [(run, s, n) for s, n in zip(plan, names, strict=False)], None)


def _collect(pool: Executor, calls, stop: threading.Event | None):
    """Run ``(fn, segment, name)`` calls on ``pool``; the results in order, or
    the first error raised (the calls not started are cancelled and running
    threads are asked to stop)."""
    with pool:
        futures = [pool.submit(fn, segment, name) for fn, segment, name in calls]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        except BaseException:
            _cancel(futures, stop)
            raise
        failed = next((f for f in futures if f in done and not f.cancelled() and f.exception() is not None), None)
        if failed is not None:
            _cancel(futures, stop)
            error = failed.exception()
            assert error is not None  # picked for having one
            raise error
        return [future.result() for future in futures]


def _cancel(futures, stop: threading.Event | None) -> None:
    if stop is not None:
        stop.set()
    for future in futures:
        future.cancel()
