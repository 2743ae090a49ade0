"""This tree against an earlier release, side by side in one run: the video
swap's frames per second (and its per-stage milliseconds) and the service's
``POST /v1/swap`` requests per second, each run in its own process, the two
trees in alternation (first one, then the other, swapping the order every
round), with the medians and the ratio printed.  For refactors whose figures
must stay within noise of the release before.

    .venv/bin/python benchmarks/release_compare.py --against f36cbd2 [--repeat 3] [--clip NAME]
        [--no-service] [--no-video]

The earlier release is checked out with ``git worktree`` into a temporary
folder and run from there with this tree's virtual environment (its
``PYTHONPATH`` first), using that release's own benchmark scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "faces"
SOURCE = "single/biden2.jpg"


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def video_run(tree: Path, clip: Path, source: Path, out: Path) -> dict:
    """One swap of ``clip`` by ``tree``'s video benchmark child (its own process)."""
    proc = subprocess.run(
        [
            sys.executable,
            str(tree / "benchmarks" / "video_swap.py"),
            "--child",
            "swap",
            str(clip),
            str(source),
            str(out),
            "many",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=_env(tree),
        cwd=tree,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def service_run(tree: Path, data: Path, requests: int) -> dict[int, float]:
    """Requests per second by number of clients, from ``tree``'s service benchmark."""
    proc = subprocess.run(
        [
            sys.executable,
            str(tree / "benchmarks" / "service_load.py"),
            "--data",
            str(data),
            "--requests",
            str(requests),
            "--clients",
            "1",
            "4",
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=_env(tree),
        cwd=tree,
    )
    rows = re.findall(r"^\s*(\d+)\s+\d+\s+\d+\s+([\d.]+)\s+\d+\s+\d+\s*$", proc.stdout, re.M)
    return {int(clients): float(rps) for clients, rps in rows}


def alternate(trees: dict[str, Path], repeat: int, run) -> dict[str, list]:
    """``run(tree)`` for every tree, ``repeat`` rounds, the order swapped each round."""
    results: dict[str, list] = {name: [] for name in trees}
    names = list(trees)
    for round_ in range(repeat):
        for name in names if round_ % 2 == 0 else names[::-1]:
            results[name].append(run(trees[name]))
    return results


def report_video(runs: dict[str, list[dict]]) -> None:
    fps = {name: statistics.median(r["fps"] for r in rs) for name, rs in runs.items()}
    print("video swap (fps, median of runs; range):")
    for name, rs in runs.items():
        values = [r["fps"] for r in rs]
        print(f"  {name:>8}: {fps[name]:6.2f}  ({min(values):.2f}-{max(values):.2f})")
    print(f"  ratio this/{list(runs)[1]}: {fps['this'] / fps[list(runs)[1]]:.3f}")
    stages = sorted({k for rs in runs.values() for r in rs for k in r["ms_per_frame"]})
    print("  ms per frame by stage (median):")
    for stage in stages:
        cells = [statistics.median(r["ms_per_frame"].get(stage, 0.0) for r in rs) for rs in runs.values()]
        print(f"    {stage:>12}: " + "  ".join(f"{name} {c:6.2f}" for name, c in zip(runs, cells, strict=True)))


def report_service(runs: dict[str, list[dict[int, float]]]) -> None:
    print("POST /v1/swap (requests per second, median of runs):")
    clients = sorted({c for rs in runs.values() for r in rs for c in r})
    for c in clients:
        medians = {name: statistics.median(r[c] for r in rs if c in r) for name, rs in runs.items()}
        other = list(runs)[1]
        cells = "  ".join(f"{name} {v:6.2f}" for name, v in medians.items())
        print(f"  {c:>2} client(s): {cells}  ratio {medians['this'] / medians[other]:.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required=True, help="the earlier release: a commit, tag or branch")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--clip", default="video/lp_d18_talking_face.mp4", help="a clip under --data")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--requests", type=int, default=16, help="service requests per concurrency level")
    ap.add_argument("--no-service", action="store_true")
    ap.add_argument("--no-video", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "release"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(old), args.against], check=True
        )
        try:
            trees = {"this": ROOT, args.against[:8]: old}
            clip, source = args.data / args.clip, args.data / SOURCE
            out = Path(tmp) / "out.mp4"
            if not args.no_video:
                report_video(alternate(trees, args.repeat, lambda tree: video_run(tree, clip, source, out)))
            if not args.no_service:
                report_service(alternate(trees, args.repeat, lambda tree: service_run(tree, args.data, args.requests)))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
