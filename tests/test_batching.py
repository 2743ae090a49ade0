"""Calls of several threads to one model run as one inference (faceweave.runtime.batching)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest

from faceweave.errors import ModelError
from faceweave.runtime import BatchingModel, SessionPool, TensorInfo, batchable
from onnx_fixtures import INSWAPPER_128, save_model

#: long enough that a test never sees it pass: a batch forms because every active caller sent its call
NEVER_S = 120.0


class RowModel:
    """A model whose rows are independent: ``output = target * 2 + source.sum(axis=1)``
    per row; it records the rows of every run, and can be made to fail."""

    label = "rows"
    providers = ("CPUExecutionProvider",)

    def __init__(self, batch: str | int = "N", *, rows_out: int | None = None) -> None:
        self.inputs = (TensorInfo("target", (batch, 3), "float32"), TensorInfo("source", (batch, 2), "float32"))
        self.outputs = (TensorInfo("output", (batch, 3), "float32"),)
        self.runs: list[int] = []
        self.fail: Exception | None = None
        self.rows_out = rows_out
        self.closed = False

    def run(self, feeds):
        self.runs.append(len(feeds["target"]))
        if self.fail is not None:
            raise self.fail
        out = feeds["target"] * 2 + feeds["source"].sum(axis=1, keepdims=True)
        return {"output": out if self.rows_out is None else out[: self.rows_out]}

    def close(self) -> None:
        self.closed = True


def feeds(value: float, rows: int = 1, width: int = 3) -> dict[str, np.ndarray]:
    return {
        "target": np.full((rows, width), value, np.float32),
        "source": np.full((rows, 2), value / 10, np.float32),
    }


def expected(value: float, rows: int = 1) -> np.ndarray:
    return np.full((rows, 3), value * 2 + 2 * np.float32(value / 10), np.float32)


def in_threads(
    model: BatchingModel, calls: list[dict[str, np.ndarray]], between: Callable[[], None] = lambda: None
) -> list[object]:
    """Each call from a thread of its own, twice: first with no waiting (so
    each thread has called and counts as active), then, after ``between``,
    again with the model's window; the second round's results (or errors),
    then the number of inferences the second round ran."""
    window, model.window_s = model.window_s, 0.0
    results: list[object] = [None] * len(calls)
    before: list[int] = []
    warmed, second = threading.Barrier(len(calls)), threading.Barrier(len(calls))

    def work(k: int) -> None:
        model.run(calls[k])
        warmed.wait()
        if k == 0:
            model.window_s = window
            before.append(model.runs)
            between()
        second.wait()
        try:
            results[k] = model.run(calls[k])
        except Exception as exc:  # noqa: BLE001 - the test reads it
            results[k] = exc

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a caller hung"
    results.append(model.runs - before[0])
    return results


def test_batchable_needs_a_dynamic_first_dimension_everywhere():
    assert batchable(RowModel())
    assert not batchable(RowModel(batch=1))
    fixed_out = RowModel()
    fixed_out.outputs = (TensorInfo("output", (1, 3), "float32"),)
    assert not batchable(fixed_out)
    with pytest.raises(ModelError, match="cannot be batched"):
        BatchingModel(RowModel(batch=1), window_ms=5)


def test_a_caller_alone_runs_at_once_with_its_own_values():
    inner = RowModel()
    model = BatchingModel(inner, window_ms=NEVER_S * 1000, idle_s=NEVER_S)
    done = []
    worker = threading.Thread(target=lambda: done.extend(model.run(feeds(v, rows=2))["output"] for v in (1.0, 3.0)))
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "a lone caller waited for others"
    np.testing.assert_array_equal(done[0], expected(1.0, rows=2))
    np.testing.assert_array_equal(done[1], expected(3.0, rows=2))
    assert inner.runs == [2, 2] and model.runs == 2 and model.calls == 2


def test_calls_of_active_threads_run_as_one_inference():
    inner = RowModel()
    model = BatchingModel(inner, window_ms=NEVER_S * 1000, idle_s=NEVER_S)
    values = [1.0, 2.0, 5.0, 7.0]
    *results, runs = in_threads(model, [feeds(v, rows=1 + k % 2) for k, v in enumerate(values)])
    assert runs == 1 and inner.runs[-1] == 6  # the second round: one inference of all six rows
    for k, (value, got) in enumerate(zip(values, results, strict=True)):
        np.testing.assert_array_equal(got["output"], expected(value, rows=1 + k % 2))


def test_a_batch_keeps_to_max_rows():
    inner = RowModel()
    # a batch full before every active caller has sent its call runs at once: the rest may wait the window
    model = BatchingModel(inner, window_ms=100, max_rows=4, idle_s=NEVER_S)
    *results, runs = in_threads(model, [feeds(float(k), rows=2) for k in range(4)])
    assert runs >= 2 and sum(inner.runs[-runs:]) == 8 and max(inner.runs[-runs:]) == 4
    for k, got in enumerate(results):
        np.testing.assert_array_equal(got["output"], expected(float(k), rows=2))


def test_calls_that_do_not_fit_together_run_apart():
    inner = RowModel()
    inner.inputs = (TensorInfo("target", ("N", "W"), "float32"), inner.inputs[1])
    # a caller that has just finished counts as active: a gathering call may wait the window for it
    model = BatchingModel(inner, window_ms=100, idle_s=NEVER_S)
    calls = [feeds(1.0), feeds(2.0, width=3), {"target": np.ones((1, 5), np.float32), "source": feeds(0.0)["source"]}]
    shapes: list[tuple[int, int]] = []

    def run(f):
        shapes.append(f["target"].shape)
        return {"output": f["target"] * 2}

    inner.run = run  # type: ignore[method-assign]
    *results, runs = in_threads(model, calls)
    assert runs >= 2 and (1, 5) in shapes[-runs:]  # the 5-wide call never joins the 3-wide ones
    assert [r["output"].shape for r in results] == [(1, 3), (1, 3), (1, 5)]
    np.testing.assert_array_equal(results[1]["output"], np.full((1, 3), 4.0, np.float32))


def test_every_caller_of_a_failed_batch_gets_the_error():
    inner = RowModel()
    model = BatchingModel(inner, window_ms=NEVER_S * 1000, idle_s=NEVER_S)

    def fail() -> None:
        inner.fail = ModelError("rows: inference failed: out of memory")

    *results, runs = in_threads(model, [feeds(float(k)) for k in range(3)], between=fail)
    assert runs == 1
    assert all(isinstance(r, ModelError) and "out of memory" in str(r) for r in results)


def test_outputs_without_a_row_per_input_row_are_refused():
    model = BatchingModel(RowModel(rows_out=1), window_ms=0)
    with pytest.raises(ModelError, match="one row per input row"):
        model.run(feeds(1.0, rows=2))


@pytest.mark.parametrize(
    "given, fragment",
    [
        ({"target": np.zeros((1, 3), np.float32)}, "do not match the inputs"),
        ({"target": np.zeros((2, 3), np.float32), "source": np.zeros((1, 2), np.float32)}, "same number of rows"),
    ],
)
def test_bad_feeds_are_refused(given, fragment):
    with pytest.raises(ModelError, match=fragment):
        BatchingModel(RowModel(), window_ms=1).run(given)


def test_settings_are_checked_and_close_closes_the_model():
    with pytest.raises(ValueError, match="window_ms"):
        BatchingModel(RowModel(), window_ms=-1)
    inner = RowModel()
    BatchingModel(inner, window_ms=1).close()
    assert inner.closed


def test_a_batching_pool_hands_out_batching_models_for_dynamic_ones_only(tmp_path):
    dynamic = (
        [("target", ["N", 3, 8, 8], "float32"), ("source", ["N", 512], "float32")],
        [("output", ["N", 3, 8, 8], "float32")],
    )
    with SessionPool(batch_window_ms=4.0) as pool:
        model = pool.get(save_model(tmp_path / "dynamic.onnx", *dynamic))
        fixed = pool.get(save_model(tmp_path / "fixed.onnx", *INSWAPPER_128))
        assert isinstance(model, BatchingModel) and model.window_s == pytest.approx(0.004)
        assert not isinstance(fixed, BatchingModel)
        out = model.run({"target": np.zeros((2, 3, 8, 8), np.float32), "source": np.ones((2, 512), np.float32)})
        np.testing.assert_allclose(out["output"], np.ones((2, 3, 8, 8), np.float32))
    with SessionPool() as pool:
        assert not isinstance(pool.get(tmp_path / "dynamic.onnx"), BatchingModel)
