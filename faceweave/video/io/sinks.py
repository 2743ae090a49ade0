"""Where the writer's frames go: an FFmpeg container (:class:`AvSink`) or PNG files (:class:`PngSink`).

Also the pure helpers that build encoder options and colour tags.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

import av
import av.error
import cv2
import numpy as np
from PIL import Image as PILImage

from faceweave import kernels
from faceweave.errors import OutputError
from faceweave.io.atomic import atomic_output
from faceweave.video.io.formats import MUXERS, VP9_SPEED, is_hd
from faceweave.video.io.probe import file_url

if TYPE_CHECKING:
    from faceweave.video.io.audio import AudioCopy, AudioEncode, AudioSource
    from faceweave.video.io.writer import VideoWriter


class FrameMarker(Protocol):
    """Changes each ``(H, W, 3)`` uint8 RGB frame just before it is encoded."""

    def mark(self, pixels: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class LumaMarker(FrameMarker, Protocol):
    """A :class:`FrameMarker` whose change is to luma alone, and which can
    also make it on the frame's limited-range ``(H, W)`` uint8 Y plane, in
    place: what an encoder of 4:2:0 video gets (no RGB round trip)."""

    def mark_luma(self, luma: np.ndarray) -> None: ...


def error_reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or " ".join(str(exc).split()) or type(exc).__name__


class AvSink:
    """Frames -> an FFmpeg container (video, and audio from another file)."""

    def __init__(self, writer: VideoWriter, audio: AudioSource | None) -> None:
        self.writer = writer
        self.audio_source = audio
        self.audio: AudioCopy | AudioEncode | None = None
        self.stream: av.VideoStream | None = None
        suffix = ".tmp" + writer.path.suffix.lower()
        try:
            writer.path.parent.mkdir(parents=True, exist_ok=True)
            self._atomic = atomic_output(writer.path, suffix)
            temp = self._atomic.__enter__()
        except OSError as exc:
            raise OutputError(f"cannot write video '{writer.path}': {error_reason(exc)}") from exc
        tags = writer.metadata if writer.kind != "gif" else {}
        options = muxer_options(writer.kind, bool(tags))
        try:
            self._temp = temp
            self.container = av.open(file_url(temp), "w", format=MUXERS[writer.kind], options=options)
            self.container.metadata.update(tags)
        except av.error.FFmpegError as exc:
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise OutputError(f"cannot write video '{writer.path}': {error_reason(exc)}") from exc

    def _open(self, width: int, height: int) -> av.VideoStream:
        w = self.writer
        stream: av.VideoStream
        if w.kind == "gif":
            stream = self.container.add_stream("gif", rate=w._rate)
            stream.pix_fmt = "pal8"
        else:
            name = {"h264": "libx264", "h265": "libx265"}[w._codec] if w.kind != "webm" else "libvpx-vp9"
            options = _encoder_options(name, w._quality, w._preset)
            added = self.container.add_stream(name, rate=w._rate, options=options)
            stream = cast(av.VideoStream, added)  # name is a video encoder
            stream.pix_fmt = "yuv420p"
            if name == "libx265" and w.kind in ("mp4", "mov"):
                stream.codec_tag = "hvc1"  # plays in QuickTime and browsers
            if w.info.pixel_aspect != 1:
                stream.codec_context.sample_aspect_ratio = w.info.pixel_aspect
            for key, value in _color_tags(height).items():
                setattr(stream.codec_context, key, value)
        stream.width, stream.height = width, height
        stream.time_base = w._time_base
        stream.codec_context.time_base = w._time_base
        self.stream = stream
        if self.audio_source is not None:
            window, first = w.audio_window, None if w.audio_at_start else w.first_time
            self.audio = self.audio_source.attach(self.container, kind=w.kind, window=window, first_time=first)
            self.audio_source = None
        return stream

    def add(self, pixels: np.ndarray, pts: int, index: int, marker: FrameMarker | None = None) -> None:
        """Encode one frame, marked by ``marker`` (on its Y plane when it is a
        :class:`LumaMarker` and the frame goes to 4:2:0 as it is)."""
        stream = self.stream if self.stream is not None else self._open(pixels.shape[1], pixels.shape[0])
        if self.writer.kind == "gif":
            frame = _palette_frame(pixels if marker is None else marker.mark(pixels))
        else:
            frame = _yuv420p_frame(pixels, marker)
        frame.pts, frame.time_base = pts, self.writer._time_base
        frame.duration = self.writer.frame_duration
        self.container.mux(stream.encode(frame))
        if self.audio is not None:
            self.audio.feed(float((pts + frame.duration) * self.writer._time_base))

    def finish(self, end: float) -> None:
        if self.stream is not None:  # the writer finishes only after a frame, which opened it
            self.container.mux(self.stream.encode(None))
        if self.audio is not None:
            self.audio.finish(end)
            self.audio.close()
            self.audio = None
        self.container.close()
        comment = self.writer.metadata.get("comment") if self.writer.kind == "gif" else None
        if comment:
            # the GIF muxer keeps no tags: the label goes into a comment extension
            self._temp.write_bytes(with_gif_comment(self._temp.read_bytes(), comment))
        self._atomic.__exit__(None, None, None)

    def abort(self, exc: BaseException | None) -> None:
        exc = exc if exc is not None else OutputError(f"video '{self.writer.path}' was abandoned")
        for resource in (self.audio, self.audio_source):
            if resource is not None:
                resource.close()
        with suppress(Exception):  # the file is being thrown away
            self.container.close()
        self._atomic.__exit__(type(exc), exc, exc.__traceback__)


def muxer_options(kind: str, tags: bool) -> dict[str, str]:
    """MP4/MOV: moov first; with tags, keep custom keys (``use_metadata_tags``)."""
    if kind not in ("mp4", "mov"):
        return {}
    return {"movflags": "+faststart+use_metadata_tags" if tags else "+faststart"}


def _encoder_options(name: str, quality: int, preset: str) -> dict[str, str]:
    if name == "libvpx-vp9":
        deadline, cpu_used = VP9_SPEED[preset]
        crf = min(63, round(1.4 * quality))
        return {"crf": str(crf), "b": "0", "deadline": deadline, "cpu-used": str(cpu_used), "row-mt": "1"}
    options = {"crf": str(quality), "preset": preset}
    if name == "libx265":
        options["x265-params"] = "log-level=error"
    return options


def _color_tags(height: int) -> dict[str, int]:
    """BT.709 for HD (720 lines and more), BT.601 (SMPTE 170M) below, as players assume when untagged;
    limited range.  (FFmpeg's AVColorSpace / AVColorPrimaries / AVColorTransferCharacteristic codes.)"""
    code = 1 if is_hd(height) else 6
    return {"colorspace": code, "color_primaries": code, "color_trc": code, "color_range": 1}


def _sws_colorspace(height: int) -> str:
    """The matrix that goes with :func:`_color_tags`, by swscale's name."""
    return "ITU709" if is_hd(height) else "ITU601"


def yuv_matrix(height: int, *, bt709: bool | None = None) -> np.ndarray:
    """``(3, 4)`` float32: RGB (0..255) -> limited-range Y, Cb, Cr, plus
    offsets, with the matrix that goes with :func:`_color_tags` (BT.709 for
    HD, BT.601 below; ``bt709`` says which instead of the ``height``)."""
    hd = is_hd(height) if bt709 is None else bt709
    kr, kb = (0.2126, 0.0722) if hd else (0.299, 0.114)
    kg = 1.0 - kr - kb
    y = np.array([kr, kg, kb]) * 219.0 / 255.0
    cb = (np.array([0.0, 0.0, 1.0]) - [kr, kg, kb]) / (2.0 * (1.0 - kb)) * 224.0 / 255.0
    cr = (np.array([1.0, 0.0, 0.0]) - [kr, kg, kb]) / (2.0 * (1.0 - kr)) * 224.0 / 255.0
    return np.array([[*y, 16.0], [*cb, 128.0], [*cr, 128.0]], np.float32)


def rgb_to_i420(pixels: np.ndarray, *, bt709: bool | None = None) -> np.ndarray:
    """An RGB ``(H, W, 3)`` uint8 frame (even sides) as planar YUV 4:2:0
    (``(H * 3 // 2, W)`` uint8: Y, then Cb, then Cr), limited range, with
    :func:`yuv_matrix` (``bt709``: its matrix, default by the height).
    Chroma is taken from the mean of each 2x2 block (the same as averaging
    the chroma, which is linear in RGB).  Several times cheaper than
    swscale's conversion with a colour matrix: OpenCV's ``cv2.transform``
    arithmetic in one compiled pass (:func:`faceweave.kernels.rgb_to_i420`)."""
    return kernels.rgb_to_i420(np.ascontiguousarray(pixels), yuv_matrix(pixels.shape[0], bt709=bt709))


def _yuv420p_frame(pixels: np.ndarray, marker: FrameMarker | None = None) -> av.VideoFrame:
    """An RGB frame as a yuv420p :class:`av.VideoFrame` for the encoder
    (swscale only for odd sides, which 4:2:0 planes do not split evenly),
    marked by ``marker``: a :class:`LumaMarker` on the Y plane, any other on
    the RGB frame first."""
    h, w = pixels.shape[:2]
    luma_marker = marker if isinstance(marker, LumaMarker) and not (h % 2 or w % 2) else None
    if marker is not None and luma_marker is None:
        pixels = marker.mark(pixels)
    if h % 2 or w % 2:
        return av.VideoFrame.from_ndarray(np.ascontiguousarray(pixels), format="rgb24").reformat(
            format="yuv420p", dst_colorspace=_sws_colorspace(h), dst_color_range="MPEG"
        )
    planes = rgb_to_i420(np.ascontiguousarray(pixels))
    if luma_marker is not None:
        luma_marker.mark_luma(planes[:h])
    return av.VideoFrame.from_ndarray(planes, format="yuv420p")


def with_gif_comment(data: bytes, text: str) -> bytes:
    """A GIF's bytes with a Comment Extension holding ``text`` (ASCII,
    non-ASCII replaced) placed right after the header and global colour
    table, where FFmpeg's GIF reader reports it as the ``comment`` tag.
    Data that is not a GIF is returned unchanged."""
    if len(data) < 13 or data[:6] not in (b"GIF87a", b"GIF89a"):
        return data
    packed = data[10]
    start = 13 + (3 * (2 ** ((packed & 0x07) + 1)) if packed & 0x80 else 0)
    payload = text.encode("ascii", "replace")
    blocks = b"".join(bytes([len(payload[i : i + 255])]) + payload[i : i + 255] for i in range(0, len(payload), 255))
    return b"GIF89a" + data[6:start] + b"\x21\xfe" + blocks + b"\x00" + data[start:]


def _palette_frame(pixels: np.ndarray):
    """RGB -> a pal8 frame with its own 256-colour palette (median cut, no dithering)."""
    image = PILImage.fromarray(np.ascontiguousarray(pixels)).quantize(256, method=PILImage.Quantize.MEDIANCUT)
    palette = np.zeros((256, 4), np.uint8)
    rgb = np.frombuffer(bytes((image.getpalette() or [])[: 256 * 3]), np.uint8).reshape(-1, 3)
    palette[: len(rgb), 1:] = rgb
    palette[: len(rgb), 0] = 255  # ARGB, opaque
    # PyAV takes (indices, palette) for pal8; its stubs list single arrays only
    return av.VideoFrame.from_ndarray((np.asarray(image, np.uint8), palette), format="pal8")  # type: ignore[arg-type]


class PngSink:
    """Frames -> PNG files in a folder, or in a ZIP (stored: PNG is compressed already)."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind = path, kind
        #: the ZIP being written and its temporary file (``png_zip``), else None
        self._zipped: tuple[zipfile.ZipFile, AbstractContextManager[Path]] | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "png_zip":
                atomic = atomic_output(path, ".tmp.zip")
                self._zipped = zipfile.ZipFile(atomic.__enter__(), "w", zipfile.ZIP_STORED), atomic
            else:
                self._dir = Path(tempfile.mkdtemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent))
        except OSError as exc:
            raise OutputError(f"cannot write PNG frames to '{path}': {error_reason(exc)}") from exc

    def add(self, pixels: np.ndarray, pts: int, index: int, marker: FrameMarker | None = None) -> None:
        if marker is not None:
            pixels = marker.mark(pixels)
        ok, data = cv2.imencode(".png", np.ascontiguousarray(pixels[..., ::-1]), [cv2.IMWRITE_PNG_COMPRESSION, 3])
        if not ok:
            raise OSError(f"PNG encoding failed for frame {index}")
        name = f"frame_{index:06d}.png"
        if self._zipped is not None:
            self._zipped[0].writestr(name, data.tobytes())
        else:
            (self._dir / name).write_bytes(data.tobytes())

    def finish(self, end: float) -> None:
        if self._zipped is not None:
            archive, atomic = self._zipped
            archive.close()
            atomic.__exit__(None, None, None)
        else:
            os.replace(self._dir, self.path)  # an empty folder under the name is replaced

    def abort(self, exc: BaseException | None) -> None:
        if self._zipped is not None:
            archive, atomic = self._zipped
            exc = exc if exc is not None else OutputError(f"'{self.path}' was abandoned")
            with suppress(Exception):  # the file is being thrown away
                archive.close()
            atomic.__exit__(type(exc), exc, exc.__traceback__)
        else:
            shutil.rmtree(self._dir, ignore_errors=True)
