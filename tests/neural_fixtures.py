"""Tiny ONNX stand-ins for the neural swappers and ArcFace, with the real
models' input/output names, ranks and initializer layout, and outputs that
are easy to compute by hand; plus a small adapter that makes an
``onnxruntime.InferenceSession`` look like the ``InferenceModel`` the
swappers take, recording every call."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


def _dim(batch):
    return batch if isinstance(batch, str) else int(batch)


def _value(name: str, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes, inputs, outputs, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "tiny", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def swapper_model(
    size: int,
    source_shape: list[int],
    *,
    batch: int | str = "N",
    gain: float = 1.0,
    offset: float = 0.0,
    source_gain: float = 0.0,
    emap: np.ndarray | None = None,
    mask_output: bool = False,
    source_first: bool = False,
) -> onnx.ModelProto:
    """A swapper with inputs ``target`` ``[batch, 3, size, size]`` and
    ``source`` ``[batch, *source_shape]``, and output ``output`` (same shape
    as ``target``) ``= target * gain + offset + source_gain * mean(source row)``.
    ``emap``: an unused ``(512, 512)`` initializer placed last (as in
    inswapper_128); ``mask_output``: a second output ``mask`` ``[batch, 1,
    size, size]`` (as hyperswap)."""
    b = _dim(batch)
    target = _value("target", [b, 3, size, size])
    source = _value("source", [b, *source_shape])
    inits = [
        numpy_helper.from_array(np.array(gain, np.float32), "gain"),
        numpy_helper.from_array(np.array(offset, np.float32), "offset"),
        numpy_helper.from_array(np.array(source_gain, np.float32), "source_gain"),
        numpy_helper.from_array(np.array([-1, 1, 1, 1], np.int64), "row_shape"),
    ]
    axes = list(range(1, 1 + len(source_shape)))
    nodes = [
        helper.make_node("Mul", ["target", "gain"], ["scaled"]),
        helper.make_node("Add", ["scaled", "offset"], ["shifted"]),
        helper.make_node("ReduceMean", ["source"], ["source_mean"], axes=axes, keepdims=0),
        helper.make_node("Reshape", ["source_mean", "row_shape"], ["source_rows"]),
        helper.make_node("Mul", ["source_rows", "source_gain"], ["source_term"]),
        helper.make_node("Add", ["shifted", "source_term"], ["output"]),
    ]
    outputs = [_value("output", [b, 3, size, size])]
    if mask_output:
        nodes.append(helper.make_node("ReduceMean", ["target"], ["mask"], axes=[1], keepdims=1))
        outputs.append(_value("mask", [b, 1, size, size]))
    if emap is not None:
        inits.append(numpy_helper.from_array(np.asarray(emap, np.float32), "emap"))
    inputs = [source, target] if source_first else [target, source]
    return _model(nodes, inputs, outputs, inits)


def arcface_model(weights: np.ndarray, *, batch: int | str = "None", input_name: str = "input.1") -> onnx.ModelProto:
    """An ArcFace stand-in: input ``[batch, 3, 112, 112]``, output ``(batch,
    512)`` ``= channel means (batch, 3) @ weights (3, 512)``."""
    b = _dim(batch)
    inits = [numpy_helper.from_array(np.asarray(weights, np.float32), "w")]
    nodes = [
        helper.make_node("GlobalAveragePool", [input_name], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "w"], ["683"]),
    ]
    return _model(nodes, [_value(input_name, [b, 3, 112, 112])], [_value("683", [b, 512])], inits)


def converter_model(*, scale: float = 2.0, shift: float = 1.0) -> onnx.ModelProto:
    """A ``crossface_*`` stand-in: ``input`` ``[N, 512]`` -> ``output`` ``= input * scale + shift``."""
    inits = [
        numpy_helper.from_array(np.array(scale, np.float32), "scale"),
        numpy_helper.from_array(np.array(shift, np.float32), "shift"),
    ]
    nodes = [helper.make_node("Mul", ["input", "scale"], ["m"]), helper.make_node("Add", ["m", "shift"], ["output"])]
    return _model(nodes, [_value("input", ["N", 512])], [_value("output", ["N", 512])], inits)


@dataclass(frozen=True)
class Info:
    name: str
    shape: tuple


class OrtModel:
    """An ``onnxruntime`` session behind the swappers' ``InferenceModel``
    protocol; ``calls`` records the feeds of every run."""

    def __init__(self, model: onnx.ModelProto) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.intra_op_num_threads = 1
        self.session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        self.inputs = [Info(i.name, tuple(i.shape)) for i in self.session.get_inputs()]
        self.outputs = [Info(o.name, tuple(o.shape)) for o in self.session.get_outputs()]
        self.calls: list[dict[str, np.ndarray]] = []

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls.append({k: np.array(v) for k, v in feeds.items()})
        names = [o.name for o in self.outputs]
        return dict(zip(names, self.session.run(names, feeds), strict=False))
