"""The record of one export, written as JSON beside the model."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from faceweave.errors import OutputError
from faceweave.export.accuracy import OutputAccuracy
from faceweave.export.ascend import AscendCheck, AtcRun
from faceweave.io.atomic import atomic_output


@dataclass(frozen=True)
class ExportReport:
    """What an export did and what it cost.

        ``steps`` in order (``fix-shapes``, ``simplify``, ``fp16``, ``int8``,
        ``ascend-check``, ``atc``, ``magicmind-script``); node counts of the main
        graph before and after (``nodes_simplified`` right after simplification,
    before Q/DQ or Cast nodes are added); ``accuracy`` per output against the fp32 model
        with the same shapes, measured on ``accuracy_inputs``."""

    source: str
    output: str
    steps: tuple[str, ...]
    input_shapes: Mapping[str, tuple[int, ...]]
    output_shapes: Mapping[str, tuple[int | str | None, ...]]  # a dimension may stay dynamic
    nodes_before: int
    nodes_after: int
    nodes_simplified: int | None
    precision: str
    bytes_before: int
    bytes_after: int
    accuracy: tuple[OutputAccuracy, ...] = ()
    accuracy_inputs: str = ""
    calibration: Mapping[str, object] | None = None
    ascend: AscendCheck | None = None
    atc_command: str | None = None
    atc: AtcRun | None = None
    files: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "output": self.output,
            "steps": list(self.steps),
            "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
            "output_shapes": {k: list(v) for k, v in self.output_shapes.items()},
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "nodes_simplified": self.nodes_simplified,
            "precision": self.precision,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "accuracy": [a.to_dict() for a in self.accuracy],
            "accuracy_inputs": self.accuracy_inputs,
            "calibration": dict(self.calibration) if self.calibration is not None else None,
            "ascend": self.ascend.to_dict() if self.ascend else None,
            "atc_command": self.atc_command,
            "atc": dict(self.atc.__dict__) if self.atc else None,
            "files": list(self.files),
            "notes": list(self.notes),
        }

    def write(self, path: str | Path) -> Path:
        """Write the report as indented JSON, atomically."""
        target = Path(path)
        try:
            with atomic_output(target, suffix=".tmp.json") as temp:
                temp.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from exc
        return target


def default_report_path(model_path: str | Path) -> Path:
    """``face.onnx`` -> ``face.report.json`` beside it."""
    p = Path(model_path)
    return p.with_name(p.stem + ".report.json")
