"""One export, start to finish: fix shapes, simplify, lower precision,
measure the cost, check the target and write everything.

Nothing is written until every model step has succeeded; then the model,
the target files and the JSON report are each written atomically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from faceweave.errors import InvalidOptionError, OutputError
from faceweave.export import accuracy, ascend, calibration, cambricon, precision
from faceweave.export.onnxfile import (
    TensorSpec,
    convert_opset,
    graph_inputs,
    graph_outputs,
    load_model,
    onnx_opset,
    save_model,
)
from faceweave.export.report import ExportReport, default_report_path
from faceweave.export.shapes import fix_shapes, resolve_shapes
from faceweave.export.simplify import Level, simplify
from faceweave.io.atomic import atomic_output

Target = Literal["generic", "ascend", "cambricon"]
TARGETS: tuple[Target, ...] = ("generic", "ascend", "cambricon")


@dataclass(frozen=True)
class ExportOptions:
    """Everything an export does; serialisable, so a saved report reproduces a run.

    ``shapes`` maps input names to static shapes; ``batch`` sets the batch of
    the other inputs (and of a dynamic batch in ``shapes``).  ``optimize``
    is ``None`` to skip simplification.  ``calibration_dir`` holds face
    photos for INT8 calibration and the accuracy check (the astronaut when
    ``None``)."""

    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    batch: int | None = None
    opset: int | None = None
    optimize: Level | None = "basic"
    fp16: bool = False
    int8: bool = False
    per_channel: bool = False
    calibration_dir: Path | None = None
    calibration_count: int = 16
    held_back: int = 4
    target: Target = "generic"
    soc_version: str = "Ascend310P3"
    atc_precision: str = "allow_mix_precision"
    cann_mode: ascend.Mode = "graph"
    run_atc: bool = True
    cambricon_archs: tuple[str, ...] = cambricon.DEFAULT_ARCHS
    providers: tuple[str, ...] = ("CPUExecutionProvider",)

    def check(self) -> None:
        """Raise :class:`InvalidOptionError` for options that cannot work together."""
        if self.target not in TARGETS:
            raise InvalidOptionError(f"--target {self.target!r}: use one of {', '.join(TARGETS)}")
        if self.calibration_dir is not None and not Path(self.calibration_dir).is_dir():
            raise InvalidOptionError(f"--calibration {self.calibration_dir}: not a folder")
        if self.calibration_count <= 0 or self.held_back <= 0:
            raise InvalidOptionError("calibration and held-back counts must be positive")
        if self.target == "ascend":  # validate before any work
            ascend.atc_command(
                "m.onnx", "m", soc_version=self.soc_version, input_shapes={}, precision_mode=self.atc_precision
            )


def export_model(
    source: str | Path,
    output: str | Path,
    options: ExportOptions = ExportOptions(),
    *,
    report_path: str | Path | None = None,
) -> ExportReport:
    """Export the ONNX model ``source`` to ``output`` as ``options`` say; return (and write) the report.

    Raises :class:`ModelFormatError` for a file that is not ONNX,
    :class:`ExportError` when the model cannot be exported as asked,
    :class:`InvalidOptionError` / :class:`OutputError` for bad options and
    unwritable outputs.  A failed export leaves nothing under ``output``."""
    options.check()
    source, output = Path(source), Path(output)
    _check_paths(source, output)
    model = load_model(source)
    log = _Steps()
    nodes_before = len(model.graph.node)
    reference, current, shapes, simplified = _normalised(model, options, log)
    inputs = graph_inputs(current)
    crops = _crops(options, inputs, shapes) if (options.int8 or options.fp16 or options.calibration_dir) else None
    current, int8_here = _lowered(current, options, inputs, shapes, crops, log)
    held = crops.held_back if crops is not None else None
    feeds = (
        calibration.to_feeds(held, inputs, shapes, seed=1)
        if held is not None
        else [_random_feed(inputs, shapes, seed) for seed in range(2)]
    )
    measured = accuracy.measure(reference, current, feeds, providers=options.providers)
    check = _ascend_check(current, options, int8_here, log) if options.target == "ascend" else None
    report_target = Path(report_path) if report_path else default_report_path(output)
    save_model(current, output)
    files, atc_line, atc_run = _target_files(output, shapes, options, crops, log)
    report = ExportReport(
        source=str(source),
        output=str(output),
        steps=tuple(log.steps),
        input_shapes=shapes,
        output_shapes={o.name: tuple(o.shape) for o in graph_outputs(current)},
        nodes_before=nodes_before,
        nodes_after=len(current.graph.node),
        nodes_simplified=simplified,
        precision=_precision_name(options, int8_here),
        bytes_before=source.stat().st_size,
        bytes_after=output.stat().st_size,
        accuracy=measured,
        accuracy_inputs=f"{len(feeds)} run(s) on " + ("held-back face crops" if held is not None else "random inputs"),
        calibration=_calibration_info(crops),
        ascend=check,
        atc_command=atc_line,
        atc=atc_run,
        files=tuple(files + [str(report_target)]),
        notes=tuple(log.notes + list(crops.notes if crops else ())),
    )
    report.write(report_target)
    return report


@dataclass
class _Steps:
    """What an export did (``steps``) and what its report should say (``notes``), in order."""

    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _check_paths(source: Path, output: Path) -> None:
    if output.suffix.lower() != ".onnx":
        raise InvalidOptionError(f"-o {output}: the exported model's name must end in .onnx")
    if not output.parent.is_dir():
        raise OutputError(f"cannot write {output}: folder {output.parent} does not exist")
    if output.resolve() == source.resolve():
        raise InvalidOptionError(f"-o {output}: give a name other than the source model")


def _normalised(model, options: ExportOptions, log: _Steps):
    """The opset converted, the shapes fixed (the accuracy reference) and the
    graph simplified: ``(reference, current, shapes, nodes after simplifying)``."""
    if options.opset is not None:
        model = convert_opset(model, options.opset)
        log.steps.append(f"opset-{options.opset}")
    shapes = resolve_shapes(graph_inputs(model), options.shapes, batch=options.batch)
    reference = fix_shapes(model, shapes, providers=options.providers)
    log.steps.append("fix-shapes")
    current, simplified = reference, None
    if options.optimize:
        current = simplify(reference, level=options.optimize).model
        simplified = len(current.graph.node)
        log.steps.append(f"simplify-{options.optimize}")
    return reference, current, shapes, simplified


def _lowered(current, options: ExportOptions, inputs, shapes, crops, log: _Steps):
    """INT8 (calibrated here, except for Cambricon, which quantises from the
    saved crops) and FP16: ``(model, whether INT8 was applied here)``."""
    int8_here = options.int8 and options.target != "cambricon"
    if options.int8 and not int8_here and crops is None:
        raise InvalidOptionError("--int8 --target cambricon needs an image input to save calibration crops for")
    if int8_here:
        if crops is not None:
            calib = calibration.to_feeds(crops.calibration, inputs, shapes)
        else:
            calib = [_random_feed(inputs, shapes, 100 + i) for i in range(options.calibration_count)]
            log.notes.append("no image input: INT8 calibrated on random inputs")
        current = precision.to_int8(current, calib, per_channel=options.per_channel)
        log.steps.append("int8-qdq" + ("-per-channel" if options.per_channel else ""))
    if options.fp16:
        current = precision.to_fp16(current, op_block_list=_fp16_blocklist(int8_here))
        log.steps.append("fp16")
    if options.int8 and not int8_here:
        log.notes.append(
            "cambricon: the ONNX stays float; MagicMind quantises it to INT8 from the saved calibration crops"
        )
    return current, int8_here


def _ascend_check(current, options: ExportOptions, int8_here: bool, log: _Steps):
    """The Ascend operator check, and notes on the opset and INT8 that atc reads."""
    check = ascend.check_model(current, mode=options.cann_mode)
    log.steps.append(f"ascend-check-{options.cann_mode}")
    lo, hi = ascend.ATC_OPSETS
    if not lo <= onnx_opset(current) <= hi:
        log.notes.append(
            f"atc reads ai.onnx opset {lo}-{hi}; this model is opset {onnx_opset(current)} (re-export with "
            f"--opset {hi})"
        )
    if int8_here:
        log.notes.append("atc may not accept ONNX Runtime QDQ models; Huawei's AMCT is the INT8 path for Ascend")
    return check


def _target_files(output: Path, shapes, options: ExportOptions, crops, log: _Steps):
    """The files a target needs beside the model (atc command, MagicMind
    script): ``(files, atc command line, atc run)``."""
    files = [str(output)]
    atc_line = atc_run = None
    if options.target == "ascend":
        atc_line, atc_run, extra = _ascend_files(output, shapes, options)
        files += extra
        log.steps.extend(["atc-command"] + (["atc"] if atc_run else []))
        if atc_run is None:
            log.notes.append("atc is not on the PATH (or --no-atc): run the command in " + extra[0])
    if options.target == "cambricon":
        files += _cambricon_files(output, shapes, options, crops)
        log.steps.append("magicmind-script")
    return files, atc_line, atc_run


def _crops(options: ExportOptions, inputs: Sequence[TensorSpec], shapes: Mapping[str, tuple[int, ...]]):
    layouts = [calibration.image_layout(shapes[s.name], dtype=s.dtype) for s in inputs]
    layout = next((found for found in layouts if found is not None), None)
    if layout is None:
        return None
    return calibration.collect_crops(
        options.calibration_dir,
        (layout.height, layout.width),
        calibration=options.calibration_count,
        held_back=options.held_back,
    )


def _random_feed(
    inputs: Sequence[TensorSpec], shapes: Mapping[str, tuple[int, ...]], seed: int
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {s.name: rng.random(shapes[s.name]).astype(s.dtype) for s in inputs}


def _fp16_blocklist(after_int8: bool) -> list[str] | None:
    if not after_int8:
        return None
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST

    return list(DEFAULT_OP_BLOCK_LIST) + ["QuantizeLinear", "DequantizeLinear"]


def _precision_name(options: ExportOptions, int8_here: bool) -> str:
    parts = (["int8"] if int8_here else []) + (["fp16"] if options.fp16 else [])
    return "+".join(parts) or "fp32"


def _calibration_info(crops) -> dict | None:
    if crops is None:
        return None
    return {
        "calibration_crops": len(crops.calibration),
        "held_back_crops": len(crops.held_back),
        "sources": list(crops.sources),
    }


def _ascend_files(output: Path, shapes, options: ExportOptions):
    om = output.with_suffix(".om")
    stem = output.with_name(f".{output.stem}.atc-tmp")
    args = ascend.atc_command(
        output,
        stem if options.run_atc and ascend.atc_available() else output.with_suffix(""),
        soc_version=options.soc_version,
        input_shapes=shapes,
        precision_mode=options.atc_precision,
    )
    shown = ascend.atc_command(
        output,
        output.with_suffix(""),
        soc_version=options.soc_version,
        input_shapes=shapes,
        precision_mode=options.atc_precision,
    )
    line = ascend.command_line(shown)
    script = output.with_name(output.stem + ".atc.sh")
    _write_text(script, "#!/bin/sh\n# Build the Ascend offline model (written by faceweave export)\n" + line + "\n")
    run = ascend.run_atc(args, om_path=om) if options.run_atc and ascend.atc_available() else None
    return line, run, [str(script)] + ([run.om_path] if run and run.om_path else [])


def _cambricon_files(output: Path, shapes, options: ExportOptions, crops) -> list[str]:
    files = []
    calib_name = None
    if options.int8:
        layout = next((found for found in map(calibration.image_layout, shapes.values()) if found is not None), None)
        if crops is None or layout is None:
            raise InvalidOptionError("--int8 for cambricon needs an image input to calibrate")
        array = calibration.pixels_to_input(crops.calibration, layout)
        calib_path = output.with_name(output.stem + ".calib.npy")
        _save_npy(calib_path, array)
        files.append(str(calib_path))
        calib_name = calib_path.name
    mode = "qint8_mixed_float16" if options.int8 else ("force_float16" if options.fp16 else "force_float32")
    script = output.with_name(output.stem + ".magicmind.py")
    text = cambricon.magicmind_script(
        output,
        script_path=script,
        input_shapes=shapes,
        precision=mode,
        archs=options.cambricon_archs,
        calibration_file=calib_name,
    )
    _write_text(script, text)
    return [str(script)] + files


def _write_text(path: Path, text: str) -> None:
    try:
        with atomic_output(path, suffix=".tmp") as temp:
            temp.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _save_npy(path: Path, array: np.ndarray) -> None:
    try:
        with atomic_output(path, suffix=".tmp.npy") as temp, open(temp, "wb") as fh:
            np.save(fh, array)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
