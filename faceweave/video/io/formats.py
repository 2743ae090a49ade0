"""Output formats: what each extension writes, and the per-kind tables the writer and audio use."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType

from faceweave.errors import InvalidOptionError

#: output extension -> what is written; a folder ("/") or .zip holds PNG frames
OUTPUT_FORMATS = MappingProxyType(
    {
        ".mp4": "MP4: H.264 (H.265 with codec='h265'), AAC audio",
        ".m4v": "MP4: H.264 (H.265 with codec='h265'), AAC audio",
        ".mov": "QuickTime: H.264 (H.265 with codec='h265'), AAC audio",
        ".mkv": "Matroska: H.264 (H.265 with codec='h265'), audio copied or AAC",
        ".webm": "WebM: VP9, Opus audio",
        ".gif": "animated GIF: longest side at most 480 px, at most 15 fps, no audio",
        ".zip": "ZIP of PNG frames frame_000000.png ..., no audio",
        "/": "folder of PNG frames frame_000000.png ... (a path with no extension or ending with '/'), no audio",
    }
)
#: extension -> output kind
_KINDS = MappingProxyType(
    {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "mkv", ".webm": "webm", ".gif": "gif", ".zip": "png_zip"}
)
#: output kind -> FFmpeg muxer
MUXERS = MappingProxyType({"mp4": "mp4", "mov": "mov", "mkv": "matroska", "webm": "webm", "gif": "gif"})
#: output kind -> audio codecs copied untouched (others are re-encoded to the first codec named in AUDIO_ENCODERS)
AUDIO_COPY = MappingProxyType(
    {
        "mp4": {"aac", "mp3"},
        "mov": {"aac", "mp3"},
        "mkv": {"aac", "mp3", "opus", "vorbis", "flac"},
        "webm": {"opus", "vorbis"},
    }
)
AUDIO_ENCODERS = MappingProxyType({"mp4": "aac", "mov": "aac", "mkv": "aac", "webm": "libopus"})
AUDIO_BITRATE = MappingProxyType({"aac": 128_000, "libopus": 96_000})
#: output kinds that take ``codec="h265"`` (the others ignore the default "h264")
H265_KINDS = frozenset({"mp4", "mov", "mkv"})
X264_PRESETS = (
    "ultrafast",
    "superfast",
    "veryfast",
    "faster",
    "fast",
    "medium",
    "slow",
    "slower",
    "veryslow",
    "placebo",
)
#: x264 preset -> libvpx-vp9 (deadline, cpu-used)
VP9_SPEED = MappingProxyType(
    {
        "ultrafast": ("realtime", 8),
        "superfast": ("realtime", 7),
        "veryfast": ("realtime", 6),
        "faster": ("good", 5),
        "fast": ("good", 4),
        "medium": ("good", 3),
        "slow": ("good", 2),
        "slower": ("good", 1),
        "veryslow": ("good", 0),
        "placebo": ("good", 0),
    }
)
GIF_MAX_FPS = 15
GIF_TIME_BASE = Fraction(1, 100)


def check_video_output(path: str | os.PathLike[str]) -> str:
    """The output kind for ``path``: ``"mp4"`` (.mp4, .m4v), ``"mov"``, ``"mkv"``,
    ``"webm"``, ``"gif"``, ``"png_zip"`` (.zip) or ``"png_dir"`` (a folder: no
    extension, or ending with '/'); call it before any work.

    Raises:
        InvalidOptionError: any other extension (the message lists the accepted
            ones), a folder path that is an existing file, a non-empty folder, or
            an existing folder named like a video (``out.mp4``).
    """
    text = os.fsdecode(os.fspath(path))
    target = Path(text)
    if target.is_dir() and target.suffix.lower() in _KINDS and not text.endswith(("/", os.sep)):
        raise InvalidOptionError(
            f"'{text}' is an existing folder; give a file name for the video, or a folder name"
            " without an extension (or ending with '/') for PNG frames"
        )
    if text.endswith(("/", os.sep)) or target.is_dir() or not target.suffix:
        if target.exists() and not target.is_dir():
            raise InvalidOptionError(f"'{text}' is a file; PNG frames need a folder (or give a video extension)")
        if target.is_dir() and any(target.iterdir()):
            raise InvalidOptionError(f"folder '{text}' is not empty; give a new or empty folder for the PNG frames")
        return "png_dir"
    kind = _KINDS.get(target.suffix.lower())
    if kind is None:
        accepted = ", ".join(ext for ext in OUTPUT_FORMATS if ext != "/")
        raise InvalidOptionError(
            f"cannot write a video with extension '{target.suffix}'; accepted: {accepted},"
            " or a folder (no extension, or ending with '/') for PNG frames"
        )
    return kind


def is_hd(height: int) -> bool:
    """Whether a frame this tall is HD, whose colours are BT.709 (players
    assume so when a file does not say), rather than SD's BT.601."""
    return height >= 720
