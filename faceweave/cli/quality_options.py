"""Options that set the swap's masks and limits, shared by the commands
that swap (``swap``, ``evaluate``) or read photos (``faces``).  Use the
``Annotated`` aliases as parameter types and pass the values to
:func:`faceweave.cli.common.swap_options`."""

from __future__ import annotations

from typing import Annotated

import typer

from faceweave.options import SwapOptions

#: the help panel these options are listed under
PANEL = "Quality and limits"

MaxPixelsOption = Annotated[
    int | None,
    typer.Option(
        "--max-pixels",
        metavar="N",
        help=f"Refuse images with more pixels than this (default {SwapOptions().max_pixels:_}).",
        rich_help_panel=PANEL,
    ),
]
NoOcclusionOption = Annotated[
    bool,
    typer.Option(
        "--no-occlusion",
        help="Do not keep hair, glasses and other things that are not skin-coloured in front of the face.",
        rich_help_panel=PANEL,
    ),
]
TargetLipsOption = Annotated[
    str | None,
    typer.Option(
        "--target-lips",
        help="Keep the target's own lips and the skin around them, so the mouth moves as the target's did "
        "(lip sync): video (default: in videos and live streams), always, never.",
        rich_help_panel=PANEL,
    ),
]
NoMouthMaskOption = Annotated[
    bool, typer.Option("--no-mouth-mask", help="Do not keep the target's open mouth.", rich_help_panel=PANEL)
]
OcclusionHandsOption = Annotated[
    bool,
    typer.Option(
        "--occlusion-hands",
        help="Also keep hands in front of the face (mediapipe hand landmarks: a hand has the colour of skin, so "
        "the occlusion test alone paints over it; about 6-10 ms per face).",
        rich_help_panel=PANEL,
    ),
]
SkinToneOption = Annotated[
    float | None,
    typer.Option(
        "--skin-tone",
        metavar="0-1",
        help="How much of the target's skin the new face takes: 0 the source's own skin colour and tint, 1 the "
        f"target's tint and shading in full (default {SwapOptions().skin_tone}); the classical swapper and "
        "faceweave compositing.",
        rich_help_panel=PANEL,
    ),
]
NoExpressionCheckOption = Annotated[
    bool,
    typer.Option(
        "--no-expression-check",
        help="Photos: do not look at each new face again to correct how its mouth and eyes read against the "
        "target's expression (saves a composite and a mesh inference, and sometimes a swap, per face).",
        rich_help_panel=PANEL,
    ),
]
