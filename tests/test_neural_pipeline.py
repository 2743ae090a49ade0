"""Neural swappers and enhancers wired into the whole pipeline: model files
imported into a model folder (tiny stand-ins with the real signatures), the
CLI's --swapper / --face-enhancer / --frame-enhancer, and the errors a user
meets when a model is missing."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from tests.neural_fixtures import arcface_model, swapper_model

from faceweave.errors import ModelNotFoundError
from faceweave.options import SwapOptions
from faceweave.pipeline import FaceSwapper
from faceweave.provenance.stamp import Provenance

pytestmark = pytest.mark.slow

#: the Python API tests compare the swap's own pixels: no watermark in them
UNMARKED = Provenance.new(watermark=False)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """A model folder with inswapper_128 (output = 1 - target: an obvious
    change), its ArcFace, and a gfpgan-like face enhancer, all imported
    through the CLI's own import path (signature checked, sha256 pinned)."""
    from tests.enhancer_fixtures import face_model

    from faceweave.models import ModelStore, import_model

    folder = tmp_path_factory.mktemp("models")
    files = tmp_path_factory.mktemp("files")
    rng = np.random.default_rng(0)
    onnx.save(swapper_model(128, [512], gain=-1.0, offset=1.0, emap=np.eye(512)), files / "inswapper.onnx")
    onnx.save(arcface_model(rng.normal(size=(3, 512)), input_name="input"), files / "arcface.onnx")
    onnx.save(face_model(size=512, batch=1, op="add", value=0.2).proto, files / "gfpgan.onnx")
    store = ModelStore(folder)
    import_model(store, "inswapper_128", files / "inswapper.onnx")
    import_model(store, "arcface_w600k_r50", files / "arcface.onnx")
    import_model(store, "gfpgan_1.4", files / "gfpgan.onnx")
    return folder


def test_a_neural_swapper_through_the_python_api(models_dir, faces_dir):
    options = SwapOptions.model_validate({"swapper": "inswapper_128", "runtime": {"models_dir": str(models_dir)}})
    target = faces_dir / "single/astronaut_eileen_collins.png"
    with FaceSwapper(options, provenance=UNMARKED) as swapper:
        assert swapper.pool is not None and len(swapper.pool) == 2  # swapper + embedder, warmed up
        result = swapper.swap([faces_dir / "single/biden2.jpg"], target)
        original = swapper.read(target, role="target").pixels
    face = result.faces[result.swapped[0].target_index].bbox
    x1, y1, x2, y2 = (int(v) for v in (face.x1, face.y1, face.x2, face.y2))
    changed = np.abs(result.image.astype(int) - original.astype(int))
    assert changed[y1:y2, x1:x2].mean() > 20  # the inverting stand-in shows inside the face
    assert changed[:20, :20].max() == 0  # and nowhere far from it


def test_a_face_enhancer_after_the_classical_swap(models_dir, faces_dir):
    target = faces_dir / "single/astronaut_eileen_collins.png"
    plain = FaceSwapper(SwapOptions(), provenance=UNMARKED).swap([faces_dir / "single/biden2.jpg"], target)
    options = SwapOptions.model_validate(
        {"enhance": {"face": "gfpgan_1.4", "face_blend": 1.0}, "runtime": {"models_dir": str(models_dir)}}
    )
    with FaceSwapper(options, provenance=UNMARKED) as swapper:
        enhanced = swapper.swap([faces_dir / "single/biden2.jpg"], target)
    assert "enhance" in enhanced.timings_ms
    face = enhanced.faces[0].bbox
    cx, cy = (int(v) for v in face.center)
    # the stand-in adds 0.2 in [-1, 1] units: about +25 levels at the face centre
    gain = enhanced.image[cy - 5 : cy + 5, cx - 5 : cx + 5].astype(int) - plain.image[
        cy - 5 : cy + 5, cx - 5 : cx + 5
    ].astype(int)
    assert 15 < gain.mean() < 30
    assert np.array_equal(enhanced.image[:20, :20], plain.image[:20, :20])


def test_missing_model_is_a_clear_error(tmp_path):
    options = SwapOptions.model_validate({"swapper": "hyperswap_1a_256", "runtime": {"models_dir": str(tmp_path)}})
    with pytest.raises(ModelNotFoundError, match="faceweave models download"):
        FaceSwapper(options)


def test_cli_neural_swap_and_errors(models_dir, faces_dir, tmp_path):
    from tests.test_cli import assert_clean_error, faceweave

    src, tgt = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    out = tmp_path / "out.png"
    proc = faceweave(
        "swap", "-s", src, "-t", tgt, "-o", out, "--swapper", "inswapper_128", "--models-dir", models_dir, "--json"
    )
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()
    import json

    loads = {m["model"]: m for m in json.loads(proc.stdout)["models"]}
    assert set(loads) == {"inswapper_128", "arcface_w600k_r50"}  # cold start reported per model
    assert all(m["provider"].startswith("cpu") and m["warmup_ms"] > 0 and not m["fell_back"] for m in loads.values())
    missing = tmp_path / "missing.png"
    proc = faceweave("swap", "-s", src, "-t", tgt, "-o", missing, "--swapper", "ghost_1_256", "--models-dir", tmp_path)
    assert_clean_error(proc, 2, "not present", "faceweave models download")  # the options named it
    proc = faceweave("swap", "-s", src, "-t", tgt, "-o", missing, "--swapper", "nope")
    assert_clean_error(proc, 2, "unknown swapper", "inswapper_128")
    proc = faceweave(
        "swap",
        "-s",
        src,
        "-t",
        tgt,
        "-o",
        missing,
        "--swapper",
        "inswapper_128",
        "--models-dir",
        models_dir,
        "--execution-provider",
        "cuda",
    )
    assert_clean_error(proc, 1, "cuda", "available")
    assert not missing.exists()


def test_faces_of_one_frame_go_through_one_inference(models_dir, faces_dir):
    options = SwapOptions.model_validate(
        {"swapper": "inswapper_128", "selection": {"mode": "many"}, "runtime": {"models_dir": str(models_dir)}}
    )
    with FaceSwapper(options) as swapper:
        model = swapper.swapper.model
        batches = []
        real = model.run

        def counting(feeds):
            batches.append(len(feeds["target"]))
            return real(feeds)

        model.run = counting
        result = swapper.swap([faces_dir / "single/biden2.jpg"], faces_dir / "group/fr_two_people.jpg")
    assert len(result.swapped) == 2
    assert batches == [2]


def test_evaluate_compares_a_neural_swapper(models_dir, faces_dir, tmp_path):
    """``faceweave evaluate --swapper`` runs the same pairs through a neural
    model, so settings and models are compared with one command; a missing
    model is a clear error before any pair is swapped."""
    import json

    from tests.test_cli import assert_clean_error, faceweave

    out = tmp_path / "report"
    proc = faceweave(
        "evaluate", faces_dir, "--out", out, "--pairs", "2", "--swapper", "inswapper_128", "--models-dir", models_dir
    )
    assert proc.returncode == 0, proc.stderr  # a report, whatever its figures
    report = json.loads((out / "report.json").read_text())
    assert report["options"]["swap_options"]["swapper"] == "inswapper_128"
    assert len(report["pairs"]) == 2
    proc = faceweave(
        "evaluate",
        faces_dir,
        "--out",
        tmp_path / "none",
        "--pairs",
        "2",
        "--swapper",
        "ghost_1_256",
        "--models-dir",
        tmp_path,
    )
    assert_clean_error(proc, 2, "not present", "faceweave models download")  # the options named it
    assert not (tmp_path / "none" / "report.json").exists()
