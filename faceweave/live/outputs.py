"""Where a live session's frames go (:func:`parse_output` ->
:class:`OutputSpec` -> :func:`open_output`): a recording file or a network
push (:class:`StreamMuxer`: H.264 and AAC through PyAV's muxers, FLV for
RTMP, MPEG-TS for SRT, UDP and TCP), a virtual camera
(:class:`VirtualCamera`, the optional ``pyvirtualcam``), or the newest frame
held for a reader such as a preview window (:class:`LatestFrame`).

Every output takes frames of one size in order (:class:`OutgoingFrame`:
the swapped pixels, marked once for all the outputs in the form each
needs, RGB or the encoder's 4:2:0 planes), each shown at its ``time``
seconds (from the session's clock), and the audio chunks that go with them."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Protocol

import numpy as np

from faceweave.errors import InvalidOptionError, OutputUnavailableError
from faceweave.live.audio import AudioChunk
from faceweave.provenance.stamp import LazyFrameMarker
from faceweave.video.io.sinks import rgb_to_i420

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


@dataclass(frozen=True, eq=False)
class OutgoingFrame:
    """One swapped frame on its way to a live session's outputs, shown at
    ``time`` seconds: ``pixels`` ``(H, W, 3)`` uint8 RGB as rendered, and
    ``marker`` the session's watermark (``None``: off).  Each form is made
    once, on first use, for all the outputs that take it: :attr:`rgb`
    marked (a preview, a virtual camera) and :meth:`i420` (an encoder's
    planes, the mark made on their Y plane by the compiled kernel, without
    marking the RGB frame; a frame of odd sides is marked in RGB, then
    padded).  Made and first read on the encoder thread."""

    pixels: np.ndarray
    time: float
    marker: LazyFrameMarker | None = None
    _planes: dict[bool, np.ndarray] = field(default_factory=dict, init=False, repr=False)

    @cached_property
    def rgb(self) -> np.ndarray:
        """The frame in RGB, marked."""
        return self.pixels if self.marker is None else self.marker.mark(self.pixels)

    def i420(self, *, bt709: bool) -> np.ndarray:
        """The frame as limited-range 4:2:0 planes (``(H' * 3 // 2, W')``
        uint8, :func:`~faceweave.video.io.sinks.rgb_to_i420`; odd sides
        padded by their last row or column), BT.709's matrix or BT.601's,
        marked."""
        planes = self._planes.get(bt709)
        if planes is None:
            planes = self._planes[bt709] = self._marked_planes(bt709)
        return planes

    def _marked_planes(self, bt709: bool) -> np.ndarray:
        h, w = self.pixels.shape[:2]
        if h % 2 or w % 2:
            padded = np.pad(self.rgb, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
            return rgb_to_i420(padded, bt709=bt709)
        planes = rgb_to_i420(np.ascontiguousarray(self.pixels), bt709=bt709)
        if self.marker is not None:
            self.marker.mark_luma(planes[:h])
        return planes


class LiveOutput(Protocol):
    """One output of a live session, used on the encoder thread: opened at
    the first frame (its size is the session's), then frames and audio, then
    :meth:`close` (complete) or :meth:`abort` (the run failed)."""

    spec: OutputSpec

    def open(self, width: int, height: int, rate: Fraction) -> None: ...

    def write(self, frame: OutgoingFrame) -> None: ...

    def write_audio(self, chunks: list[AudioChunk]) -> None: ...

    def close(self) -> None: ...

    def abort(self, exc: BaseException | None) -> None: ...
