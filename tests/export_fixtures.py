"""Tiny ONNX models built with ``onnx.helper`` for the export tests, and the
path of the real network shipped in the ``nudenet`` wheel."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def _save(model, path: Path) -> Path:
    import onnx

    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def conv_model(
    path: Path,
    *,
    dims: Sequence[int | str] = ("batch", 3, "height", "width"),
    opset: int = 17,
    extra_op: str | None = None,
    channels: int = 4,
    seed: int = 0,
) -> Path:
    """``x[dims] -> Conv(3->channels, 3x3, pad 1) -> Relu [-> extra_op] -> y``, float32, seeded weights."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.normal(0, 0.5, (channels, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(0, 0.1, (channels,)).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r" if extra_op else "y"], name="relu"),
    ]
    if extra_op:
        nodes.append(helper.make_node(extra_op, ["r"], ["y"], name="extra"))
    out_dims = [dims[0], channels, dims[2], dims[3]]
    graph = helper.make_graph(
        nodes,
        "tiny_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)],
        [w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="faceweave-tests")
    model.ir_version = 8
    return _save(model, path)


def foldable_model(path: Path) -> Path:
    """``y = x * ((a + b) * 2) + Reshape(c, Shape(a))``: six of its eight nodes
    compute constants only, which the simplifier folds away.  ``x`` is ``[batch, 4]``."""
    from onnx import TensorProto, helper, numpy_helper

    a = numpy_helper.from_array(np.array([1.0, 2.0, 3.0, 4.0], np.float32), "a")
    b = numpy_helper.from_array(np.array([0.5, 0.25, -1.0, 2.0], np.float32), "b")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    c = numpy_helper.from_array(np.array([[0.1, 0.2], [0.3, 0.4]], np.float32), "c")
    nodes = [
        helper.make_node("Add", ["a", "b"], ["ab"], name="add_ab"),
        helper.make_node("Mul", ["ab", "two"], ["scale"], name="mul_two"),
        helper.make_node("Identity", ["scale"], ["scale_id"], name="identity"),
        helper.make_node("Shape", ["a"], ["a_shape"], name="shape"),
        helper.make_node("Reshape", ["c", "a_shape"], ["offset"], name="reshape"),
        helper.make_node("Neg", ["offset"], ["neg_offset"], name="neg"),
        helper.make_node("Mul", ["x", "scale_id"], ["xs"], name="mul_x"),
        helper.make_node("Sub", ["xs", "neg_offset"], ["y"], name="sub"),
    ]
    graph = helper.make_graph(
        nodes,
        "foldable",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [a, b, two, c],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="faceweave-tests")
    model.ir_version = 8
    return _save(model, path)


def foldable_expected(x: np.ndarray) -> np.ndarray:
    """What :func:`foldable_model` computes, by hand: ``x * [3, 4.5, 4, 12] + [0.1, 0.2, 0.3, 0.4]``."""
    return x * np.array([3.0, 4.5, 4.0, 12.0], np.float32) + np.array([0.1, 0.2, 0.3, 0.4], np.float32)


def nudenet_model() -> Path | None:
    """``320n.onnx`` from the installed ``nudenet`` wheel (YOLOv8n, input ``images``
    ``[batch, 3, height, width]``, output ``output0``), or ``None``.  The
    package is located without importing it (it imports an OpenCV we lack)."""
    spec = importlib.util.find_spec("nudenet")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "320n.onnx"
    return path if path.is_file() else None
