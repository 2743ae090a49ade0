"""Each compiled kernel against the same kernel of an earlier revision,
interleaved in one process, on the calls the 720p one-face clip makes.

The earlier revision's ``faceweave/kernels/_pixels.c`` and ``_raster.c``
(read with ``git show``) and this tree's are compiled into a temporary
folder alike, as setuptools compiles them (the interpreter's ``CFLAGS``,
then the flags of that revision's ``pyproject.toml``), and loaded; the
video is swapped once (one render thread) with every call of this tree's
installed kernels recorded (its arguments copied); then each recorded
call is made again with each build, alternating which goes first every
round, on fresh copies of its arrays (the kernels write in place), and the
thread's CPU time of the call alone is taken.  Both builds' outputs are
compared: a kernel that gives other values than the earlier one says so.
A kernel whose arguments changed between the revisions, or that the
earlier one lacks, is listed as not comparable.

    .venv/bin/python benchmarks/kernels_against.py --against REV [--frames 30] [--rounds 8]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "faces"
SOURCE = "single/biden2.jpg"
ROOT = Path(__file__).resolve().parents[1]
MODULES = ("_pixels", "_raster")


def build(rev: str | None, folder: Path) -> dict[str, ModuleType]:
    """The kernels of ``rev`` (``None``: this working tree), compiled as
    setuptools compiles them, with the flags its ``pyproject.toml`` gives, and loaded."""
    project = tomllib.loads(_read(rev, "pyproject.toml"))
    flags = {m["name"].rsplit(".", 1)[1]: m.get("extra-compile-args", []) for m in _ext_modules(project)}
    include = sysconfig.get_paths()["include"]
    base = [sysconfig.get_config_var(v) or "" for v in ("CFLAGS", "CCSHARED")]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    built = {}
    for name in MODULES:
        source = folder / f"{name}.c"
        source.write_text(_read(rev, f"faceweave/kernels/{name}.c"))
        target = folder / f"{name}{suffix}"
        cc = ["cc", "-shared", *" ".join(base).split(), *flags.get(name, []), f"-I{include}", str(source)]
        subprocess.run([*cc, "-o", str(target)], check=True, capture_output=True)
        loader = importlib.machinery.ExtensionFileLoader(name, str(target))
        spec = importlib.util.spec_from_file_location(name, target, loader=loader)
        if spec is None:
            raise RuntimeError(f"cannot load {target}")
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        built[name] = module
    return built


def _read(rev: str | None, path: str) -> str:
    return (ROOT / path).read_text() if rev is None else _show(rev, path)


def _show(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def _ext_modules(project: dict) -> list[dict]:
    return list(project.get("tool", {}).get("setuptools", {}).get("ext-modules", []))


class Recorder:
    """A stand-in for a kernel module that records each call's arguments
    (arrays copied, at most ``limit`` calls per kernel) and makes the call."""

    def __init__(self, module: ModuleType, limit: int) -> None:
        self.module, self.limit = module, limit
        self.calls: dict[str, list[tuple]] = defaultdict(list)

    def __getattr__(self, name: str) -> Any:
        kernel = getattr(self.module, name)

        def call(*args: Any) -> Any:
            if len(self.calls[name]) < self.limit:
                self.calls[name].append(_fresh(args))
            return kernel(*args)

        return call


def _fresh(args: tuple) -> tuple:
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def record(data: Path, frames: int) -> dict[str, dict[str, list[tuple]]]:
    """The kernels' calls over the first ``frames`` frames of the 720p clip, by module."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from faceweave.kernels import pixels, raster
    from video_swap import swap_720p_start

    recorders = {"_pixels": Recorder(pixels._pixels, frames), "_raster": Recorder(raster._raster, frames)}
    real = pixels._pixels, raster._raster
    pixels._pixels, raster._raster = recorders["_pixels"], recorders["_raster"]
    try:
        swap_720p_start(data, frames, workers=1)
    finally:
        pixels._pixels, raster._raster = real
    return {name: dict(r.calls) for name, r in recorders.items()}


def timed(kernel: Any, args: tuple) -> tuple[float, tuple, Any]:
    """One call on fresh copies of ``args``: its thread CPU seconds, the arrays after it, its result."""
    fresh = _fresh(args)
    start = time.thread_time()
    result = kernel(*fresh)
    return time.thread_time() - start, fresh, result


def _same(a: tuple, b: tuple) -> bool:
    (_, arrays_a, result_a), (_, arrays_b, result_b) = a, b
    arrays = all(
        np.array_equal(x, y, equal_nan=x.dtype.kind == "f") if isinstance(x, np.ndarray) else x == y
        for x, y in zip(arrays_a, arrays_b, strict=True)
    )
    return arrays and result_a == result_b


def compare(name: str, calls: list[tuple], before: Any, after: Any, rounds: int) -> tuple[float, float, bool] | None:
    """Median CPU ms per call of ``before`` and ``after`` over ``rounds``
    interleaved rounds, and whether every call gave the same values;
    ``None`` when ``before`` cannot take these arguments."""
    try:
        first = [timed(before, args) for args in calls]
    except (TypeError, ValueError):
        return None
    same = all(_same(a, timed(after, args)) for a, args in zip(first, calls, strict=True))
    times: dict[str, list[float]] = {"before": [], "after": []}
    pair = [("before", before), ("after", after)]
    for r in range(rounds):
        for label, kernel in pair if r % 2 == 0 else pair[::-1]:
            times[label].append(1000.0 * sum(timed(kernel, args)[0] for args in calls) / len(calls))
    return statistics.median(times["before"]), statistics.median(times["after"]), same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the earlier revision whose kernels are compared")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--frames", type=int, default=30, help="frames of the clip (and calls kept per kernel)")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    if not (args.data / SOURCE).is_file():
        print(f"test data not found under {args.data}", file=sys.stderr)
        return 2
    from faceweave import kernels

    if not kernels.compiled():
        print("this tree's kernels are not compiled (pip install -e . with a C compiler)", file=sys.stderr)
        return 2
    import cv2

    cv2.setNumThreads(1)  # as a video's render threads run
    with tempfile.TemporaryDirectory() as old_tmp, tempfile.TemporaryDirectory() as new_tmp:
        try:  # first, so that a wrong revision is said before the clip is swapped
            theirs, ours = build(args.against, Path(old_tmp)), build(None, Path(new_tmp))
        except subprocess.CalledProcessError as exc:
            reason = (exc.stderr or "").strip().splitlines()[:1]
            print(f"cannot read or compile the kernels of {args.against}: {' '.join(reason)}", file=sys.stderr)
            return 2
        except FileNotFoundError as exc:
            print(f"needs git and a C compiler (cc): {exc.filename} not found", file=sys.stderr)
            return 2
        recorded = record(args.data, args.frames)
        print(f"CPU ms per call, medians of {args.rounds} interleaved rounds; {args.against} against this tree")
        print(f"{'kernel':<24}{'calls':>6}{args.against[:10]:>12}{'this tree':>12}{'ratio':>8}  values")
        for module, calls in sorted(recorded.items()):
            for name, made in sorted(calls.items()):
                found = None
                if hasattr(theirs[module], name):
                    found = compare(name, made, getattr(theirs[module], name), getattr(ours[module], name), args.rounds)
                if found is None:
                    print(f"{name:<24}{len(made):>6}  not comparable (absent or other arguments in {args.against})")
                    continue
                old, new, same = found
                verdict = "the same" if same else "DIFFER"
                print(f"{name:<24}{len(made):>6}{old:12.3f}{new:12.3f}{new / old:8.2f}  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
