"""``faceweave people``: the distinct people of a video, with thumbnails."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli import console
from faceweave.cli.option_flags import typer_command
from faceweave.errors import InvalidOptionError
from faceweave.option_schema import GivenOptions, reads_faces
from faceweave.options import CLI_WORDS


@dataclass(frozen=True)
class PeopleArgs:
    """List the distinct people in VIDEO (grouped by identity), most often seen first (with swap's face
    detector and landmarker flags, the people and indices that swap --map finds with them)."""

    video: Annotated[Path, typer.Argument(metavar="VIDEO", help="The video to look through.")]
    sheet: Annotated[
        Path | None,
        typer.Option("--sheet", metavar="PNG", help="Write a sheet of the people's thumbnails with their indices."),
    ] = None
    every: Annotated[
        float, typer.Option("--every", min=0.04, metavar="SECONDS", help="Look at one frame every this many seconds.")
    ] = 0.5
    json_output: Annotated[bool, typer.Option("--json", help="Print the people as JSON.")] = False
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")] = False
    options: GivenOptions = GivenOptions()


def run_people(term: console.Terminal, args: PeopleArgs) -> int:
    from faceweave.analysis import FaceAnalyser
    from faceweave.cli.common import check_output_path
    from faceweave.sessions import ModelSessions
    from faceweave.video.io import probe_video
    from faceweave.video.people import find_people, people_sheet

    if not math.isfinite(args.every):
        raise InvalidOptionError(f"--every must be a finite number of seconds (at least 0.04); got {args.every}")
    options = args.options.swap_options(kind="video", has_reference=None, words=CLI_WORDS)  # checks the flags
    if args.sheet is not None:
        check_output_path(args.sheet, flag="--sheet")
    probe_video(args.video)
    sessions = ModelSessions(options.runtime)
    try:
        with FaceAnalyser(options.analysis, sessions=sessions) as analyser:
            people = find_people(args.video, analyser, every=args.every, max_pixels=options.max_pixels)
    finally:
        sessions.close()
    if args.sheet is not None and people:
        from faceweave.io import write_image

        write_image(args.sheet, people_sheet(people))
    return _report(term, people, args)


def _report(term: console.Terminal, people: list, args: PeopleArgs) -> int:
    if args.json_output:
        term.json([p.summary() for p in people])
        return console.EXIT_OK
    if not people:
        term.line(f"no face found in {args.video}")
        return console.EXIT_OK
    for p in people:
        s = p.summary()
        term.line(f"person {s['person']}: seen {s['appearances']} times, {s['first_seen']:.1f}-{s['last_seen']:.1f} s")
    if args.sheet is not None:
        term.line(f"wrote {args.sheet}")
    return console.EXIT_OK


#: ``faceweave people``: the options that change how faces are found (as ``faces``)
people_command = typer_command(PeopleArgs, run_people, kinds=("video",), where=reads_faces)
