"""``faceweave benchmark``: the whole video swap's speed on this machine,
240p to 2160p, cold and warm (:mod:`faceweave.benchmark`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from faceweave.cli import console
from faceweave.cli.option_flags import typer_command
from faceweave.option_schema import GivenOptions
from faceweave.options import CLI_WORDS

_SourceFlag = Annotated[
    list[Path],
    typer.Option("--source", "-s", metavar="PHOTO", help="Source photo; repeat for several photos of one person."),
]
if TYPE_CHECKING:
    from faceweave.benchmark import BenchmarkReport

_PictureFlag = Annotated[
    Path | None,
    typer.Option(
        "--target", "-t", metavar="PHOTO", help="Photo with a face the clips are made from (default: the source)."
    ),
]
_ResolutionsFlag = Annotated[
    str,
    typer.Option(
        "--resolutions",
        metavar="LIST",
        help="Clip heights to run, comma-separated: 240p,360p,540p,720p,1080p,1440p,2160p or all.",
    ),
]
_FramesFlag = Annotated[int, typer.Option("--frames", metavar="N", min=2, max=10_000, help="Frames per clip.")]
_CyclesFlag = Annotated[
    int, typer.Option("--cycles", metavar="N", min=1, max=100, help="Warm runs per clip (the median is reported).")
]
_JsonFlag = Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")]
_VerboseFlag = Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")]


@dataclass(frozen=True)
class BenchmarkArgs:
    """Time the whole video swap (decode, tracking, swap, blend, watermark, encode) on clips made
    from a face photo at each resolution: the first run with the models loading (cold), then
    warm runs; frames per second, CPU per frame and per stage, with the options given (a video's
    defaults). Nothing is written."""

    source: _SourceFlag
    target: _PictureFlag = None
    resolutions: _ResolutionsFlag = "240p,360p,540p,720p,1080p"
    frames: _FramesFlag = 30
    cycles: _CyclesFlag = 3
    json_output: _JsonFlag = False
    verbose: _VerboseFlag = False
    options: GivenOptions = GivenOptions()


def run_benchmark_command(term: console.Terminal, args: BenchmarkArgs) -> int:
    from faceweave.benchmark import parse_resolutions, run_benchmark

    chosen = parse_resolutions(args.resolutions)
    options = args.options.swap_options(kind="video", has_reference=False, words=CLI_WORDS)
    report = run_benchmark(
        [str(s) for s in args.source],
        picture=args.target,
        resolutions=chosen,
        frames=args.frames,
        cycles=args.cycles,
        options=options,
    )
    if args.json_output:
        term.json(report.to_dict())
    else:
        _print_table(term, report)
    return console.EXIT_OK


def _print_table(term: console.Terminal, report: BenchmarkReport) -> None:
    stages = ("decode", "track", "crop", "swap", "blend", "paste", "encode")
    term.line(f"swapper {report.swapper}; warm figures: median of {report.cycles} run(s); CPU in ms per frame")
    header = f"{'clip':>6} {'size':>10} {'cold s':>7} {'cold fps':>8} {'fps':>6} {'CPU':>6} "
    term.line(header + " ".join(f"{s:>6}" for s in stages))
    for case in report.cases:
        cells = " ".join(f"{case.stages_ms.get(s, 0.0):6.1f}" for s in stages)
        size = f"{case.width}x{case.height}"
        term.line(
            f"{case.resolution:>6} {size:>10} {case.cold_s:7.2f} {case.cold_fps:8.1f} {case.fps:6.1f} "
            f"{case.cpu_ms:6.1f} {cells}"
        )


#: ``faceweave benchmark``: the clips have one face, so no face selection
benchmark_command = typer_command(
    BenchmarkArgs, run_benchmark_command, kinds=("video",), where=lambda leaf: leaf.path[0] != "selection"
)
