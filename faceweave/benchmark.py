"""``faceweave benchmark``: how fast the whole video swap runs on this
machine, from 240p to 2160p, cold and warm (FaceFusion's ``benchmark``
command, for faceweave's pipeline).

Each resolution gets a clip made for it (:func:`make_clip`: a face photo,
by default the source itself, on a 16:9 grey canvas of that height,
drifting and zooming a little from frame to frame so that the tracker
follows a moving face).  The *cold* run builds a new
:class:`~faceweave.pipeline.FaceSwapper` (its models loaded, the source
prepared) and swaps the clip once: what a user waits for the first time;
the *warm* runs swap it again with the same swapper, ``cycles`` times, and
report the median frames per second, the process's CPU per frame and each
stage's CPU per frame (thread CPU, as ``benchmarks/budget.py`` prints it).
The clips and outputs live in a temporary folder that is removed at the end.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from faceweave.errors import InvalidOptionError, NoFaceError
from faceweave.options import VIDEO_WORKING_SIZE, SwapOptions

#: the resolutions, by name, and their heights (FaceFusion's set)
RESOLUTIONS = {"240p": 240, "360p": 360, "540p": 540, "720p": 720, "1080p": 1080, "1440p": 1440, "2160p": 2160}
#: the clips' frame rate
CLIP_FPS = 30


@dataclass(frozen=True)
class BenchmarkCase:
    """One resolution's figures: ``cold_s`` the first swap's wall seconds
    with the swapper built (models loaded, source prepared); ``fps``,
    ``cpu_ms`` (process CPU per frame) and ``stages_ms`` (each stage's CPU
    per frame) of the median warm run (by frames per second)."""

    resolution: str
    width: int
    height: int
    frames: int
    cold_s: float
    cold_fps: float
    fps: float
    cpu_ms: float
    faces_swapped: int
    stages_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "resolution": self.resolution,
            "width": self.width,
            "height": self.height,
            "frames": self.frames,
            "cold_s": round(self.cold_s, 3),
            "cold_fps": round(self.cold_fps, 2),
            "fps": round(self.fps, 2),
            "cpu_ms_per_frame": round(self.cpu_ms, 1),
            "faces_swapped": self.faces_swapped,
            "stages_cpu_ms_per_frame": {k: round(v, 2) for k, v in self.stages_ms.items()},
        }


@dataclass(frozen=True)
class BenchmarkReport:
    """The cases in the order run, and what they were run with."""

    cases: tuple[BenchmarkCase, ...]
    swapper: str
    cycles: int

    def to_dict(self) -> dict:
        return {"swapper": self.swapper, "cycles": self.cycles, "cases": [c.to_dict() for c in self.cases]}


def parse_resolutions(text: str) -> tuple[str, ...]:
    """``"240p,720p"`` (or ``all``) -> the names, in the order given.

    Raises:
        InvalidOptionError: an unknown resolution, or none.
    """
    names = tuple(dict.fromkeys(p.strip().lower() for p in text.split(",") if p.strip()))
    if names == ("all",):
        return tuple(RESOLUTIONS)
    unknown = [n for n in names if n not in RESOLUTIONS]
    if unknown or not names:
        got = repr(unknown[0]) if unknown else "none"
        raise InvalidOptionError(f"--resolutions: {got}; one or more of {', '.join(RESOLUTIONS)}, or all")
    return names


def make_clip(picture: np.ndarray, height: int, frames: int, path: Path) -> tuple[int, int]:
    """Write an H.264 clip of ``frames`` frames at ``height`` lines (16:9,
    even sizes): ``picture`` (RGB uint8) fitted into 80 % of the height on a
    grey canvas, drifting and zooming by a few percent over the clip.
    Returns ``(width, height)``."""
    import av

    width = int(round(height * 16 / 9 / 2)) * 2
    h, w = picture.shape[:2]
    base = 0.8 * height / h
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=CLIP_FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "18"}
        for k in range(frames):
            t = k / max(frames - 1, 1)
            scale = base * (1.0 + 0.04 * t)
            shift = (width - w * scale) / 2.0 + 0.03 * width * np.sin(2 * np.pi * t)
            matrix = np.array([[scale, 0.0, shift], [0.0, scale, (height - h * scale) / 2.0]])
            canvas = np.asarray(cv2.warpAffine(picture, matrix, (width, height), borderValue=(128, 128, 128)), np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(canvas, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return width, height


def run_benchmark(
    sources: Sequence[str | Path],
    *,
    picture: str | Path | None = None,
    resolutions: Sequence[str] = ("240p", "360p", "540p", "720p", "1080p"),
    frames: int = 30,
    cycles: int = 3,
    options: SwapOptions | None = None,
) -> BenchmarkReport:
    """Swap the sources onto a clip of each resolution, cold then warm
    (see the module).  ``picture``: the photo the clips are made from
    (default: the first source).  ``options``: the swap options (default:
    video's, ``SwapOptions()`` with the video working size).

    Raises:
        InvalidOptionError: bad ``resolutions``, ``frames`` or ``cycles``.
        NoFaceError: a source without a face, or clips in which no face was swapped.
        and what reading the photos raises.
    """
    from faceweave.io import read_image

    unknown = [r for r in resolutions if r not in RESOLUTIONS]
    if unknown or not resolutions:
        raise InvalidOptionError(f"resolutions: one or more of {', '.join(RESOLUTIONS)}; got {list(resolutions)}")
    if not 2 <= frames <= 10_000 or not 1 <= cycles <= 100:
        raise InvalidOptionError(f"frames must be 2..10000 and cycles 1..100; got {frames} and {cycles}")
    if not sources:
        raise InvalidOptionError("a benchmark needs a source photo")
    options = options if options is not None else _video_options()
    image = read_image(picture if picture is not None else sources[0]).pixels
    with tempfile.TemporaryDirectory(prefix="faceweave-benchmark-") as scratch:
        folder = Path(scratch)
        cases = tuple(
            _run_case(name, image, [str(s) for s in sources], folder, frames=frames, cycles=cycles, options=options)
            for name in resolutions
        )
    return BenchmarkReport(cases=cases, swapper=options.swapper, cycles=cycles)


def _video_options() -> SwapOptions:
    return SwapOptions(working_size=VIDEO_WORKING_SIZE)


def _run_case(
    name: str, image: np.ndarray, sources: list[str], folder: Path, *, frames: int, cycles: int, options: SwapOptions
) -> BenchmarkCase:
    from faceweave.pipeline import FaceSwapper
    from faceweave.video.pipeline import VideoSwapper

    clip = folder / f"clip-{name}.mp4"
    width, height = make_clip(image, RESOLUTIONS[name], frames, clip)
    began = time.perf_counter()
    with FaceSwapper(options) as swapper:
        video = VideoSwapper(swapper)
        cold = video.swap_video(sources, clip, folder / f"out-{name}.mp4")
        cold_s = time.perf_counter() - began
        if cold.faces_swapped == 0:
            raise NoFaceError(
                f"no face was swapped in the {name} clip made from the picture; give a photo with a face", role="target"
            )
        runs = []
        for _ in range(cycles):
            cpu = time.process_time()
            report = video.swap_video(sources, clip, folder / f"out-{name}.mp4")
            runs.append((report, time.process_time() - cpu))
    report, cpu_s = sorted(runs, key=lambda r: r[0].fps)[len(runs) // 2]
    stages = {k[: -len(".cpu")]: v / max(report.frames, 1) for k, v in report.timings_ms.items() if k.endswith(".cpu")}
    return BenchmarkCase(
        resolution=name,
        width=width,
        height=height,
        frames=report.frames,
        cold_s=cold_s,
        cold_fps=cold.frames / cold_s if cold_s > 0 else 0.0,
        fps=report.fps,
        cpu_ms=1000.0 * cpu_s / max(report.frames, 1),
        faces_swapped=report.faces_swapped,
        stages_ms=stages,
    )
