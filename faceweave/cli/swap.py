"""``faceweave swap``: put the face from source photos onto a target photo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli import console
from faceweave.cli.common import (
    check_output_path,
    check_video_output_path,
    display_name,
    refuse_video,
    swap_options,
    target_is_video,
    wants_video_output,
)
from faceweave.cli.marking import AUDIT_HELP, NO_WATERMARK_HELP, SCREENING_HELP
from faceweave.cli.quality_options import PANEL as QUALITY_PANEL
from faceweave.cli.quality_options import (
    MaxPixelsOption,
    NoExpressionCheckOption,
    NoMouthMaskOption,
    NoOcclusionOption,
    OcclusionHandsOption,
)
from faceweave.cli.runtime_options import (
    PANEL,
    DeviceIdOption,
    ExecutionProviderOption,
    ModelsDirOption,
    PixelBoostOption,
    ProviderFallbackOption,
    SwapperOption,
    TensorrtCacheOption,
    TensorrtFp16Option,
    runtime_fields,
)
from faceweave.cli.video import DEFAULT_VIDEO_QUALITY
from faceweave.errors import InvalidOptionError
from faceweave.options import FACE_ORDERS, SELECTION_MODES, SwapOptions

_DEFAULTS = SwapOptions()
_SELECT = "Face selection"
_QUALITY = QUALITY_PANEL
_VIDEO = "Video"
_MARKING = "Watermark, screening and audit"
_MODELS = PANEL
#: default face size in the working crop for video targets
VIDEO_WORKING_SIZE = 192


def swap_command(  # noqa: C901 - to be split into steps (issue 14)
    target: Annotated[
        Path, typer.Option("--target", "-t", metavar="FILE", help="Photo or video whose face(s) are replaced.")
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Where to write the result: an image (.png .jpg .jpeg .webp .bmp .tif .tiff), or for a video "
            "target .mp4 .mov .mkv .webm .gif, a folder or .zip of PNG frames.",
        ),
    ],
    sources: Annotated[
        list[Path] | None,
        typer.Option(
            "--source", "-s", metavar="PHOTO", help="Source photo; repeat for several photos of the same person."
        ),
    ] = None,
    faces: Annotated[
        str | None,
        typer.Option(
            "--faces",
            metavar="MODE",
            help=f"Which target faces: {'|'.join(SELECTION_MODES)} (default one, or reference / index when "
            "--reference-face / --face-index is given).",
            rich_help_panel=_SELECT,
        ),
    ] = None,
    reference_face: Annotated[
        Path | None,
        typer.Option(
            "--reference-face",
            metavar="PHOTO",
            help="Photo of the person to replace (--faces reference).",
            rich_help_panel=_SELECT,
        ),
    ] = None,
    face_index: Annotated[
        list[int] | None,
        typer.Option(
            "--face-index",
            metavar="N",
            help="Position of a target face after ordering, from 0; repeatable (--faces index).",
            rich_help_panel=_SELECT,
        ),
    ] = None,
    order: Annotated[
        str | None,
        typer.Option(
            "--order",
            metavar="ORDER",
            help=f"Face order: {'|'.join(FACE_ORDERS)} (default {_DEFAULTS.selection.order}).",
            rich_help_panel=_SELECT,
        ),
    ] = None,
    reference_distance: Annotated[
        float | None,
        typer.Option(
            "--reference-distance",
            metavar="F",
            help="Largest identity distance that counts as the reference person (default "
            f"{_DEFAULTS.selection.reference_distance}).",
            rich_help_panel=_SELECT,
        ),
    ] = None,
    min_face_size: Annotated[
        int | None,
        typer.Option(
            "--min-face-size",
            metavar="PX",
            help="Ignore target faces smaller than this many pixels.",
            rich_help_panel=_SELECT,
        ),
    ] = None,
    quality: Annotated[
        int | None,
        typer.Option(
            "--quality",
            min=1,
            max=100,
            metavar="Q",
            help="Output quality 1-100: JPEG / WebP quality (default 95), or video quality (default 65, mapped "
            "to the encoder's CRF as FaceFusion does: 65 -> CRF 18, 80 -> CRF 10).",
            rich_help_panel=_QUALITY,
        ),
    ] = None,
    max_pixels: MaxPixelsOption = None,
    working_size: Annotated[
        int | None,
        typer.Option(
            "--working-size",
            metavar="PX",
            help=f"Face size in pixels inside the working crop, 96-1024 (default {_DEFAULTS.working_size} for "
            "photos, 192 for videos); larger is slower.",
            rich_help_panel=_QUALITY,
        ),
    ] = None,
    no_occlusion: NoOcclusionOption = False,
    no_mouth_mask: NoMouthMaskOption = False,
    occlusion_hands: OcclusionHandsOption = False,
    no_expression_check: NoExpressionCheckOption = False,
    map_: Annotated[
        list[str] | None,
        typer.Option(
            "--map",
            metavar="INDEX=PHOTO",
            help="Video: swap person INDEX (see 'faceweave people') with this photo; repeatable, replaces --source.",
            rich_help_panel=_VIDEO,
        ),
    ] = None,
    trim: Annotated[
        str | None,
        typer.Option(
            "--trim",
            metavar="START-END",
            help="Video: only this part, e.g. 00:00:05-00:00:20 or 5-20 (seconds).",
            rich_help_panel=_VIDEO,
        ),
    ] = None,
    fps: Annotated[
        float | None,
        typer.Option(
            "--fps",
            metavar="N",
            min=0.1,
            help="Video: drop frames down to at most N per second.",
            rich_help_panel=_VIDEO,
        ),
    ] = None,
    scale: Annotated[
        float,
        typer.Option(
            "--scale",
            metavar="F",
            min=0.05,
            max=1.0,
            help="Video: resize frames by F (at most 1).",
            rich_help_panel=_VIDEO,
        ),
    ] = 1.0,
    no_audio: Annotated[
        bool, typer.Option("--no-audio", help="Video: leave the audio out.", rich_help_panel=_VIDEO)
    ] = False,
    codec: Annotated[
        str,
        typer.Option(
            "--codec", metavar="CODEC", help="Video: h264 or h265 for .mp4/.mov/.mkv.", rich_help_panel=_VIDEO
        ),
    ] = "h264",
    preset: Annotated[
        str,
        typer.Option(
            "--preset",
            metavar="NAME",
            help="Video: encoder speed preset (ultrafast ... veryslow).",
            rich_help_panel=_VIDEO,
        ),
    ] = "veryfast",
    preview: Annotated[
        Path | None,
        typer.Option(
            "--preview",
            metavar="PNG",
            help="Video: first write one swapped frame to this image.",
            rich_help_panel=_VIDEO,
        ),
    ] = None,
    preview_frame: Annotated[
        int | None,
        typer.Option(
            "--preview-frame",
            metavar="N",
            min=0,
            help="Video: the frame the preview shows (default: the first with a face).",
            rich_help_panel=_VIDEO,
        ),
    ] = None,
    swapper: SwapperOption = "mesh",
    pixel_boost: PixelBoostOption = None,
    face_enhancer: Annotated[
        str | None,
        typer.Option(
            "--face-enhancer",
            metavar="NAME",
            help="Restore the swapped faces: gfpgan_1.4, codeformer, gpen_bfr_512, restoreformer_plus_plus.",
            rich_help_panel=_MODELS,
        ),
    ] = None,
    face_enhancer_blend: Annotated[
        float,
        typer.Option(
            "--face-enhancer-blend",
            metavar="F",
            min=0.0,
            max=1.0,
            help="How much of the restored face to keep.",
            rich_help_panel=_MODELS,
        ),
    ] = 0.8,
    face_enhancer_weight: Annotated[
        float,
        typer.Option(
            "--face-enhancer-weight",
            metavar="F",
            min=0.0,
            max=1.0,
            help="CodeFormer fidelity weight (1 = closest to the input).",
            rich_help_panel=_MODELS,
        ),
    ] = 0.5,
    frame_enhancer: Annotated[
        str | None,
        typer.Option(
            "--frame-enhancer",
            metavar="NAME",
            help="Upscale the whole result: real_esrgan_x2, real_esrgan_x4.",
            rich_help_panel=_MODELS,
        ),
    ] = None,
    frame_enhancer_blend: Annotated[
        float,
        typer.Option(
            "--frame-enhancer-blend",
            metavar="F",
            min=0.0,
            max=1.0,
            help="How much of the upscaled frame to keep.",
            rich_help_panel=_MODELS,
        ),
    ] = 1.0,
    execution_provider: ExecutionProviderOption = "cpu",
    device_id: DeviceIdOption = 0,
    provider_fallback: ProviderFallbackOption = False,
    tensorrt_cache: TensorrtCacheOption = None,
    tensorrt_fp16: TensorrtFp16Option = False,
    models_dir: ModelsDirOption = None,
    no_watermark: Annotated[
        bool, typer.Option("--no-watermark", help=NO_WATERMARK_HELP, rich_help_panel=_MARKING)
    ] = False,
    screening: Annotated[
        str, typer.Option("--screening", metavar="POLICY", help=SCREENING_HELP, rich_help_panel=_MARKING)
    ] = "off",
    audit_log: Annotated[
        Path | None, typer.Option("--audit-log", metavar="FILE", help=AUDIT_HELP, rich_help_panel=_MARKING)
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")] = False,
) -> None:
    """Swap the face from SOURCE photo(s) onto the face(s) in TARGET (a photo or a video).

    Every output carries an invisible watermark and an AI-generated label;
    each run appends one line to the audit log."""

    def body(term: console.Terminal) -> int:
        from faceweave.cli.marking import Screener, make_provenance, open_audit, write_audit

        log = open_audit(audit_log)
        provenance = make_provenance(no_watermark=no_watermark)
        record: dict = {"options": {"no_watermark": no_watermark, "screening": screening}}
        inputs = [("source", p) for p in sources or []] + [("target", target)]
        inputs += [("source", p) for item in map_ or [] for p in [Path(item.partition("=")[2].strip())]]
        inputs += [("reference", reference_face)] if reference_face is not None else []
        screener = None
        audit = dict(command="swap", inputs=inputs, options=record["options"], provenance=provenance, output=output)
        try:
            screener = Screener(screening)
            code = work(term, provenance, screener, record)
        except BaseException as exc:
            write_audit(log, **audit, screener=screener, error=exc)
            raise
        finally:
            if screener is not None:
                screener.close()
        write_audit(log, **audit, screener=screener, error=None)
        return code

    def work(term: console.Terminal, provenance, screener, record: dict) -> int:
        is_video = target_is_video(target)
        if not is_video and target.is_file() and wants_video_output(output):
            from faceweave.io import WRITE_FORMATS, probe_kind

            if probe_kind(target) == "image":
                raise InvalidOptionError(
                    f"--output {output}: '{output.suffix or output.name}' is a video output but the target is a photo;"
                    f" use one of {' '.join(WRITE_FORMATS)}"
                )
            # not an image and not recognised as a video: probing says exactly
            # what it is (audio only, corrupt, ...)
            from faceweave.video.io import probe_video

            probe_video(target)
            is_video = True
        if is_video:
            check_video_output_path(output, flag="--output")
            if preview is not None:
                check_output_path(preview, flag="--preview")
        else:
            check_output_path(output, flag="--output")
        mode = _selection_mode(faces, reference_face, face_index)
        options = swap_options(
            # video frames are many and faces move: a smaller working crop is
            # about 1.5 times faster and, once the grain is matched, looks the same
            working_size=working_size if working_size is not None or not is_video else VIDEO_WORKING_SIZE,
            max_pixels=max_pixels,
            occlusion=not no_occlusion,
            mouth_mask=not no_mouth_mask,
            hands=occlusion_hands,
            expression_check=not no_expression_check,
            selection={
                "mode": mode,
                "order": order,
                "indices": tuple(face_index) if face_index else None,
                "reference_distance": reference_distance,
                "min_face_size": min_face_size,
            },
            swapper=swapper,
            pixel_boost=pixel_boost,
            runtime=runtime_fields(
                execution_provider, device_id, provider_fallback, tensorrt_cache, tensorrt_fp16, models_dir
            ),
            enhance={
                "face": face_enhancer,
                "face_blend": face_enhancer_blend,
                "face_weight": face_enhancer_weight,
                "frame": frame_enhancer,
                "frame_blend": frame_enhancer_blend,
            },
        )
        sources_ = list(sources or [])
        mapping = parse_map(map_ or [])
        if not sources_ and not mapping:
            raise InvalidOptionError("give a source photo with --source PHOTO (or, for a video, --map INDEX=PHOTO)")
        if sources_ and mapping:
            raise InvalidOptionError("give either --source or --map, not both")
        if mapping and not is_video:
            raise InvalidOptionError("--map is for video targets; for a photo use --source with --faces")
        for path in [*sources_, *(p for paths in mapping.values() for p in paths)]:
            refuse_video(path, role="source")
        if reference_face is not None:
            refuse_video(reference_face, role="reference face")
        record["options"].update(
            swap=options.model_dump(mode="json"),
            video=is_video,
            quality=quality or (DEFAULT_VIDEO_QUALITY if is_video else 95),
            **(
                {"trim": trim, "fps": fps, "scale": scale, "audio": not no_audio, "codec": codec, "preset": preset}
                if is_video
                else {}
            ),
        )
        # content screening, before any work
        screened = [screener.image(p, role="source", max_pixels=options.max_pixels) for p in sources_]
        mapping = {
            i: [screener.image(p, role="source", max_pixels=options.max_pixels) for p in ps]
            for i, ps in mapping.items()
        }
        if is_video:
            from faceweave.cli.video import swap_video

            screener.video(target)
            return swap_video(
                term,
                options,
                screened,
                target,
                output,
                reference_face,
                mapping=mapping,
                trim=trim,
                fps=fps,
                scale=scale,
                audio=not no_audio,
                codec=codec,
                preset=preset,
                quality=quality or DEFAULT_VIDEO_QUALITY,
                preview=preview,
                preview_frame=preview_frame,
                json_output=json_output,
                provenance=provenance,
            )
        target_ = screener.image(target, role="target", max_pixels=options.max_pixels)
        return _swap(
            term,
            options,
            screened,
            target_,
            output,
            reference_face,
            quality=quality or 95,
            json_output=json_output,
            provenance=provenance,
        )

    raise typer.Exit(console.run(verbose, body))


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


def _selection_mode(faces: str | None, reference_face: Path | None, face_index: list[int] | None) -> str:
    """The selection mode: as given, or implied by --reference-face / --face-index."""
    if faces is None:
        if reference_face is not None and face_index:
            raise InvalidOptionError("give either --reference-face or --face-index, not both")
        return "reference" if reference_face is not None else "index" if face_index else "one"
    if faces not in SELECTION_MODES:
        return faces  # SwapOptions rejects it with the list of modes
    if reference_face is not None and faces != "reference":
        raise InvalidOptionError(f"--reference-face is only used with --faces reference, not --faces {faces}")
    if face_index and faces != "index":
        raise InvalidOptionError(f"--face-index is only used with --faces index, not --faces {faces}")
    if faces == "reference" and reference_face is None:
        raise InvalidOptionError("--faces reference needs --reference-face PHOTO of the person to replace")
    return faces


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
                "run_id": provenance.run_hex if provenance is not None else None,
                "watermark": bool(provenance is not None and provenance.watermark),
                "timings_ms": {k: round(float(v), 1) for k, v in result.timings_ms.items()},
                "models": models,
            }
        )
        return console.EXIT_OK
    for item in models:
        fell = f" (fell back from {item['requested']})" if item["fell_back"] else ""
        term.line(
            f"model {item['model']} on {item['provider']}{fell}: loaded in {item['load_ms']:.0f} ms, warm-up "
            f"{item['warmup_ms']:.0f} ms"
        )
    for item in swapped:
        box = ", ".join(f"{v:.0f}" for v in item["box"])
        source = display_name(item["source"], f"source {item['source_index']}")
        term.line(f"face {item['face']} [{box}] <- {source}")
    term.line(f"wrote {written} ({len(swapped)} of {len(result.faces)} face(s) swapped)")
    return console.EXIT_OK
