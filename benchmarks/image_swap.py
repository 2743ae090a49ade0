"""Per-stage milliseconds of the image swap, median of repeated runs.

Cases: one face at 720p and at 1080p (a single-face photo scaled and cut to
that frame), and the 6-person group photo with ``--faces many``.  Source
preparation (done once per run, cached) is timed separately from the
per-target work.  Absolute times drift on shared machines: compare stages
and cases within one run.

    .venv/bin/python benchmarks/image_swap.py [--repeat 7] [--data ../shared/data/faces]

Numbers are medians; each case is also timed as one whole ``FaceSwapper.swap``
call, with the source recalled from the swapper's cache of prepared sources
and, in brackets, with the source photo decoded and prepared anew each time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from faceweave.io import read_image, write_image
from faceweave.options import SelectionOptions, SwapOptions
from faceweave.pipeline import FaceSwapper
from faceweave.selection import select_faces
from faceweave.timing import timed

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "faces"


def fit_frame(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    """Scale to cover ``width x height`` and cut the centre."""
    h, w = pixels.shape[:2]
    s = max(width / w, height / h)
    big = cv2.resize(
        pixels, (int(np.ceil(w * s)), int(np.ceil(h * s))), interpolation=cv2.INTER_AREA if s < 1 else cv2.INTER_CUBIC
    )
    y0, x0 = (big.shape[0] - height) // 2, (big.shape[1] - width) // 2
    return np.ascontiguousarray(big[y0 : y0 + height, x0 : x0 + width])


def run_case(swapper: FaceSwapper, sources, target_path: Path, repeat: int) -> dict[str, float]:
    """Median milliseconds per stage over ``repeat`` full runs of decode ->
    analyse -> swap -> encode (sources already prepared)."""
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jpg"
        for _ in range(repeat + 1):
            t: dict[str, float] = {}
            start = time.perf_counter()
            with timed(t, "decode"):
                image = read_image(target_path)
            faces = swapper.find_faces(image.pixels, t)
            indices = select_faces(faces, swapper.options.selection)
            result = swapper.swap_faces(image.pixels, faces, indices, sources, t).pixels
            with timed(t, "encode"):
                write_image(out, result, quality=92)
            t["total"] = (time.perf_counter() - start) * 1000.0
            t["faces"] = float(len(indices))
            runs.append(t)
    runs = runs[1:]  # the first run warms caches
    keys = sorted({k for r in runs for k in r})
    return {k: statistics.median(r.get(k, 0.0) for r in runs) for k in keys}


def whole_calls(swapper: FaceSwapper, source: Path, target: Path, repeat: int) -> float:
    """Median milliseconds of one whole ``FaceSwapper.swap`` call (decoding
    the target, finding its faces, preparing or recalling the source,
    swapping)."""
    swapper.swap([source], target)  # warm caches
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        swapper.swap([source], target)
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    if not args.data.is_dir():
        print(f"test data not found at {args.data}", file=sys.stderr)
        return 2
    source = args.data / "single" / "biden2.jpg"
    single = read_image(args.data / "identity" / "matt_damon" / "df_img30.jpg").pixels
    group = args.data / "group" / "insightface_t1.jpg"

    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for name, (w, h) in {"720p": (1280, 720), "1080p": (1920, 1080)}.items():
            path = Path(tmp) / f"{name}.jpg"
            write_image(path, fit_frame(single, w, h), quality=95)
            cases.append((f"1 face {name}", path, SwapOptions()))
        cases.append(("group 6 faces", group, SwapOptions(selection=SelectionOptions(mode="many"))))

        print(
            f"{'case':18s} "
            + " ".join(
                f"{k[:7]:>7s}"
                for k in ("decode", "detect", "mesh", "crop", "swap", "blend", "expression", "paste", "encode", "total")
            )
            + "  faces"
        )
        for label, path, options in cases:
            with FaceSwapper(options) as swapper:
                load_ms = swapper.prepare()
                t0 = time.perf_counter()
                sources = swapper.load_sources([source])
                src_ms = (time.perf_counter() - t0) * 1000.0
                med = run_case(swapper, sources, path, args.repeat)
                known = whole_calls(swapper, source, path, args.repeat)
            # the same call with the source prepared anew each time (no cache)
            with FaceSwapper(options, source_cache=0) as cold_swapper:
                cold_swapper.prepare()
                cold = whole_calls(cold_swapper, source, path, args.repeat)
            row = " ".join(
                f"{med.get(k, 0.0):7.1f}"
                for k in ("decode", "detect", "mesh", "crop", "swap", "blend", "expression", "paste", "encode", "total")
            )
            print(f"{label:18s} {row}  {int(med['faces'])}   swap(): {known:.1f} (source prepared anew: {cold:.1f})")
        print(f"\nmodel load + warm-up: {load_ms:.0f} ms; source preparation (once per run): {src_ms:.0f} ms")
        print("medians in milliseconds; 'total' is one target image from file to file with sources prepared;")
        print("'swap()' is one whole FaceSwapper.swap call (target decoded, faces found, source recalled from the")
        print("swapper's cache of prepared sources); in brackets the same call preparing the source photo every time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
