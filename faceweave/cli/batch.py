"""``faceweave batch``: swap many targets (photos or videos) matched by glob
patterns, writing each to a name made from a template."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from faceweave.cli import console
from faceweave.cli.common import refuse_video
from faceweave.cli.marking import AUDIT_HELP, NO_WATERMARK_HELP, SCREENING_HELP
from faceweave.cli.option_flags import typer_command
from faceweave.option_fields import SELECTION
from faceweave.option_schema import GivenOptions
from faceweave.options import CLI_WORDS

_SourcesFlag = Annotated[
    list[Path],
    typer.Option("--source", "-s", metavar="PHOTO", help="Source photo; repeat for several photos of the same person."),
]

_TargetsFlag = Annotated[
    list[str],
    typer.Option(
        "--target",
        "-t",
        metavar="GLOB",
        help="Glob pattern of target photos or videos (quote it); repeatable; ** is recursive.",
    ),
]

_OutputFlag = Annotated[
    str,
    typer.Option(
        "--output",
        "-o",
        metavar="TEMPLATE",
        help="Output path template with {name}, {index} and {source_name}, e.g. 'out/{name}_swapped.mp4'.",
    ),
]

_ReferenceFaceFlag = Annotated[
    Path | None,
    typer.Option(
        "--reference-face",
        metavar="PHOTO",
        help="Photo of the person to replace (--faces reference).",
        rich_help_panel=SELECTION,
    ),
]

_QualityFlag = Annotated[
    int | None,
    typer.Option(
        "--quality",
        min=1,
        max=100,
        metavar="Q",
        help="Image quality (default 95) or video quality (default 65: CRF 18).",
    ),
]

_NoAudioFlag = Annotated[bool, typer.Option("--no-audio", help="Videos: leave the audio out.")]

_NoWatermarkFlag = Annotated[bool, typer.Option("--no-watermark", help=NO_WATERMARK_HELP)]

_ScreeningFlag = Annotated[str, typer.Option("--screening", metavar="POLICY", help=SCREENING_HELP)]

_AuditLogFlag = Annotated[Path | None, typer.Option("--audit-log", metavar="FILE", help=AUDIT_HELP)]

_JsonOutputFlag = Annotated[bool, typer.Option("--json", help="Print the outcome of every target as JSON.")]

_VerboseFlag = Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")]


@dataclass(frozen=True)
class BatchArgs:
    """Swap the face from SOURCE photo(s) into every target matched by the patterns.

    A bad file does not stop the batch; at the end the failures are listed
    with their reasons and the exit code is 1 if any target failed.  Every
    output is watermarked and labelled; each target adds one audit line.
    One set of options serves every target, photo or video (a photo's
    defaults)."""

    sources: _SourcesFlag
    targets: _TargetsFlag
    output: _OutputFlag
    reference_face: _ReferenceFaceFlag = None
    quality: _QualityFlag = None
    no_audio: _NoAudioFlag = False
    no_watermark: _NoWatermarkFlag = False
    screening: _ScreeningFlag = "off"
    audit_log: _AuditLogFlag = None
    json_output: _JsonOutputFlag = False
    verbose: _VerboseFlag = False
    options: GivenOptions = GivenOptions()


def run_batch_command(term: console.Terminal, args: BatchArgs) -> int:
    """One batch: each target adds its own audit line; a failure of the
    batch as a whole adds one line that says why, then is raised."""
    from faceweave.cli.marking import Screener, make_provenance, open_audit, write_audit

    log = open_audit(args.audit_log)
    provenance = make_provenance(no_watermark=args.no_watermark)
    screener = None
    record: dict[str, Any] = {
        "no_watermark": args.no_watermark,
        "screening": args.screening,
        "targets": list(args.targets),
    }
    try:
        screener = Screener(args.screening)
        return _run(term, args, _BatchAudit(log, provenance, screener, record, args))
    except BaseException as exc:
        inputs = [("source", p) for p in args.sources]
        write_audit(
            log,
            command="batch",
            provenance=provenance,
            inputs=inputs,
            options=record,
            output=args.output,
            screener=screener,
            error=exc,
        )
        raise
    finally:
        if screener is not None:
            screener.close()


@dataclass
class _BatchAudit:
    """Writes each target's audit line (and prints its line unless --json)."""

    log: Any
    provenance: Any
    screener: Any
    record: dict[str, Any]
    args: BatchArgs
    source_inputs: tuple[Any, ...] = ()

    def __call__(self, outcome, term: console.Terminal) -> None:
        from faceweave.cli.marking import write_audit

        write_audit(
            self.log,
            command="batch",
            inputs=[*self.source_inputs, ("target", outcome.item.target)],
            options=self.record,
            provenance=self.provenance,
            output=outcome.item.output,
            screener=self.screener,
            error=None,
            outcome={
                "outcome": "ok" if outcome.ok else "error",
                "code": outcome.code,
                "message": None if outcome.ok else outcome.message,
            },
        )
        if not self.args.json_output:
            mark = "ok  " if outcome.ok else "FAIL"
            term.line(f"{mark} {outcome.item.target} -> {outcome.item.output}: {outcome.message}")


def _run(term: console.Terminal, args: BatchArgs, audit: _BatchAudit) -> int:
    """Check the flags, plan the targets, swap each, then report."""
    from faceweave.batch import expand_targets, plan_batch, run_batch
    from faceweave.cli.marking import hashed_inputs
    from faceweave.cli.video import DEFAULT_VIDEO_QUALITY, video_crf
    from faceweave.pipeline import FaceSwapper
    from faceweave.video.pipeline import VideoOptions

    options = args.options.swap_options(kind="photo", has_reference=args.reference_face is not None, words=CLI_WORDS)
    for path in args.sources:
        refuse_video(path, role="source")
    _check_template_extension(args.output)
    items = plan_batch(expand_targets(args.targets), args.output, source_name=args.sources[0].stem)
    audit.record.update(swap=options.model_dump(mode="json"), quality=args.quality, audio=not args.no_audio)
    screener = audit.screener
    screened = [screener.image(p, role="source", max_pixels=options.max_pixels) for p in args.sources]
    audit.source_inputs = hashed_inputs([("source", p) for p in args.sources])
    video_options = VideoOptions(audio=not args.no_audio, crf=video_crf(args.quality or DEFAULT_VIDEO_QUALITY))
    with FaceSwapper(options) as swapper:
        outcomes = run_batch(
            swapper,
            screened,
            items,
            reference=args.reference_face,
            image_quality=args.quality or 95,
            video_options=video_options,
            on_item=lambda outcome: audit(outcome, term),
            provenance=audit.provenance,
            screener=screener if screener.enabled else None,
        )
    return _report(term, outcomes, json_output=args.json_output)


def _report(term: console.Terminal, outcomes: list, *, json_output: bool) -> int:
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


#: ``faceweave batch``
batch_command = typer_command(BatchArgs, run_batch_command, kinds=("photo",))
