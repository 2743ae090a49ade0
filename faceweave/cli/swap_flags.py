"""The own flags of ``faceweave swap`` (and of ``live`` and ``batch``, where
they mean the same) as typed aliases, so that a command's dataclass reads
one line per flag; the option flags are made from the options models
(``option_flags.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli.marking import AUDIT_HELP, NO_WATERMARK_HELP, SCREENING_HELP
from faceweave.option_fields import QUALITY as _QUALITY
from faceweave.option_fields import SELECTION as _SELECT

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
ReferenceFaceOption = Annotated[
    Path | None,
    typer.Option(
        "--reference-face",
        metavar="PHOTO",
        help="Photo of the person to replace (--faces reference).",
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
NoWatermarkOption = Annotated[bool, typer.Option("--no-watermark", help=NO_WATERMARK_HELP, rich_help_panel=_MARKING)]
ScreeningOption = Annotated[
    str, typer.Option("--screening", metavar="POLICY", help=SCREENING_HELP, rich_help_panel=_MARKING)
]
AuditLogOption = Annotated[
    Path | None, typer.Option("--audit-log", metavar="FILE", help=AUDIT_HELP, rich_help_panel=_MARKING)
]
JsonOutputOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")]
