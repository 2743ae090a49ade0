"""Huawei Ascend: which nodes ONNX Runtime's CANN provider leaves on the CPU,
and the ``atc`` command line that builds an offline ``.om`` model.

The CANN execution provider places nodes in one of two ways:

* graph mode (``enable_cann_graph``, the default): a node goes to the NPU when
  it is in the ``ai.onnx`` domain, its op type is in :data:`CANN_GRAPH_OPS`,
  the model's ``ai.onnx`` opset is within :data:`CANN_GRAPH_OPSETS`, and not
  every input is an initializer (such nodes, and ``Constant``, run on the CPU);
* kernel mode (``enable_cann_graph=0``): a node goes to the NPU when a CANN
  kernel is registered for its op type, the schema version its opset resolves
  to, and its element type (:data:`CANN_KERNELS`).

Both lists are data copied from the ONNX Runtime sources named below; they
change between releases, so treat the check as a strong hint, not a promise.

Long because it holds CANN's operator tables as data beside the checks
that read them.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from faceweave.errors import InvalidOptionError
from faceweave.export.onnxfile import onnx_opset

Mode = Literal["graph", "kernel"]

# Source: microsoft/onnxruntime onnxruntime/core/providers/cann/cann_graph.cc,
# SupportONNXModel() (commit 89e47161534550b416ad40030b690386b1c8467b).
CANN_GRAPH_OPSETS = (8, 15)
CANN_GRAPH_OPS = frozenset(
    [
        "Abs",
        "Acos",
        "Acosh",
        "Add",
        "And",
        "ArgMax",
        "ArgMin",
        "Asin",
        "Asinh",
        "Atan",
        "Atanh",
        "AveragePool",
        "BatchNormalization",
        "BitShift",
        "Cast",
        "Ceil",
        "Celu",
        "Clip",
        "Compress",
        "Concat",
        "Constant",
        "ConstantOfShape",
        "Conv",
        "ConvTranspose",
        "Cos",
        "Cosh",
        "CumSum",
        "DepthToSpace",
        "Det",
        "Div",
        "Dropout",
        "Elu",
        "Equal",
        "Erf",
        "Exp",
        "Expand",
        "EyeLike",
        "Flatten",
        "Floor",
        "Gather",
        "GatherElements",
        "GatherND",
        "Gemm",
        "GlobalAveragePool",
        "GlobalLpPool",
        "GlobalMaxPool",
        "Greater",
        "GreaterOrEqual",
        "Hardmax",
        "HardSigmoid",
        "HardSwish",
        "Identity",
        "InstanceNormalization",
        "LeakyRelu",
        "Less",
        "LessOrEqual",
        "Log",
        "LogSoftmax",
        "LpNormalization",
        "LpPool",
        "LRN",
        "LSTM",
        "MatMul",
        "Max",
        "MaxPool",
        "MaxRoiPool",
        "MaxUnpool",
        "Mean",
        "MeanVarianceNormalization",
        "Min",
        "Mod",
        "Mul",
        "Multinomial",
        "Neg",
        "NonMaxSuppression",
        "NonZero",
        "Not",
        "OneHot",
        "Or",
        "Pad",
        "Pow",
        "PRelu",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Range",
        "Reciprocal",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceMax",
        "ReduceMean",
        "ReduceMin",
        "ReduceProd",
        "ReduceSum",
        "ReduceSumSquare",
        "Relu",
        "Reshape",
        "Resize",
        "ReverseSequence",
        "RoiAlign",
        "Round",
        "Scatter",
        "ScatterElements",
        "ScatterND",
        "Selu",
        "Shape",
        "Shrink",
        "Sigmoid",
        "Sign",
        "Sin",
        "Sinh",
        "Size",
        "Slice",
        "Softmax",
        "SoftmaxCrossEntropyLoss",
        "Softplus",
        "Softsign",
        "SpaceToDepth",
        "Split",
        "Sqrt",
        "Squeeze",
        "Sub",
        "Sum",
        "Tanh",
        "TfIdfVectorizer",
        "ThresholdedRelu",
        "Tile",
        "TopK",
        "Transpose",
        "Unsqueeze",
        "Where",
        "Xor",
    ]
)

_F = frozenset({"f16", "f32"})
_F3 = frozenset({"f16", "f32", "f64"})
_ARITH = frozenset({"i32", "i64", "f16", "f32", "f64"})
_ARITH14 = frozenset({"u8", "u16", "i8", "i16", "i32", "i64", "f16", "f32", "f64"})
_INTS_F = frozenset({"u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f16", "f32"})
_CAST = _INTS_F | {"f64", "bool"}
_ANY: frozenset[str] = frozenset()  # untyped kernel: every element type

# Source: microsoft/onnxruntime onnxruntime/core/providers/cann/cann_execution_provider.cc,
# RegisterCANNKernels() (commit a774228376990fe7c990d42e56d722c481b3abd6).
# op type -> ((since, until or None, element types or _ANY), ...) in the ai.onnx domain.
CANN_KERNELS: Mapping[str, tuple[tuple[int, int | None, frozenset[str]], ...]] = {
    "Add": ((7, 12, _ARITH), (13, 13, _ARITH), (14, None, _ARITH14 - {"u16"})),
    "Sub": ((7, 12, _ARITH), (13, 13, _ARITH), (14, None, _ARITH14)),
    "Mul": ((7, 12, _ARITH), (13, 13, _ARITH), (14, None, _ARITH14)),
    "Div": ((7, 12, _ARITH), (13, 13, _ARITH), (14, None, _ARITH14)),
    "Relu": ((6, 12, _F3), (13, 13, _F3), (14, None, frozenset({"i8", "i16", "i32", "i64"}) | _F3)),
    "Gemm": (
        (7, 8, frozenset({"f16"})),
        (9, 10, frozenset({"f16"})),
        (11, 12, frozenset({"f16"})),
        (13, None, frozenset({"f16"})),
    ),
    "Flatten": ((1, 8, _F), (9, 10, _INTS_F), (11, 12, _INTS_F), (13, None, _INTS_F)),
    "BatchNormalization": (
        (7, 8, frozenset({"f32"})),
        (9, 13, frozenset({"f32"})),
        (14, 14, frozenset({"f32"})),
        (15, None, frozenset({"f32"})),
    ),
    "GlobalAveragePool": ((1, None, _F3),),
    "AveragePool": ((7, 9, _F3), (10, 10, _F3), (11, None, _F3)),
    "MaxPool": ((1, 7, _F3),),
    "GlobalMaxPool": ((1, None, _F3),),
    "Conv": ((1, 10, _F), (11, None, _F)),
    "Dropout": ((7, 9, _ANY), (10, 11, _ANY), (12, 12, _F), (13, None, _F)),
    "Identity": ((1, 12, _ANY), (13, 13, _ANY), (14, 18, _ANY), (19, None, _ANY)),
    "MatMul": ((1, 8, _F), (9, 12, _F | {"i32"}), (13, None, _F | {"i32", "bf16"})),
    "Cast": ((6, 8, _CAST), (9, 12, _CAST), (13, None, _CAST)),
    "Reshape": ((1, 4, _ANY), (5, 12, _ANY), (13, 13, _ANY), (14, None, _ANY)),
    "Transpose": ((1, None, _INTS_F | {"bool"}),),
    "Abs": ((1, 5, _F), (6, 12, _F | {"i32"}), (13, None, _F | {"i32"})),
    "Neg": ((1, 5, _F), (6, 12, _F | {"i8", "i32"}), (13, None, _F | {"i8", "i32"})),
    "Floor": ((1, 5, _F), (6, 12, _F), (13, None, _F)),
    "Ceil": ((1, 5, _F), (6, 12, _F), (13, None, _F)),
    "Reciprocal": ((1, 5, _F), (6, 12, _F), (13, None, _F)),
    "Sqrt": ((1, 5, _F), (6, 12, _F), (13, None, _F)),
    "Log": ((1, 5, _F), (6, 12, _F), (13, None, _F)),
    "Exp": ((1, 5, frozenset({"f16"})), (6, 12, frozenset({"f16"})), (13, None, frozenset({"f16"}))),
    "Erf": ((9, 12, _F), (13, None, _F)),
    "Sin": ((7, None, _F),),
    "Cos": ((7, None, _F),),
    "Round": ((11, None, _F),),
}

#: ONNX TensorProto element type -> the short names used above
_TYPE_NAMES = {
    1: "f32",
    2: "u8",
    3: "i8",
    4: "u16",
    5: "i16",
    6: "i32",
    7: "i64",
    9: "bool",
    10: "f16",
    11: "f64",
    12: "u32",
    13: "u64",
    16: "bf16",
}

#: ai.onnx opsets that atc's ONNX parser accepts (Huawei ATC docs, --framework=5)
ATC_OPSETS = (11, 15)
PRECISION_MODES = ("force_fp32", "force_fp16", "allow_fp32_to_fp16", "must_keep_origin_dtype", "allow_mix_precision")
_SOC = re.compile(r"^Ascend[0-9A-Za-z_]+$")


@dataclass(frozen=True)
class Fallback:
    """A node that would run on the CPU, and why."""

    node: str
    op_type: str
    reason: str


@dataclass(frozen=True)
class AscendCheck:
    """Placement check of one model: ``nodes`` in total, ``fallbacks`` on the CPU."""

    mode: Mode
    opset: int
    nodes: int
    fallbacks: tuple[Fallback, ...]

    @property
    def on_npu(self) -> int:
        return self.nodes - len(self.fallbacks)

    def by_op(self) -> dict[str, int]:
        """Fallback count per op type, most first."""
        counts: dict[str, int] = {}
        for f in self.fallbacks:
            counts[f.op_type] = counts.get(f.op_type, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def to_dict(self) -> dict:
        return {
            "mode": self.mode,
            "opset": self.opset,
            "nodes": self.nodes,
            "on_npu": self.on_npu,
            "fallback_ops": self.by_op(),
            "fallbacks": [f.__dict__ for f in self.fallbacks],
        }


def check_model(model, *, mode: Mode = "graph") -> AscendCheck:
    """Which nodes of ``model`` (an ``onnx.ModelProto``) the CANN provider would leave on the CPU."""
    if mode not in ("graph", "kernel"):
        raise InvalidOptionError(f"CANN placement mode {mode!r}: use graph or kernel")
    opset = onnx_opset(model)
    nodes = list(model.graph.node)
    check = _graph_reason if mode == "graph" else _kernel_reason
    context = _Context(model, opset)
    fallbacks = []
    for i, node in enumerate(nodes):
        reason = check(node, context)
        if reason:
            fallbacks.append(Fallback(node.name or f"#{i}", node.op_type, reason))
    return AscendCheck(mode, opset, len(nodes), tuple(fallbacks))


class _Context:
    """What the per-node checks need to know about the whole model."""

    def __init__(self, model, opset: int) -> None:
        self.opset = opset
        self.constants = {t.name for t in model.graph.initializer}
        self.types = _element_types(model)


def _graph_reason(node, ctx: _Context) -> str | None:
    lo, hi = CANN_GRAPH_OPSETS
    if node.domain not in ("", "ai.onnx"):
        return f"domain {node.domain} is not ai.onnx"
    if not lo <= ctx.opset <= hi:
        return f"model opset {ctx.opset} is outside CANN graph mode's {lo}-{hi}"
    if node.op_type not in CANN_GRAPH_OPS:
        return "op type not in CANN graph mode's list"
    if all(name in ctx.constants for name in node.input if name):
        return "all inputs are constant (runs as a single CPU op)"
    return None


def _kernel_reason(node, ctx: _Context) -> str | None:
    import onnx

    if node.domain not in ("", "ai.onnx"):
        return f"domain {node.domain} is not ai.onnx"
    ranges = CANN_KERNELS.get(node.op_type)
    if not ranges:
        return "no CANN kernel for this op type"
    try:
        version = onnx.defs.get_schema(node.op_type, ctx.opset, "").since_version
    except Exception:  # noqa: BLE001 - unknown op/version: treat as unsupported
        return f"no ONNX schema for opset {ctx.opset}"
    matching = [types for since, until, types in ranges if since <= version <= (until or version)]
    if not matching:
        return f"no CANN kernel for version {version} (opset {ctx.opset})"
    elem = ctx.types.get(node.input[0]) if node.input else None
    if elem and all(types and elem not in types for types in matching):
        return f"no CANN kernel for element type {elem}"
    return None


def _element_types(model) -> dict[str, str]:
    """Tensor name -> short element type name, from shape inference where it succeeds."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001
        inferred = model
    types: dict[str, str] = {}
    graph = inferred.graph
    for value in (*graph.input, *graph.value_info, *graph.output):
        name = _TYPE_NAMES.get(value.type.tensor_type.elem_type)
        if name:
            types[value.name] = name
    for init in graph.initializer:
        name = _TYPE_NAMES.get(init.data_type)
        if name:
            types[init.name] = name
    return types


def atc_command(
    model_path: str | Path,
    output: str | Path,
    *,
    soc_version: str,
    input_shapes: Mapping[str, Sequence[int]],
    precision_mode: str = "allow_mix_precision",
    input_format: str | None = "NCHW",
) -> list[str]:
    """``atc`` arguments that build ``<output>.om`` from an ONNX model (``--framework=5``).  Pure.

    ``input_shapes`` gives each input's static shape (``name:1,3,320,320;...``);
    ``precision_mode`` is one of :data:`PRECISION_MODES`."""
    if not _SOC.match(soc_version):
        raise InvalidOptionError(f"--soc-version {soc_version!r}: expected a name like Ascend310P3 or Ascend910B")
    if precision_mode not in PRECISION_MODES:
        raise InvalidOptionError(f"precision mode {precision_mode!r}: use one of {', '.join(PRECISION_MODES)}")
    shape = ";".join(f"{name}:{','.join(str(int(d)) for d in dims)}" for name, dims in input_shapes.items())
    args = ["atc", f"--model={model_path}", "--framework=5", f"--output={output}", f"--soc_version={soc_version}"]
    if input_format:
        args.append(f"--input_format={input_format}")
    args += [f"--input_shape={shape}", f"--precision_mode={precision_mode}", "--log=error"]
    return args


def command_line(args: Sequence[str]) -> str:
    """The arguments as one shell line (quoted where the shell needs it, e.g. ``;`` in the shape)."""
    return shlex.join(args)


@dataclass(frozen=True)
class AtcRun:
    """An ``atc`` run: its exit status, the last lines it printed and the ``.om`` it wrote (if any)."""

    returncode: int
    log_tail: str
    om_path: str | None


def atc_available() -> str | None:
    """Path of ``atc`` on the PATH, or ``None``."""
    return shutil.which("atc")


def run_atc(args: Sequence[str], *, om_path: Path, timeout: float = 1800.0) -> AtcRun:
    """Run ``atc`` (``args`` from :func:`atc_command`, its ``--output`` a temporary
    stem beside ``om_path``); rename the ``.om`` it writes onto ``om_path``."""
    stem = next(a.split("=", 1)[1] for a in args if a.startswith("--output="))
    written = Path(stem + ".om")
    try:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        written.unlink(missing_ok=True)
        return AtcRun(returncode=-1, log_tail=str(exc), om_path=None)
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
    if done.returncode == 0 and written.is_file():
        written.replace(om_path)
        return AtcRun(0, tail, str(om_path))
    written.unlink(missing_ok=True)
    return AtcRun(done.returncode or 1, tail, None)
