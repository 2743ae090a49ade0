"""Read an ONNX file's inputs and outputs, and compare them with a spec.

Only the graph's structure is read (``load_external_data=False``), so even a
large model is checked in well under a second.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from faceweave.errors import ModelFormatError, ModelNotFoundError, ModelSignatureError
from faceweave.models.spec import Dim, TensorSpec, is_dynamic


@dataclass(frozen=True)
class Signature:
    """The inputs (initializers excluded) and outputs of a graph, in order."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def describe(self) -> str:
        ins = ", ".join(t.describe() for t in self.inputs)
        outs = ", ".join(t.describe() for t in self.outputs)
        return f"inputs ({ins}) -> outputs ({outs})"


def read_signature(source: Path | bytes) -> Signature:
    """The :class:`Signature` of an ONNX file (a path) or of serialized bytes.

    Raises:
        ModelNotFoundError: the path does not exist.
        ModelFormatError: the content is not an ONNX model.
    """
    import onnx
    from google.protobuf.message import DecodeError

    label = "model bytes" if isinstance(source, (bytes, bytearray)) else str(source)
    try:
        if isinstance(source, (bytes, bytearray)):
            model = onnx.load_from_string(bytes(source))
        else:
            path = Path(source)
            if not path.is_file():
                raise ModelNotFoundError(f"model file {path} does not exist")
            model = onnx.load(str(path), load_external_data=False)
    except ModelNotFoundError:
        raise
    except (DecodeError, ValueError, RuntimeError, OSError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"{label} is not an ONNX model ({type(exc).__name__})") from exc
    graph = model.graph
    if model.ir_version <= 0 or (not graph.input and not graph.output):
        raise ModelFormatError(f"{label} is not an ONNX model (no graph inputs or outputs)")
    initializers = {init.name for init in graph.initializer}
    inputs = tuple(_tensor(v) for v in graph.input if v.name not in initializers)
    outputs = tuple(_tensor(v) for v in graph.output)
    return Signature(inputs=inputs, outputs=outputs)


def _tensor(value) -> TensorSpec:  # onnx.ValueInfoProto
    from onnx import helper

    tensor_type = value.type.tensor_type
    dtype: str | None = None
    if tensor_type.elem_type:
        try:
            dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type).name
        except (KeyError, TypeError, ValueError):
            dtype = None
    shape: tuple[Dim, ...] | None = None
    if tensor_type.HasField("shape"):
        shape = tuple(_dim(d) for d in tensor_type.shape.dim)
    return TensorSpec(name=value.name, shape=shape, dtype=dtype)


def _dim(dim) -> Dim:
    if dim.HasField("dim_value") and dim.dim_value > 0:
        return int(dim.dim_value)
    if dim.HasField("dim_param") and dim.dim_param:
        return dim.dim_param
    return None


def tensor_mismatch(expected: TensorSpec, actual: TensorSpec) -> str | None:
    """Why ``actual`` does not fit ``expected``, or ``None`` when it does.

    A dynamic dimension on either side matches any size; an unpinned name,
    rank or dtype in ``expected`` matches anything.
    """
    if expected.name is not None and expected.name != actual.name:
        return f"name {actual.name!r}, expected {expected.name!r}"
    if expected.dtype is not None and actual.dtype is not None and expected.dtype != actual.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if expected.shape is not None and actual.shape is not None:
        if len(expected.shape) != len(actual.shape):
            return f"rank {len(actual.shape)}, expected {len(expected.shape)}"
        for axis, (want, got) in enumerate(zip(expected.shape, actual.shape, strict=True)):
            if not is_dynamic(want) and not is_dynamic(got) and want != got:
                return f"size {got} on axis {axis}, expected {want}"
    return None


def check_signature(
    expected_inputs: Sequence[TensorSpec],
    expected_outputs: Sequence[TensorSpec],
    actual: Signature,
    *,
    model: str,
    log: logging.Logger | None = None,
) -> tuple[str, ...]:
    """Raise :class:`ModelSignatureError` unless ``actual`` fits the expected tensors.

    Named tensors are matched by name (in any order), unnamed ones by
    position.  The inputs' counts must be equal.  A file may have more
    outputs than the spec (BiSeNet exported by its authors' script gives
    three): the spec's are matched against the file's first ones, which are
    what is read (FaceFusion reads the first output too), and the others are
    named in one warning on ``log`` (default ``faceweave.models``) and
    returned.  The message of the error shows both signatures.
    """
    outputs = actual.outputs[: len(expected_outputs)]
    problems = _side("input", expected_inputs, actual.inputs) + _side("output", expected_outputs, outputs)
    if problems:
        expected = Signature(tuple(expected_inputs), tuple(expected_outputs))
        raise ModelSignatureError(
            f"{model}: the graph does not match its spec ({'; '.join(problems)}); "
            f"expected {expected.describe()}, found {actual.describe()}"
        )
    extra = tuple(t.name or str(i) for i, t in enumerate(actual.outputs[len(outputs) :], start=len(outputs)))
    if extra:
        (log or logging.getLogger("faceweave.models")).warning(
            "%s: the file has %d output(s) beyond the %d of its spec (%s); the first %d are used, the others ignored",
            model,
            len(extra),
            len(outputs),
            ", ".join(extra),
            len(outputs),
        )
    return extra


def _side(role: str, expected: Sequence[TensorSpec], actual: Sequence[TensorSpec]) -> list[str]:
    by_name = {t.name: t for t in actual}
    present = [t for t in expected if not t.optional or t.name in by_name]
    if len(present) != len(actual):
        return [f"{len(actual)} {role}s, expected {len(present)}"]
    problems = []
    for position, want in enumerate(present):
        got = by_name.get(want.name) if want.name is not None else actual[position]
        if got is None:
            problems.append(f"no {role} named {want.name!r}")
            continue
        why = tensor_mismatch(want, got)
        if why:
            problems.append(f"{role} {want.name or position}: {why}")
    return problems
