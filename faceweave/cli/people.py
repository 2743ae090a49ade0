"""``faceweave people``: the distinct people of a video, with thumbnails."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli import console
from faceweave.errors import InvalidOptionError


def people_command(
    video: Annotated[Path, typer.Argument(metavar="VIDEO", help="The video to look through.")],
    sheet: Annotated[
        Path | None,
        typer.Option("--sheet", metavar="PNG", help="Write a sheet of the people's thumbnails with their indices."),
    ] = None,
    every: Annotated[
        float, typer.Option("--every", min=0.04, metavar="SECONDS", help="Look at one frame every this many seconds.")
    ] = 0.5,
    json_output: Annotated[bool, typer.Option("--json", help="Print the people as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")] = False,
) -> None:
    """List the distinct people in VIDEO (grouped by identity), most often seen first."""

    def body(term: console.Terminal) -> int:
        from faceweave.analysis import FaceAnalyser
        from faceweave.cli.common import check_output_path
        from faceweave.video.io import probe_video
        from faceweave.video.people import find_people, people_sheet

        if not math.isfinite(every):
            raise InvalidOptionError(f"--every must be a finite number of seconds (at least 0.04); got {every}")
        if sheet is not None:
            check_output_path(sheet, flag="--sheet")
        probe_video(video)
        with FaceAnalyser() as analyser:
            people = find_people(video, analyser, every=every)
        if sheet is not None and people:
            from faceweave.io import write_image

            write_image(sheet, people_sheet(people))
        if json_output:
            term.json([p.summary() for p in people])
            return console.EXIT_OK
        if not people:
            term.line(f"no face found in {video}")
            return console.EXIT_OK
        for p in people:
            s = p.summary()
            term.line(
                f"person {s['person']}: seen {s['appearances']} times, {s['first_seen']:.1f}-{s['last_seen']:.1f} s"
            )
        if sheet is not None:
            term.line(f"wrote {sheet}")
        return console.EXIT_OK

    raise typer.Exit(console.run(verbose, body))
