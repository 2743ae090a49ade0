"""Lower a model's precision: fp16 weights and compute, or INT8 with calibration.

Both keep the model's inputs and outputs in their original float32, so
callers feed and read the same arrays as before.  INT8 uses ONNX Runtime's
static quantisation in QDQ format (QuantizeLinear/DequantizeLinear pairs,
which TensorRT, OpenVINO and the NPU converters read), calibrated with
MinMax on arrays the caller supplies (real face crops, see
:mod:`faceweave.export.calibration`).
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from faceweave.errors import ExportError
from faceweave.export.onnxfile import model_from_bytes


def to_fp16(model, *, op_block_list: Sequence[str] | None = None):
    """A float16 copy of ``model`` (unchanged) with float32 inputs and outputs.

    ``op_block_list`` names operator types kept in float32 (ONNX Runtime's
    default list when ``None``).  Raises :class:`ExportError` when the
    conversion fails."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "values were clamped to fp16 range" is expected
            converted = convert_float_to_float16(copy, keep_io_types=True, op_block_list=op_block_list)
    except Exception as exc:  # onnxconverter's errors have no common base: one ExportError
        raise ExportError(f"cannot convert the model to fp16: {' '.join(str(exc).split())[:300]}") from exc
    sort_nodes(converted.graph)  # the converter appends its input casts at the end
    return model_from_bytes(converted.SerializeToString(), what="fp16 model")


def sort_nodes(graph) -> None:
    """Reorder ``graph.node`` in place so every node follows the producers of
    its inputs (stable: nodes keep their order where they can).  Names that
    no node produces (graph inputs, initializers, outer scope) count as ready."""
    produced = {out for node in graph.node for out in node.output}
    ready = {name for name in _all_inputs(graph) if name not in produced} | {""}
    pending = list(graph.node)
    ordered = []
    while pending:
        rest = []
        for node in pending:
            if all(name in ready for name in node.input):
                ordered.append(node)
                ready.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            raise ExportError("the fp16 graph has a cycle")
        pending = rest
    copies = [type(n)() for n in ordered]
    for copy, node in zip(copies, ordered, strict=False):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)


def _all_inputs(graph) -> set[str]:
    return {name for node in graph.node for name in node.input}


class ArrayReader:
    """Calibration feeds for ONNX Runtime's ``quantize_static``: one dict of
    input name -> array per model run, from a finite iterable.

    Implements ``onnxruntime.quantization.CalibrationDataReader``'s protocol
    (``get_next`` returns ``None`` when done, ``rewind`` starts over)."""

    def __init__(self, feeds: Iterable[Mapping[str, np.ndarray]]) -> None:
        self._feeds = [dict(f) for f in feeds]
        self._iter: Iterator[dict[str, np.ndarray]] = iter(self._feeds)

    def __len__(self) -> int:
        return len(self._feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._iter, None)

    def rewind(self) -> None:
        self._iter = iter(self._feeds)

    def __iter__(self):  # CalibrationDataReader is iterable too
        return iter(self._feeds)

    def __next__(self):
        item = self.get_next()
        if item is None:
            raise StopIteration
        return item


def to_int8(model, feeds: Sequence[Mapping[str, np.ndarray]], *, per_channel: bool = False, preprocess: bool = True):
    """An INT8 QDQ copy of ``model`` calibrated (MinMax) on ``feeds``.

    ``feeds`` holds one input dict per run, shaped like the model's static
    inputs.  ``preprocess`` runs ONNX Runtime's ``quant_pre_process`` (shape
    inference and optimisation) first, as its documentation advises.
    Activations and weights are signed INT8; ``per_channel`` quantises
    weights per output channel.  Raises :class:`ExportError` when
    calibration or quantisation fails."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    if not feeds:
        raise ExportError("INT8 quantisation needs at least one calibration input")

    class _Reader(ArrayReader, CalibrationDataReader):
        pass

    with tempfile.TemporaryDirectory(prefix="faceweave-int8-") as folder:
        source = Path(folder) / "fp32.onnx"
        prepared = Path(folder) / "prepared.onnx"
        target = Path(folder) / "int8.onnx"
        source.write_bytes(model.SerializeToString())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if preprocess:
                    quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
                else:
                    prepared = source
                quantize_static(
                    str(prepared),
                    str(target),
                    _Reader(feeds),
                    quant_format=QuantFormat.QDQ,
                    per_channel=per_channel,
                    activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8,
                    extra_options={"ActivationSymmetric": False, "WeightSymmetric": True},
                )
        except ExportError:
            raise
        except Exception as exc:  # the quantiser's errors have no common base: one ExportError
            raise ExportError(f"INT8 quantisation failed: {' '.join(str(exc).split())[:300]}") from exc
        return model_from_bytes(target.read_bytes(), what="INT8 model")
