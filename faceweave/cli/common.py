"""Checks and option building shared by the commands (pure, no output)."""

from __future__ import annotations

from pathlib import Path

from faceweave.errors import InvalidOptionError, UnsupportedFormatError


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
    """Whether ``path`` names a video output rather than an image (an
    image's name is told without importing the video writer and FFmpeg)."""
    if path.suffix.lower() in (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"):
        return False
    from faceweave.video.io import check_video_output

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


def display_name(path: str | Path | None, fallback: str) -> str:
    return Path(path).name if path else fallback
