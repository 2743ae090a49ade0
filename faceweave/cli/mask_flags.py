"""FaceFusion's mask models and quality knobs as flags, shared by the
commands that swap (``swap``, ``live``, ``evaluate``): ``--face-occluder``,
``--face-parser``, ``--face-parser-regions``, ``--face-mask-blur``,
``--face-mask-padding``, ``--face-mask-areas`` and ``--face-swapper-weight``.  Use the
``Annotated`` aliases as parameter types and :func:`mask_fields` /
:func:`swapper_fields` to put the values into :class:`SwapOptions`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from faceweave import names

#: the help panel these options are listed under
PANEL = "FaceFusion masks and knobs (neural swappers)"

FaceOccluderOption = Annotated[
    str | None,
    typer.Option(
        "--face-occluder",
        metavar="NAME",
        help=f"FaceFusion's occluder model: {'|'.join(names.OCCLUDER_CHOICES)} (many: all three, their minimum; keeps "
        "what is in front of the face: hair, hands, glasses; the files must be downloaded or imported first).",
        rich_help_panel=PANEL,
    ),
]
FaceParserOption = Annotated[
    str | None,
    typer.Option(
        "--face-parser",
        metavar="NAME",
        help=f"FaceFusion's face parser: {'|'.join(sorted(names.FACE_PARSERS))} (the new face shows only on "
        "--face-parser-regions).",
        rich_help_panel=PANEL,
    ),
]
FaceParserRegionsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--face-parser-regions",
        metavar="REGION",
        help=f"Regions the new face shows on with --face-parser (repeat, or comma-separate; default all): "
        f"{', '.join(names.PARSER_REGIONS)}.",
        rich_help_panel=PANEL,
    ),
]
FaceMaskAreasOption = Annotated[
    list[str] | None,
    typer.Option(
        "--face-mask-areas",
        metavar="AREA",
        help="FaceFusion's face mask areas: the new face shows only inside the hull of the target's 68 "
        "landmarks of these areas (repeat, or comma-separate): upper-face, lower-face, mouth; needs "
        "--face-landmarker 2dfan4 or fan_68_5 (default: off).",
        rich_help_panel=PANEL,
    ),
]
FaceMaskBlurOption = Annotated[
    float | None,
    typer.Option(
        "--face-mask-blur",
        metavar="F",
        help="Feather of FaceFusion's box mask, 0-1 of the crop (default 0.3).",
        rich_help_panel=PANEL,
    ),
]
FaceMaskPaddingOption = Annotated[
    tuple[int, int, int, int] | None,
    typer.Option(
        "--face-mask-padding",
        metavar="TOP RIGHT BOTTOM LEFT",
        help="FaceFusion's box mask padding: four whole percentages of the crop, 0-100 (default 0 0 0 0).",
        rich_help_panel=PANEL,
    ),
]
FaceSwapperWeightOption = Annotated[
    float | None,
    typer.Option(
        "--face-swapper-weight",
        metavar="F",
        help="FaceFusion's swapper weight, 0-1 (default 0.5: the source's identity alone; lower mixes the "
        "target's identity in, higher pushes it away); embedding swappers only.",
        rich_help_panel=PANEL,
    ),
]


def split_regions(given: list[str] | None) -> tuple[str, ...] | None:
    """The names of repeated ``--face-parser-regions`` (or ``--face-mask-areas``) values, each of which
    may list several (``skin,nose`` or ``'skin nose'``); ``None`` when none was given."""
    if not given:
        return None
    return tuple(name for value in given for name in value.replace(",", " ").split())


def mask_fields(
    *,
    face_occluder: str | None,
    face_parser: str | None,
    face_parser_regions: list[str] | None,
    face_mask_blur: float | None,
    face_mask_padding: tuple[int, int, int, int] | None,
    face_mask_areas: list[str] | None = None,
) -> dict[str, Any]:
    """The ``masks`` fields the flags set (those not given keep their defaults)."""
    fields: dict[str, Any] = {
        "face_occluder": face_occluder,
        "face_parser": face_parser,
        "face_parser_regions": split_regions(face_parser_regions),
        "face_mask_areas": split_regions(face_mask_areas),
        "face_mask_blur": face_mask_blur,
        "face_mask_padding": face_mask_padding,
    }
    return {k: v for k, v in fields.items() if v is not None}


def flag_fields(args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(masks fields, top-level fields)`` of the flags above, read by name off ``args``."""
    masks = mask_fields(
        face_occluder=args.face_occluder,
        face_parser=args.face_parser,
        face_parser_regions=args.face_parser_regions,
        face_mask_blur=args.face_mask_blur,
        face_mask_padding=args.face_mask_padding,
        face_mask_areas=args.face_mask_areas,
    )
    top = {} if args.face_swapper_weight is None else {"swapper_weight": args.face_swapper_weight}
    return masks, top
