"""The CPU budget: CPU milliseconds per frame, by stage and for the whole
process, and the wall frames per second, for each video case beside a plain
PyAV decode + x264 encode of the same clip (at the product's preset), and
for the 1080p photo; optionally beside an earlier release, in alternation.

Cases (``../shared/data/faces``):

- ``720p 1 face``: the talking-head clip scaled to 720 lines on a 1280x720
  canvas (the data has no 720p one-face clip), ``--faces one``;
- ``720p unrendered``: the same clip through the same pipeline with the
  render left out (each planned frame passed on as it was): decode,
  detection, tracking, the watermark and the encode, so the render's share
  of the case above is the difference;
- ``talking head``: ``lp_d18_talking_face.mp4`` as it is;
- ``1080p street``: ``fn_pedestrians_1080p.mp4``, ``--faces many``;
- ``1080p photo``: one face scaled and cut to 1920x1080, one whole
  ``FaceSwapper.swap()`` call (PNG decoded, faces found, source recalled);
- ``live 720p``, ``live 480p``: one ``faceweave live`` session fed the
  talking head on a 1280x720 or 854x480 canvas at 30 fps over UDP on
  loopback (``benchmarks/live.py``'s feeder and reader, in the measuring
  process); fps is the rate read back, CPU the session process's CPU
  (all its threads, sampled from ``/proc``) over the frames read back
  after the warm-up, and the glass-to-glass and the session's own latency
  are printed under the row;
- ``live 2x720p``, ``live 4x480p@15``: two 720p sessions fed at 30 fps, and
  four 480p sessions fed at 15 fps, at once: the slowest stream's fps, a
  session's CPU per frame (the mean), the worst p95s;
- ``neural 720p``: ``neural_frame.py``'s 720p frame rendered as a video
  renders it by the random-weight inswapper_128-sized stand-in (the
  model's call counted apart): the CPU per frame outside inference with
  each compositing and the encoder's watermark.

After the table, ``targets`` says for each of the issue's targets that ran
(issue 29: 35 ms of CPU per 720p frame, 0.45x the transcode, live 720p at
25 fps with session p95 at most 120 ms, two 720p streams at 15 fps each,
four 480p streams at 15 fps each with every frame swapped, the photo at
0.6x an earlier release's time with ``--against``, the neural path under
8 ms outside inference) this tree's figure, met or not, and the largest
parts of a frame's CPU.

Each run is its own process.  ``process CPU`` is the process's user + system
time over the frames (FFmpeg's own threads included); the stage columns are
the CPU time of the threads that ran each stage (``faceweave.timing``), so
they add up to less than the process: ``other`` is the rest (FFmpeg's
codec threads, mediapipe's graph threads, where the detector and mesh
models run, model start-up such as the tracker's pool of mesh graphs, the
interpreter and the queues).  The machine drifts: compare within one run.

    .venv/bin/python benchmarks/budget.py [--repeat 3] [--frames 150] [--against REV] [--only NAME]
        [--working-size 192]

``--against REV`` checks REV out with ``git worktree`` into a temporary
folder, builds its compiled kernels with the flags of its own
``pyproject.toml``, and runs the same cases from it with this virtual
environment (``PYTHONPATH`` first), alternating this tree and REV every
round; a release whose stages record no CPU time shows ``-`` there.
``--working-size`` sets the video cases' working size (the CLI's is 192):
only part of the render grows with it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "faces"
SOURCE = "single/biden2.jpg"
PHOTO = "identity/matt_damon/df_img30.jpg"
#: the budget's stages: timing names (``timings_ms`` keys) summed into each
STAGES = {
    "decode": ("decode",),
    "detect": ("detect", "mesh", "embed"),
    "track": ("track", "colour"),
    "crop": ("crop",),
    "swap": ("swap", "expression"),
    "masks": ("segment", "hands"),
    "blend": ("blend",),
    "paste": ("paste",),
    "mark": ("mark",),
    "encode": ("encode",),
}


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _stage_cpu(timings: dict[str, float], per: int) -> dict[str, float | None]:
    """CPU ms per frame of each budget stage (``None``: not recorded)."""
    out: dict[str, float | None] = {}
    for stage, names in STAGES.items():
        found = [timings[n + ".cpu"] for n in names if n + ".cpu" in timings]
        out[stage] = sum(found) / per if found else None
    return out


def child_video(mode: str, video: str, source: str, out: str, faces: str, frames: int, working_size: int) -> dict:
    """One run of a video case: ``copy`` (the plain transcode), ``swap``, or
    ``tracked`` (the swap's pipeline with the render left out: each planned
    frame passed on as it was, so decode, detection, tracking, the watermark
    and the encode are what is left)."""
    from faceweave.options import SelectionOptions, SwapOptions
    from faceweave.pipeline import FaceSwapper
    from faceweave.video.io import VideoReader, VideoWriter, probe_video
    from faceweave.video.pipeline import VideoOptions, VideoSwapper

    class Unrendered(VideoSwapper):
        def render(self, pixels, plan, timings, *, speech=None):  # type: ignore[no-untyped-def]
            return pixels

    limit = frames or None
    # the first ``frames`` frames: the run ends half a frame after the last
    end = None if limit is None else (limit - 0.5) / float(probe_video(video).fps)
    settings = VideoOptions(end=end)
    timings: dict[str, float] = {}
    if mode == "copy":
        cpu, start, count = _cpu_s(), time.perf_counter(), 0
        with (
            VideoReader(video) as reader,
            VideoWriter(
                out, info=reader.info, audio_from=video, quality=settings.crf, preset=settings.preset
            ) as writer,
        ):
            for frame in reader:
                if limit is not None and count >= limit:
                    break
                writer.write(frame.pixels, frame.time)
                count += 1
    else:
        options = SwapOptions(selection=SelectionOptions(mode=faces), working_size=working_size)
        pipeline = Unrendered if mode == "tracked" else VideoSwapper
        with FaceSwapper(options) as swapper:
            swapper.prepare()
            cpu, start = _cpu_s(), time.perf_counter()
            report = pipeline(swapper).swap_video([source], video, out, options=settings)
        count, timings = report.frames, dict(report.timings_ms)
    seconds, cpu = time.perf_counter() - start, _cpu_s() - cpu
    per = max(count, 1)
    return {"frames": count, "fps": count / seconds, "cpu_ms": 1000.0 * cpu / per, "stages": _stage_cpu(timings, per)}


def child_photo(source: str, target: str, repeat: int) -> dict:
    from faceweave.pipeline import FaceSwapper

    with FaceSwapper() as swapper:
        swapper.prepare()
        swapper.swap([source], target)  # warm: the source prepared and cached
        walls, cpus, stages = [], [], []
        for _ in range(repeat):
            cpu, start = _cpu_s(), time.perf_counter()
            result = swapper.swap([source], target)
            walls.append(time.perf_counter() - start)
            cpus.append(_cpu_s() - cpu)
            stages.append(_stage_cpu(dict(result.timings_ms), 1))
    middle = sorted(range(repeat), key=lambda k: walls[k])[repeat // 2]
    return {"frames": 1, "fps": 1.0 / walls[middle], "cpu_ms": 1000.0 * cpus[middle], "stages": stages[middle]}


def child_live(size: str, source: str, video: str, seconds: float, count: int = 1, fps: float = 30.0) -> dict:
    """``count`` live sessions at once, each fed at ``fps``: the slowest
    stream's frames per second, the median p50 and the worst p95s, the
    mean drop share, and a session's CPU per frame after the warm-up (the
    mean over the sessions; the whole run's where ``/proc`` gave no samples)."""
    from live import SIZES, canvas_frames, run_streams

    frames, rate = canvas_frames(Path(video), SIZES[size])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    streams = run_streams(count, frames, rate, fps, seconds, Path(source))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    written = sum(s.frames_out for s in streams)
    sessions = [s.session_p95_ms for s in streams if s.session_p95_ms is not None]
    steady = [s.steady_cpu_ms for s in streams if s.steady_cpu_ms is not None]
    return {
        "frames": written,
        "fps": min(s.fps for s in streams),
        # after the warm-up where it was sampled, else the whole run's (start-up and model loading in)
        "cpu_ms": statistics.mean(steady) if steady else 1000.0 * cpu / max(written, 1),
        "stages": {stage: None for stage in STAGES},
        "latency": [
            statistics.median(s.latency_p50_ms for s in streams),
            max(s.latency_p95_ms for s in streams),
            max(sessions) if sessions else None,
            statistics.mean(s.dropped_share for s in streams),
        ],
    }


def child_neural(frames: int) -> dict:
    """The neural path's own CPU per 720p frame (``neural_frame.py``): a
    face photo on a 1280x720 frame rendered as a video renders it by the
    inswapper_128-sized stand-in, the model's call counted apart, with
    each compositing, plus the encoder's watermark on the Y plane."""
    from threadpoolctl import threadpool_limits

    from faceweave.types import Image
    from neural_frame import PLAN_EVERY, TARGET, frame_720p, models_folder, per_frame, route, watermark_ms
    from neural_frame import SOURCE as NEURAL_SOURCE

    pixels = frame_720p(DEFAULT_DATA / TARGET)
    outside: dict[str, float] = {}
    with threadpool_limits(1, "blas"), tempfile.TemporaryDirectory() as tmp:
        folder = models_folder(Path(tmp))
        for mode in ("faceweave", "facefusion"):
            with route(folder, mode) as swapper:
                source = swapper.load_sources([DEFAULT_DATA / NEURAL_SOURCE])[0]
                faces, indices = swapper.targets.select(Image(pixels=pixels), {})
                chosen = [(faces[i], source) for i in indices[:1]]
                start = time.perf_counter()
                figures = per_frame(swapper, pixels, chosen, frames)
                wall = time.perf_counter() - start
                outside[mode] = statistics.median(figures["outside"])
    mark = statistics.median(watermark_ms(pixels, frames))
    return {
        "frames": frames,
        "fps": (frames + PLAN_EVERY) / wall,  # the facefusion route's renders, its warm-up frames included
        "cpu_ms": outside["facefusion"] + mark,
        "stages": {stage: None for stage in STAGES},
        "neural": {"outside": outside, "mark": mark, "face": float(chosen[0][0].size)},
    }


def run_child(tree: Path, args: list[str]) -> dict | None:
    """One child run from ``tree``; ``None`` (said on stderr) when an earlier
    release cannot run the case (a benchmark helper it lacks)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env, cwd=tree
    )
    if proc.returncode != 0:
        if tree == ROOT:
            raise SystemExit(f"the {args[0]} case failed: {proc.stderr.strip()[-2000:]}")
        print(f"{tree.name}: the {args[0]} case did not run ({proc.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cases(data: Path, tmp: Path) -> list[tuple[str, list[str]]]:
    """(name, child arguments without the output path) of each case."""
    from faceweave.io import read_image, write_image
    from image_swap import fit_frame
    from video_swap import derive_720p

    source, talking = data / SOURCE, data / "video" / "lp_d18_talking_face.mp4"
    derived = tmp / "talking_face_720p.mp4"
    derive_720p(talking, derived)
    photo = tmp / "photo_1080p.png"
    write_image(photo, fit_frame(read_image(data / PHOTO).pixels, 1920, 1080))
    return [
        ("720p 1 face", ["video", str(derived), str(source), "one"]),
        ("720p unrendered", ["tracked", str(derived), str(source), "one"]),
        ("talking head", ["video", str(talking), str(source), "many"]),
        ("1080p street", ["video", str(data / "video" / "fn_pedestrians_1080p.mp4"), str(source), "many"]),
        ("1080p photo", ["photo", str(source), str(photo)]),
        ("live 720p", ["live", "720p", str(source), str(talking), "1", "30"]),
        ("live 480p", ["live", "480p", str(source), str(talking), "1", "30"]),
        ("live 2x720p", ["live", "720p", str(source), str(talking), "2", "30"]),
        ("live 4x480p@15", ["live", "480p", str(source), str(talking), "4", "15"]),
        ("neural 720p", ["neural"]),
    ]


def measure(
    trees: dict[str, Path], child: list[str], tmp: Path, repeat: int, frames: int, working_size: int = 192
) -> dict[str, list[dict]]:
    """Runs of ``child`` for each tree (and the plain transcode, for a
    video), ``repeat`` rounds, the order turned round every round."""
    runs: dict[str, list[dict]] = {}
    order = ["copy", *trees] if child[0] in ("video", "tracked") else list(trees)
    for round_ in range(max(1, repeat)):
        for who in order if round_ % 2 == 0 else order[::-1]:
            if who == "copy":
                args = ["copy", child[1], child[2], str(tmp / "copy.mp4"), child[3], str(frames), str(working_size)]
                result = run_child(trees["this tree"], args)
            elif child[0] in ("video", "tracked"):
                mode = "swap" if child[0] == "video" else "tracked"
                args = [mode, child[1], child[2], str(tmp / "swap.mp4"), child[3], str(frames), str(working_size)]
                result = run_child(trees[who], args)
            elif child[0] == "live":
                result = run_child(trees[who], [*child, str(max(5.0, frames / 30.0))])
            elif child[0] == "neural":
                result = run_child(trees[who], ["neural", str(max(12, frames // 4))])
            else:
                result = run_child(trees[who], ["photo", child[1], child[2], str(max(3, repeat * 2 + 1))])
            runs.setdefault(who, [])
            if result is not None:
                runs[who].append(result)
    return runs


def median_run(runs: list[dict]) -> dict:
    """The run of median fps, with the fps range."""
    ordered = sorted(runs, key=lambda r: r["fps"])
    return {**ordered[len(ordered) // 2], "low": ordered[0]["fps"], "high": ordered[-1]["fps"]}


def row(name: str, who: str, run: dict, copy: dict | None) -> str:
    ratio = f"{run['fps'] / copy['fps']:5.2f}" if copy is not None else "    -"
    named = sum(v for v in run["stages"].values() if v is not None)
    stages = " ".join("      -" if v is None else f"{v:7.1f}" for v in run["stages"].values())
    other = run["cpu_ms"] - named if named else None
    rest = "      -" if other is None else f"{other:7.1f}"
    fps = f"{run['fps']:6.1f} ({run['low']:.1f}-{run['high']:.1f})"
    return f"{name:13s} {who:11s} {run['frames']:6d} {fps:>19s} {ratio} {run['cpu_ms']:8.1f}  {stages} {rest}"


def report(results: list[tuple[str, dict[str, list[dict]]]], working_size: int = 192) -> None:
    heads = " ".join(f"{s:>7s}" for s in [*STAGES, "other"])
    print(f"{'case':13s} {'run':11s} {'frames':>6s} {'fps (range)':>19s} ratio {'CPU ms':>8s}  {heads}")
    for name, runs in results:
        copy = median_run(runs["copy"]) if "copy" in runs else None
        for who, group in runs.items():
            if not group:
                continue
            run = median_run(group)
            print(row(name, who, run, None if who == "copy" else copy))
            if "latency" in run:
                p50, p95, session, dropped = run["latency"]
                print(
                    f"{'':25s} glass-to-glass p50 {p50:.0f} / p95 {p95:.0f} ms, session p95 {session} ms,"
                    f" {100 * dropped:.0f} % of the input dropped"
                )
    print(
        "fps: wall frames per second after models are loaded (photo: whole swap() calls per second), median run;"
        "\nratio: swap fps over the plain decode + x264 encode of the same frames ('copy', the product's preset);"
        "\nCPU ms: the process's user + system CPU per frame; stage columns: CPU ms per frame of the threads that"
        "\nran each stage; other: the rest (FFmpeg's and mediapipe's own threads, start-up, the interpreter);"
        f" video working size {working_size};\n'720p unrendered': that case's pipeline with the render left out"
        " (decode, detection, tracking, watermark, encode);"
        "\nlive: fps read back (of several streams: the slowest), a session process's CPU per frame read back"
        " after the warm-up;\nneural 720p: CPU ms outside inference per frame, facefusion compositing,"
        " with the watermark"
    )
    lines = target_lines(results)
    if lines:
        print("\ntargets (this tree):")
        for line in lines:
            print("  " + line)


#: the issue's targets on the 2-core machine (issue 29): CPU ms per 720p
#: one-face frame, fps over the plain transcode's, one live 720p stream
#: (fps, session p95 ms), fps of each of two live 720p streams and of each
#: of four 480p streams fed at 15 fps (every frame swapped), the photo's
#: time against an earlier release's, the neural path's CPU outside inference
TARGETS = {"cpu_ms": 35.0, "ratio": 0.45, "live_fps": 25.0, "live_p95": 120.0, "multi_fps": 15.0}
PHOTO_TARGET, NEURAL_TARGET = 0.6, 8.0


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def _holding(run: dict) -> str:
    """The render's stages and the rest, largest first: what holds a frame's CPU."""
    named = {k: v for k, v in run["stages"].items() if v is not None}
    named["other"] = run["cpu_ms"] - sum(named.values())
    top = sorted(named.items(), key=lambda kv: -kv[1])[:4]
    return ", ".join(f"{k} {v:.1f}" for k, v in top)


def target_lines(results: list[tuple[str, dict[str, list[dict]]]]) -> list[str]:
    """One line per target of the cases that ran: this tree's median run
    against the target, met or not, and where a frame's CPU goes."""
    runs = {name: {who: median_run(group) for who, group in found.items() if group} for name, found in results}
    lines = []
    video = runs.get("720p 1 face", {})
    if "this tree" in video and "copy" in video:
        run, copy = video["this tree"], video["copy"]
        ratio = run["fps"] / copy["fps"]
        lines.append(
            f"720p one face: {run['cpu_ms']:.1f} ms CPU per frame (at most {TARGETS['cpu_ms']:.0f}):"
            f" {_verdict(run['cpu_ms'] <= TARGETS['cpu_ms'])}; largest: {_holding(run)}"
        )
        lines.append(
            f"720p one face: {ratio:.2f}x the plain transcode (at least {TARGETS['ratio']}):"
            f" {_verdict(ratio >= TARGETS['ratio'])}"
        )
        bare = runs.get("720p unrendered", {}).get("this tree")
        if bare is not None:
            lines.append(
                f"  the pipeline without the render: {bare['cpu_ms']:.1f} ms CPU per frame;"
                f" the render: {run['cpu_ms'] - bare['cpu_ms']:.1f}"
            )
    lines += _live_lines(runs)
    lines += _photo_lines(runs.get("1080p photo", {}))
    neural = runs.get("neural 720p", {}).get("this tree")
    if neural is not None:
        figures = neural["neural"]
        outside = figures["outside"]
        best = min(outside.values())
        lines.append(
            f"neural path outside inference, {figures['face']:.0f} px face at 720p: faceweave compositing"
            f" {outside['faceweave']:.1f}, facefusion {outside['facefusion']:.1f} ms CPU per frame, the"
            f" watermark {figures['mark']:.1f} more (at most {NEURAL_TARGET:.0f}): {_verdict(best <= NEURAL_TARGET)}"
            " with the faster"
        )
    return lines


def _live_lines(runs: dict[str, dict[str, dict]]) -> list[str]:
    lines = []
    one = runs.get("live 720p", {}).get("this tree")
    if one is not None:
        p95 = one["latency"][2]
        met = one["fps"] >= TARGETS["live_fps"] and p95 is not None and p95 <= TARGETS["live_p95"]
        lines.append(
            f"live 720p: {one['fps']:.1f} fps, session p95 {p95} ms (at least {TARGETS['live_fps']:.0f} fps,"
            f" p95 at most {TARGETS['live_p95']:.0f} ms): {_verdict(met)}; {one['cpu_ms']:.1f} ms of the"
            " session's CPU per frame"
        )
    for name, what in (("live 2x720p", "two 720p streams"), ("live 4x480p@15", "four 480p streams fed at 15 fps")):
        run = runs.get(name, {}).get("this tree")
        if run is None:
            continue
        dropped = run["latency"][3]
        # fed at 15 fps, a stream read back at 95 % of it over the measured span is held (``live.py``'s capacity)
        fed15 = name != "live 2x720p"
        met = run["fps"] >= TARGETS["multi_fps"] * (0.95 if fed15 else 1.0) and (not fed15 or dropped <= 0.01)
        lines.append(
            f"{what}: the slowest {run['fps']:.1f} fps, {100 * dropped:.0f} % of the input dropped (at least"
            f" {TARGETS['multi_fps']:.0f} fps each{', every frame swapped' if '480p' in name else ''}):"
            f" {_verdict(met)}; {run['cpu_ms']:.1f} ms of a session's CPU per frame"
        )
    return lines


def _photo_lines(runs: dict[str, dict]) -> list[str]:
    here = runs.get("this tree")
    if here is None:
        return []
    others = [(who, run) for who, run in runs.items() if who != "this tree"]
    if not others:
        per = 1000.0 / here["fps"]
        return [f"1080p photo: {per:.0f} ms per swap(); its target is against a release (--against REV)"]
    who, then = others[0]
    ratio = then["fps"] / here["fps"]
    cpu = here["cpu_ms"] / then["cpu_ms"] if then["cpu_ms"] else math.nan
    return [
        f"1080p photo: {ratio:.2f}x {who}'s time per swap() ({cpu:.2f}x its CPU; at most {PHOTO_TARGET}):"
        f" {_verdict(ratio <= PHOTO_TARGET)}; largest: {_holding(here)}"
    ]


def against_tree(rev: str, tmp: Path) -> Path:
    tree = tmp / f"against-{rev}"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True, capture_output=True
    )
    build_kernels(tree)
    return tree


def build_kernels(tree: Path) -> None:
    """The compiled kernels of a checked-out release, built in place as its
    install would: each ``[[tool.setuptools.ext-modules]]`` of its
    ``pyproject.toml`` with its own compiler flags (none: nothing to build)."""
    include, suffix = sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX")
    with (tree / "pyproject.toml").open("rb") as file:
        modules = tomllib.load(file).get("tool", {}).get("setuptools", {}).get("ext-modules", [])
    for module in modules:
        target = tree / (module["name"].replace(".", "/") + suffix)
        sources = [str(tree / source) for source in module["sources"]]
        flags = list(module.get("extra-compile-args", []))
        command = ["cc", *flags, "-shared", "-fPIC", f"-I{include}", *sources, "-o", str(target)]
        subprocess.run(command, check=True, capture_output=True)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, rest = sys.argv[2], sys.argv[3:]
        if kind == "photo":
            print(json.dumps(child_photo(rest[0], rest[1], int(rest[2]))))
        elif kind == "live":
            size, source, video, count, fps, seconds = rest
            print(json.dumps(child_live(size, source, video, float(seconds), int(count), float(fps))))
        elif kind == "neural":
            print(json.dumps(child_neural(int(rest[0]))))
        else:
            print(json.dumps(child_video(kind, rest[0], rest[1], rest[2], rest[3], int(rest[4]), int(rest[5]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--repeat", type=int, default=3, help="rounds, in alternation; medians are printed")
    ap.add_argument("--frames", type=int, default=150, help="frames of each clip (0: all)")
    ap.add_argument("--against", default="", help="an earlier revision to run beside this tree")
    ap.add_argument("--only", default="", help="only the cases whose name contains this")
    ap.add_argument("--working-size", type=int, default=192, help="the video cases' working size (the CLI's: 192)")
    args = ap.parse_args()
    if not (args.data / "video").is_dir():
        print(f"no test data at {args.data}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        trees = {"this tree": ROOT}
        if args.against:
            trees[args.against[:11]] = against_tree(args.against, tmp)
        try:
            chosen = [(n, c) for n, c in cases(args.data, tmp) if args.only in n]
            results = [(n, measure(trees, c, tmp, args.repeat, args.frames, args.working_size)) for n, c in chosen]
        finally:
            if args.against:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees[args.against[:11]])])
    report(results, args.working_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
