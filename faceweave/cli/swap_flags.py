"""The flags of ``faceweave swap`` as typed aliases, so that the command's
signature reads one line per flag (shared flag groups live in
``quality_options.py`` and ``runtime_options.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli.marking import AUDIT_HELP, NO_WATERMARK_HELP, SCREENING_HELP
from faceweave.cli.quality_options import PANEL as _QUALITY
from faceweave.cli.runtime_options import PANEL as _MODELS
from faceweave.options import FACE_ORDERS, SELECTION_MODES, SwapOptions

_DEFAULTS = SwapOptions()
_SELECT = "Face selection"
_VIDEO = "Video"
_MARKING = "Watermark, screening and audit"

TargetOption = Annotated[
    Path, typer.Option("--target", "-t", metavar="FILE", help="Photo or video whose face(s) are replaced.")
]
OutputOption = Annotated[
    Path,
    typer.Option(
        "--output",
        "-o",
        metavar="FILE",
        help="Where to write the result: an image (.png .jpg .jpeg .webp .bmp .tif .tiff), or for a video "
        "target .mp4 .mov .mkv .webm .gif, a folder or .zip of PNG frames.",
    ),
]
SourcesOption = Annotated[
    list[Path] | None,
    typer.Option("--source", "-s", metavar="PHOTO", help="Source photo; repeat for several photos of the same person."),
]
FacesOption = Annotated[
    str | None,
    typer.Option(
        "--faces",
        metavar="MODE",
        help=f"Which target faces: {'|'.join(SELECTION_MODES)} (default one, or reference / index when "
        "--reference-face / --face-index is given).",
        rich_help_panel=_SELECT,
    ),
]
ReferenceFaceOption = Annotated[
    Path | None,
    typer.Option(
        "--reference-face",
        metavar="PHOTO",
        help="Photo of the person to replace (--faces reference).",
        rich_help_panel=_SELECT,
    ),
]
FaceIndexOption = Annotated[
    list[int] | None,
    typer.Option(
        "--face-index",
        metavar="N",
        help="Position of a target face after ordering, from 0; repeatable (--faces index).",
        rich_help_panel=_SELECT,
    ),
]
OrderOption = Annotated[
    str | None,
    typer.Option(
        "--order",
        metavar="ORDER",
        help=f"Face order: {'|'.join(FACE_ORDERS)} (default {_DEFAULTS.selection.order}).",
        rich_help_panel=_SELECT,
    ),
]
ReferenceDistanceOption = Annotated[
    float | None,
    typer.Option(
        "--reference-distance",
        metavar="F",
        help="Largest identity distance that counts as the reference person (default "
        f"{_DEFAULTS.selection.reference_distance}).",
        rich_help_panel=_SELECT,
    ),
]
MinFaceSizeOption = Annotated[
    int | None,
    typer.Option(
        "--min-face-size",
        metavar="PX",
        help="Ignore target faces smaller than this many pixels.",
        rich_help_panel=_SELECT,
    ),
]
QualityOption = Annotated[
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
]
WorkingSizeOption = Annotated[
    int | None,
    typer.Option(
        "--working-size",
        metavar="PX",
        help=f"Face size in pixels inside the working crop, 96-1024 (default {_DEFAULTS.working_size} for "
        "photos, 192 for videos); larger is slower.",
        rich_help_panel=_QUALITY,
    ),
]
MapOption = Annotated[
    list[str] | None,
    typer.Option(
        "--map",
        metavar="INDEX=PHOTO",
        help="Video: swap person INDEX (see 'faceweave people') with this photo; repeatable, replaces --source.",
        rich_help_panel=_VIDEO,
    ),
]
TrimOption = Annotated[
    str | None,
    typer.Option(
        "--trim",
        metavar="START-END",
        help="Video: only this part, e.g. 00:00:05-00:00:20 or 5-20 (seconds).",
        rich_help_panel=_VIDEO,
    ),
]
FpsOption = Annotated[
    float | None,
    typer.Option(
        "--fps",
        metavar="N",
        min=0.1,
        help="Video: drop frames down to at most N per second.",
        rich_help_panel=_VIDEO,
    ),
]
ScaleOption = Annotated[
    float,
    typer.Option(
        "--scale",
        metavar="F",
        min=0.05,
        max=1.0,
        help="Video: resize frames by F (at most 1).",
        rich_help_panel=_VIDEO,
    ),
]
NoAudioOption = Annotated[bool, typer.Option("--no-audio", help="Video: leave the audio out.", rich_help_panel=_VIDEO)]
CodecOption = Annotated[
    str,
    typer.Option("--codec", metavar="CODEC", help="Video: h264 or h265 for .mp4/.mov/.mkv.", rich_help_panel=_VIDEO),
]
PresetOption = Annotated[
    str,
    typer.Option(
        "--preset",
        metavar="NAME",
        help="Video: encoder speed preset (ultrafast ... veryslow).",
        rich_help_panel=_VIDEO,
    ),
]
PreviewOption = Annotated[
    Path | None,
    typer.Option(
        "--preview",
        metavar="PNG",
        help="Video: first write one swapped frame to this image.",
        rich_help_panel=_VIDEO,
    ),
]
PreviewFrameOption = Annotated[
    int | None,
    typer.Option(
        "--preview-frame",
        metavar="N",
        min=0,
        help="Video: the frame the preview shows (default: the first with a face).",
        rich_help_panel=_VIDEO,
    ),
]
FaceEnhancerOption = Annotated[
    str | None,
    typer.Option(
        "--face-enhancer",
        metavar="NAME",
        help="Restore the swapped faces: gfpgan_1.2, gfpgan_1.3, gfpgan_1.4, codeformer, gpen_bfr_256, "
        "gpen_bfr_512, gpen_bfr_1024, gpen_bfr_2048, restoreformer_plus_plus.",
        rich_help_panel=_MODELS,
    ),
]
FaceEnhancerBlendOption = Annotated[
    float,
    typer.Option(
        "--face-enhancer-blend",
        metavar="F",
        min=0.0,
        max=1.0,
        help="How much of the restored face to keep.",
        rich_help_panel=_MODELS,
    ),
]
FaceEnhancerWeightOption = Annotated[
    float,
    typer.Option(
        "--face-enhancer-weight",
        metavar="F",
        min=0.0,
        max=1.0,
        help="CodeFormer fidelity weight (1 = closest to the input).",
        rich_help_panel=_MODELS,
    ),
]
FrameEnhancerOption = Annotated[
    str | None,
    typer.Option(
        "--frame-enhancer",
        metavar="NAME",
        help="Upscale the whole result: real_esrgan_x2, real_esrgan_x4, real_esrgan_x8 (each also _fp16).",
        rich_help_panel=_MODELS,
    ),
]
FrameEnhancerBlendOption = Annotated[
    float,
    typer.Option(
        "--frame-enhancer-blend",
        metavar="F",
        min=0.0,
        max=1.0,
        help="How much of the upscaled frame to keep.",
        rich_help_panel=_MODELS,
    ),
]
NoWatermarkOption = Annotated[bool, typer.Option("--no-watermark", help=NO_WATERMARK_HELP, rich_help_panel=_MARKING)]
ScreeningOption = Annotated[
    str, typer.Option("--screening", metavar="POLICY", help=SCREENING_HELP, rich_help_panel=_MARKING)
]
AuditLogOption = Annotated[
    Path | None, typer.Option("--audit-log", metavar="FILE", help=AUDIT_HELP, rich_help_panel=_MARKING)
]
JsonOutputOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")]
