"""Every catalogued model loads through every path a user takes.

For each :class:`~faceweave.models.ModelSpec` a stand-in with the model's
real input/output names, shapes and dtypes (and those of the models it is
used with) is laid out as FaceFusion keeps it (``NAME.onnx`` + ``NAME.hash``),
then reaches a store through:

* ``--models-dir`` pointing at that FaceFusion folder;
* ``faceweave models import FILE`` (the name taken from the file name);
* ``faceweave models download NAME --mirror URL`` from a loopback server;
* ``faceweave models import --from-facefusion DIR``;

and each store must give the model through the session pool and build
faceweave's component for it (swapper, enhancer, embedder).  A catalog entry
whose signature a component refuses, or whose companion models are not
declared, fails here.  Also: every name the options accept has an entry.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tests.neural_fixtures import FolderServer, catalog_stand_in, face_crop, facefusion_folder, source_face

from faceweave.analysis.face_detectors import FACE_DETECTORS, create_face_detector, detector_models
from faceweave.analysis.face_landmarkers import FACE_LANDMARKERS, LANDMARKER_MODELS, create_face_landmarker
from faceweave.embedders import ArcFaceEmbedder, EmbeddingConverter
from faceweave.embedders.arcface import EMBEDDERS
from faceweave.enhancers import available_face_enhancers, available_frame_enhancers
from faceweave.enhancers.base import FRAME_ENHANCERS, create_face_enhancer, create_frame_enhancer
from faceweave.maskers import available_face_occluders, available_face_parsers, create_face_occluder, create_face_parser
from faceweave.models import ModelSpec, ModelStore, builtin_specs
from faceweave.options import RuntimeOptions, SwapOptions
from faceweave.runtime import SessionPool
from faceweave.sessions import ModelSessions
from faceweave.swappers.base import SwapperContext
from faceweave.swappers.neural import NEURAL_SWAPPERS
from faceweave.swappers.registry import available_swappers, create_swapper

CATALOG = builtin_specs()
PATHS = ("models-dir", "import", "download", "from-facefusion")
#: five points of an upright face in a 300 px frame, for the landmarkers
_FIVE = np.array([[130.0, 140], [170, 140], [150, 160], [135, 180], [165, 180]])


def _invoke(capfd, *args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from faceweave.cli.models import build_models_app

    result = CliRunner().invoke(build_models_app(), list(args))
    captured = capfd.readouterr()
    return result.exit_code, result.stdout + captured.out, captured.err


def _frame_points(side: int = 160) -> tuple[np.ndarray, np.ndarray]:
    crop = face_crop(side)
    from faceweave.geometry.templates import points5

    return crop.pixels, points5(crop)


def use_component(spec: ModelSpec, store: ModelStore) -> None:
    """Load ``spec`` from ``store`` as a run does and build its component
    (a swapper through the registry's factory, which loads its companions)."""
    if spec.kind == "swapper":
        options = SwapOptions(swapper=spec.name, runtime=RuntimeOptions(models_dir=str(store.folder)))
        sessions = ModelSessions(options.runtime)
        try:
            swapper = create_swapper(spec.name, SwapperContext(options=options, sessions=sessions))
            out = swapper.swap(swapper.prepare_source(source_face()), face_crop())
            assert out.face.shape == (200, 200, 3) and out.coverage.max() > 0.9
        finally:
            sessions.close()
        return
    with SessionPool(store=store) as pool:
        model = pool.get(spec.name)
        if spec.kind == "face_enhancer":
            frame, points = _frame_points()
            assert create_face_enhancer(spec.name, model).enhance(frame, [points]).shape == frame.shape
        elif spec.kind == "frame_enhancer":
            enhancer = create_frame_enhancer(spec.name, model)
            assert enhancer.enhance(np.zeros((24, 20, 3), np.uint8)).shape == (
                24 * enhancer.scale,
                20 * enhancer.scale,
                3,
            )
        elif spec.kind == "embedder" and "input" in [t.name for t in spec.inputs]:
            assert EmbeddingConverter(model, name=spec.name).convert(np.ones((2, 512), np.float32)).shape == (2, 512)
        elif spec.kind == "embedder":
            frame, points = _frame_points()
            assert ArcFaceEmbedder(model).embed(frame, points).shape == (512,)
        elif spec.kind == "face_occluder":
            assert create_face_occluder(spec.name, model).mask(face_crop(128).pixels).shape == (128, 128)
        elif spec.kind == "face_parser":
            assert create_face_parser(spec.name, model).mask(face_crop(128).pixels, ("skin",)).shape == (128, 128)
        elif spec.kind == "face_detector":
            assert len(create_face_detector(spec.name, model).detect(np.zeros((480, 640, 3), np.uint8))) == 1
        elif spec.kind == "face_landmarker":
            landmarker = create_face_landmarker(spec.name, pool.get)
            assert landmarker is not None
            found = landmarker.points(np.zeros((300, 300, 3), np.uint8), np.array([100.0, 100, 200, 200]), _FIVE)
            assert found.points68.shape == (68, 2)
        assert pool.records[0].warmup_ms >= 0.0


def _store_by(path: str, spec: ModelSpec, folder: Path, tmp_path: Path, capfd) -> ModelStore:
    """The store a user gets by ``path`` from the FaceFusion ``folder``."""
    names = [spec.name, *spec.requires]
    if path == "models-dir":
        return ModelStore(folder)
    target = tmp_path / path
    if path == "import":
        for name in names:
            code, out, err = _invoke(
                capfd, "import", str(folder / CATALOG[name].file_name), "--models-dir", str(target)
            )
            assert code == 0 and f"{name}: imported" in out, err
    elif path == "download":
        with FolderServer(folder) as server:
            code, out, err = _invoke(capfd, "download", *names, "--mirror", server.url, "--models-dir", str(target))
        assert code == 0, err
        files = [Path(CATALOG[n].file_name) for n in names]
        assert sorted(server.requests) == sorted([f"/{f}" for f in files] + [f"/{f.stem}.hash" for f in files])
    else:
        code, out, err = _invoke(capfd, "import", "--from-facefusion", str(folder), "--models-dir", str(target))
        assert code == 0 and err == "", err
        assert all(f"{name}: imported" in out and "CRC32" in out for name in names)
    return ModelStore(target)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(n for n, s in CATALOG.items() if s.bundled is None))
def test_every_catalogued_model_loads_through_every_user_path(tmp_path, capfd, name, path):
    spec = CATALOG[name]
    folder = facefusion_folder(
        tmp_path / "facefusion" / ".assets" / "models", [CATALOG[n] for n in (name, *spec.requires)]
    )
    store = _store_by(path, spec, folder, tmp_path, capfd)
    use_component(spec, store)


def test_the_bundled_classifier_imports_by_name_and_loads(tmp_path, capfd):
    """nudenet_320n ships in a wheel (never downloaded, not a FaceFusion
    model) and its sha256 is pinned: a stand-in imports only with --trust."""
    spec = CATALOG["nudenet_320n"]
    stand_in = tmp_path / "320n.onnx"
    stand_in.write_bytes(catalog_stand_in(spec).SerializeToString())
    target = tmp_path / "models"
    code, _, err = _invoke(capfd, "import", str(stand_in), "--models-dir", str(target))
    assert code == 2 and "--trust" in err and len(err.strip().splitlines()) == 1
    code, out, err = _invoke(capfd, "import", str(stand_in), "--trust", "--models-dir", str(target))
    assert code == 0 and "nudenet_320n: imported" in out, err
    unbundled = {spec.name: replace(spec, bundled=None)}
    with SessionPool(store=ModelStore(target, catalog=unbundled)) as pool:
        assert [t.name for t in pool.get(spec.name).inputs] == ["images"]


# -- every name the options accept has a catalog entry ---------------------------


def _accepted() -> list[tuple[str, str]]:
    names = [("swapper", n) for n in available_swappers() if n not in ("mesh", "none")]  # no model files
    names += [("face_enhancer", n) for n in available_face_enhancers()]
    names += [("frame_enhancer", n) for n in available_frame_enhancers()]
    names += [("embedder", n) for n in EMBEDDERS]
    names += [("face_occluder", n) for n in available_face_occluders()]
    names += [("face_parser", n) for n in available_face_parsers()]
    for entry in NEURAL_SWAPPERS.values():
        names += [("embedder", n) for n in (entry.spec.embedder, entry.spec.converter) if n]
    # a name that runs several models (many) needs each of them
    names += [("face_detector", m) for n in FACE_DETECTORS for m in detector_models(n)]
    names += [("face_landmarker", m) for n in FACE_LANDMARKERS for m in LANDMARKER_MODELS[n]]
    return sorted(set(names))


@pytest.mark.parametrize("kind, name", _accepted())
def test_every_accepted_name_has_a_catalog_entry_of_its_kind(kind, name):
    assert name in CATALOG, f"{name} is accepted as a {kind} but has no catalog entry"
    assert CATALOG[name].kind == kind


def test_catalog_facts_of_the_new_entries():
    """Checked by hand against FaceFusion 3.8.1's model sets."""
    hyperswap = CATALOG["hyperswap_1b_256"]
    assert [t.name for t in hyperswap.outputs] == [None, "mask"] and hyperswap.outputs[1].shape == (None, 1, 256, 256)
    hififace = CATALOG["hififace_unofficial_256"]
    assert (hififace.template, hififace.crop_size, hififace.mean, hififace.licence, hififace.vendor) == (
        "mtcnn_512",
        256,
        (0.5, 0.5, 0.5),
        "Unknown",
        "GuijiAI",
    )
    assert hififace.urls[0].endswith("/models-3.1.0/hififace_unofficial_256.onnx")
    assert CATALOG["crossface_hififace"].urls[0].endswith("/models-3.4.0/crossface_hififace.onnx")
    assert (CATALOG["gpen_bfr_256"].template, CATALOG["gpen_bfr_256"].crop_size) == ("arcface_128", 256)
    assert CATALOG["gpen_bfr_2048"].crop_size == 2048 and CATALOG["gfpgan_1.2"].licence == "Apache-2.0"
    fp16 = CATALOG["real_esrgan_x8_fp16"]
    assert fp16.inputs[0].dtype == "float32" and fp16.urls[0].endswith("/models-3.0.0/real_esrgan_x8_fp16.onnx")
    assert FRAME_ENHANCERS["real_esrgan_x8_fp16"].scale == 8
