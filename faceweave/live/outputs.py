"""Where a live session's frames go (:func:`parse_output` ->
:class:`OutputSpec` -> :func:`open_output`): a recording file or a network
push (:class:`StreamMuxer`: H.264 and AAC through PyAV's muxers, FLV for
RTMP, MPEG-TS for SRT, UDP and TCP), a virtual camera
(:class:`VirtualCamera`, the optional ``pyvirtualcam``), or the newest frame
held for a reader such as a preview window (:class:`LatestFrame`).

Every output takes frames of one size, ``(H, W, 3)`` uint8 RGB, in order,
each shown at ``time`` seconds (from the session's clock), and the audio
chunks that go with them."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Protocol

import numpy as np

from faceweave.errors import InvalidOptionError, OutputUnavailableError
from faceweave.live.audio import AudioChunk

#: recording extension -> FFmpeg muxer
FILE_MUXERS = MappingProxyType({".mkv": "matroska", ".mp4": "mp4", ".mov": "mov", ".ts": "mpegts", ".flv": "flv"})
#: network URL scheme -> FFmpeg muxer (the stream is pushed to the URL)
URL_MUXERS = MappingProxyType({"rtmp": "flv", "rtmps": "flv", "srt": "mpegts", "udp": "mpegts", "tcp": "mpegts"})
#: output words that are not paths
PREVIEW, VCAM = "preview", "vcam"

OutputKind = Literal["file", "network", "vcam", "preview"]


@dataclass(frozen=True)
class OutputSpec:
    """One output, checked: ``target`` is the path, URL or virtual camera
    device (``""``: the first free one); ``muxer`` the FFmpeg muxer of a
    file or network output."""

    kind: OutputKind
    target: str = ""
    muxer: str | None = None

    @property
    def label(self) -> str:
        return {"preview": "preview window", "vcam": f"virtual camera {self.target}".strip()}.get(
            self.kind, self.target
        )


def parse_output(text: str) -> OutputSpec:
    """``preview``, ``vcam`` or ``vcam:/dev/videoN``, a URL (``rtmp://``,
    ``srt://``, ``udp://``, ``tcp://``) or a recording file (``.mkv``,
    ``.mp4``, ``.mov``, ``.ts``, ``.flv``).

    Raises:
        InvalidOptionError: anything else, or a file in a folder that is a file.
    """
    text = str(text).strip()
    if text == PREVIEW:
        return OutputSpec("preview")
    if text == VCAM or text.startswith(VCAM + ":"):
        return OutputSpec("vcam", text.partition(":")[2])
    scheme, sep, _ = text.partition("://")
    if sep:
        muxer = URL_MUXERS.get(scheme.lower())
        if muxer is None:
            accepted = ", ".join(f"{s}://" for s in URL_MUXERS)
            raise InvalidOptionError(f"--output {text}: cannot push '{scheme}://' streams; accepted: {accepted}")
        return OutputSpec("network", text, muxer)
    path = Path(text)
    muxer = FILE_MUXERS.get(path.suffix.lower())
    if muxer is None:
        accepted = " ".join(FILE_MUXERS)
        raise InvalidOptionError(
            f"--output {text}: give a recording file ({accepted}), a stream URL, 'preview' or 'vcam'"
        )
    if path.is_dir():
        raise InvalidOptionError(f"--output {text}: is a folder; give a file name")
    if path.parent.exists() and not path.parent.is_dir():
        raise InvalidOptionError(f"--output {text}: {path.parent} is a file, not a folder")
    return OutputSpec("file", text, muxer)


def check_outputs(specs: Sequence[OutputSpec], *, environ: Mapping[str, str] | None = None) -> None:
    """Refuse, before any work, outputs this machine cannot give: a preview
    without a display, a virtual camera without its package or device, an
    output named twice.

    Raises:
        InvalidOptionError: no output, or one given twice.
        OutputUnavailableError: a preview or virtual camera that cannot be had.
    """
    if not specs:
        raise InvalidOptionError("give at least one --output: a recording file, a stream URL, 'preview' or 'vcam'")
    seen = [(s.kind, s.target) for s in specs]
    twice = next((s for i, s in enumerate(specs) if (s.kind, s.target) in seen[:i]), None)
    if twice is not None:
        raise InvalidOptionError(f"--output {twice.label} is given twice")
    env = os.environ if environ is None else environ
    for spec in specs:
        if spec.kind == "preview":
            check_display(env)
        elif spec.kind == "vcam":
            check_virtual_camera(spec.target)


def check_display(environ: Mapping[str, str]) -> None:
    """Raise :class:`OutputUnavailableError` when no window can be shown."""
    if sys.platform.startswith("linux") and not (environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY")):
        raise OutputUnavailableError(
            "--output preview needs a display, and neither DISPLAY nor WAYLAND_DISPLAY is set;"
            " record to a file or push a stream instead"
        )


def check_virtual_camera(device: str) -> None:
    """Raise :class:`OutputUnavailableError` without ``pyvirtualcam`` or, on
    Linux, without a v4l2loopback device (the one named, or any)."""
    try:
        importlib.import_module("pyvirtualcam")  # only whether it is there
    except ImportError:
        raise OutputUnavailableError(
            "--output vcam needs the pyvirtualcam package: pip install 'faceweave[live]'"
            " (and on Linux the v4l2loopback kernel module)"
        ) from None
    if not sys.platform.startswith("linux"):
        return  # OBS's virtual camera: pyvirtualcam says at start whether it is there
    loopbacks = loopback_devices()
    if device and device not in loopbacks:
        found = ", ".join(loopbacks) or "none"
        raise OutputUnavailableError(f"--output vcam:{device}: not a v4l2loopback device (loopback devices: {found})")
    if not loopbacks:
        raise OutputUnavailableError(
            "--output vcam: no v4l2loopback device; load the module first: sudo modprobe v4l2loopback exclusive_caps=1"
        )


def loopback_devices(sysfs: Path = Path("/sys/devices/virtual/video4linux")) -> list[str]:
    """The ``/dev/videoN`` devices v4l2loopback made (they are the virtual ones)."""
    if not sysfs.is_dir():
        return []
    return sorted(f"/dev/{entry.name}" for entry in sysfs.iterdir() if entry.name.startswith("video"))


class LiveOutput(Protocol):
    """One output of a live session, used on the encoder thread: opened at
    the first frame (its size is the session's), then frames and audio, then
    :meth:`close` (complete) or :meth:`abort` (the run failed)."""

    spec: OutputSpec

    def open(self, width: int, height: int, rate: Fraction) -> None: ...

    def write(self, pixels: np.ndarray, time: float) -> None: ...

    def write_audio(self, chunks: list[AudioChunk]) -> None: ...

    def close(self) -> None: ...

    def abort(self, exc: BaseException | None) -> None: ...
