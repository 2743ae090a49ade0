"""Fix a model's dynamic dimensions to one static shape per input.

:func:`resolve_shapes` decides the shape of every input from ``--shape`` and
``--batch`` and refuses what the model cannot take; :func:`fix_shapes` writes
those shapes into the graph (ONNX Runtime's ``make_input_shape_fixed``), infers
the rest, runs the model once on zeros and stamps the output shapes it saw.
Pure functions on ``onnx.ModelProto`` values (the input is never changed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from faceweave.errors import ExportError, InvalidOptionError
from faceweave.export.onnxfile import (
    TensorSpec,
    graph_inputs,
    model_from_bytes,
    run,
    session,
    zeros_for,
)

Shape = tuple[int, ...]


def parse_shape(text: str) -> tuple[str, Shape]:
    """``"images=1,3,320,320"`` -> ``("images", (1, 3, 320, 320))``.

    Raises :class:`InvalidOptionError` for anything else (missing ``=``, a
    dimension that is not a positive integer)."""
    name, sep, dims = text.partition("=")
    name = name.strip()
    if not sep or not name or not dims.strip():
        raise InvalidOptionError(f"--shape {text!r}: write NAME=D1,D2,... (e.g. images=1,3,320,320)")
    try:
        shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
    except ValueError:
        raise InvalidOptionError(f"--shape {text!r}: dimensions must be whole numbers") from None
    if not shape or any(d <= 0 for d in shape):
        raise InvalidOptionError(f"--shape {text!r}: dimensions must be positive")
    return name, shape


def resolve_shapes(
    inputs: Sequence[TensorSpec], shapes: Mapping[str, Sequence[int]], *, batch: int | None = None
) -> dict[str, Shape]:
    """The static shape of every input.

    An input named in ``shapes`` takes that shape; its rank must match and
    its fixed dimensions must keep their values.  Otherwise ``batch`` (when
    given) sets the first dimension and the rest must already be fixed.
    ``batch`` also overrides the first dimension of a given shape's dynamic
    batch.  Raises :class:`ExportError` with expected and actual shapes.
    """
    known = {s.name: s for s in inputs}
    unknown = sorted(set(shapes) - set(known))
    if unknown:
        raise ExportError(
            f"--shape names input '{unknown[0]}', which the model does not have; its inputs are "
            + ", ".join(s.shown() for s in inputs)
        )
    if batch is not None and batch <= 0:
        raise ExportError(f"--batch must be positive, got {batch}")
    resolved: dict[str, Shape] = {}
    for spec in inputs:
        if spec.name in shapes:
            wanted = tuple(int(d) for d in shapes[spec.name])
            if batch is not None and len(wanted) == len(spec.shape) and not isinstance(spec.shape[0], int):
                wanted = (batch, *wanted[1:])
        else:
            wanted = _from_batch(spec, batch)
        _check_fits(spec, wanted)
        resolved[spec.name] = wanted
    return resolved


def fix_shapes(model, shapes: Mapping[str, Sequence[int]], *, providers: Sequence[str] = ("CPUExecutionProvider",)):
    """A copy of ``model`` whose inputs have ``shapes`` and whose outputs have
    the static shapes a check run on zeros produces.

    Raises :class:`ExportError` when the model cannot take the shapes
    (wrong rank, a fixed dimension changed, or the check run fails).
    """
    import onnx
    from onnxruntime.tools.onnx_model_utils import make_input_shape_fixed

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    specs = graph_inputs(fixed)
    for spec in specs:
        _check_fits(spec, tuple(shapes[spec.name]))
        try:
            make_input_shape_fixed(fixed.graph, spec.name, [int(d) for d in shapes[spec.name]])
        except ValueError as exc:
            raise ExportError(f"input {spec.shown()} cannot take shape {list(shapes[spec.name])}: {exc}") from exc
    _clear_dynamic(fixed.graph.output)
    del fixed.graph.value_info[:]
    with contextlib.suppress(Exception):  # inference is best effort; the check run decides
        fixed = onnx.shape_inference.infer_shapes(fixed)
    sess = session(fixed.SerializeToString(), providers)
    try:
        results = run(sess, zeros_for(specs, shapes))
    except ExportError as exc:
        shown = "; ".join(f"{name}={list(shape)}" for name, shape in shapes.items())
        raise ExportError(
            f"the model cannot take shape {shown}: {str(exc).removeprefix('the model fails to run: ')}"
        ) from exc
    for value, result in zip(fixed.graph.output, results, strict=False):
        _set_shape(value, result.shape)
    return model_from_bytes(fixed.SerializeToString(), what="model with fixed shapes")


def _from_batch(spec: TensorSpec, batch: int | None) -> Shape:
    dims = list(spec.shape)
    if batch is not None and dims:
        if isinstance(dims[0], int) and dims[0] != batch:
            raise ExportError(f"input {spec.shown()} has a fixed batch of {dims[0]}; it cannot take --batch {batch}")
        dims[0] = batch
    dynamic = [i for i, d in enumerate(dims) if not isinstance(d, int)]
    if dynamic:
        names = ", ".join(f"dim {i} ({spec.shape[i] or '?'})" for i in dynamic)
        hint = f"{spec.name}=" + ",".join(str(d) if isinstance(d, int) else "N" for d in dims)
        raise ExportError(f"input {spec.shown()} has dynamic {names}; give --shape {hint}")
    return tuple(int(d) for d in dims)  # type: ignore[arg-type]


def _check_fits(spec: TensorSpec, wanted: Shape) -> None:
    if len(wanted) != len(spec.shape):
        raise ExportError(
            f"input {spec.shown()} has rank {len(spec.shape)}; shape {list(wanted)} has rank {len(wanted)}"
        )
    for i, (have, want) in enumerate(zip(spec.shape, wanted, strict=False)):
        if isinstance(have, int) and have != want:
            raise ExportError(
                f"input {spec.shown()} has dim {i} fixed to {have}; shape {list(wanted)} sets it to {want}"
            )


def _clear_dynamic(values) -> None:
    """Drop symbolic dims on ``values`` (outputs) so inference and the check run set them."""
    for value in values:
        for dim in value.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value") or dim.dim_value <= 0:
                dim.Clear()


def _set_shape(value, shape: Sequence[int]) -> None:
    tensor_shape = value.type.tensor_type.shape
    tensor_shape.ClearField("dim")
    for d in shape:
        tensor_shape.dim.add().dim_value = int(d)
