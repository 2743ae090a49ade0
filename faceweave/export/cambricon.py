"""Cambricon MLU: a MagicMind build script for an exported ONNX model.

:func:`magicmind_script` writes a short Python program that, on a machine
with Cambricon's MagicMind SDK, parses the ONNX file
(``mm.Parser(mm.ModelKind.kOnnx)``), fixes the input dims, builds with a
``BuilderConfig`` (target archs and precision mode) and serialises the
model.  For the ``qint8_*`` modes it calibrates on the crops saved beside
the script (``.npy``, the model's input layout) with ``mm.Calibrator``.

UNTESTED HERE: the names follow Cambricon's public magicmind_cloud samples
(``magicmind.python.runtime``); no MagicMind SDK or MLU was available to run
the script.  It is checked to be valid Python only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from faceweave.errors import InvalidOptionError

PRECISION_MODES = ("force_float32", "force_float16", "qint8_mixed_float16", "qint8_mixed_float32")
#: MLU370 series; MLU270 is "mtp_270", MLU290 "mtp_290"
DEFAULT_ARCHS = ("mtp_372",)

_TEMPLATE = '''#!/usr/bin/env python3
"""Build a Cambricon MagicMind model from {onnx_name} (written by faceweave export).

Untested template: check it against your MagicMind SDK version.
Run on a machine with the MagicMind SDK:  python3 {script_name}
"""
import json
import os

import numpy as np
import magicmind.python.runtime as mm

HERE = os.path.dirname(os.path.abspath(__file__))
ONNX_MODEL = os.path.join(HERE, {onnx_name!r})
OUTPUT = os.path.join(HERE, {output_name!r})
INPUT_DIMS = {input_dims!r}
PRECISION = {precision!r}
ARCHS = {archs!r}
CALIBRATION = {calibration!r}


class ArrayCalibData(mm.CalibDataInterface):
    """Calibration batches from a saved array shaped like the first input."""

    def __init__(self, array, dims):
        super().__init__()
        self.array_ = np.ascontiguousarray(array.astype(np.float32))
        self.shape_ = mm.Dims(dims)
        self.batch_ = dims[0]
        self.index_ = 0
        self.sample_ = None

    def get_shape(self):
        return self.shape_

    def get_data_type(self):
        return mm.DataType.FLOAT32

    def get_sample(self):
        return self.sample_

    def next(self):
        end = self.index_ + self.batch_
        if end > len(self.array_):
            return mm.Status(mm.Code.OUT_OF_RANGE, "end of calibration data")
        self.sample_ = self.array_[self.index_:end]
        self.index_ = end
        return mm.Status.OK()

    def reset(self):
        self.index_ = 0
        self.sample_ = None
        return mm.Status.OK()


def main():
    network = mm.Network()
    parser = mm.Parser(mm.ModelKind.kOnnx)
    assert parser.parse(network, ONNX_MODEL).ok(), "MagicMind cannot parse " + ONNX_MODEL
    for i, dims in enumerate(INPUT_DIMS):
        network.get_input(i).set_dimension(mm.Dims(dims))

    config = mm.BuilderConfig()
    settings = {{
        "archs": ARCHS,
        "graph_shape_mutable": False,
        "precision_config": {{"precision_mode": PRECISION}},
    }}
    assert config.parse_from_string(json.dumps(settings)).ok(), "bad builder config"

    if PRECISION.startswith("qint"):
        data = ArrayCalibData(np.load(os.path.join(HERE, CALIBRATION)), INPUT_DIMS[0])
        calibrator = mm.Calibrator([data])
        assert calibrator.set_quantization_algorithm(mm.QuantizationAlgorithm.LINEAR_ALGORITHM).ok()
        assert calibrator.calibrate(network, config).ok(), "calibration failed"

    model = mm.Builder().build_model({model_name!r}, network, config)
    assert model is not None, "MagicMind build failed"
    model.serialize_to_file(OUTPUT)
    print("wrote", OUTPUT)


if __name__ == "__main__":
    main()
'''


def magicmind_script(
    onnx_path: str | Path,
    *,
    script_path: str | Path,
    input_shapes: Mapping[str, Sequence[int]],
    precision: str = "force_float16",
    archs: Sequence[str] = DEFAULT_ARCHS,
    calibration_file: str | None = None,
) -> str:
    """The text of the build script (paths are taken relative to the script's folder).  Pure."""
    if precision not in PRECISION_MODES:
        raise InvalidOptionError(f"MagicMind precision {precision!r}: use one of {', '.join(PRECISION_MODES)}")
    if precision.startswith("qint") and not calibration_file:
        raise InvalidOptionError(f"MagicMind precision {precision} needs calibration data")
    onnx_path, script_path = Path(onnx_path), Path(script_path)
    return _TEMPLATE.format(
        onnx_name=onnx_path.name,
        script_name=script_path.name,
        output_name=onnx_path.with_suffix(".magicmind").name,
        input_dims=[[int(d) for d in dims] for dims in input_shapes.values()],
        precision=precision,
        archs=list(archs),
        calibration=calibration_file,
        model_name=onnx_path.stem,
    )
