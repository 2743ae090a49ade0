"""``faceweave evaluate``: swap pairs of photos from a folder and score them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer

from faceweave.cli import console
from faceweave.cli.option_flags import typer_command
from faceweave.option_schema import GivenOptions
from faceweave.options import CLI_WORDS, SwapOptions

_ACCEPTED = (
    "give a folder of test photos with an identities.csv (columns file,identity,independent_photo),"
    " or a video with --source PHOTO"
)


_DataDirFlag = Annotated[
    Path,
    typer.Argument(
        metavar="DATA_DIR|VIDEO",
        help="Folder of test photos (e.g. ../shared/data/faces), or a video to measure temporal stability "
        "on (with --source).",
    ),
]

_OutDirFlag = Annotated[
    Path, typer.Option("--out", metavar="DIR", help="Folder for the swapped images and the report.")
]

_PairsFlag = Annotated[
    int,
    typer.Option(
        "--pairs",
        min=1,
        metavar="N",
        help="How many source/target pairs to swap (with --pairs-from: the first N listed).",
    ),
]

_SeedFlag = Annotated[int, typer.Option("--seed", metavar="N", help="Seed of the pair sampling.")]

_PairsFromFlag = Annotated[
    Path | None,
    typer.Option(
        "--pairs-from",
        metavar="JSON",
        help="Swap the pairs listed in a judge's results.json or an earlier report.json (the first --pairs of "
        "them) instead of a seeded pick.",
    ),
]

_SourceFlag = Annotated[
    Path | None, typer.Option("--source", "-s", metavar="PHOTO", help="Video mode: the source photo to swap in.")
]

_VerboseFlag = Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")]


@dataclass(frozen=True)
class EvaluateArgs:
    """Swap PAIRS source/target pairs from DATA_DIR, write the results to --out and print a summary.

    Compare settings and models with it: --swapper runs a neural swapper
    (its model downloaded or imported first) on the same pairs."""

    data_dir: _DataDirFlag
    out_dir: _OutDirFlag
    pairs: _PairsFlag = 30
    seed: _SeedFlag = 0
    pairs_from: _PairsFromFlag = None
    source: _SourceFlag = None
    verbose: _VerboseFlag = False
    options: GivenOptions = GivenOptions()


def run_evaluate(term: console.Terminal, args: EvaluateArgs) -> int:
    """Evaluate a folder of photo pairs, or a video with one source photo
    (the options are checked first)."""
    data_dir = args.data_dir
    options = _options(args, "video" if data_dir.is_file() else "photo")
    if data_dir.is_file():
        from faceweave.cli.common import refuse_video, target_is_video
        from faceweave.errors import InvalidOptionError, UnsupportedFormatError

        if not target_is_video(data_dir):
            raise UnsupportedFormatError(f"{data_dir} is neither a folder of test photos nor a video; {_ACCEPTED}")
        if args.source is None:
            raise InvalidOptionError("evaluating a video needs --source PHOTO")
        refuse_video(args.source, role="source")
        return _evaluate_video(term, options, data_dir, args.source, args.out_dir)
    _check_folder_mode(data_dir, args.out_dir, args.pairs_from)
    return _evaluate(
        term, options, data_dir, args.out_dir, pairs=args.pairs, seed=args.seed, pairs_from=args.pairs_from
    )


def _options(args: EvaluateArgs, kind: Literal["photo", "video"]) -> SwapOptions:
    """The options of the flags; the pairs choose their faces themselves."""
    return args.options.swap_options(kind=kind, has_reference=False, words=CLI_WORDS)


def _check_folder_mode(data_dir: Path, out_dir: Path, pairs_from: Path | None) -> None:
    """Refuse a missing data folder or ``identities.csv``, an ``--out`` that is
    a file and a missing ``--pairs-from`` file."""
    from faceweave.errors import InvalidOptionError, UnreadableFileError

    if not data_dir.is_dir():
        raise UnreadableFileError(f"{data_dir} does not exist; {_ACCEPTED}")
    if not (data_dir / "identities.csv").is_file():
        raise UnreadableFileError(f"folder {data_dir} has no identities.csv; {_ACCEPTED}")
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidOptionError(f"--out {out_dir}: is a file; give a folder for the swapped images and the report")
    if pairs_from is not None and not pairs_from.is_file():
        raise UnreadableFileError(f"--pairs-from {pairs_from}: no such file; give a results.json or report.json")


def _evaluate_video(term: console.Terminal, options: SwapOptions, video: Path, source: Path, out_dir: Path) -> int:
    from faceweave.evaluate.video import evaluate_video, format_video_summary
    from faceweave.pipeline import FaceSwapper

    with FaceSwapper(options) as swapper:
        evaluation = evaluate_video(video, source, out_dir, swapper=swapper)
    term.line(format_video_summary(evaluation, video, settings=options.model_dump(mode="json")))
    return console.EXIT_OK


def _evaluate(
    term: console.Terminal,
    options: SwapOptions,
    data_dir: Path,
    out_dir: Path,
    *,
    pairs: int,
    seed: int,
    pairs_from: Path | None,
) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from faceweave.evaluate import evaluate_folder, format_summary
    from faceweave.pipeline import FaceSwapper

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with FaceSwapper(options) as swapper, Progress(*columns, console=term.err, transient=True) as bar:
        task = bar.add_task("swapping", total=pairs)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        report = evaluate_folder(
            data_dir, out_dir, swapper=swapper, pairs=pairs, seed=seed, pairs_from=pairs_from, progress=progress
        )
    term.line(format_summary(report))
    return console.EXIT_OK


#: ``faceweave evaluate``: every option but the face selection (the pairs choose their faces)
evaluate_command = typer_command(
    EvaluateArgs, run_evaluate, kinds=("photo", "video"), where=lambda leaf: leaf.path[0] != "selection"
)
