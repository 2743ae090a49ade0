"""``faceweave.export``: static shapes, simplification, fp16/INT8 with an
accuracy report, Ascend/Cambricon outputs, batch benchmarks and the CLI,
on tiny generated ONNX models and the real network in the ``nudenet`` wheel."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from export_fixtures import conv_model, foldable_expected, foldable_model, nudenet_model
from faceweave.errors import ExportError, InputError, InvalidOptionError, ModelFormatError
from faceweave.export import ExportOptions, benchmark_model, export_model, parse_batches
from faceweave.export.accuracy import PSNR_CAP_DB, cosine, psnr
from faceweave.export.ascend import atc_command, check_model, command_line
from faceweave.export.calibration import Face, split_faces
from faceweave.export.onnxfile import graph_inputs, load_model
from faceweave.export.shapes import fix_shapes, parse_shape, resolve_shapes
from faceweave.export.simplify import simplify

NOISE = ("Traceback", "WARNING:", "INFO:", "absl", "W0000", "I0000")


def ort_run(path_or_model, feeds: dict) -> list[np.ndarray]:
    data = path_or_model.SerializeToString() if hasattr(path_or_model, "SerializeToString") else str(path_or_model)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


def dims_of(value) -> list:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in value.type.tensor_type.shape.dim]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {
        "dynamic": conv_model(folder / "dynamic.onnx"),
        "fixed_batch": conv_model(folder / "fixed_batch.onnx", dims=(1, 3, 16, 16)),
        "foldable": foldable_model(folder / "foldable.onnx"),
        "trilu": conv_model(folder / "trilu.onnx", dims=(1, 3, 8, 8), opset=14, extra_op="Trilu"),
    }


# --- shapes ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("images=1,3,320,320", ("images", (1, 3, 320, 320))),
        (" x = 2, 3, 8, 8 ", ("x", (2, 3, 8, 8))),
        ("x=1x3x8x8", ("x", (1, 3, 8, 8))),
        ("x", InvalidOptionError),
        ("x=", InvalidOptionError),
        ("x=1,a,3", InvalidOptionError),
        ("x=1,0,3", InvalidOptionError),
    ],
)
def test_parse_shape(text, expected):
    if isinstance(expected, type):
        with pytest.raises(expected):
            parse_shape(text)
    else:
        assert parse_shape(text) == expected


def test_fixing_dynamic_dims_gives_a_static_model_that_runs(models, tmp_path):
    model = load_model(models["dynamic"])
    shapes = resolve_shapes(graph_inputs(model), {"x": (2, 3, 16, 20)})
    fixed = fix_shapes(model, shapes)
    out = tmp_path / "fixed.onnx"
    onnx.save(fixed, str(out))

    saved = onnx.load(str(out))
    assert dims_of(saved.graph.input[0]) == [2, 3, 16, 20]
    assert dims_of(saved.graph.output[0]) == [2, 4, 16, 20]
    x = np.random.default_rng(3).random((2, 3, 16, 20), dtype=np.float32)
    (y,) = ort_run(out, {"x": x})
    (expected,) = ort_run(models["dynamic"], {"x": x})
    assert y.shape == (2, 4, 16, 20)
    np.testing.assert_array_equal(y, expected)


def test_batch_alone_sets_the_batch_and_names_the_other_dynamic_dims(models):
    inputs = graph_inputs(load_model(models["dynamic"]))
    with pytest.raises(ExportError, match=r"--shape x=4,3,N,N"):
        resolve_shapes(inputs, {}, batch=4)
    assert resolve_shapes(inputs, {"x": (1, 3, 8, 8)}, batch=4) == {"x": (4, 3, 8, 8)}
    fixed_inputs = graph_inputs(load_model(models["fixed_batch"]))
    assert resolve_shapes(fixed_inputs, {}) == {"x": (1, 3, 16, 16)}


# (model, shapes, batch, fragments of the message)
REFUSED = [
    ("dynamic", {"x": (1, 3, 16)}, None, ["rank 4", "rank 3"]),
    ("dynamic", {"x": (1, 4, 16, 16)}, None, ["dim 1 fixed to 3", "sets it to 4"]),
    ("fixed_batch", {"x": (2, 3, 16, 16)}, None, ["dim 0 fixed to 1"]),
    ("fixed_batch", {}, 2, ["fixed batch of 1", "--batch 2"]),
    ("dynamic", {"images": (1, 3, 8, 8)}, None, ["'images'", "x(batch,3,height,width)"]),
]


@pytest.mark.parametrize("name, shapes, batch, fragments", REFUSED)
def test_shapes_the_model_cannot_take_are_refused_and_nothing_is_written(
    models, tmp_path, name, shapes, batch, fragments
):
    out = tmp_path / "out.onnx"
    with pytest.raises(ExportError) as info:
        export_model(models[name], out, ExportOptions(shapes=shapes, batch=batch))
    for fragment in fragments:
        assert fragment in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_a_shape_the_graph_cannot_run_is_refused(tmp_path):
    """A reshape to a fixed ``[1, 48]`` only works for 4x4 images: 8x8 fails the check run."""
    from onnx import TensorProto, helper, numpy_helper

    target = numpy_helper.from_array(np.array([1, 48], np.int64), "target")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "target"], ["y"])],
        "reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 48])],
        [target],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert graph_inputs(fix_shapes(model, {"x": (1, 3, 4, 4)}))[0].shape == (1, 3, 4, 4)
    with pytest.raises(ExportError, match=r"cannot take shape x=\[1, 3, 8, 8\]"):
        fix_shapes(model, {"x": (1, 3, 8, 8)})


# --- simplification ----------------------------------------------------------


def test_simplification_folds_constants_and_keeps_outputs(models):
    model = load_model(models["foldable"])
    fixed = fix_shapes(model, {"x": (3, 4)})
    result = simplify(fixed)
    assert result.nodes_before == 8
    assert result.nodes_after <= 2
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.0
    (y,) = ort_run(result.model, {"x": x})
    np.testing.assert_allclose(y, foldable_expected(x), rtol=1e-6, atol=1e-6)


# --- metrics and calibration split ---------------------------------------------


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([1.0, 0.0], [0.0, 1.0], 0.0),
        ([1.0, 2.0], [2.0, 4.0], 1.0),
        ([1.0, 0.0], [-1.0, 0.0], -1.0),
        ([0.0, 0.0], [0.0, 0.0], 1.0),
    ],
)
def test_cosine(a, b, expected):
    assert cosine(np.array(a), np.array(b)) == pytest.approx(expected)


def test_psnr_uses_the_reference_range_as_peak():
    # range 3, MSE 0.25 -> 10 log10(9 / 0.25) = 10 log10(36)
    assert psnr(np.array([0.0, 1, 2, 3]), np.array([0.0, 1, 2, 4])) == pytest.approx(10 * math.log10(36))
    assert psnr(np.ones(4), np.ones(4)) == PSNR_CAP_DB


def test_held_back_split_is_deterministic():
    faces = [Face(f"p{i}", np.zeros((4, 4, 3), np.uint8), (0, 0, 1, 1)) for i in range(8)]
    kept, held = split_faces(faces, every=4)
    assert [f.source for f in held] == ["p3", "p7"]
    assert [f.source for f in kept] == ["p0", "p1", "p2", "p4", "p5", "p6"]
    one = faces[:1]
    assert split_faces(one) == (one, one)


# --- precision -----------------------------------------------------------------


def test_fp16_export_keeps_float32_io_and_accuracy(models, tmp_path):
    out = tmp_path / "fp16.onnx"
    report = export_model(
        models["dynamic"], out, ExportOptions(shapes={"x": (1, 3, 64, 64)}, fp16=True, calibration_count=2, held_back=2)
    )
    saved = onnx.load(str(out))
    assert saved.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert saved.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert {init.data_type for init in saved.graph.initializer} == {onnx.TensorProto.FLOAT16}
    assert report.precision == "fp16" and "fp16" in report.steps
    (acc,) = report.accuracy
    assert acc.name == "y" and acc.runs == 2
    assert acc.cosine_min >= 0.999
    assert 30.0 < acc.psnr_min <= PSNR_CAP_DB
    x = np.random.default_rng(1).random((1, 3, 64, 64), dtype=np.float32)
    assert cosine(ort_run(out, {"x": x})[0], ort_run(models["dynamic"], {"x": x})[0]) >= 0.999
    written = json.loads((tmp_path / "fp16.report.json").read_text())
    assert written["accuracy"][0]["cosine_min"] >= 0.999
    assert written["input_shapes"] == {"x": [1, 3, 64, 64]}


@pytest.mark.slow
def test_int8_export_of_a_real_network_on_face_crops(faces_dir, tmp_path):
    source = nudenet_model()
    if source is None:
        pytest.skip("the nudenet wheel (320n.onnx) is not installed")
    out = tmp_path / "320n_int8.onnx"
    report = export_model(
        source,
        out,
        ExportOptions(
            shapes={"images": (1, 3, 320, 320)}, int8=True, calibration_dir=faces_dir, calibration_count=6, held_back=3
        ),
    )
    saved = onnx.load(str(out))
    ops = {n.op_type for n in saved.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    assert dims_of(saved.graph.input[0]) == [1, 3, 320, 320]
    assert dims_of(saved.graph.output[0]) == [1, 22, 2100]
    assert report.precision == "int8"
    assert report.bytes_after < report.bytes_before / 2
    assert report.calibration["calibration_crops"] == 6 and report.calibration["held_back_crops"] == 3
    sources = report.calibration["sources"]  # 6 calibration photos, then 3 held back
    assert len(set(sources)) == 9
    assert all(s.split("/")[0] in {"group", "hard", "identity", "single"} for s in sources)
    assert report.nodes_before == 323 and report.nodes_simplified < report.nodes_before
    (acc,) = report.accuracy
    assert acc.name == "output0" and acc.runs == 3
    assert 0.9 < acc.cosine_min <= 1.0
    assert 15.0 < acc.psnr_min < PSNR_CAP_DB
    assert "held-back face crops" in report.accuracy_inputs


# --- targets -------------------------------------------------------------------


def test_ascend_check_flags_an_op_cann_lacks(models):
    model = load_model(models["trilu"])
    graph = check_model(model, mode="graph")
    assert graph.nodes == 3 and graph.on_npu == 2
    assert [(f.node, f.op_type) for f in graph.fallbacks] == [("extra", "Trilu")]
    kernel = check_model(model, mode="kernel")
    assert [(f.op_type, f.reason) for f in kernel.fallbacks] == [("Trilu", "no CANN kernel for this op type")]


def test_ascend_graph_mode_rejects_opsets_outside_its_range(models):
    check = check_model(load_model(models["dynamic"]), mode="graph")  # opset 17
    assert check.on_npu == 0
    assert all("opset 17" in f.reason for f in check.fallbacks)


def test_atc_command_line():
    args = atc_command(
        "/m/face.onnx", "/m/face", soc_version="Ascend310P3", input_shapes={"images": (1, 3, 128, 128), "emb": (1, 512)}
    )
    assert args[0] == "atc"
    for flag in (
        "--model=/m/face.onnx",
        "--framework=5",
        "--output=/m/face",
        "--soc_version=Ascend310P3",
        "--input_shape=images:1,3,128,128;emb:1,512",
        "--precision_mode=allow_mix_precision",
    ):
        assert flag in args
    assert "'--input_shape=images:1,3,128,128;emb:1,512'" in command_line(args)
    with pytest.raises(InvalidOptionError):
        atc_command("m.onnx", "m", soc_version="310P3; rm -rf /", input_shapes={})


def test_ascend_export_writes_the_command_and_runs_atc_when_present(models, tmp_path, monkeypatch):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    atc = fake_bin / "atc"
    atc.write_text(
        '#!/bin/sh\nfor a in "$@"; do case "$a" in --output=*) out="${a#--output=}";; esac; done\n'
        'echo "ATC run success" ; printf om > "$out.om"\n'
    )
    atc.chmod(atc.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    report = export_model(
        models["trilu"], out_dir / "trilu.onnx", ExportOptions(target="ascend", soc_version="Ascend910B")
    )
    assert "--input_shape=x:1,3,8,8" in report.atc_command and "--soc_version=Ascend910B" in report.atc_command
    assert (out_dir / "trilu.atc.sh").read_text().strip().endswith(report.atc_command)
    assert report.atc is not None and report.atc.returncode == 0
    assert (out_dir / "trilu.om").read_text() == "om"
    assert sorted(p.name for p in out_dir.iterdir()) == ["trilu.atc.sh", "trilu.om", "trilu.onnx", "trilu.report.json"]
    assert [f.op_type for f in report.ascend.fallbacks] == ["Trilu"]


def test_cambricon_script_is_valid_python(models, tmp_path):
    out = tmp_path / "conv.onnx"
    report = export_model(
        models["dynamic"],
        out,
        ExportOptions(shapes={"x": (2, 3, 32, 32)}, target="cambricon", int8=True, calibration_count=2, held_back=1),
    )
    script = tmp_path / "conv.magicmind.py"
    text = script.read_text()
    compile(text, str(script), "exec")
    assert "mm.Parser(mm.ModelKind.kOnnx)" in text and "INPUT_DIMS = [[2, 3, 32, 32]]" in text
    assert "PRECISION = 'qint8_mixed_float16'" in text and "'conv.onnx'" in text
    calib = np.load(tmp_path / "conv.calib.npy")
    assert calib.shape == (2, 3, 32, 32) and calib.dtype == np.float32 and 0.0 <= calib.min() <= calib.max() <= 1.0
    assert report.precision == "fp32"  # MagicMind quantises; the ONNX stays float
    assert str(script) in report.files


# --- benchmark -------------------------------------------------------------------


def test_benchmark_reports_each_batch_of_a_dynamic_model(models):
    result = benchmark_model(models["dynamic"], batches=(1, 2, 4), repeat=2, warmup=1, dims={"height": 16, "width": 16})
    assert [r.batch for r in result.rows] == [1, 2, 4]
    assert all(r.ms_per_run > 0 and r.items_per_s == pytest.approx(r.batch * 1000 / r.ms_per_run) for r in result.rows)
    assert result.input_shapes == {"x": (4, 3, 16, 16)}
    assert result.notes == ()


def test_benchmark_of_a_fixed_batch_model_reports_batch_one(models):
    result = benchmark_model(models["fixed_batch"], batches=(1, 2, 4), repeat=2, warmup=0)
    assert [r.batch for r in result.rows] == [1]
    assert "fixed to 1" in result.notes[0] and "2, 4" in result.notes[0]


@pytest.mark.parametrize(
    "text, expected",
    [("1,2,4,8", (1, 2, 4, 8)), ("4,4,1", (4, 1)), ("0", InvalidOptionError), ("a", InvalidOptionError)],
)
def test_parse_batches(text, expected):
    if isinstance(expected, type):
        with pytest.raises(expected):
            parse_batches(text)
    else:
        assert parse_batches(text) == expected


# --- bad files and the command line ---------------------------------------------


@pytest.fixture(scope="module")
def bad_models(models, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bad")
    (folder / "text.onnx").write_text("this is not a model\n")
    data = models["dynamic"].read_bytes()
    (folder / "truncated.onnx").write_bytes(data[: len(data) // 2])
    return {"text": folder / "text.onnx", "truncated": folder / "truncated.onnx"}


@pytest.mark.parametrize("name", ["text", "truncated"])
def test_bad_model_files_raise_model_format_error(bad_models, name):
    with pytest.raises(ModelFormatError, match="is not") as raised:
        load_model(bad_models[name])
    # a file the user names: bad input, as a missing one is
    assert isinstance(raised.value, InputError) and raised.value.code == "model_format"


APP = """
import sys, typer
from faceweave.cli.export import benchmark_model_command, export_command
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command("export")(export_command)
app.command("benchmark-model")(benchmark_model_command)
app(args=sys.argv[1:], prog_name="faceweave")
"""


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", APP, *map(str, args)], check=False, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("name", ["text", "truncated"])
def test_cli_reports_bad_model_files_in_one_line(bad_models, tmp_path, name):
    out = tmp_path / "out.onnx"
    proc = cli("export", bad_models[name], "-o", out)
    assert proc.returncode == 2, proc.stderr  # bad input, as `models import` answers the same file
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "is not" in lines[0], proc.stderr
    assert not any(noise in proc.stderr for noise in NOISE)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_cli_export_and_benchmark(models, tmp_path):
    out = tmp_path / "conv.onnx"
    proc = cli("export", models["dynamic"], "-o", out, "--shape", "x=1,3,16,16", "--batch", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["input_shapes"] == {"x": [2, 3, 16, 16]} and report["precision"] == "fp32"
    assert report["accuracy"][0]["cosine_min"] == pytest.approx(1.0)

    proc = cli("benchmark-model", out, "--batch", "1,2,4", "--repeat", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)
    assert [r["batch"] for r in table["rows"]] == [2]
    assert "fixed to 2" in table["notes"][0]

    proc = cli("benchmark-model", out, "--execution-provider", "nosuch")
    assert proc.returncode == 2 and "unknown execution provider 'nosuch'" in proc.stderr and "cuda" in proc.stderr


def test_int8_of_a_model_without_image_input_calibrates_on_random_inputs(models, tmp_path):
    report = export_model(
        models["foldable"], tmp_path / "f.onnx", ExportOptions(shapes={"x": (2, 4)}, int8=True, calibration_count=4)
    )
    assert report.precision == "int8" and "no image input: INT8 calibrated on random inputs" in report.notes
    assert report.accuracy_inputs == "2 run(s) on random inputs"
    assert report.accuracy[0].cosine_min > 0.99
