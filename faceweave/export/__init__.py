"""Export ONNX models for accelerators and measure them.

``export_model(source, output, ExportOptions(...))`` fixes dynamic
dimensions, simplifies the graph, optionally lowers precision (fp16, INT8
calibrated on face crops), reports the accuracy cost against the fp32
model, and for ``target="ascend"`` / ``"cambricon"`` checks operator
placement and writes the ``atc`` command / MagicMind build script.
``benchmark_model(path, batches=...)`` reports throughput per batch size.

Modules: ``onnxfile`` (read/write/run), ``shapes``, ``simplify``,
``precision``, ``calibration``, ``accuracy``, ``ascend``, ``cambricon``,
``bench``, ``report``, ``exporter``.  onnxruntime and onnx are imported
only when a function needs them.
"""

from __future__ import annotations

from faceweave.export.bench import BenchReport, BenchRow, benchmark_model, parse_batches
from faceweave.export.exporter import TARGETS, ExportOptions, export_model
from faceweave.export.report import ExportReport

__all__ = [
    "TARGETS",
    "BenchReport",
    "BenchRow",
    "ExportOptions",
    "ExportReport",
    "benchmark_model",
    "export_model",
    "parse_batches",
]
