"""``faceweave export`` and ``faceweave benchmark-model``: deployable ONNX
models for accelerators, and throughput per batch size."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli import console
from faceweave.errors import InvalidOptionError, ProviderError
from faceweave.runtime.providers import PROVIDERS

#: oldest ai.onnx opset ONNX Runtime runs
MIN_OPSET = 7


_ModelFlag = Annotated[Path, typer.Argument(metavar="MODEL", help="ONNX model to export.")]

_OutputFlag = Annotated[
    Path,
    typer.Option("--output", "-o", metavar="OUT.onnx", help="Exported model (.onnx); the report goes beside it."),
]

_ShapeFlag = Annotated[
    list[str] | None,
    typer.Option(
        "--shape",
        metavar="NAME=D1,D2,..",
        help="Static shape of an input, e.g. images=1,3,320,320 (repeat per input).",
    ),
]

_BatchFlag = Annotated[
    int | None, typer.Option("--batch", metavar="N", help="Batch size for inputs with a dynamic batch.")
]

_OpsetFlag = Annotated[
    int | None, typer.Option("--opset", metavar="N", help="Convert to this ai.onnx opset first (atc reads 11-15).")
]

_OptimizeFlag = Annotated[
    str,
    typer.Option(
        "--optimize",
        metavar="LEVEL",
        help="Graph simplification: basic (portable ONNX), extended (ONNX Runtime only) or none.",
    ),
]

_Fp16Flag = Annotated[
    bool, typer.Option("--fp16", help="Convert weights and compute to float16 (inputs/outputs stay float32).")
]

_Int8Flag = Annotated[bool, typer.Option("--int8", help="Quantise to INT8 (QDQ), calibrated on face crops.")]

_CalibrationDirFlag = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        metavar="DIR",
        help="Folder of face photos for INT8 calibration and the accuracy check (default: a stock photo).",
    ),
]

_PerChannelFlag = Annotated[bool, typer.Option("--per-channel", help="INT8: quantise weights per output channel.")]

_CalibrationCountFlag = Annotated[
    int, typer.Option("--calibration-count", metavar="N", help="Face crops used for calibration.")
]

_HeldBackFlag = Annotated[
    int, typer.Option("--held-back", metavar="N", help="Face crops held back to measure the accuracy cost.")
]

_TargetFlag = Annotated[
    str,
    typer.Option(
        "--target", metavar="TARGET", help="generic | ascend (CANN check + atc) | cambricon (MagicMind script)."
    ),
]

_SocVersionFlag = Annotated[
    str, typer.Option("--soc-version", metavar="SOC", help="Ascend chip for atc --soc_version.")
]

_CannModeFlag = Annotated[
    str,
    typer.Option("--cann-mode", metavar="MODE", help="Ascend placement check: graph (CANN EP default) or kernel."),
]

_RunAtcFlag = Annotated[bool, typer.Option("--atc/--no-atc", help="Run atc when it is on the PATH.")]

_ReportFlag = Annotated[
    Path | None,
    typer.Option("--report", metavar="FILE", help="Where to write the JSON report (default OUT.report.json)."),
]

_JsonOutputFlag = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]

_VerboseFlag = Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")]


def export_command(
    model: _ModelFlag,
    output: _OutputFlag,
    shape: _ShapeFlag = None,
    batch: _BatchFlag = None,
    opset: _OpsetFlag = None,
    optimize: _OptimizeFlag = "basic",
    fp16: _Fp16Flag = False,
    int8: _Int8Flag = False,
    calibration_dir: _CalibrationDirFlag = None,
    per_channel: _PerChannelFlag = False,
    calibration_count: _CalibrationCountFlag = 16,
    held_back: _HeldBackFlag = 4,
    target: _TargetFlag = "generic",
    soc_version: _SocVersionFlag = "Ascend310P3",
    cann_mode: _CannModeFlag = "graph",
    run_atc: _RunAtcFlag = True,
    report: _ReportFlag = None,
    json_output: _JsonOutputFlag = False,
    verbose: _VerboseFlag = False,
) -> None:
    """Export MODEL for deployment: static shapes, simplified graph, optional fp16/INT8, accuracy report."""

    def body(term: console.Terminal) -> int:
        from faceweave.export import ExportOptions, export_model
        from faceweave.export.shapes import parse_shape

        shapes = dict(parse_shape(s) for s in (shape or []))
        _check_flags(optimize=optimize, cann_mode=cann_mode, opset=opset)
        options = ExportOptions(
            shapes=shapes,
            batch=batch,
            opset=opset,
            optimize=None if optimize == "none" else optimize,  # type: ignore[arg-type]
            fp16=fp16,
            int8=int8,
            per_channel=per_channel,
            calibration_dir=calibration_dir,
            calibration_count=calibration_count,
            held_back=held_back,
            target=target,  # type: ignore[arg-type]  # a str from the command line: ExportOptions.check() names the choices
            soc_version=soc_version,
            cann_mode=cann_mode,  # type: ignore[arg-type]  # likewise
            run_atc=run_atc,
        )
        result = export_model(model, output, options, report_path=report)
        if json_output:
            term.json(result.to_dict())
        else:
            _print_report(term, result)
        if result.atc is not None and result.atc.returncode != 0:
            last = result.atc.log_tail.splitlines()[-1] if result.atc.log_tail else "no output"
            term.error(f"atc failed (exit {result.atc.returncode}): {last}")
            return console.EXIT_FAILURE
        return console.EXIT_OK

    raise typer.Exit(console.run(verbose, body))


def _check_flags(*, optimize: str, cann_mode: str, opset: int | None) -> None:
    if optimize not in ("basic", "extended", "none"):
        raise InvalidOptionError(f"--optimize {optimize!r}: use basic, extended or none")
    if cann_mode not in ("graph", "kernel"):
        raise InvalidOptionError(f"--cann-mode {cann_mode!r}: use graph or kernel")
    if opset is not None:
        import onnx

        newest = onnx.defs.onnx_opset_version()
        if not MIN_OPSET <= opset <= newest:
            raise InvalidOptionError(f"--opset {opset}: use an ai.onnx opset from {MIN_OPSET} to {newest}")


def benchmark_model_command(
    model: Annotated[Path, typer.Argument(metavar="MODEL", help="ONNX model to time.")],
    batch: Annotated[str, typer.Option("--batch", metavar="B1,B2,..", help="Batch sizes to time.")] = "1,2,4,8",
    repeat: Annotated[
        int, typer.Option("--repeat", metavar="N", help="Timed runs per batch size (median reported).")
    ] = 10,
    warmup: Annotated[int, typer.Option("--warmup", metavar="N", help="Untimed runs first.")] = 2,
    provider: Annotated[
        str, typer.Option("--execution-provider", metavar="EP", help=f"{' | '.join(PROVIDERS)}.")
    ] = "cpu",
    dim: Annotated[
        list[str] | None,
        typer.Option("--dim", metavar="NAME=N", help="Size of a named dynamic dim, e.g. height=320 (others: 128)."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the table as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")] = False,
) -> None:
    """Time MODEL at each batch size: ms per run and items per second."""

    def body(term: console.Terminal) -> int:
        from faceweave.export import benchmark_model, parse_batches

        batches = parse_batches(batch)
        dims = dict(_parse_dim(d) for d in (dim or []))
        result = benchmark_model(
            model, batches=batches, repeat=repeat, warmup=warmup, providers=resolve_providers(provider), dims=dims
        )
        if json_output:
            term.json(result.to_dict())
            return console.EXIT_OK
        _print_bench(term, result)
        return console.EXIT_OK

    raise typer.Exit(console.run(verbose, body))


def resolve_providers(name: str, device_id: int = 0) -> list:
    """ONNX Runtime's provider list (with options) for ``--execution-provider``,
    built by :mod:`faceweave.runtime.providers` like every other command's;
    :class:`ProviderError` naming the available ones when ONNX Runtime here
    does not have it."""
    import onnxruntime as ort

    from faceweave.runtime.providers import ProviderConfig, ort_providers

    available = ort.get_available_providers()
    config = ProviderConfig(name=name.strip().lower(), device_id=device_id)
    chain = ort_providers(config, available)
    if chain[0][0] not in available:
        raise ProviderError(
            f"--execution-provider {name}: {chain[0][0]} is not available here; available: {', '.join(available)}"
        )
    return chain


def _parse_dim(text: str) -> tuple[str, int]:
    name, _, value = text.partition("=")
    try:
        size = int(value)
    except ValueError:
        size = 0
    if not name.strip() or size <= 0:
        raise InvalidOptionError(f"--dim {text!r}: write NAME=N with N positive, e.g. height=320")
    return name.strip(), size


def _print_report(term: console.Terminal, r) -> None:
    def mb(n: float) -> str:
        return f"{n / 1e6:.1f} MB"

    simplified = f" ({r.nodes_simplified} after simplifying)" if r.nodes_simplified not in (None, r.nodes_after) else ""
    term.line(
        f"wrote {r.output} ({r.precision}, {r.nodes_before} -> {r.nodes_after} nodes{simplified}, "
        f"{mb(r.bytes_before)} -> {mb(r.bytes_after)})"
    )
    term.line("inputs: " + "; ".join(f"{k}={','.join(map(str, v))}" for k, v in r.input_shapes.items()))
    for a in r.accuracy:
        term.line(
            f"{a.name}: cosine mean {a.cosine_mean:.5f} min {a.cosine_min:.5f}, "
            f"PSNR mean {a.psnr_mean:.1f} dB min {a.psnr_min:.1f} dB ({r.accuracy_inputs})"
        )
    if r.ascend is not None:
        c = r.ascend
        ops = ", ".join(f"{op} x{n}" for op, n in c.by_op().items()) or "none"
        term.line(
            f"ascend ({c.mode} mode, opset {c.opset}): {c.on_npu}/{c.nodes} nodes on the NPU; CPU fallbacks: {ops}"
        )
    if r.atc_command:
        term.line(f"atc: {r.atc_command}")
    if r.atc is not None:
        term.line(f"atc exit {r.atc.returncode}" + (f", wrote {r.atc.om_path}" if r.atc.om_path else ""))
    for note in r.notes:
        term.note(f"note: {note}")
    term.line(f"report: {r.files[-1]}")


def _print_bench(term: console.Terminal, result) -> None:
    from rich.table import Table

    shapes = "; ".join(f"{k}={','.join(map(str, v))}" for k, v in result.input_shapes.items())
    table = Table(title=f"{Path(result.model).name} on {result.providers[0]} ({shapes})", title_justify="left")
    for name in ("batch", "ms/run", "items/s"):
        table.add_column(name, justify="right")
    best = result.best.batch
    for row in result.rows:
        mark = " *" if row.batch == best else ""
        table.add_row(str(row.batch), f"{row.ms_per_run:.2f}", f"{row.items_per_s:.1f}{mark}")
    term.out.print(table)
    for note in result.notes:
        term.note(f"note: {note}")
