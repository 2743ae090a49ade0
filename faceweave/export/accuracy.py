"""What an export costs in accuracy: run the original and the exported model
on the same held-back inputs and compare every output.

Per output and per run: cosine similarity of the flattened outputs and PSNR
with the reference run's value range as the peak
(``10 * log10(range^2 / MSE)``, capped at :data:`PSNR_CAP_DB` for identical
outputs).  Reported as mean and minimum over the runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from faceweave.errors import ExportError
from faceweave.export.onnxfile import graph_outputs, run, session

PSNR_CAP_DB = 99.0


@dataclass(frozen=True)
class OutputAccuracy:
    """Agreement of one output over ``runs`` runs: cosine similarity (1 is
    equal) and PSNR in dB, mean and minimum."""

    name: str
    runs: int
    cosine_mean: float
    cosine_min: float
    psnr_mean: float
    psnr_min: float

    def to_dict(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two arrays, flattened, in float64; 1.0 when both are all zero."""
    x, y = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0.0 and ny == 0.0:
        return 1.0
    if nx == 0.0 or ny == 0.0:
        return 0.0
    return float(np.dot(x, y) / (nx * ny))


def psnr(reference: np.ndarray, candidate: np.ndarray, *, cap: float = PSNR_CAP_DB) -> float:
    """PSNR in dB of ``candidate`` against ``reference`` with the reference's
    value range (max - min, or its largest magnitude when flat) as the peak;
    ``cap`` when they are equal."""
    ref, cand = np.asarray(reference, np.float64), np.asarray(candidate, np.float64)
    if ref.shape != cand.shape:
        raise ExportError(f"output shapes differ: {ref.shape} vs {cand.shape}")
    mse = float(np.mean((ref - cand) ** 2)) if ref.size else 0.0
    peak = float(ref.max() - ref.min()) if ref.size else 0.0
    if peak == 0.0:
        peak = float(np.abs(ref).max()) if ref.size else 0.0
    if mse == 0.0:
        return cap
    if peak == 0.0:
        return 0.0
    return min(cap, 10.0 * math.log10(peak * peak / mse))


def compare_outputs(
    reference: Sequence[Sequence[np.ndarray]], candidate: Sequence[Sequence[np.ndarray]], names: Sequence[str]
) -> tuple[OutputAccuracy, ...]:
    """Per-output statistics from ``reference[run][output]`` and ``candidate[run][output]`` arrays."""
    if len(reference) != len(candidate) or not reference:
        raise ExportError("need the same, non-zero number of runs to compare")
    rows = []
    for k, name in enumerate(names):
        cos = [cosine(r[k], c[k]) for r, c in zip(reference, candidate, strict=False)]
        db = [psnr(r[k], c[k]) for r, c in zip(reference, candidate, strict=False)]
        rows.append(
            OutputAccuracy(name, len(cos), float(np.mean(cos)), float(min(cos)), float(np.mean(db)), float(min(db)))
        )
    return tuple(rows)


def measure(
    original,
    exported,
    feeds: Sequence[Mapping[str, np.ndarray]],
    *,
    providers: Sequence[str] = ("CPUExecutionProvider",),
) -> tuple[OutputAccuracy, ...]:
    """Run ``original`` and ``exported`` (``onnx.ModelProto`` values with the
    same inputs and outputs) on each feed dict and compare their outputs."""
    names = [o.name for o in graph_outputs(original)]
    if [o.name for o in graph_outputs(exported)] != names:
        raise ExportError("the exported model's outputs differ from the original's")
    ref_sess = session(original.SerializeToString(), providers)
    new_sess = session(exported.SerializeToString(), providers)
    ref = [run(ref_sess, f) for f in feeds]
    new = [run(new_sess, f) for f in feeds]
    return compare_outputs(ref, new, names)
