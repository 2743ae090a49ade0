"""Checks and option building shared by the commands (pure, no output)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faceweave.errors import InvalidOptionError, UnsupportedFormatError
from faceweave.options import SwapOptions


def check_output_path(path: Path, *, flag: str) -> None:
    """Raise :class:`InvalidOptionError` unless ``path`` has an image extension
    that :func:`faceweave.io.write_image` writes; called before any work."""
    from faceweave.io import WRITE_FORMATS

    ext = path.suffix.lower()
    if ext not in WRITE_FORMATS:
        shown = f"extension '{path.suffix}'" if ext else "no extension"
        raise InvalidOptionError(
            f"{flag} {path}: cannot write an image with {shown}; use one of {' '.join(WRITE_FORMATS)}"
        )
    if path.is_dir():
        raise InvalidOptionError(f"{flag} {path}: is a folder; give a file name")


def refuse_video(path: Path, *, role: str) -> None:
    """Raise :class:`UnsupportedFormatError` when ``path`` is a video (for
    inputs that must be photos).  A missing path passes; reading it later
    says what is wrong."""
    from faceweave.io import probe_kind

    if path.is_file() and probe_kind(path) == "video":
        raise UnsupportedFormatError(f"{role} {path} is a video; give a photo")


def target_is_video(path: Path) -> bool:
    """Whether the target file holds a video (by its content)."""
    from faceweave.io import probe_kind

    return path.is_file() and probe_kind(path) == "video"


def wants_video_output(path: Path) -> bool:
    """Whether ``path`` names a video output rather than an image."""
    from faceweave.video.io import check_video_output

    if path.suffix.lower() in (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"):
        return False
    try:
        check_video_output(path)
    except InvalidOptionError:
        return False
    return True


def check_video_output_path(path: Path, *, flag: str) -> None:
    """Raise :class:`InvalidOptionError` unless ``path`` is a video output the
    writer supports; called before any work."""
    from faceweave.video.io import check_video_output

    try:
        check_video_output(path)
    except InvalidOptionError as exc:
        raise InvalidOptionError(f"{flag} {path}: {exc}") from exc


def swap_options(
    *,
    working_size: int | None = None,
    max_pixels: int | None = None,
    occlusion: bool = True,
    mouth_mask: bool = True,
    hands: bool = False,
    target_lips: str | None = None,
    selection: dict[str, Any] | None = None,
    masks: dict[str, Any] | None = None,
    analysis: dict[str, Any] | None = None,
    **extra: Any,
) -> SwapOptions:
    """:class:`SwapOptions` from CLI flags; ``None`` keeps the default;
    ``masks``: further :class:`~faceweave.options.MaskOptions` fields (the
    mask models and FaceFusion's box mask); ``analysis``: further
    :class:`~faceweave.options.AnalysisOptions` fields (the face detector
    and landmarker); ``extra`` are further
    :class:`SwapOptions` fields (swapper, runtime, enhance).

    Raises pydantic's ``ValidationError`` for a value out of range.
    """
    data: dict[str, Any] = {"masks": {"occlusion": occlusion, "mouth": mouth_mask, "hands": hands}}
    if target_lips is not None:
        data["masks"]["target_lips"] = target_lips
    data["masks"].update(masks or {})
    if working_size is not None:
        data["working_size"] = working_size
    if max_pixels is not None:
        data["max_pixels"] = max_pixels
    if selection:
        data["selection"] = {k: v for k, v in selection.items() if v is not None}
    if analysis:
        data["analysis"] = analysis
    data.update({k: v for k, v in extra.items() if v is not None})
    return SwapOptions.model_validate(data)


def options_from_flags(
    args: Any, *, working_size: int | None, expression_check: bool, target_lips: str | None = None
) -> SwapOptions:
    """:class:`SwapOptions` from the flags ``swap`` and ``live`` share (face
    selection, masks, swapper, enhancers, runtime), read by name off
    ``args``; ``working_size`` and ``expression_check`` are the command's own."""
    from faceweave.cli.analysis_flags import analysis_flag_fields
    from faceweave.cli.mask_flags import flag_fields
    from faceweave.cli.runtime_options import runtime_fields
    from faceweave.options import CLI_WORDS, selection_mode

    selection = {
        "mode": selection_mode(
            args.faces,
            has_reference=args.reference_face is not None,
            has_indices=bool(args.face_index),
            words=CLI_WORDS,
        ),
        "order": args.order,
        "indices": tuple(args.face_index) if args.face_index else None,
        "reference_distance": args.reference_distance,
        "min_face_size": args.min_face_size,
    }
    enhance = {
        "face": args.face_enhancer,
        "face_blend": args.face_enhancer_blend,
        "face_weight": args.face_enhancer_weight,
        "frame": args.frame_enhancer,
        "frame_blend": args.frame_enhancer_blend,
    }
    runtime = runtime_fields(
        args.execution_provider,
        args.device_id,
        args.provider_fallback,
        args.tensorrt_cache,
        args.tensorrt_fp16,
        args.models_dir,
    )
    masks, knobs = flag_fields(args)
    analysis = analysis_flag_fields(args)
    return swap_options(
        working_size=working_size,
        max_pixels=args.max_pixels,
        occlusion=not args.no_occlusion,
        mouth_mask=not args.no_mouth_mask,
        target_lips=target_lips,
        hands=args.occlusion_hands,
        expression_check=expression_check,
        skin_tone=args.skin_tone,
        selection=selection,
        swapper=args.swapper,
        pixel_boost=args.pixel_boost,
        compositing=args.compositing,
        source_blend=args.source_blend,
        runtime=runtime,
        enhance=enhance,
        masks=masks,
        analysis=analysis,
        **knobs,
    )


def display_name(path: str | Path | None, fallback: str) -> str:
    return Path(path).name if path else fallback
