"""``faceweave batch``: swap many targets (photos or videos) matched by glob
patterns, writing each to a name made from a template."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from faceweave.cli import console
from faceweave.cli.common import refuse_video, swap_options
from faceweave.options import FACE_ORDERS, SELECTION_MODES


def batch_command(
    sources: Annotated[list[Path], typer.Option("--source", "-s", metavar="PHOTO", help="Source photo; repeat for several photos of the same person.")],
    targets: Annotated[list[str], typer.Option("--target", "-t", metavar="GLOB", help="Glob pattern of target photos or videos (quote it); repeatable; ** is recursive.")],
    output: Annotated[str, typer.Option("--output", "-o", metavar="TEMPLATE", help="Output path template with {name}, {index} and {source_name}, e.g. 'out/{name}_swapped.mp4'.")],
    faces: Annotated[str, typer.Option("--faces", metavar="MODE", help=f"Which target faces: {'|'.join(SELECTION_MODES[:3])}.")] = "one",
    reference_face: Annotated[Optional[Path], typer.Option("--reference-face", metavar="PHOTO", help="Photo of the person to replace (--faces reference).")] = None,
    order: Annotated[Optional[str], typer.Option("--order", metavar="ORDER", help=f"Face order: {'|'.join(FACE_ORDERS)}.")] = None,
    quality: Annotated[Optional[int], typer.Option("--quality", min=1, max=100, metavar="Q", help="Image quality (default 95) or video quality (default 80).")] = None,
    no_audio: Annotated[bool, typer.Option("--no-audio", help="Videos: leave the audio out.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the outcome of every target as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")] = False,
) -> None:
    """Swap the face from SOURCE photo(s) into every target matched by the patterns.

    A bad file does not stop the batch; at the end the failures are listed
    with their reasons and the exit code is 1 if any target failed."""

    def body(term: console.Terminal) -> int:
        from faceweave.batch import expand_targets, plan_batch, run_batch
        from faceweave.cli.video import video_crf
        from faceweave.errors import InvalidOptionError
        from faceweave.pipeline import FaceSwapper
        from faceweave.video.pipeline import VideoOptions

        if faces == "reference" and reference_face is None:
            raise InvalidOptionError("--faces reference needs --reference-face PHOTO of the person to replace")
        for path in sources:
            refuse_video(path, role="source")
        options = swap_options(selection={"mode": faces, "order": order})
        items = plan_batch(expand_targets(targets), output, source_name=sources[0].stem)

        def report(outcome) -> None:
            if not json_output:
                mark = "ok  " if outcome.ok else "FAIL"
                term.line(f"{mark} {outcome.item.target} -> {outcome.item.output}: {outcome.message}")

        with FaceSwapper(options) as swapper:
            outcomes = run_batch(
                swapper, sources, items, reference=reference_face, image_quality=quality or 95,
                video_options=VideoOptions(audio=not no_audio, crf=video_crf(quality or 80)), on_item=report,
            )
        failed = [o for o in outcomes if not o.ok]
        if json_output:
            term.json([
                {"target": str(o.item.target), "output": str(o.item.output), "ok": o.ok, "message": o.message}
                for o in outcomes
            ])
        else:
            term.line(f"{len(outcomes) - len(failed)} of {len(outcomes)} target(s) done, {len(failed)} failed")
            for o in failed:
                term.note(f"failed: {o.item.target}: {o.message}")
        return console.EXIT_FAILURE if failed else console.EXIT_OK

    raise typer.Exit(console.run(verbose, body))
