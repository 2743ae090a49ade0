"""``faceweave evaluate``: swap pairs of photos from a folder and score them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli import console
from faceweave.cli.analysis_flags import (
    FaceDetectorAnglesOption,
    FaceDetectorMarginOption,
    FaceDetectorOption,
    FaceDetectorScoreOption,
    FaceDetectorSizeOption,
    FaceLandmarkerOption,
    FaceLandmarkerScoreOption,
    analysis_fields,
)
from faceweave.cli.common import swap_options
from faceweave.cli.mask_flags import (
    FaceMaskAreasOption,
    FaceMaskBlurOption,
    FaceMaskPaddingOption,
    FaceOccluderOption,
    FaceParserOption,
    FaceParserRegionsOption,
    FaceSwapperWeightOption,
    mask_fields,
)
from faceweave.cli.quality_options import (
    MaxPixelsOption,
    NoExpressionCheckOption,
    NoMouthMaskOption,
    NoOcclusionOption,
    OcclusionHandsOption,
    SkinToneOption,
)
from faceweave.cli.runtime_options import (
    CompositingOption,
    DeviceIdOption,
    ExecutionProviderOption,
    ModelsDirOption,
    PixelBoostOption,
    ProviderFallbackOption,
    SourceBlendOption,
    SwapperOption,
    TensorrtCacheOption,
    TensorrtFp16Option,
    runtime_fields,
)
from faceweave.options import SwapOptions

_DEFAULTS = SwapOptions()
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

_WorkingSizeFlag = Annotated[
    int | None,
    typer.Option(
        "--working-size",
        metavar="PX",
        help=f"Face size in pixels inside the working crop, 96-1024 (default {_DEFAULTS.working_size}); "
        "larger is slower.",
    ),
]

_VerboseFlag = Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")]


def evaluate_command(
    data_dir: _DataDirFlag,
    out_dir: _OutDirFlag,
    pairs: _PairsFlag = 30,
    seed: _SeedFlag = 0,
    pairs_from: _PairsFromFlag = None,
    source: _SourceFlag = None,
    working_size: _WorkingSizeFlag = None,
    max_pixels: MaxPixelsOption = None,
    no_occlusion: NoOcclusionOption = False,
    no_mouth_mask: NoMouthMaskOption = False,
    occlusion_hands: OcclusionHandsOption = False,
    skin_tone: SkinToneOption = None,
    no_expression_check: NoExpressionCheckOption = False,
    swapper: SwapperOption = "mesh",
    pixel_boost: PixelBoostOption = None,
    compositing: CompositingOption = None,
    source_blend: SourceBlendOption = None,
    face_occluder: FaceOccluderOption = None,
    face_parser: FaceParserOption = None,
    face_parser_regions: FaceParserRegionsOption = None,
    face_mask_areas: FaceMaskAreasOption = None,
    face_mask_blur: FaceMaskBlurOption = None,
    face_mask_padding: FaceMaskPaddingOption = None,
    face_swapper_weight: FaceSwapperWeightOption = None,
    face_detector: FaceDetectorOption = None,
    face_detector_size: FaceDetectorSizeOption = None,
    face_detector_score: FaceDetectorScoreOption = None,
    face_detector_angles: FaceDetectorAnglesOption = None,
    face_detector_margin: FaceDetectorMarginOption = None,
    face_landmarker: FaceLandmarkerOption = None,
    face_landmarker_score: FaceLandmarkerScoreOption = None,
    execution_provider: ExecutionProviderOption = "cpu",
    device_id: DeviceIdOption = 0,
    provider_fallback: ProviderFallbackOption = False,
    tensorrt_cache: TensorrtCacheOption = None,
    tensorrt_fp16: TensorrtFp16Option = False,
    models_dir: ModelsDirOption = None,
    verbose: _VerboseFlag = False,
) -> None:
    """Swap PAIRS source/target pairs from DATA_DIR, write the results to --out and print a summary.

    Compare settings and models with it: --swapper runs a neural swapper
    (its model downloaded or imported first) on the same pairs."""

    def body(term: console.Terminal) -> int:
        options = swap_options(
            working_size=working_size,
            max_pixels=max_pixels,
            occlusion=not no_occlusion,
            mouth_mask=not no_mouth_mask,
            hands=occlusion_hands,
            expression_check=not no_expression_check,
            skin_tone=skin_tone,
            swapper=swapper,
            pixel_boost=pixel_boost,
            compositing=compositing,
            source_blend=source_blend,
            masks=mask_fields(
                face_occluder=face_occluder,
                face_parser=face_parser,
                face_parser_regions=face_parser_regions,
                face_mask_areas=face_mask_areas,
                face_mask_blur=face_mask_blur,
                face_mask_padding=face_mask_padding,
            ),
            swapper_weight=face_swapper_weight,
            analysis=analysis_fields(
                face_detector=face_detector,
                face_detector_size=face_detector_size,
                face_detector_score=face_detector_score,
                face_landmarker=face_landmarker,
                face_landmarker_score=face_landmarker_score,
                face_detector_angles=face_detector_angles,
                face_detector_margin=face_detector_margin,
            ),
            runtime=runtime_fields(
                execution_provider, device_id, provider_fallback, tensorrt_cache, tensorrt_fp16, models_dir
            ),
        )
        if data_dir.is_file():
            from faceweave.cli.common import refuse_video, target_is_video
            from faceweave.errors import InvalidOptionError, UnsupportedFormatError

            if not target_is_video(data_dir):
                raise UnsupportedFormatError(f"{data_dir} is neither a folder of test photos nor a video; {_ACCEPTED}")
            if source is None:
                raise InvalidOptionError("evaluating a video needs --source PHOTO")
            refuse_video(source, role="source")
            return _evaluate_video(term, options, data_dir, source, out_dir)
        _check_folder_mode(data_dir, out_dir, pairs_from)
        return _evaluate(term, options, data_dir, out_dir, pairs=pairs, seed=seed, pairs_from=pairs_from)

    raise typer.Exit(console.run(verbose, body))


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


def _evaluate_video(term: console.Terminal, options, video: Path, source: Path, out_dir: Path) -> int:
    from faceweave.evaluate.video import evaluate_video, format_video_summary
    from faceweave.pipeline import FaceSwapper

    with FaceSwapper(options) as swapper:
        evaluation = evaluate_video(video, source, out_dir, swapper=swapper)
    term.line(format_video_summary(evaluation, video, settings=options.model_dump(mode="json")))
    return console.EXIT_OK


def _evaluate(
    term: console.Terminal, options, data_dir: Path, out_dir: Path, *, pairs: int, seed: int, pairs_from: Path | None
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
