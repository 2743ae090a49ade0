"""Read, describe, check-run and write ONNX files for export.

Every ONNX file that enters :mod:`faceweave.export` goes through
:func:`load_model`, which turns a missing, truncated or non-ONNX file into a
one-line :class:`~faceweave.errors.ModelFormatError`.  Models are written with
:func:`save_model`, atomically: a failed export leaves nothing under the name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from faceweave.errors import (
    ExportError,
    ModelFileFormatError,
    ModelFormatError,
    OutputError,
    UnreadableFileError,
)
from faceweave.io.atomic import atomic_output

#: ONNX TensorProto element type -> numpy dtype, for the input types we feed
_NUMPY_TYPES = {
    1: np.float32,
    10: np.float16,
    11: np.float64,
    2: np.uint8,
    3: np.int8,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
}

Dim = int | str | None


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output: name, element type and shape.

    ``shape`` holds an ``int`` for a fixed dimension, the ``str`` name of a
    symbolic one (``"batch"``) and ``None`` for an unnamed dynamic one.
    """

    name: str
    elem_type: int
    shape: tuple[Dim, ...]

    @property
    def dtype(self) -> np.dtype:
        """numpy dtype of the tensor; raises :class:`ExportError` for types not fed here."""
        if self.elem_type not in _NUMPY_TYPES:
            raise ExportError(
                f"input '{self.name}' has ONNX element type {self.elem_type}, which faceweave cannot feed"
            )
        return np.dtype(_NUMPY_TYPES[self.elem_type])

    def shown(self) -> str:
        """``images(batch,3,height,width)``: the shape as one would read it (no
        square brackets, which rich's markup would eat from CLI messages)."""
        return f"{self.name}({','.join('?' if d is None else str(d) for d in self.shape)})"


def load_model(path: str | Path, *, role: str = "model"):
    """The ``onnx.ModelProto`` in ``path`` (a file the user names), checked by ``onnx.checker``.

    Raises:
        UnreadableFileError: the file is missing or unreadable.
        ModelFileFormatError: the file is not a (complete) ONNX model: bad
            input like a missing file (exit code 2, as ``models import``
            answers the same file), and still a ``ModelFormatError``.
    """

    source = Path(path)
    if source.is_dir():
        raise UnreadableFileError(f"{role} {source}: is a folder; give an .onnx file")
    if not source.is_file():
        raise UnreadableFileError(f"{role} {source}: no such file")
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise UnreadableFileError(f"{role} {source}: cannot read ({exc.strerror or exc})") from exc
    try:
        return model_from_bytes(data, what=f"{role} {source}")
    except ModelFormatError as exc:
        raise ModelFileFormatError(str(exc)) from exc.__cause__


def model_from_bytes(data: bytes, *, what: str = "model"):
    """Parse and check serialized ONNX bytes; :class:`ModelFormatError` when they are not a model."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load_from_string(data)
    except (DecodeError, ValueError, RuntimeError, TypeError) as exc:
        raise ModelFormatError(
            f"{what} is not an ONNX model (cannot parse it: {_one_line(exc) or 'protobuf decode error'})"
        ) from exc
    if not model.HasField("graph") or len(model.graph.node) == 0 or not model.opset_import:
        raise ModelFormatError(
            f"{what} is not an ONNX model (no graph, nodes or opset found; truncated or another format?)"
        )
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise ModelFormatError(f"{what} is not a valid ONNX model: {_one_line(exc)[:300]}") from exc
    return model


def save_model(model, path: str | Path) -> Path:
    """Write ``model`` to ``path`` atomically; the parent folder must exist.

    Raises:
        OutputError: the file cannot be written.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise OutputError(f"cannot write {target}: folder {target.parent} does not exist")
    try:
        with atomic_output(target, suffix=".tmp.onnx") as temp:
            temp.write_bytes(model.SerializeToString())
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from exc
    return target


def graph_inputs(model) -> tuple[TensorSpec, ...]:
    """The model's real inputs (graph inputs that are not initializers)."""
    constants = {init.name for init in model.graph.initializer}
    return tuple(_spec(v) for v in model.graph.input if v.name not in constants)


def graph_outputs(model) -> tuple[TensorSpec, ...]:
    return tuple(_spec(v) for v in model.graph.output)


def onnx_opset(model) -> int:
    """The ``ai.onnx`` opset the model imports (0 when it imports none)."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return 0


def session(model_bytes: bytes, providers: Sequence[str] = ("CPUExecutionProvider",), *, threads: int = 0):
    """An ``onnxruntime.InferenceSession`` on serialized model bytes.

    The one place export opens sessions; a switch to
    ``faceweave.runtime`` (``SessionPool``/``ProviderConfig``) replaces this
    body.  Raises :class:`ExportError` when ONNX Runtime refuses the model.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    try:
        return ort.InferenceSession(model_bytes, sess_options=options, providers=list(providers))
    except Exception as exc:  # ONNX Runtime's errors have no common base: one ExportError
        raise ExportError(f"ONNX Runtime cannot load the model: {_one_line(exc)[:300]}") from exc


def run(sess, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run a session; :class:`ExportError` with ONNX Runtime's message when it fails."""
    try:
        return sess.run(None, dict(feeds))
    except Exception as exc:  # ONNX Runtime's errors have no common base: one ExportError
        raise ExportError(f"the model fails to run: {_one_line(exc)[:300]}") from exc


def zeros_for(specs: Sequence[TensorSpec], shapes: Mapping[str, Sequence[int]]) -> dict[str, np.ndarray]:
    """Zero-filled feeds with ``shapes[name]`` for each input spec."""
    return {s.name: np.zeros(tuple(shapes[s.name]), s.dtype) for s in specs}


def count_nodes(model) -> int:
    """Nodes in the main graph (subgraphs of If/Loop not counted)."""
    return len(model.graph.node)


def _spec(value) -> TensorSpec:
    tensor = value.type.tensor_type
    dims: list[Dim] = []
    for d in tensor.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return TensorSpec(name=value.name, elem_type=int(tensor.elem_type), shape=tuple(dims))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def convert_opset(model, version: int):
    """``model`` converted to ``ai.onnx`` opset ``version`` (``onnx.version_converter``).

    Raises :class:`ExportError` when the converter cannot do it."""
    from onnx import version_converter

    if onnx_opset(model) == version:
        return model
    try:
        converted = version_converter.convert_version(model, version)
    except Exception as exc:  # onnx's converter raises what it meets: one ExportError
        raise ExportError(
            f"cannot convert the model from opset {onnx_opset(model)} to {version}: {_one_line(exc)[:300]}"
        ) from exc
    return model_from_bytes(converted.SerializeToString(), what=f"model at opset {version}")
