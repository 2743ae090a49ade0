"""The skin-tone trade-off (issue 32): identity against tone, one point per
``--skin-tone`` level, judged by the independent judge.

For each level: the photo judge (``../shared/eval/swapeval.py``) on
``../shared/data/faces`` with each seed, the video judge (``videoeval.py``)
on the talking head with a laughing and a neutral source, and the
skin-contrast pairs (:data:`CONTRAST_PAIRS`: a darker source on a lighter
target and the other way round, scored with faceweave's own metrics, which
follow the judge's definitions).  Prints one table and writes the curve
(d_src median against tone mean) as a PNG.  Runs already in ``--out`` are
reused, so a level added later costs only its own runs (about 4 minutes a
level on the 2-core machine)::

    bash ../shared/eval/setup.sh
    .venv/bin/python benchmarks/skin_tone_curve.py --out /tmp/skin-tone \\
        --plot docs/figures/skin_tone_curve.png
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
DATA = SHARED / "data" / "faces"
JUDGE = SHARED / "eval"
CLIP = "video/lp_d18_talking_face.mp4"
#: video sources: name -> (source photo, gallery photos)
VIDEO_SOURCES = {
    "happy_man": ("single/happy_man.png", ("single/happy_man.png",)),
    "matt": (
        "identity/matt_damon/df_img29.jpg",
        tuple(f"identity/matt_damon/df_img{n}.jpg" for n in (30, 31, 32, 33)),
    ),
}
#: (kind, source, target, gallery of the source's other photos): cheek L* of
#: the sources and targets differ by 30-50 (faceweave's mesh, the judge's cheeks)
CONTRAST_PAIRS = (
    ("dark on light", "single/attr_1423_black_woman.jpg", "single/astronaut_eileen_collins.png", ()),
    ("dark on light", "single/attr_1423_black_woman.jpg", "single/sad_woman.png", ()),
    (
        "dark on light",
        "identity/sundar_pichai/df_img24.jpg",
        "identity/mark_zuckerberg/df_img15.jpg",
        ("identity/sundar_pichai/df_img25.jpg",),
    ),
    (
        "dark on light",
        "identity/sundar_pichai/df_img24.jpg",
        "identity/scarlett_johansson/df_img49.jpg",
        ("identity/sundar_pichai/df_img25.jpg",),
    ),
    ("light on dark", "single/astronaut_eileen_collins.png", "single/attr_1423_black_woman.jpg", ()),
    ("light on dark", "single/sad_woman.png", "single/attr_1423_black_woman.jpg", ()),
    (
        "light on dark",
        "identity/mark_zuckerberg/df_img15.jpg",
        "identity/sundar_pichai/df_img24.jpg",
        tuple(f"identity/mark_zuckerberg/df_img{n}.jpg" for n in (14, 57, 58)),
    ),
    (
        "light on dark",
        "identity/scarlett_johansson/df_img49.jpg",
        "identity/sundar_pichai/df_img24.jpg",
        tuple(f"identity/scarlett_johansson/df_img{n}.jpg" for n in (50, 51, 8, 9)),
    ),
)


@dataclass(frozen=True)
class Point:
    """One level's figures (``None`` where a run is missing)."""

    level: float
    photo: dict[int, dict]  # seed -> the judge's summary of the tool
    worst_blotch: dict[int, float]
    video: dict[str, dict]
    contrast: dict[str, dict]


def _tag(level: float) -> str:
    return f"{level:g}"


def _faceweave() -> str:
    return f"{sys.executable} -m faceweave.cli"


def run_photo_judge(out: Path, level: float, seed: int, judge_python: str) -> Path:
    """The judge's result folder for ``level`` and ``seed`` (run unless there)."""
    folder = out / f"L{_tag(level)}_s{seed}"
    if not (folder / "summary.txt").is_file():
        cmd = f"{_faceweave()} swap -s {{source}} -t {{target}} -o {{output}} --skin-tone {_tag(level)}"
        args = [judge_python, str(JUDGE / "swapeval.py"), "--data", str(DATA), "--out", str(folder)]
        subprocess.run([*args, "--seed", str(seed), "--cmd", cmd], check=True, cwd=ROOT, capture_output=True)
    return folder


def run_video_judge(out: Path, level: float, name: str, judge_python: str) -> Path:
    """The video judge's JSON for ``level`` and source ``name`` (run unless there)."""
    result = out / f"v_{name}_L{_tag(level)}.json"
    if not result.is_file():
        source, gallery = VIDEO_SOURCES[name]
        video = result.with_suffix(".mp4")
        swap = [*_faceweave().split(), "swap", "-s", str(DATA / source), "-t", str(DATA / CLIP), "-o", str(video)]
        subprocess.run([*swap, "--no-watermark", "--skin-tone", _tag(level)], check=True, cwd=ROOT)
        judge = [judge_python, str(JUDGE / "videoeval.py"), str(DATA / CLIP), str(video), "--gallery"]
        subprocess.run([*judge, *(str(DATA / g) for g in gallery), "--json", str(result)], check=True)
    return result


def run_contrast(out: Path, level: float) -> Path:
    """faceweave's own figures for :data:`CONTRAST_PAIRS` at ``level`` (run unless there)."""
    result = out / f"contrast_L{_tag(level)}.json"
    if not result.is_file():
        rows = [_contrast_pair(level, *pair) for pair in CONTRAST_PAIRS]
        result.write_text(json.dumps(rows, indent=1))
    return result


def _contrast_pair(level: float, kind: str, source: str, target: str, gallery: Sequence[str]) -> dict:
    from faceweave.evaluate import metrics as M
    from faceweave.evaluate.report import EvaluationSettings
    from faceweave.evaluate.scores import image_metrics
    from faceweave.io.images import read_image
    from faceweave.options import SwapOptions
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    def largest(swapper: FaceSwapper, pixels):
        return max(swapper.analyser.analyse(pixels, embeddings=True), key=lambda f: f.bbox.area)

    target_pixels = read_image(DATA / target).pixels
    with FaceSwapper(SwapOptions(skin_tone=level), provenance=Provenance.new(watermark=False)) as swapper:
        out = swapper.swap(DATA / source, target_pixels).image
        face, target_face = largest(swapper, out), largest(swapper, target_pixels)
        refs = [largest(swapper, read_image(DATA / g).pixels).embedding for g in (gallery or (source,))]
    figures = image_metrics(target_pixels, target_face, out, face, settings=EvaluationSettings())
    centre = M.mean_embedding([r for r in refs if r is not None])
    d_src = None if centre is None or face.embedding is None else M.embedding_distance(face.embedding, centre)
    return {
        "kind": kind,
        "source": source,
        "target": target,
        "d_src": d_src,
        "d_src_reference": "other photos" if gallery else "the source photo itself",
        "tone": figures["tone_error"],
        "blotch": figures["blotch_fraction"],
        "sharpness": figures["sharpness_ratio"],
    }


def collect(out: Path, level: float, seeds: Sequence[int], video: bool) -> Point:
    photo, worst = {}, {}
    for seed in seeds:
        results = json.loads((out / f"L{_tag(level)}_s{seed}" / "results.json").read_text())
        photo[seed] = results["summary"]["tool"]
        worst[seed] = max((abs(p["blotch"]) for p in results["pairs"] if p.get("blotch") is not None), default=0.0)
    videos = {}
    if video:
        for name in VIDEO_SOURCES:
            videos[name] = json.loads((out / f"v_{name}_L{_tag(level)}.json").read_text())
    rows = json.loads((out / f"contrast_L{_tag(level)}.json").read_text())
    contrast = {}
    for kind in ("dark on light", "light on dark"):
        group = [r for r in rows if r["kind"] == kind]
        contrast[kind] = {
            name: _mean([r[name] for r in group]) for name in ("d_src", "tone", "blotch", "sharpness")
        } | {"worst_tone": max((r["tone"] or 0.0) for r in group)}
    return Point(level, photo, worst, videos, contrast)


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return mean(kept) if kept else None


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(points: Sequence[Point], seeds: Sequence[int]) -> str:
    """A Markdown table, one row per level."""
    s = " / ".join(str(seed) for seed in seeds)
    head = (
        f"| skin tone | d_src median (seeds {s}) | tone mean | blotch mean | worst abs blotch | sharpness median "
        "| expression mean | video d_src (laughing / neutral) | video mouth corr. | dark on light d_src, tone "
        "(worst), blotch | light on dark d_src, tone (worst), blotch |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for p in points:
        per = " / ".join
        photo = [p.photo[seed] for seed in seeds]
        video = [p.video[n] for n in VIDEO_SOURCES] if p.video else []
        cells = [
            _tag(p.level),
            per(_f(x["d_src_median"]) for x in photo),
            per(_f(x["tone_err_mean"], 2) for x in photo),
            per(_f(x["blotch_mean"], 2) for x in photo),
            per(_f(p.worst_blotch[seed], 2) for seed in seeds),
            per(_f(x["sharpness_median"]) for x in photo),
            per(_f(x["expr_err_mean"], 4) for x in photo),
            per(_f(v["d_src_median"]) for v in video) or "-",
            per(_f(v["mouth_corr"]) for v in video) or "-",
        ]
        for kind in ("dark on light", "light on dark"):
            c = p.contrast[kind]
            cells.append(f"{_f(c['d_src'])}, {_f(c['tone'], 2)} ({_f(c['worst_tone'], 1)}), {_f(c['blotch'], 2)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def choose(
    points: Sequence[Point], seeds: Sequence[int], *, max_tone: float = 1.5, max_blotch: float = 0.5
) -> Point | None:
    """The issue's rule: the lowest d_src (mean of the seeds' medians) among
    the levels whose tone mean stays at most ``max_tone`` and whose blotch
    mean stays within ``max_blotch`` of 0 on every seed (its targets)."""
    kept = [
        p
        for p in points
        if all(p.photo[s]["tone_err_mean"] <= max_tone and abs(p.photo[s]["blotch_mean"]) <= max_blotch for s in seeds)
    ]
    return min(kept, key=lambda p: mean(p.photo[s]["d_src_median"] for s in seeds), default=None)


def plot(points: Sequence[Point], seeds: Sequence[int], path: Path, chosen: Point | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5.0), dpi=110)
    for seed, marker in zip(seeds, "os^v", strict=False):
        xs = [p.photo[seed]["tone_err_mean"] for p in points]
        ys = [p.photo[seed]["d_src_median"] for p in points]
        ax.plot(xs, ys, marker=marker, label=f"../shared pairs, seed {seed}")
        for p, x, y in zip(points, xs, ys, strict=True):
            ax.annotate(_tag(p.level), (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    xs = [p.contrast["dark on light"]["tone"] for p in points]
    ys = [p.contrast["dark on light"]["d_src"] for p in points]
    ax2 = ax.twiny()
    ax2.plot(xs, ys, "x--", color="grey", label="dark on light pairs (top axis)")
    ax2.set_xlabel("tone mean, dark-on-light pairs (dE)")
    ax.axvline(1.5, color="red", lw=0.8, ls=":")
    if chosen is not None:
        ax.plot(
            [chosen.photo[s]["tone_err_mean"] for s in seeds],
            [chosen.photo[s]["d_src_median"] for s in seeds],
            "*",
            ms=16,
            color="gold",
            mec="black",
            label=f"chosen by the rule: {_tag(chosen.level)}",
        )
    ax.set_xlabel("tone error mean (dE76, judge)")
    ax.set_ylabel("d_src median (judge, lower = more of the source)")
    ax.set_title("faceweave --skin-tone: identity against tone (labels: level)")
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=8, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="scratch folder for the runs (reused)")
    ap.add_argument("--levels", default="0,0.25,0.35,0.5,0.65,0.75,1")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--judge-python", default="/tmp/swapeval-venv/bin/python")
    ap.add_argument("--no-video", action="store_true", help="skip the video judge")
    ap.add_argument("--plot", type=Path, help="write the curve here (PNG)")
    args = ap.parse_args()
    if not DATA.is_dir():
        sys.exit(f"no test data at {DATA}: the curve needs ../shared beside the repository")
    levels = [float(v) for v in args.levels.split(",")]
    seeds = [int(v) for v in args.seeds.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    for level in levels:
        for seed in seeds:
            run_photo_judge(args.out, level, seed, args.judge_python)
        if not args.no_video:
            for name in VIDEO_SOURCES:
                run_video_judge(args.out, level, name, args.judge_python)
        run_contrast(args.out, level)
    points = [collect(args.out, level, seeds, not args.no_video) for level in sorted(levels)]
    chosen = choose(points, seeds)
    print(table(points, seeds))
    found = "-" if chosen is None else _tag(chosen.level)
    print(f"\nlowest d_src with tone mean <= 1.5 and blotch mean within 0.5 on every seed: {found}")
    if args.plot is not None:
        plot(points, seeds, args.plot, chosen)
        print(f"curve: {args.plot}")


if __name__ == "__main__":
    main()
