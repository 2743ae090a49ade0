"""Tiny ONNX graphs with chosen input/output names, shapes and dtypes.

Used by the runtime and model-registry tests (and free for any test that
needs a stand-in for a real model).  Every graph computes something simple
and checkable by hand:

    s = sum over inputs of mean(input)             (a float32 scalar)
    an output shaped like an input:  input + s + bias
    any other output:                s + bias, broadcast to the output shape
                                     (dynamic dimensions become 1)

``bias`` defaults to 0, so a model with inputs ``a`` (zeros) and ``b``
(ones) gives ``a + 1`` on an output shaped like ``a``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Dim = int | str | None
Tensor = tuple[str, Sequence[Dim], str]  # (name, shape, numpy dtype name)

OPSET = 17
IR_VERSION = 8


def _elem(dtype: str) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _value_info(name: str, shape: Sequence[Dim], dtype: str) -> onnx.ValueInfoProto:
    dims = [d if isinstance(d, (int, str)) else None for d in shape]
    return helper.make_tensor_value_info(name, _elem(dtype), dims)


def build_model(
    inputs: Sequence[Tensor],
    outputs: Sequence[Tensor],
    *,
    bias: float = 0.0,
    initializers: Mapping[str, np.ndarray] | None = None,
    name: str = "tiny",
) -> onnx.ModelProto:
    """A checked :class:`onnx.ModelProto` with exactly these inputs and outputs
    (see the module doc for what it computes).  ``initializers`` are added to
    the graph as constants (in the given order, after the graph's own)."""
    nodes = []
    own: list[onnx.TensorProto] = [numpy_helper.from_array(np.array(bias, dtype=np.float32), "bias")]
    means = []
    for index, (in_name, _, _dtype) in enumerate(inputs):
        cast = f"_in{index}_f"
        nodes.append(helper.make_node("Cast", [in_name], [cast], to=TensorProto.FLOAT))
        nodes.append(helper.make_node("ReduceMean", [cast], [f"_in{index}_mean"], keepdims=0))
        means.append(f"_in{index}_mean")
    nodes.append(helper.make_node("Sum", means + ["bias"], ["_s"]))
    by_shape = {(tuple(shape), dtype): f"_in{index}_f" for index, (_, shape, dtype) in enumerate(inputs)}
    for index, (out_name, shape, dtype) in enumerate(outputs):
        same = by_shape.get((tuple(shape), dtype)) or next(
            (f"_in{i}_f" for i, (_, s, _) in enumerate(inputs) if tuple(s) == tuple(shape)), None
        )
        value = f"_out{index}_f"
        if same is not None:
            nodes.append(helper.make_node("Add", [same, "_s"], [value]))
        else:
            fixed = [d if isinstance(d, int) and d > 0 else 1 for d in shape]
            own.append(numpy_helper.from_array(np.array(fixed, dtype=np.int64), f"_out{index}_shape"))
            nodes.append(helper.make_node("Expand", ["_s", f"_out{index}_shape"], [value]))
        nodes.append(helper.make_node("Cast", [value], [out_name], to=_elem(dtype)))
    extra = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(
        nodes,
        name,
        [_value_info(*t) for t in inputs],
        [_value_info(*t) for t in outputs],
        initializer=own + extra,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="faceweave-tests")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def model_bytes(inputs: Sequence[Tensor], outputs: Sequence[Tensor], **kwargs) -> bytes:
    return build_model(inputs, outputs, **kwargs).SerializeToString()


def save_model(path: Path, inputs: Sequence[Tensor], outputs: Sequence[Tensor], **kwargs) -> Path:
    """Write the model to ``path`` (parents created); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model_bytes(inputs, outputs, **kwargs))
    return path


def tensors_for(specs: Iterable, prefix: str) -> list[Tensor]:
    """Concrete tensors for :class:`faceweave.models.TensorSpec` values: an
    unpinned name becomes ``prefix_N``, an unnamed dynamic dim ``dim_N``, an
    unpinned dtype float32."""
    tensors = []
    for index, spec in enumerate(specs):
        shape = spec.shape if spec.shape is not None else ("n",)
        dims = [d if d is not None else f"dim_{axis}" for axis, d in enumerate(shape)]
        tensors.append((spec.name or f"{prefix}_{index}", dims, spec.dtype or "float32"))
    return tensors


def model_for_spec(spec, **kwargs) -> onnx.ModelProto:
    """A tiny graph with the inputs and outputs that ``spec`` (a ModelSpec) declares."""
    return build_model(tensors_for(spec.inputs, "input"), tensors_for(spec.outputs, "output"), name=spec.name, **kwargs)


# the real models' signatures, as the tests build them
INSWAPPER_128 = (
    [("target", [1, 3, 128, 128], "float32"), ("source", [1, 512], "float32")],
    [("output", [1, 3, 128, 128], "float32")],
)
NUDENET_320N = (
    [("images", ["batch", 3, "height", "width"], "float32")],
    [("output0", ["batch", 22, "anchors"], "float32")],
)
