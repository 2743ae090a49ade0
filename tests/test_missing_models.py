"""One rule for a model the options need whose file is not installed, for
every model kind: the Python API raises ``ChosenModelMissingError`` (an
``InputError`` and a ``ModelNotFoundError``) naming the option and how to get
the file, before any model loads; the CLI exits 2 with that one line; the
service answers 422 ``model_not_found``.  Each case installs every other
model the options need (stand-ins with the real signatures), so the missing
one is the only thing wrong."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.neural_fixtures import catalog_stand_in

from faceweave.errors import ChosenModelMissingError, InputError, ModelNotFoundError
from faceweave.models import builtin_specs
from faceweave.options import SwapOptions
from faceweave.pipeline import FaceSwapper

pytestmark = pytest.mark.slow

CATALOG = builtin_specs()
SOURCE = "single/biden2.jpg"
TARGET = "single/astronaut_eileen_collins.png"


@dataclass(frozen=True)
class Case:
    """``options`` (SwapOptions' fields), the same as CLI flags and as the
    service's job options, the models installed and the one missing."""

    options: dict[str, Any]
    flags: tuple[str, ...]
    service: dict[str, Any]
    installed: tuple[str, ...]
    missing: str
    role: str


NEURAL = {"swapper": "inswapper_128"}
CASES = {
    "swapper": Case(
        NEURAL, ("--swapper", "inswapper_128"), NEURAL, ("arcface_w600k_r50",), "inswapper_128", "swapper inswapper_128"
    ),
    "embedder": Case(
        NEURAL, ("--swapper", "inswapper_128"), NEURAL, ("inswapper_128",), "arcface_w600k_r50", "swapper inswapper_128"
    ),
    "converter": Case(
        {"swapper": "simswap_256"},
        ("--swapper", "simswap_256"),
        {"swapper": "simswap_256"},
        ("simswap_256", "arcface_w600k_r50"),
        "crossface_simswap",
        "swapper simswap_256",
    ),
    "face_enhancer": Case(
        {"enhance": {"face": "gfpgan_1.4"}},
        ("--face-enhancer", "gfpgan_1.4"),
        {"face_enhancer": "gfpgan_1.4"},
        (),
        "gfpgan_1.4",
        "face enhancer gfpgan_1.4",
    ),
    "frame_enhancer": Case(
        {"enhance": {"frame": "real_esrgan_x2"}},
        ("--frame-enhancer", "real_esrgan_x2"),
        {"frame_enhancer": "real_esrgan_x2"},
        (),
        "real_esrgan_x2",
        "frame enhancer real_esrgan_x2",
    ),
    "background_remover": Case(
        {"enhance": {"background": "modnet"}},
        ("--background-remover", "modnet"),
        {"background_remover": "modnet"},
        (),
        "modnet",
        "background remover modnet",
    ),
    "frame_colorizer": Case(
        {"enhance": {"colorizer": "ddcolor"}},
        ("--frame-colorizer", "ddcolor"),
        {"frame_colorizer": "ddcolor"},
        (),
        "ddcolor",
        "frame colorizer ddcolor",
    ),
    "lip_syncer": Case(
        {"enhance": {"lip_syncer": "wav2lip_gan_96"}},
        ("--lip-syncer", "wav2lip_gan_96"),
        {"lip_syncer": "wav2lip_gan_96"},
        (),
        "wav2lip_gan_96",
        "lip syncer wav2lip_gan_96",
    ),
    "age_modifier": Case(
        {"enhance": {"age_modifier": "styleganex_age"}},
        ("--age-modifier", "styleganex_age"),
        {"age_modifier": "styleganex_age"},
        (),
        "styleganex_age",
        "age modifier styleganex_age",
    ),
    "face_classifier": Case(
        {"enhance": {"age_modifier": "fran"}},
        ("--age-modifier", "fran"),
        {"age_modifier": "fran"},
        ("fran",),
        "fairface",
        "age modifier fran",
    ),
    "live_portrait": Case(
        {"enhance": {"expression_restorer": "live_portrait"}},
        ("--expression-restorer", "live_portrait"),
        {"expression_restorer": "live_portrait"},
        ("live_portrait_feature_extractor",),
        "live_portrait_motion_extractor",
        "expression restorer live_portrait",
    ),
    "face_editor": Case(
        {"enhance": {"edit": {"model": "live_portrait"}}},
        ("--face-editor", "live_portrait"),
        {"face_editor": "live_portrait"},
        ("live_portrait_feature_extractor", "live_portrait_motion_extractor"),
        "live_portrait_eye_retargeter",
        "face editor live_portrait",
    ),
    "deep_swapper": Case(
        {"enhance": {"deep_swapper": "iperov/elon_musk_224"}},
        ("--deep-swapper", "iperov/elon_musk_224"),
        {"deep_swapper": "iperov/elon_musk_224"},
        (),
        "dfm_iperov_elon_musk_224",
        "deep swapper iperov/elon_musk_224",
    ),
    "face_detector": Case(
        {"analysis": {"face_detector": "scrfd"}},
        ("--face-detector", "scrfd"),
        {"face_detector": "scrfd"},
        (),
        "scrfd",
        "face detector scrfd",
    ),
    "face_landmarker": Case(
        {"analysis": {"face_landmarker": "2dfan4"}},
        ("--face-landmarker", "2dfan4"),
        {"face_landmarker": "2dfan4"},
        ("fan_68_5",),
        "2dfan4",
        "face landmarker 2dfan4",
    ),
    "face_occluder": Case(
        {**NEURAL, "masks": {"face_occluder": "xseg_2"}},
        ("--swapper", "inswapper_128", "--face-occluder", "xseg_2"),
        {**NEURAL, "face_occluder": "xseg_2"},
        ("inswapper_128", "arcface_w600k_r50"),
        "xseg_2",
        "face occluder xseg_2",
    ),
    "face_parser": Case(
        {**NEURAL, "masks": {"face_parser": "bisenet_resnet_18"}},
        ("--swapper", "inswapper_128", "--face-parser", "bisenet_resnet_18"),
        {**NEURAL, "face_parser": "bisenet_resnet_18"},
        ("inswapper_128", "arcface_w600k_r50"),
        "bisenet_resnet_18",
        "face parser bisenet_resnet_18",
    ),
}
KINDS = sorted(CASES)


def _install(folder: Path, names: tuple[str, ...]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        spec = CATALOG[name]
        (folder / spec.file_name).write_bytes(catalog_stand_in(spec).SerializeToString())
    return folder


def _expected(case: Case) -> str:
    return f"{case.role}: model {case.missing} is not present in"


def test_the_cases_cover_every_model_kind_the_options_choose():
    kinds = {CATALOG[case.missing].kind for case in CASES.values()}
    # screening is the server's setting; the voice extractor is checked when a video's speech is read
    # (tests/test_lip_syncer.py), a photo does not use it
    assert kinds == {s.kind for s in CATALOG.values()} - {"content_classifier", "voice_extractor"}


@pytest.mark.parametrize("kind", KINDS)
def test_the_api_raises_one_error_type_before_any_model_loads(kind, tmp_path, monkeypatch):
    from faceweave.runtime import SessionPool

    case = CASES[kind]
    folder = _install(tmp_path / "models", case.installed)

    def no_load(*args, **kwargs):
        raise AssertionError("a model was loaded before the missing one was found")

    monkeypatch.setattr(SessionPool, "_load", no_load)
    options = SwapOptions.model_validate({**case.options, "runtime": {"models_dir": str(folder)}})
    with pytest.raises(ChosenModelMissingError) as caught:
        FaceSwapper(options)
    error = caught.value
    assert isinstance(error, InputError) and isinstance(error, ModelNotFoundError)
    assert error.code == "model_not_found"
    assert str(error).startswith(_expected(case)), error
    assert f"faceweave models download {case.missing}" in str(error) or "faceweave models import" in str(error)


@pytest.mark.parametrize("kind", KINDS)
def test_the_cli_exits_2_with_one_line(kind, tmp_path, faces_dir):
    from tests.test_cli import assert_clean_error, faceweave

    case = CASES[kind]
    folder = _install(tmp_path / "models", case.installed)
    out = tmp_path / "out.png"
    proc = faceweave(
        "swap", "-s", faces_dir / SOURCE, "-t", faces_dir / TARGET, "-o", out, "--models-dir", folder, *case.flags
    )
    assert_clean_error(proc, 2, _expected(case), f"faceweave models import {case.missing}")
    assert not out.exists()


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    from tests.service_fixtures import running_app, settings

    tmp = tmp_path_factory.mktemp("missing")
    models = tmp / "models"
    models.mkdir()
    config = settings(tmp, workers=0, sync_slots=1, runtime={"models_dir": str(models)})
    with running_app(config) as client:
        client.models = models
        yield client


@pytest.mark.parametrize("kind", KINDS)
def test_the_service_answers_422_model_not_found(kind, service, faces_dir):
    case = CASES[kind]
    for path in service.models.iterdir():
        path.unlink()
    _install(service.models, case.installed)
    files = {
        "source": ("s.jpg", (faces_dir / SOURCE).read_bytes()),
        "target": ("t.png", (faces_dir / TARGET).read_bytes()),
    }
    response = service.post("/v1/swap", files=files, data={"options": json.dumps(case.service)})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "model_not_found", error
    assert error["message"].startswith(f"{case.role}: model {case.missing} is not present in the server's folder")
