"""Throughput of an ONNX model per batch size, to pick the best batch on a device.

:func:`benchmark_model` feeds seeded random inputs shaped by the model (its
fixed dims, ``1``… for the others unless given) at each batch size, warms up,
then times ``repeat`` runs.  A model whose batch dimension is fixed reports
only that batch, with a note.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from faceweave.errors import ExportError, InvalidOptionError
from faceweave.export.onnxfile import TensorSpec, graph_inputs, load_model, run, session

#: size used for dynamic non-batch dims when no shape is given (typical face-model crop)
DEFAULT_DYNAMIC_DIM = 128


@dataclass(frozen=True)
class BenchRow:
    """One batch size: milliseconds per run (median of ``runs``) and items per second."""

    batch: int
    ms_per_run: float
    items_per_s: float
    runs: int


@dataclass(frozen=True)
class BenchReport:
    """Rows in the order asked; ``notes`` say which batches were skipped and why."""

    model: str
    providers: tuple[str, ...]
    input_shapes: Mapping[str, tuple[int, ...]]
    rows: tuple[BenchRow, ...]
    notes: tuple[str, ...] = ()

    @property
    def best(self) -> BenchRow:
        return max(self.rows, key=lambda r: r.items_per_s)

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "providers": list(self.providers),
            "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
            "rows": [r.__dict__ for r in self.rows],
            "best_batch": self.best.batch,
            "notes": list(self.notes),
        }


def parse_batches(text: str) -> tuple[int, ...]:
    """``"1,2,4,8"`` -> ``(1, 2, 4, 8)``; :class:`InvalidOptionError` otherwise."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise InvalidOptionError(f"--batch {text!r}: give batch sizes like 1,2,4,8") from None
    if not values or any(v <= 0 for v in values):
        raise InvalidOptionError(f"--batch {text!r}: batch sizes must be positive")
    return tuple(dict.fromkeys(values))


def benchmark_model(
    path: str | Path,
    *,
    batches: Sequence[int] = (1, 2, 4, 8),
    repeat: int = 10,
    warmup: int = 2,
    providers: Sequence[str] = ("CPUExecutionProvider",),
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
) -> BenchReport:
    """Time ``path`` at each batch size in ``batches``.

    ``dims`` gives a size to named dynamic dims (``{"height": 320}``); others
    get :data:`DEFAULT_DYNAMIC_DIM`.  Raises :class:`ModelFormatError` for a
    file that is not ONNX and :class:`ExportError` when the model cannot run
    at a batch (the message names the batch)."""
    if repeat <= 0:
        raise InvalidOptionError(f"--repeat must be a positive whole number; got {repeat}")
    if warmup < 0:
        raise InvalidOptionError(f"--warmup must be 0 or more; got {warmup}")
    model = load_model(path)
    inputs = graph_inputs(model)
    sess = session(model.SerializeToString(), providers)
    wanted, notes = _usable_batches(inputs, batches)
    rng = np.random.default_rng(seed)
    rows = []
    shapes_used: dict[str, tuple[int, ...]] = {}
    for batch in wanted:
        shapes = {s.name: _shape(s, batch, dims or {}) for s in inputs}
        _check_input_size(batch, {s.name: (s, shapes[s.name]) for s in inputs})
        feeds = {s.name: _random(rng, s, shapes[s.name]) for s in inputs}
        try:
            for _ in range(warmup):
                run(sess, feeds)
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                run(sess, feeds)
                times.append(time.perf_counter() - start)
        except ExportError as exc:
            raise ExportError(f"batch {batch}: {exc}") from exc
        ms = float(np.median(times)) * 1000.0
        rows.append(
            BenchRow(
                batch=batch, ms_per_run=ms, items_per_s=batch * 1000.0 / ms if ms > 0 else float("inf"), runs=repeat
            )
        )
        shapes_used = shapes
    return BenchReport(str(path), tuple(sess.get_providers()), shapes_used, tuple(rows), tuple(notes))


def _usable_batches(inputs: Sequence[TensorSpec], batches: Sequence[int]) -> tuple[list[int], list[str]]:
    fixed = {s.shape[0] for s in inputs if s.shape and isinstance(s.shape[0], int)}
    if not fixed:
        return list(batches), []
    if len(fixed) > 1:
        raise ExportError(f"inputs have different fixed batch sizes: {sorted(fixed)}")
    only = fixed.pop()
    skipped = [b for b in batches if b != only]
    notes = (
        [
            f"the model's batch is fixed to {only}; skipped batch {', '.join(map(str, skipped))} (re-export "
            "with --batch N)"
        ]
        if skipped
        else []
    )
    return [only], notes


def _shape(spec: TensorSpec, batch: int, dims: Mapping[str, int]) -> tuple[int, ...]:
    out = []
    for i, d in enumerate(spec.shape):
        if isinstance(d, int):
            out.append(d)
        elif i == 0:
            out.append(batch)
        else:
            out.append(int(dims.get(d, DEFAULT_DYNAMIC_DIM)) if isinstance(d, str) else DEFAULT_DYNAMIC_DIM)
    return tuple(out)


#: largest total size of one batch's random inputs (bytes); a typo such as
#: --batch 100000000 is refused instead of exhausting memory
MAX_INPUT_BYTES = 8 << 30


def _check_input_size(batch: int, specs: dict[str, tuple[TensorSpec, tuple[int, ...]]]) -> None:
    total = sum(int(np.prod(shape, dtype=np.float64)) * np.dtype(spec.dtype).itemsize for spec, shape in specs.values())
    if total > MAX_INPUT_BYTES:
        raise InvalidOptionError(
            f"--batch {batch}: the inputs alone would take {total / (1 << 30):,.1f} GiB"
            f" (at most {MAX_INPUT_BYTES >> 30} GiB); give smaller batch sizes"
        )


def _random(rng: np.random.Generator, spec: TensorSpec, shape: tuple[int, ...]) -> np.ndarray:
    dtype = spec.dtype
    if np.issubdtype(dtype, np.floating):
        return rng.random(shape, dtype=np.float32).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    return rng.integers(0, 2, size=shape).astype(dtype)
