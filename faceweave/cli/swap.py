"""``faceweave swap``: put the face from source photos onto a target photo
or a video.  The command packs its flags into a frozen :class:`SwapArgs`;
the steps below check them, build the options, screen the inputs and hand
a video to ``cli/video.py``.

The module is long because the command's 54 flags appear twice: in its
signature, which typer reads, and in :class:`SwapArgs`, which the steps take.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
)
from faceweave.cli.common import (
    check_output_path,
    check_video_output_path,
    display_name,
    options_from_flags,
    refuse_video,
    target_is_video,
    wants_video_output,
)
from faceweave.cli.mask_flags import (
    FaceMaskAreasOption,
    FaceMaskBlurOption,
    FaceMaskPaddingOption,
    FaceOccluderOption,
    FaceParserOption,
    FaceParserRegionsOption,
    FaceSwapperWeightOption,
)
from faceweave.cli.quality_options import (
    MaxPixelsOption,
    NoExpressionCheckOption,
    NoMouthMaskOption,
    NoOcclusionOption,
    OcclusionHandsOption,
    SkinToneOption,
    TargetLipsOption,
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
)
from faceweave.cli.swap_flags import (
    AuditLogOption,
    CodecOption,
    FaceEnhancerBlendOption,
    FaceEnhancerOption,
    FaceEnhancerWeightOption,
    FaceIndexOption,
    FacesOption,
    FpsOption,
    FrameEnhancerBlendOption,
    FrameEnhancerOption,
    JsonOutputOption,
    MapOption,
    MinFaceSizeOption,
    NoAudioOption,
    NoWatermarkOption,
    OrderOption,
    OutputOption,
    PresetOption,
    PreviewFrameOption,
    PreviewOption,
    QualityOption,
    ReferenceDistanceOption,
    ReferenceFaceOption,
    ScaleOption,
    ScreeningOption,
    SourcesOption,
    TargetOption,
    TrimOption,
    VerboseOption,
    WorkingSizeOption,
)
from faceweave.cli.video import DEFAULT_VIDEO_QUALITY
from faceweave.errors import InvalidOptionError
from faceweave.options import VIDEO_WORKING_SIZE, SwapOptions
from faceweave.timing import cpu_times, wall_times


def swap_command(
    target: TargetOption,
    output: OutputOption,
    sources: SourcesOption = None,
    faces: FacesOption = None,
    reference_face: ReferenceFaceOption = None,
    face_index: FaceIndexOption = None,
    order: OrderOption = None,
    reference_distance: ReferenceDistanceOption = None,
    min_face_size: MinFaceSizeOption = None,
    quality: QualityOption = None,
    max_pixels: MaxPixelsOption = None,
    working_size: WorkingSizeOption = None,
    no_occlusion: NoOcclusionOption = False,
    no_mouth_mask: NoMouthMaskOption = False,
    target_lips: TargetLipsOption = None,
    occlusion_hands: OcclusionHandsOption = False,
    skin_tone: SkinToneOption = None,
    no_expression_check: NoExpressionCheckOption = False,
    map_: MapOption = None,
    trim: TrimOption = None,
    fps: FpsOption = None,
    scale: ScaleOption = 1.0,
    no_audio: NoAudioOption = False,
    codec: CodecOption = "h264",
    preset: PresetOption = "veryfast",
    preview: PreviewOption = None,
    preview_frame: PreviewFrameOption = None,
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
    face_enhancer: FaceEnhancerOption = None,
    face_enhancer_blend: FaceEnhancerBlendOption = 0.8,
    face_enhancer_weight: FaceEnhancerWeightOption = 0.5,
    frame_enhancer: FrameEnhancerOption = None,
    frame_enhancer_blend: FrameEnhancerBlendOption = 1.0,
    execution_provider: ExecutionProviderOption = "cpu",
    device_id: DeviceIdOption = 0,
    provider_fallback: ProviderFallbackOption = False,
    tensorrt_cache: TensorrtCacheOption = None,
    tensorrt_fp16: TensorrtFp16Option = False,
    models_dir: ModelsDirOption = None,
    no_watermark: NoWatermarkOption = False,
    screening: ScreeningOption = "off",
    audit_log: AuditLogOption = None,
    json_output: JsonOutputOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Swap the face from SOURCE photo(s) onto the face(s) in TARGET (a photo or a video).

    Every output carries an invisible watermark and an AI-generated label;
    each run appends one line to the audit log."""
    args = SwapArgs(**locals())  # every flag above, by name
    raise typer.Exit(console.run(verbose, lambda term: run_swap(term, args)))


@dataclass(frozen=True)
class SwapArgs:
    """The flags of one ``faceweave swap`` run, as given."""

    target: Path
    output: Path
    sources: list[Path] | None
    faces: str | None
    reference_face: Path | None
    face_index: list[int] | None
    order: str | None
    reference_distance: float | None
    min_face_size: int | None
    quality: int | None
    max_pixels: int | None
    working_size: int | None
    no_occlusion: bool
    no_mouth_mask: bool
    target_lips: str | None
    occlusion_hands: bool
    skin_tone: float | None
    no_expression_check: bool
    map_: list[str] | None
    trim: str | None
    fps: float | None
    scale: float
    no_audio: bool
    codec: str
    preset: str
    preview: Path | None
    preview_frame: int | None
    swapper: str
    pixel_boost: int | None
    compositing: str | None
    source_blend: str | None
    face_occluder: str | None
    face_parser: str | None
    face_parser_regions: list[str] | None
    face_mask_areas: list[str] | None
    face_mask_blur: float | None
    face_mask_padding: tuple[int, int, int, int] | None
    face_swapper_weight: float | None
    face_detector: str | None
    face_detector_size: int | None
    face_detector_score: float | None
    face_detector_angles: list[str] | None
    face_detector_margin: tuple[int, int, int, int] | None
    face_landmarker: str | None
    face_landmarker_score: float | None
    face_enhancer: str | None
    face_enhancer_blend: float
    face_enhancer_weight: float
    frame_enhancer: str | None
    frame_enhancer_blend: float
    execution_provider: str
    device_id: int
    provider_fallback: bool
    tensorrt_cache: Path | None
    tensorrt_fp16: bool
    models_dir: Path | None
    no_watermark: bool
    screening: str
    audit_log: Path | None
    json_output: bool
    verbose: bool

    def inputs(self) -> list[tuple[str, Path]]:
        """Every input file with its role, for the audit line."""
        found = [("source", p) for p in self.sources or []] + [("target", self.target)]
        found += [("source", Path(item.partition("=")[2].strip())) for item in self.map_ or []]
        return found + ([("reference", self.reference_face)] if self.reference_face is not None else [])


def run_swap(term: console.Terminal, args: SwapArgs) -> int:
    """One run: the work between opening the audit log and writing its line
    (an error is recorded, then raised for the console to report)."""
    from faceweave.cli.marking import Screener, make_provenance, open_audit, write_audit

    log = open_audit(args.audit_log)
    provenance = make_provenance(no_watermark=args.no_watermark)
    record: dict[str, Any] = {"options": {"no_watermark": args.no_watermark, "screening": args.screening}}
    audit = dict(
        command="swap", inputs=args.inputs(), options=record["options"], provenance=provenance, output=args.output
    )
    screener = None
    try:
        screener = Screener(args.screening)
        code = _swap_target(term, args, provenance, screener, record)
    except BaseException as exc:
        write_audit(log, **audit, screener=screener, error=exc)
        raise
    finally:
        if screener is not None:
            screener.close()
    write_audit(log, **audit, screener=screener, error=None)
    return code


def _swap_target(term: console.Terminal, args: SwapArgs, provenance, screener, record: dict[str, Any]) -> int:
    """Check the flags, build the options, screen the inputs, then swap a
    photo here or hand a video to ``cli/video.py``."""
    is_video = _is_video_target(args)
    _check_outputs(args, is_video)
    options = _options(args, is_video)
    sources, mapping = _sources(args, is_video)
    record["options"].update(_recorded_options(args, options, is_video))
    # content screening, before any work
    screened = [screener.image(p, role="source", max_pixels=options.max_pixels) for p in sources]
    people = {
        i: [screener.image(p, role="source", max_pixels=options.max_pixels) for p in ps] for i, ps in mapping.items()
    }
    if is_video:
        screener.video(args.target)
        return _swap_video_target(term, args, options, screened, people, provenance)
    target = screener.image(args.target, role="target", max_pixels=options.max_pixels)
    return _swap(
        term,
        options,
        screened,
        target,
        args.output,
        args.reference_face,
        quality=args.quality or 95,
        json_output=args.json_output,
        provenance=provenance,
    )


def _is_video_target(args: SwapArgs) -> bool:
    """Whether the target is a video; a target that is neither a photo nor a
    recognised video is probed, which says exactly what it is."""
    if target_is_video(args.target):
        return True
    if not (args.target.is_file() and wants_video_output(args.output)):
        return False
    from faceweave.io import WRITE_FORMATS, probe_kind

    if probe_kind(args.target) == "image":
        raise InvalidOptionError(
            f"--output {args.output}: '{args.output.suffix or args.output.name}' is a video output but the target"
            f" is a photo; use one of {' '.join(WRITE_FORMATS)}"
        )
    from faceweave.video.io import probe_video

    probe_video(args.target)  # audio only, corrupt, ...: raises with the reason
    return True


def _check_outputs(args: SwapArgs, is_video: bool) -> None:
    if is_video:
        check_video_output_path(args.output, flag="--output")
        if args.preview is not None:
            check_output_path(args.preview, flag="--preview")
    else:
        check_output_path(args.output, flag="--output")


def _options(args: SwapArgs, is_video: bool) -> SwapOptions:
    """The swap options of the flags (checked by ``SwapOptions``)."""
    # video frames are many and faces move: a smaller working crop is
    # about 1.5 times faster and, once the grain is matched, looks the same
    working_size = args.working_size if args.working_size is not None or not is_video else VIDEO_WORKING_SIZE
    return options_from_flags(
        args, working_size=working_size, expression_check=not args.no_expression_check, target_lips=args.target_lips
    )


def _sources(args: SwapArgs, is_video: bool) -> tuple[list[Path], dict[int, list[Path]]]:
    """The source photos, or a photo list per video person (``--map``)."""
    sources = list(args.sources or [])
    mapping = parse_map(args.map_ or [])
    if not sources and not mapping:
        raise InvalidOptionError("give a source photo with --source PHOTO (or, for a video, --map INDEX=PHOTO)")
    if sources and mapping:
        raise InvalidOptionError("give either --source or --map, not both")
    if mapping and not is_video:
        raise InvalidOptionError("--map is for video targets; for a photo use --source with --faces")
    for path in [*sources, *(p for paths in mapping.values() for p in paths)]:
        refuse_video(path, role="source")
    if args.reference_face is not None:
        refuse_video(args.reference_face, role="reference face")
    return sources, mapping


def _recorded_options(args: SwapArgs, options: SwapOptions, is_video: bool) -> dict[str, Any]:
    """What the audit line records of the options."""
    recorded: dict[str, Any] = {
        "swap": options.model_dump(mode="json"),
        "video": is_video,
        "quality": args.quality or (DEFAULT_VIDEO_QUALITY if is_video else 95),
    }
    if is_video:
        recorded.update(
            trim=args.trim,
            fps=args.fps,
            scale=args.scale,
            audio=not args.no_audio,
            codec=args.codec,
            preset=args.preset,
        )
    return recorded


def _swap_video_target(
    term: console.Terminal, args: SwapArgs, options: SwapOptions, sources: list, mapping: dict, provenance
) -> int:
    from faceweave.cli.video import swap_video

    return swap_video(
        term,
        options,
        sources,
        args.target,
        args.output,
        args.reference_face,
        mapping=mapping,
        trim=args.trim,
        fps=args.fps,
        scale=args.scale,
        audio=not args.no_audio,
        codec=args.codec,
        preset=args.preset,
        quality=args.quality or DEFAULT_VIDEO_QUALITY,
        preview=args.preview,
        preview_frame=args.preview_frame,
        json_output=args.json_output,
        provenance=provenance,
    )


def parse_map(items: list[str]) -> dict[int, list[Path]]:
    """``--map INDEX=PHOTO`` values as ``{index: [photos]}`` (an index may be
    given several photos of the same person)."""
    mapping: dict[int, list[Path]] = {}
    for item in items:
        index, sep, photo = item.partition("=")
        if not sep or not index.strip().isdigit() or not photo.strip():
            raise InvalidOptionError(f"--map {item!r}: use INDEX=PHOTO, e.g. --map 0=alice.jpg")
        mapping.setdefault(int(index), []).append(Path(photo.strip()))
    return mapping


def _swap(
    term: console.Terminal,
    options: SwapOptions,
    sources: list,
    target,
    output: Path,
    reference_face: Path | None,
    *,
    quality: int,
    json_output: bool,
    provenance=None,
) -> int:
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import attach_manifest

    with FaceSwapper(options) as swapper:
        # the library marks the pixels (after any enhancer) with the run's provenance
        result = swapper.swap(list(sources), target, reference=reference_face, provenance=provenance)
        models = swapper.model_loads()
    provenance = result.provenance
    written = result.save(output, quality=quality)  # and writes its label
    attach_manifest(written, provenance)
    # result.faces is in the selection order, so target_index is what --face-index counts
    swapped = [
        {
            "face": s.target_index,
            "box": s.bbox.as_list(),
            "source": s.source_path,
            "source_index": s.source_index,
            "pose_gap": round(s.pose_gap, 1),
        }
        for s in result.swapped
    ]
    if json_output:
        term.json(
            {
                "output": str(written),
                "target": str(target),
                "width": int(result.image.shape[1]),
                "height": int(result.image.shape[0]),
                "faces_found": len(result.faces),
                "swapped": swapped,
                "skipped": [
                    {"face": s.target_index, "box": s.bbox.as_list(), "reason": s.reason} for s in result.skipped
                ],
                "run_id": provenance.run_hex if provenance is not None else None,
                "watermark": bool(provenance is not None and provenance.watermark),
                "timings_ms": {k: round(float(v), 1) for k, v in wall_times(result.timings_ms).items()},
                "cpu_ms": {k: round(float(v), 1) for k, v in cpu_times(result.timings_ms).items()},
                "models": models,
            }
        )
    else:
        _print_swap(term, models, result, written)
    return console.EXIT_OK


def _print_swap(term: console.Terminal, models: list[dict[str, Any]], result, written: Path) -> None:
    """The human-readable report of a photo swap."""
    for item in models:
        fell = f" (fell back from {item['requested']})" if item["fell_back"] else ""
        term.line(
            f"model {item['model']} on {item['provider']}{fell}: loaded in {item['load_ms']:.0f} ms, warm-up "
            f"{item['warmup_ms']:.0f} ms"
        )
    for face in result.swapped:
        box = ", ".join(f"{v:.0f}" for v in face.bbox.as_list())
        source = display_name(face.source_path, f"source {face.source_index}")
        term.line(f"face {face.target_index} [{box}] <- {source}")
    for skipped in result.skipped:
        box = ", ".join(f"{v:.0f}" for v in skipped.bbox.as_list())
        term.line(f"face {skipped.target_index} [{box}] not swapped: {skipped.reason}")
    term.line(f"wrote {written} ({len(result.swapped)} of {len(result.faces)} face(s) swapped)")
