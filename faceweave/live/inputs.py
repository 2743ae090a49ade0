"""What ``faceweave live`` reads (:class:`LiveInput`, :func:`parse_input`):
a camera (a V4L2 device path or its index), a network stream (a URL whose
scheme FFmpeg reads: RTSP, RTMP, SRT, UDP, RTP, TCP, HTTP and HLS over
HTTP) or a file played at its own rate, optionally looped."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from faceweave.errors import InvalidOptionError, UnreadableFileError

#: URL schemes read as network streams
NETWORK_SCHEMES = frozenset({"rtsp", "rtsps", "rtmp", "rtmps", "srt", "udp", "rtp", "tcp", "http", "https"})
#: demuxer options for network streams (the user's ``--input-option`` win):
#: a short probe and no buffering beyond what decoding needs, for low latency
NETWORK_OPTIONS = MappingProxyType({"analyzeduration": "1000000", "fflags": "nobuffer"})
#: the FFmpeg demuxer that reads a camera on this system
CAMERA_FORMAT = {"linux": "v4l2", "darwin": "avfoundation", "win32": "dshow"}.get(sys.platform, "v4l2")

InputKind = Literal["camera", "network", "file"]


@dataclass(frozen=True)
class LiveInput:
    """A live input, checked.  ``url``: the device path, URL or file path
    given to FFmpeg; ``format``: the demuxer (``v4l2`` for a camera), or
    ``None`` to probe; ``options``: demuxer and protocol options; ``loop``:
    a file starts again at its end."""

    kind: InputKind
    url: str
    format: str | None = None
    options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    loop: bool = False

    @property
    def paced(self) -> bool:
        """Whether frames are held back to the input's own rate (a file;
        a camera and a network stream come at their own pace)."""
        return self.kind == "file"

    @property
    def reconnects(self) -> bool:
        """Whether a drop is met by reconnecting (network streams)."""
        return self.kind == "network"


def parse_input(
    text: str, *, input_format: str | None = None, options: Mapping[str, str] | None = None, loop: bool = False
) -> LiveInput:
    """The :class:`LiveInput` that ``text`` names: a camera index (``0``) or
    device (``/dev/video0``), a URL, or a file.

    Raises:
        InvalidOptionError: an empty input, a URL scheme FFmpeg is not asked
            to read here, or ``loop`` for something that is not a file.
        UnreadableFileError: a camera device or file that does not exist.
    """
    text = str(text).strip()
    if not text:
        raise InvalidOptionError("give an INPUT: a camera (0 or /dev/video0), a stream URL or a video file")
    extra = dict(options or {})
    kind = _kind_of(text)
    if loop and kind != "file":
        raise InvalidOptionError(f"--loop is for files; {text} is a {kind}")
    if kind == "camera":
        device = f"/dev/video{text}" if text.isdigit() and CAMERA_FORMAT == "v4l2" else text
        if CAMERA_FORMAT == "v4l2" and not Path(device).exists():
            raise UnreadableFileError(f"camera {device} does not exist ({_cameras_found()})")
        return LiveInput("camera", device, input_format or CAMERA_FORMAT, MappingProxyType(extra))
    if kind == "network":
        merged = {**NETWORK_OPTIONS, **extra}
        return LiveInput("network", text, input_format, MappingProxyType(merged))
    path = Path(text)
    if not path.is_file():
        what = "is a folder, not a video file" if path.is_dir() else "does not exist"
        raise UnreadableFileError(f"input {text} {what}")
    return LiveInput("file", os.fspath(path), input_format, MappingProxyType(extra), loop=loop)


def _kind_of(text: str) -> InputKind:
    scheme, sep, _ = text.partition("://")
    if sep:
        if scheme.lower() not in NETWORK_SCHEMES:
            accepted = ", ".join(sorted(NETWORK_SCHEMES))
            raise InvalidOptionError(f"input {text}: cannot read '{scheme}://' streams; accepted: {accepted}")
        return "network"
    if text.isdigit() or text.startswith("/dev/video"):
        return "camera"
    return "file"


def _cameras_found() -> str:
    found = sorted(str(p) for p in Path("/dev").glob("video*"))
    return "cameras found: " + ", ".join(found) if found else "no camera found on this machine"


def parse_options(items: Sequence[str], *, flag: str) -> dict[str, str]:
    """``KEY=VALUE`` flag values as a dict (``--input-option video_size=640x480``).

    Raises:
        InvalidOptionError: an item without ``=`` or with an empty key.
    """
    parsed: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"{flag} {item!r}: use KEY=VALUE, e.g. {flag} video_size=640x480")
        parsed[key.strip()] = value.strip()
    return parsed


@dataclass(frozen=True)
class Reconnect:
    """How a network input that drops is met: up to ``attempts`` reopenings,
    the first after ``delay_s`` seconds, each wait twice the one before (at
    most ``max_delay_s``); ``timeout_s``: no data for this long counts as a
    drop (and bounds each opening).  A successful reconnect starts the count
    again."""

    attempts: int = 3
    delay_s: float = 0.5
    max_delay_s: float = 8.0
    timeout_s: float = 5.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 0:
            raise InvalidOptionError(f"--reconnect must be 0 or more attempts; got {self.attempts!r}")
        for name, value in (("--reconnect-delay", self.delay_s), ("--timeout", self.timeout_s)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise InvalidOptionError(f"{name} must be a positive number of seconds; got {value!r}")

    def delays(self) -> tuple[float, ...]:
        """The wait before each attempt, in seconds."""
        return tuple(min(self.max_delay_s, self.delay_s * 2**i) for i in range(self.attempts))
