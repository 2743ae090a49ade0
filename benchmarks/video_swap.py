"""Video swap throughput against plain decode+encode of the same video, with
per-stage time and peak memory, side by side in one run.

For each clip in ../shared/data/faces/video: frames per second of (a) a plain
decode + encode with the same settings and (b) the swap pipeline, their
ratio, the milliseconds per frame of each stage, and the peak resident
memory of each run (every run in its own process).  ``--loop 10`` also
swaps the first clip looped ten times, to show memory does not grow with
length.  The test data has no 720p clip with one face, so one is derived
from the talking-head clip (scaled to 720 lines on a 1280x720 canvas).

    .venv/bin/python benchmarks/video_swap.py [--data ../shared/data/faces] [--loop 10] [--repeat 3] [--only NAME]

``--repeat N`` runs copy and swap of each clip N times, in alternation, and
prints the medians (and the range of the swap's fps): on a shared machine
single runs move by 10 % and more.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "faces"
SOURCE = "single/biden2.jpg"


def child(mode: str, video: str, source: str, out: str, faces: str = "many") -> dict:
    from faceweave.options import SelectionOptions, SwapOptions
    from faceweave.pipeline import FaceSwapper
    from faceweave.video.io import VideoReader, VideoWriter
    from faceweave.video.pipeline import VideoOptions, VideoSwapper

    start = time.perf_counter()
    if mode == "copy":
        frames = 0
        # the same encoder settings as the swap run (VideoOptions' defaults = the CLI's)
        settings = VideoOptions()
        with (
            VideoReader(video) as reader,
            VideoWriter(
                out, info=reader.info, audio_from=video, quality=settings.crf, preset=settings.preset
            ) as writer,
        ):
            for frame in reader:
                writer.write(frame.pixels, frame.time)
                frames += 1
        timings: dict = {}
    else:
        # the CLI's video working size (192 px); every face, or the CLI's
        # default (the largest face) for the one-face 720p clip
        options = SwapOptions(selection=SelectionOptions(mode=faces), working_size=192)
        with FaceSwapper(options) as swapper:
            swapper.prepare()
            start = time.perf_counter()
            report = VideoSwapper(swapper).swap_video([source], video, out, options=VideoOptions())
        frames, timings = report.frames, report.timings_ms
    seconds = time.perf_counter() - start
    return {
        "frames": frames,
        "fps": frames / seconds,
        "ms_per_frame": {k: v / max(frames, 1) for k, v in timings.items()},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def run_child(mode: str, video: Path, source: Path, out: Path, faces: str = "many") -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(video), str(source), str(out), faces],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(video: Path, source: Path, tmp: Path, faces: str, repeat: int) -> tuple[dict, dict, tuple[float, float]]:
    """Copy and swap of ``video``, ``repeat`` times in alternation: the
    median run of each (by fps), and the swap's lowest and highest fps."""
    copies, swaps = [], []
    for _ in range(max(1, repeat)):
        copies.append(run_child("copy", video, source, tmp / "copy.mp4"))
        swaps.append(run_child("swap", video, source, tmp / "swap.mp4", faces))

    def median_run(runs: list[dict]) -> dict:
        middle = statistics.median_low([r["fps"] for r in runs])
        run = dict(next(r for r in runs if r["fps"] == middle))
        run["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
        return run

    fps = [r["fps"] for r in swaps]
    return median_run(copies), median_run(swaps), (min(fps), max(fps))


def derive_720p(video: Path, out: Path) -> None:
    """A 1280x720 clip with one face: the talking-head clip scaled to 720
    lines and centred on a grey 16:9 canvas (the test data has no 720p clip
    with a single face), with its audio."""
    import cv2
    import numpy as np

    from faceweave.video.io import VideoReader, VideoWriter

    with VideoReader(video) as reader:
        info = reader.info
        with VideoWriter(out, info=info, audio_from=video, quality=18) as writer:
            for frame in reader:
                h, w = frame.pixels.shape[:2]
                side = 720
                scaled = cv2.resize(frame.pixels, (w * side // h, side), interpolation=cv2.INTER_CUBIC)
                canvas = np.full((720, 1280, 3), 128, np.uint8)
                x0 = (1280 - scaled.shape[1]) // 2
                canvas[:, x0 : x0 + scaled.shape[1]] = scaled
                writer.write(canvas, frame.time)


def swap_720p_start(data: Path, frames: int, *, workers: int = 2) -> None:
    """The first ``frames`` frames of the derived 720p clip swapped with
    ``SOURCE`` (one face, the CLI's video working size 192), in a
    temporary folder: what the step and kernel benchmarks record calls from."""
    from faceweave.options import SelectionOptions, SwapOptions
    from faceweave.pipeline import FaceSwapper
    from faceweave.video.pipeline import VideoOptions, VideoSwapper

    with tempfile.TemporaryDirectory() as tmp:
        clip = Path(tmp) / "720p.mp4"
        derive_720p(data / "video" / "lp_d18_talking_face.mp4", clip)
        options = SwapOptions(selection=SelectionOptions(mode="one"), working_size=192)
        with FaceSwapper(options) as swapper:
            settings = VideoOptions(end=(frames + 0.5) / 30.0, workers=workers)
            VideoSwapper(swapper).swap_video([data / SOURCE], clip, Path(tmp) / "out.mp4", options=settings)


def loop_video(video: Path, times: int, out: Path) -> None:
    from faceweave.video.io import VideoReader, VideoWriter

    with VideoReader(video) as first:
        info = first.info
    with VideoWriter(out, info=info) as writer:
        for _ in range(times):
            with VideoReader(video) as reader:
                for frame in reader:
                    writer.write(frame.pixels)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(*sys.argv[2:7])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--loop", type=int, default=0, help="also swap the first clip looped this many times")
    ap.add_argument(
        "--no-720p", action="store_true", help="skip the 1280x720 one-face clip derived from the talking head"
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs of each clip, in alternation; medians are printed")
    ap.add_argument("--only", default="", help="only the clips whose name contains this")
    args = ap.parse_args()
    videos = sorted((args.data / "video").glob("*.mp4"))
    if not videos:
        print(f"no videos in {args.data / 'video'}", file=sys.stderr)
        return 2
    source = args.data / SOURCE
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        talking = args.data / "video" / "lp_d18_talking_face.mp4"
        if talking.is_file() and not args.no_720p:
            derived = Path(tmp) / "talking_face_720p_derived.mp4"
            derive_720p(talking, derived)
            videos = [*videos, derived]
        first = videos[0]
        videos = [v for v in videos if args.only in v.name]
        for video in videos:
            faces = "one" if video.name.startswith("talking_face_720p") else "many"
            rows.append((video.name, *measure(video, source, Path(tmp), faces, args.repeat)))
        if args.loop > 1 and args.only in first.name:
            looped = Path(tmp) / f"looped_x{args.loop}.mp4"
            loop_video(first, args.loop, looped)
            rows.append((looped.name, *measure(looped, source, Path(tmp), "many", args.repeat)))
    span = "  swap fps range" if args.repeat > 1 else ""
    print(
        f"{'video':34s} {'frames':>6s} {'copy fps':>9s} {'swap fps':>9s} {'ratio':>6s} {'copy MB':>8s} "
        f"{'swap MB':>8s}{span}  swap ms/frame by stage"
    )
    for name, copy, swap, (low, high) in rows:
        stages = " ".join(f"{k}={v:.1f}" for k, v in sorted(swap["ms_per_frame"].items()))
        spread = f"  {low:6.1f}-{high:<6.1f}" if args.repeat > 1 else ""
        print(
            f"{name:34s} {swap['frames']:6d} {copy['fps']:9.1f} {swap['fps']:9.1f} {swap['fps'] / copy['fps']:6.2f} "
            f"{copy['peak_rss_mb']:8.0f} {swap['peak_rss_mb']:8.0f}{spread}  {stages}"
        )
    print(
        "fps over the whole run after models are loaded; peak RSS of each run's own process; working size 192;"
        " --faces many, except the derived 720p one-face clip (--faces one, the CLI default)"
        + (f"; medians of {args.repeat} runs in alternation (peak RSS: the highest)" if args.repeat > 1 else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
