"""``faceweave swap``: put the face from source photos onto a target photo
or a video.  :class:`SwapArgs` declares the command's own flags; the
option flags are made from the options models
(:mod:`faceweave.cli.option_flags`).  The steps below check the flags,
build the options, screen the inputs and hand a video to ``cli/video.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faceweave import names
from faceweave.cli import console
from faceweave.cli.common import (
    check_output_path,
    check_video_output_path,
    display_name,
    refuse_video,
    target_is_video,
    wants_video_output,
)
from faceweave.cli.option_flags import typer_command
from faceweave.cli.swap_flags import (
    AuditLogOption,
    CodecOption,
    FpsOption,
    JsonOutputOption,
    MapOption,
    NoAudioOption,
    NoWatermarkOption,
    OutputOption,
    PresetOption,
    PreviewFrameOption,
    PreviewOption,
    QualityOption,
    ReferenceFaceOption,
    ScaleOption,
    ScreeningOption,
    SourcesOption,
    TargetOption,
    TrimOption,
    VerboseOption,
)
from faceweave.cli.video import DEFAULT_VIDEO_QUALITY
from faceweave.errors import InvalidOptionError
from faceweave.option_schema import GivenOptions
from faceweave.options import CLI_WORDS, SwapOptions
from faceweave.timing import cpu_times, wall_times


@dataclass(frozen=True)
class SwapArgs:
    """Swap the face from SOURCE photo(s) onto the face(s) in TARGET (a photo or a video).

    Every output carries an invisible watermark and an AI-generated label;
    each run appends one line to the audit log."""

    target: TargetOption
    output: OutputOption
    sources: SourcesOption = None
    reference_face: ReferenceFaceOption = None
    quality: QualityOption = None
    map_: MapOption = None
    trim: TrimOption = None
    fps: FpsOption = None
    scale: ScaleOption = 1.0
    no_audio: NoAudioOption = False
    codec: CodecOption = "h264"
    preset: PresetOption = "veryfast"
    preview: PreviewOption = None
    preview_frame: PreviewFrameOption = None
    no_watermark: NoWatermarkOption = False
    screening: ScreeningOption = "off"
    audit_log: AuditLogOption = None
    json_output: JsonOutputOption = False
    verbose: VerboseOption = False
    options: GivenOptions = GivenOptions()

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
    sources, mapping = _sources(args, is_video, keeps=options.swapper == names.NO_SWAPPER)
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
    """The swap options of the flags (checked by ``SwapOptions``), with the
    defaults of the target's kind."""
    has_reference = args.reference_face is not None
    return args.options.swap_options(
        kind="video" if is_video else "photo", has_reference=has_reference, words=CLI_WORDS
    )


def _sources(args: SwapArgs, is_video: bool, *, keeps: bool = False) -> tuple[list[Path], dict[int, list[Path]]]:
    """The source photos, or a photo list per video person (``--map``);
    none with ``--swapper none`` (``keeps``), which takes none."""
    sources = list(args.sources or [])
    mapping = parse_map(args.map_ or [])
    if keeps:
        if sources or mapping:
            raise InvalidOptionError("--swapper none keeps the faces: give no --source or --map")
        if args.reference_face is not None:
            refuse_video(args.reference_face, role="reference face")
        return [], {}
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
        source = "kept" if face.source_index is None else display_name(face.source_path, f"source {face.source_index}")
        term.line(f"face {face.target_index} [{box}] <- {source}")
    for skipped in result.skipped:
        box = ", ".join(f"{v:.0f}" for v in skipped.bbox.as_list())
        term.line(f"face {skipped.target_index} [{box}] not swapped: {skipped.reason}")
    kept = bool(result.swapped) and all(face.source_index is None for face in result.swapped)
    done = "kept and processed" if kept else "swapped"
    term.line(f"wrote {written} ({len(result.swapped)} of {len(result.faces)} face(s) {done})")


#: ``faceweave swap``
swap_command = typer_command(SwapArgs, run_swap, kinds=("photo", "video"))
