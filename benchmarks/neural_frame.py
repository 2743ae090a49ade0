"""The neural path's own CPU per 720p frame: everything outside the model call.

A face photo is scaled to 720 lines and padded (edges replicated) to
1280x720, its face detected once outside the timing.  Each route renders the
frame as a video does (``FaceRenderer.render`` with the video's profile; a
track's face plan made on the first frame of every six and reused on the
others, as ``PlanPolicy`` does), and the encoder's watermark is put on the
frame's Y plane (``FrameMarker.mark_luma``).  The swapper's model is the
random-weight inswapper_128-sized stand-in of ``neural_path.py``, wrapped so
that the calling thread's CPU inside ``model.run`` is counted apart: what is
left is the neural path's own cost (alignment, normalisation, masks,
compositing, paste-back, watermark), the part a GPU or NPU worker runs in
Python.  All figures are the calling thread's CPU (``time.thread_time``),
medians over the frames, with one BLAS and one OpenCV thread.

``--batch 1 4 8``: frames per second of the model call and of the whole
render at each batch of frames (one inference for the faces of ``batch``
frames, :meth:`~faceweave.render.FaceRenderer.render_frames`); with
``--video``, also the whole video swap's frames per second at each batch
(``VideoOptions.neural_batch``: decode, tracking, two render threads,
watermark, encode).

    .venv/bin/python benchmarks/neural_frame.py [--frames 60] [--batch 1 4 8] [--video CLIP] [--data DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from faceweave.compositing.plans import PlanSlot, PlanUse  # noqa: E402
from faceweave.options import SwapOptions  # noqa: E402
from faceweave.pipeline import FaceSwapper  # noqa: E402
from faceweave.provenance.stamp import Provenance, watermarker  # noqa: E402
from faceweave.timing import cpu_times  # noqa: E402
from faceweave.types import Image  # noqa: E402
from neural_path import DEFAULT_DATA, SOURCE, models_folder  # noqa: E402

TARGET = "single/woman_east_asian.png"
WIDTH, HEIGHT = 1280, 720
#: frames per face plan, as ``PlanPolicy`` makes them
PLAN_EVERY = 6


class TimedModel:
    """A model whose ``run`` adds the calling thread's CPU seconds to ``cpu_s``."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.inputs, self.outputs = model.inputs, model.outputs
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.calls = 0

    def run(self, feeds: Mapping[str, np.ndarray]) -> Any:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return self.model.run(feeds)
        finally:
            self.cpu_s += time.thread_time() - cpu
            self.wall_s += time.perf_counter() - start
            self.calls += 1


def frame_720p(path: Path, lines: int = HEIGHT) -> np.ndarray:
    """The photo at ``lines`` lines (720 at most), cut to 1280 columns at
    most, padded to 1280x720 (edges replicated), RGB uint8."""
    image = cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)
    scale = min(lines, HEIGHT) / image.shape[0]
    image = cv2.resize(image, (round(image.shape[1] * scale), min(lines, HEIGHT)), interpolation=cv2.INTER_AREA)
    left = max(0, (image.shape[1] - WIDTH) // 2)
    image = np.ascontiguousarray(image[:, left : left + WIDTH])
    top, side = HEIGHT - image.shape[0], WIDTH - image.shape[1]
    return cv2.copyMakeBorder(image, top // 2, top - top // 2, side // 2, side - side // 2, cv2.BORDER_REPLICATE)


def route(folder: Path, compositing: str) -> FaceSwapper:
    options = SwapOptions.model_validate(
        {"swapper": "inswapper_128", "compositing": compositing, "runtime": {"models_dir": str(folder)}}
    )
    swapper = FaceSwapper(options, provenance=Provenance.new(watermark=False))
    swapper.swapper.model = TimedModel(swapper.swapper.model)  # type: ignore[attr-defined]
    return swapper


def per_frame(swapper: FaceSwapper, pixels: np.ndarray, chosen: list, frames: int) -> dict[str, list[float]]:
    """CPU ms per frame: the whole render, the model call, and each stage."""
    model: TimedModel = swapper.swapper.model  # type: ignore[attr-defined]
    profile = swapper.renderer.profile("video")
    figures: dict[str, list[float]] = {}
    slot = PlanSlot(0)
    for n in range(frames + PLAN_EVERY):  # the first six warm up
        if n % PLAN_EVERY == 0:
            slot = PlanSlot(n)
        plans = [PlanUse(slot, makes=n % PLAN_EVERY == 0)]
        timings: dict[str, float] = {}
        model.cpu_s = 0.0
        cpu = time.thread_time()
        swapper.renderer.render(swapper.swapper, pixels, chosen, timings, [None], profile=profile, plans=plans)
        total = (time.thread_time() - cpu) * 1000.0
        if n < PLAN_EVERY:
            continue
        model_ms = model.cpu_s * 1000.0
        rows = {"render": total, "model": model_ms, "outside": total - model_ms}
        rows |= {f"  {k}": v for k, v in cpu_times(timings).items()}
        for key, value in rows.items():
            figures.setdefault(key, []).append(value)
    return figures


def watermark_ms(pixels: np.ndarray, frames: int) -> list[float]:
    provenance = Provenance.new(watermark=True)
    marker = watermarker(provenance).frame_marker(WIDTH, HEIGHT, provenance.payload)
    luma = np.ascontiguousarray(cv2.cvtColor(pixels, cv2.COLOR_RGB2YUV)[..., 0])
    out = []
    for _ in range(frames):
        plane = luma.copy()
        cpu = time.thread_time()
        marker.mark_luma(plane)
        out.append((time.thread_time() - cpu) * 1000.0)
    return out


def batch_fps(swapper: FaceSwapper, pixels: np.ndarray, chosen: list, batch: int, frames: int) -> dict[str, float]:
    """Frames per second at ``batch`` frames per inference: of the whole
    render from this thread's CPU (what one core does when nothing else
    runs: steadier than the wall clock on a shared machine) and from the
    wall clock, and of the model call alone (wall clock).  Each frame makes
    its face plan (no video here)."""
    from faceweave.render import FrameFaces  # here: the rest of the benchmark also runs on the release before

    model: TimedModel = swapper.swapper.model  # type: ignore[attr-defined]
    profile = swapper.renderer.profile("video")
    rounds = max(1, frames // batch)
    group = [FrameFaces(pixels, tuple(chosen))] * batch
    swapper.renderer.render_frames(swapper.swapper, group, {}, profile=profile)
    model.cpu_s = model.wall_s = 0.0
    start, cpu = time.perf_counter(), time.thread_time()
    for _ in range(rounds):
        swapper.renderer.render_frames(swapper.swapper, group, {}, profile=profile)
    wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
    done = rounds * batch
    return {  # the model's own threads are not this thread's: its figure is the wall clock's
        "render cpu": done / cpu,
        "model wall": done / model.wall_s,
        "render wall": done / wall,
    }


def video_fps(swapper: FaceSwapper, video: Path, source: Path, batch: int, out: Path, seconds: float) -> float:
    """Frames per second of a whole video swap (decode, tracking, render
    threads, watermark, encode) of the first ``seconds`` with ``neural_batch=batch``."""
    from faceweave.video.pipeline import VideoOptions, VideoSwapper

    options = VideoOptions(neural_batch=batch, end=seconds, audio=False, provenance=Provenance.new(watermark=True))
    return VideoSwapper(swapper).swap_video([source], video, out / f"batch_{batch}.mp4", options=options).fps


def report(label: str, figures: dict[str, list[float]]) -> None:
    print(f"{label}")
    for key, values in figures.items():
        print(f"  {key:24s} {statistics.median(values):7.2f} ms (mean {statistics.fmean(values):6.2f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--batch", type=int, nargs="*", default=[])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--target", default=TARGET)
    parser.add_argument("--lines", type=int, default=HEIGHT, help="the photo's height in the frame (a smaller face)")
    parser.add_argument("--video", type=Path, help="also swap this video at each --batch (whole pipeline fps)")
    parser.add_argument("--video-seconds", type=float, default=3.0, help="how much of --video")
    args = parser.parse_args(argv)
    cv2.setNumThreads(1)
    from threadpoolctl import threadpool_limits

    pixels = frame_720p(args.data / args.target, args.lines)
    with threadpool_limits(1, "blas"), tempfile.TemporaryDirectory() as tmp:
        folder = models_folder(Path(tmp))
        routes = {mode: route(folder, mode) for mode in ("faceweave", "facefusion")}
        base = routes["faceweave"]
        source = base.load_sources([args.data / SOURCE])[0]
        faces, indices = base.targets.select(Image(pixels=pixels), {})
        chosen = [(faces[i], source) for i in indices[:1]]
        print(f"720p frame of {args.target}: face {chosen[0][0].size:.0f} px")
        for mode, swapper in routes.items():
            report(f"--compositing {mode}", per_frame(swapper, pixels, chosen, args.frames))
        report("watermark (mark_luma, encoder thread)", {"mark_luma": watermark_ms(pixels, args.frames)})
        for mode, swapper in routes.items():
            for batch in args.batch:
                fps = batch_fps(swapper, pixels, chosen, batch, args.frames)
                print(f"--compositing {mode} batch {batch}: " + ", ".join(f"{k} {v:6.1f} fps" for k, v in fps.items()))
        for mode, swapper in routes.items():
            for batch in args.batch if args.video else []:
                fps = video_fps(swapper, args.video, args.data / SOURCE, batch, Path(tmp), args.video_seconds)
                print(f"--compositing {mode} video {args.video.name} batch {batch}: {fps:5.1f} fps")
        for swapper in routes.values():
            swapper.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
