"""The video branch of ``faceweave swap``: a progress bar with fps and time
left, an optional preview frame first, and a clean stop on Ctrl-C."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faceweave.cli import console
from faceweave.options import SwapOptions
from faceweave.timing import cpu_times, wall_times

if TYPE_CHECKING:
    from faceweave.provenance.stamp import Provenance
    from faceweave.video.pipeline import VideoOptions, VideoSwapReport

#: the default video quality: CRF 18, visually lossless at about the size of
#: a typical source (FaceFusion's 80 is CRF 10, about three times larger and
#: slower to encode)
DEFAULT_VIDEO_QUALITY = 65


def video_crf(quality: int) -> int:
    """CRF (0 best .. 51 worst) for a 1-100 quality, as FaceFusion maps it."""
    return int(round(max(0.0, min(51.0, 51.0 - quality * 0.51))))


def swap_video(
    term: console.Terminal,
    options: SwapOptions,
    sources: list[Path],
    target: Path,
    output: Path,
    reference_face: Path | None,
    *,
    mapping: dict[int, list[Path]] | None = None,
    trim: str | None,
    fps: float | None,
    scale: float,
    audio: bool,
    codec: str,
    preset: str,
    quality: int,
    preview: Path | None,
    preview_frame: int | None,
    json_output: bool,
    provenance: Provenance | None = None,
) -> int:
    """Swap the faces of a video target: an optional preview frame first,
    then the whole video under a progress bar, then the report."""
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import attach_manifest
    from faceweave.video.pipeline import VideoSwapper

    video_options = _video_options(trim, fps, scale, audio, codec, preset, quality, provenance)
    with FaceSwapper(options) as swapper:
        video = VideoSwapper(swapper)
        people = video.people_map(target, mapping) if mapping else None
        prepared = video.prepare_sources(sources) if people is None else []
        if preview is not None:
            index = video.preview(
                prepared,
                target,
                preview,
                reference=reference_face,
                frame_index=preview_frame,
                options=video_options,
                mapping=people,
            )
            if not json_output:
                term.line(f"preview: frame {index} -> {preview}")
        with _progress_bar(term, json_output) as progress:
            report = video.swap_video(
                prepared,
                target,
                output,
                reference=reference_face,
                options=video_options,
                progress=progress,
                mapping=people,
            )
        attach_manifest(output, video_options.provenance)
    return _report(term, report, target, provenance, json_output)


def _video_options(
    trim: str | None,
    fps: float | None,
    scale: float,
    audio: bool,
    codec: str,
    preset: str,
    quality: int,
    provenance: Provenance | None,
) -> VideoOptions:
    """The video flags as :class:`VideoOptions` (``--trim`` parsed, quality as CRF)."""
    from faceweave.video.io import parse_trim
    from faceweave.video.pipeline import VideoOptions

    start, end = parse_trim(trim) if trim else (0.0, None)
    return VideoOptions(
        start=start,
        end=end,
        fps=fps,
        scale=scale,
        audio=audio,
        codec=codec,
        crf=video_crf(quality),
        preset=preset,
        provenance=provenance,
    )


@contextmanager
def _progress_bar(term: console.Terminal, json_output: bool) -> Iterator[Callable[[int, int | None], None]]:
    """A progress bar with frames, fps and time left on stderr (off with
    ``--json``), as a ``progress(done, total)`` callback; drawn from the
    first frame on, so that a run refused before it prints its one error line alone."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn("swapping"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[fps]} fps"),
        TimeRemainingColumn(),
    )
    with ExitStack() as stack:
        drawn: dict[str, Any] = {}

        def progress(done: int, total: int | None) -> None:
            now = time.perf_counter()
            if not drawn:
                bar = stack.enter_context(Progress(*columns, console=term.err, transient=True, disable=json_output))
                drawn.update(bar=bar, task=bar.add_task("swap", total=None, fps="-"), t=now)
            rate = f"{done / (now - drawn['t']):.1f}" if now > drawn["t"] else "-"
            drawn["bar"].update(drawn["task"], completed=done, total=total, fps=rate)

        yield progress


def _report(
    term: console.Terminal, report: VideoSwapReport, target: Path, provenance: Provenance | None, json_output: bool
) -> int:
    """Print what the swap did (JSON, or a line and its warnings)."""
    if json_output:
        term.json(
            {
                "output": str(report.output),
                "frames": report.frames,
                "frames_with_swap": report.frames_with_swap,
                "faces_swapped": report.faces_swapped,
                "scene_cuts": report.scene_cuts,
                "fps": round(report.fps, 2),
                "broken_at": report.broken_at,
                "run_id": provenance.run_hex if provenance is not None else None,
                "watermark": bool(provenance is not None and provenance.watermark),
                "timings_ms": {k: round(v, 1) for k, v in wall_times(report.timings_ms).items()},
                "cpu_ms": {k: round(v, 1) for k, v in cpu_times(report.timings_ms).items()},
            }
        )
        return console.EXIT_OK
    if report.broken_at is not None:
        term.note(f"warning: {target} could not be decoded past {report.broken_at:.2f} s; the output stops there")
    if report.frames_with_swap == 0:
        term.note(f"warning: no face to swap was found in {target}; the video was copied unchanged")
    term.line(
        f"wrote {report.output} ({report.frames} frames, faces swapped in {report.frames_with_swap}, "
        f"{report.fps:.1f} fps)"
    )
    return console.EXIT_OK
