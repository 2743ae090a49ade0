"""``faceweave batch``: swap many targets (photos or videos) matched by glob
patterns, writing each to a name made from a template."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli import console
from faceweave.cli.common import refuse_video, swap_options
from faceweave.cli.marking import AUDIT_HELP, NO_WATERMARK_HELP, SCREENING_HELP
from faceweave.options import FACE_ORDERS, SELECTION_MODES


def batch_command(
    sources: Annotated[
        list[Path],
        typer.Option(
            "--source", "-s", metavar="PHOTO", help="Source photo; repeat for several photos of the same person."
        ),
    ],
    targets: Annotated[
        list[str],
        typer.Option(
            "--target",
            "-t",
            metavar="GLOB",
            help="Glob pattern of target photos or videos (quote it); repeatable; ** is recursive.",
        ),
    ],
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            metavar="TEMPLATE",
            help="Output path template with {name}, {index} and {source_name}, e.g. 'out/{name}_swapped.mp4'.",
        ),
    ],
    faces: Annotated[
        str, typer.Option("--faces", metavar="MODE", help=f"Which target faces: {'|'.join(SELECTION_MODES[:3])}.")
    ] = "one",
    reference_face: Annotated[
        Path | None,
        typer.Option("--reference-face", metavar="PHOTO", help="Photo of the person to replace (--faces reference)."),
    ] = None,
    order: Annotated[
        str | None, typer.Option("--order", metavar="ORDER", help=f"Face order: {'|'.join(FACE_ORDERS)}.")
    ] = None,
    quality: Annotated[
        int | None,
        typer.Option(
            "--quality",
            min=1,
            max=100,
            metavar="Q",
            help="Image quality (default 95) or video quality (default 65: CRF 18).",
        ),
    ] = None,
    no_audio: Annotated[bool, typer.Option("--no-audio", help="Videos: leave the audio out.")] = False,
    no_watermark: Annotated[bool, typer.Option("--no-watermark", help=NO_WATERMARK_HELP)] = False,
    screening: Annotated[str, typer.Option("--screening", metavar="POLICY", help=SCREENING_HELP)] = "off",
    audit_log: Annotated[Path | None, typer.Option("--audit-log", metavar="FILE", help=AUDIT_HELP)] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the outcome of every target as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")] = False,
) -> None:
    """Swap the face from SOURCE photo(s) into every target matched by the patterns.

    A bad file does not stop the batch; at the end the failures are listed
    with their reasons and the exit code is 1 if any target failed.  Every
    output is watermarked and labelled; each target adds one audit line."""

    def body(term: console.Terminal) -> int:
        from faceweave.cli.marking import Screener, make_provenance, open_audit, write_audit

        log = open_audit(audit_log)
        provenance = make_provenance(no_watermark=no_watermark)
        screener = None
        audit = dict(command="batch", provenance=provenance)
        record: dict = {"no_watermark": no_watermark, "screening": screening, "targets": list(targets)}
        try:
            screener = Screener(screening)
            return work(term, provenance, screener, log, record)
        except BaseException as exc:  # the batch as a whole failed: one line says why
            write_audit(
                log,
                **audit,
                inputs=[("source", p) for p in sources],
                options=record,
                output=output,
                screener=screener,
                error=exc,
            )
            raise
        finally:
            if screener is not None:
                screener.close()

    def work(term: console.Terminal, provenance, screener, log, record: dict) -> int:
        from faceweave.batch import expand_targets, plan_batch, run_batch
        from faceweave.cli.marking import hashed_inputs, write_audit
        from faceweave.cli.video import DEFAULT_VIDEO_QUALITY, video_crf
        from faceweave.errors import InvalidOptionError
        from faceweave.pipeline import FaceSwapper
        from faceweave.video.pipeline import VideoOptions

        if faces == "reference" and reference_face is None:
            raise InvalidOptionError("--faces reference needs --reference-face PHOTO of the person to replace")
        for path in sources:
            refuse_video(path, role="source")
        _check_template_extension(output)
        options = swap_options(selection={"mode": faces, "order": order})
        items = plan_batch(expand_targets(targets), output, source_name=sources[0].stem)
        record.update(swap=options.model_dump(mode="json"), quality=quality, audio=not no_audio)
        screened = [screener.image(p, role="source", max_pixels=options.max_pixels) for p in sources]
        source_inputs = hashed_inputs([("source", p) for p in sources])

        def report(outcome) -> None:
            write_audit(
                log,
                command="batch",
                inputs=[*source_inputs, ("target", outcome.item.target)],
                options=record,
                provenance=provenance,
                output=outcome.item.output,
                screener=screener,
                error=None,
                outcome={
                    "outcome": "ok" if outcome.ok else "error",
                    "code": outcome.code,
                    "message": None if outcome.ok else outcome.message,
                },
            )
            if not json_output:
                mark = "ok  " if outcome.ok else "FAIL"
                term.line(f"{mark} {outcome.item.target} -> {outcome.item.output}: {outcome.message}")

        with FaceSwapper(options) as swapper:
            outcomes = run_batch(
                swapper,
                screened,
                items,
                reference=reference_face,
                image_quality=quality or 95,
                video_options=VideoOptions(audio=not no_audio, crf=video_crf(quality or DEFAULT_VIDEO_QUALITY)),
                on_item=report,
                provenance=provenance,
                screener=screener if screener.enabled else None,
            )
        failed = [o for o in outcomes if not o.ok]
        if json_output:
            term.json(
                [
                    {"target": str(o.item.target), "output": str(o.item.output), "ok": o.ok, "message": o.message}
                    for o in outcomes
                ]
            )
        else:
            term.line(f"{len(outcomes) - len(failed)} of {len(outcomes)} target(s) done, {len(failed)} failed")
            for o in failed:
                term.note(f"failed: {o.item.target}: {o.message}")
        return console.EXIT_FAILURE if failed else console.EXIT_OK

    raise typer.Exit(console.run(verbose, body))


def _check_template_extension(template: str) -> None:
    """Refuse an output template whose extension neither an image nor a video
    output takes (before any work, rather than once per target)."""
    from faceweave.cli.common import wants_video_output
    from faceweave.errors import InvalidOptionError
    from faceweave.io import WRITE_FORMATS
    from faceweave.video.io.formats import OUTPUT_FORMATS

    suffix = Path(template).suffix
    if not suffix or "{" in suffix or "}" in suffix:
        return
    if suffix.lower() not in WRITE_FORMATS and not wants_video_output(Path(template)):
        videos = " ".join(ext for ext in OUTPUT_FORMATS if ext != "/")
        raise InvalidOptionError(
            f"--output {template!r}: cannot write '{suffix}'; use an image extension ({' '.join(WRITE_FORMATS)})"
            f" or, for videos, {videos}"
        )
