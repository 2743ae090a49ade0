"""Simplify a graph without new dependencies: ONNX Runtime's offline optimiser.

ONNX Runtime folds constants (including ``Shape`` chains once the shapes are
static), removes identity and dead nodes and fuses simple patterns, then
writes the optimised graph (``SessionOptions.optimized_model_filepath``).
``basic`` keeps standard ONNX operators only, so the result still loads in
other runtimes and converters (``atc``, MagicMind); ``extended`` adds ONNX
Runtime fusions (``com.microsoft`` operators) that only ONNX Runtime runs.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from faceweave.errors import ExportError, InvalidOptionError
from faceweave.export.onnxfile import count_nodes, model_from_bytes

Level = Literal["basic", "extended"]
LEVELS: tuple[Level, ...] = ("basic", "extended")


@dataclass(frozen=True)
class SimplifyResult:
    """The simplified model and its node counts (main graph) before and after."""

    model: Any  # onnx.ModelProto
    nodes_before: int
    nodes_after: int


def simplify(model, *, level: Level = "basic") -> SimplifyResult:
    """Optimise ``model`` (an ``onnx.ModelProto``, left unchanged) offline.

    Raises :class:`InvalidOptionError` for an unknown level and
    :class:`ExportError` when ONNX Runtime cannot optimise the graph.
    """
    import onnxruntime as ort

    if level not in LEVELS:
        raise InvalidOptionError(f"optimisation level {level!r}: use one of {', '.join(LEVELS)}")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        if level == "basic"
        else ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    )
    with tempfile.TemporaryDirectory(prefix="faceweave-simplify-") as folder:
        target = Path(folder) / "optimized.onnx"
        options.optimized_model_filepath = str(target)
        try:
            ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ONNX Runtime's errors have no common base: one ExportError
            raise ExportError(f"ONNX Runtime cannot optimise the model: {' '.join(str(exc).split())[:300]}") from exc
        simplified = model_from_bytes(target.read_bytes(), what="optimised model")
    _keep_metadata(model, simplified)
    return SimplifyResult(model=simplified, nodes_before=count_nodes(model), nodes_after=count_nodes(simplified))


def _keep_metadata(source, target) -> None:
    """Keep the producer's metadata (ONNX Runtime drops ``metadata_props``)."""
    if not target.metadata_props and source.metadata_props:
        target.metadata_props.extend(source.metadata_props)
