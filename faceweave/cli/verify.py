"""``faceweave verify``: is this file marked as made by faceweave?

Reads the metadata label and looks for the invisible watermark.  Exit 0 when
the file is marked (label or watermark found), 1 when it is not ("not
marked"), 2 when it is not an image or a video, or cannot be read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli import console
from faceweave.provenance.verify import DEFAULT_FRAMES


def verify_command(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Image or video to check.")],
    frames: Annotated[
        int,
        typer.Option(
            "--frames",
            metavar="N",
            min=1,
            max=1000,
            help="Video: how many frames, evenly spread, are checked for the watermark.",
        ),
    ] = DEFAULT_FRAMES,
    json_output: Annotated[bool, typer.Option("--json", help="Print what was found as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")] = False,
) -> None:
    """Check FILE for faceweave's AI-generated label and invisible watermark; exit 0 when it is marked."""

    def body(term: console.Terminal) -> int:
        from faceweave.provenance.verify import verify_file

        result = verify_file(file, frames=frames)
        if json_output:
            term.json(result.as_dict())
        else:
            for line in describe(result):
                term.line(line)
        return console.EXIT_OK if result.marked else console.EXIT_FAILURE

    raise typer.Exit(console.run(verbose, body))


def describe(result) -> list[str]:
    """The human-readable report of a :class:`~faceweave.provenance.verify.Verification`."""
    label, mark = result.label, result.watermark
    if label is None:
        label_line = "label: none"
    else:
        kind = label.digital_source_type.rstrip("/").rsplit("/", 1)[-1]
        label_line = (
            f"label: {kind} ({'AI-generated' if label.ai_generated else 'not AI-generated'}),"
            f" tool {label.tool} {label.version}, created {label.created or '?'}, run {label.run_id or '?'}"
        )
    frames = f", {mark.frames_agreeing} of {mark.frames_checked} frames agree" if result.kind == "video" else ""
    if mark.found:
        p = mark.payload
        mark_line = (
            f"watermark: found, tool 0x{int(p.tool_id):04X} version {int(p.version)} run {int(p.run_id):06x},"
            f" confidence {mark.confidence:.2f}{frames}"
        )
    else:
        checked = f" in {mark.frames_checked} frames" if result.kind == "video" else ""
        mark_line = f"watermark: not found{checked} (best confidence {mark.confidence:.2f})"
    verdict = f"{result.path}: marked" if result.marked else f"{result.path}: not marked"
    lines = [verdict, label_line, mark_line]
    if result.c2pa is not None:
        lines.append("c2pa: manifest present (signed by a local key; not from a public trust list)")
    return lines
