"""The leaf of names (``faceweave.names``): the registries register against
it, the options validate against it without importing the implementations,
and the neural models' facts come from the catalog alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from faceweave import names
from faceweave.analysis.face_detectors import ONNX_DETECTORS
from faceweave.compositing.facefusion import FACE_MASK_AREAS
from faceweave.enhancers.base import FACE_ENHANCERS, FRAME_ENHANCERS
from faceweave.maskers.base import FACE_OCCLUDERS, FACE_PARSERS, REGIONS
from faceweave.models.catalog import builtin_specs
from faceweave.options import SwapOptions
from faceweave.runtime.providers import ORT_PROVIDER_NAMES
from faceweave.swappers.neural import NEURAL_SWAPPERS
from faceweave.swappers.registry import available_swappers, swapper_factory


def test_registered_refuses_a_registry_that_differs_from_the_names():
    with pytest.raises(LookupError, match=r"not registered \['b'\], registered but not named \['c'\]"):
        names.registered("thing", ("a", "b"), {"a": 1, "c": 2})
    chosen = names.registered("thing", ("a", "b"), {"b": 2, "a": 1})
    assert dict(chosen) == {"a": 1, "b": 2}
    with pytest.raises(TypeError):
        chosen["a"] = 3  # type: ignore[index]


@pytest.mark.parametrize(
    "registry, group",
    [
        (ONNX_DETECTORS, names.ONNX_FACE_DETECTORS),
        (FACE_OCCLUDERS, names.FACE_OCCLUDERS),
        (FACE_PARSERS, names.FACE_PARSERS),
        (REGIONS, names.PARSER_REGIONS),
        (FACE_MASK_AREAS, names.FACE_MASK_AREAS),
        (ORT_PROVIDER_NAMES, names.EXECUTION_PROVIDERS),
        (FACE_ENHANCERS, names.FACE_ENHANCERS),
        (FRAME_ENHANCERS, names.FRAME_ENHANCERS),
        (NEURAL_SWAPPERS, names.NEURAL_SWAPPERS),
    ],
)
def test_each_registry_holds_exactly_its_names(registry, group):
    assert sorted(registry) == sorted(group)


def test_every_swapper_name_has_a_factory():
    assert available_swappers() == sorted(names.SWAPPERS)
    assert all(callable(swapper_factory(name)) for name in names.SWAPPERS)


def test_every_model_a_name_runs_is_in_the_catalog():
    catalog = builtin_specs()
    run = [*names.NEURAL_SWAPPERS, *names.FACE_ENHANCERS, *names.FRAME_ENHANCERS, *names.FACE_OCCLUDERS]
    run += [*names.FACE_PARSERS, *names.ONNX_FACE_DETECTORS]
    run += [m for models in names.LANDMARKER_MODELS.values() for m in models]
    assert [n for n in run if n not in catalog] == []


def test_the_neural_constants_are_the_catalogs():
    """Checked by hand against FaceFusion 3.8.1's model sets: one value of each kind."""
    inswapper = NEURAL_SWAPPERS["inswapper_128"].spec
    assert (inswapper.template, inswapper.size, inswapper.source) == ("arcface_128", 128, "embedding")
    assert (inswapper.embedder, inswapper.converter, inswapper.denormalize) == ("arcface_w600k_r50", None, False)
    ghost = NEURAL_SWAPPERS["ghost_2_256"].spec
    assert (ghost.template, ghost.mean, ghost.converter, ghost.denormalize) == (
        "arcface_112_v1",
        (0.5, 0.5, 0.5),
        "crossface_ghost",
        True,
    )
    blendswap = NEURAL_SWAPPERS["blendswap_256"].spec
    assert (blendswap.source, blendswap.source_alignment(), blendswap.embedder) == (
        "image",
        ("arcface_112_v2", 112),
        None,
    )
    assert FACE_ENHANCERS["codeformer"].weight_input and not FACE_ENHANCERS["gfpgan_1.4"].weight_input
    assert (FACE_ENHANCERS["gpen_bfr_256"].template, FACE_ENHANCERS["gpen_bfr_256"].size) == ("arcface_128", 256)
    assert (FRAME_ENHANCERS["real_web_photo_x4"].tile_size, FRAME_ENHANCERS["tghq_face_x8"].scale) == (64, 8)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("swapper", "roop", "unknown swapper 'roop'; available: blendswap_256, ghost_1_256"),
        ("analysis", {"face_detector": "dlib"}, "unknown face detector 'dlib'; one of mediapipe, yolo_face"),
        ("analysis", {"face_landmarker": "x"}, "unknown face landmarker 'x'; one of mediapipe, 2dfan4"),
        ("masks", {"face_occluder": "x"}, "unknown face occluder 'x'; one of many, xseg_1, xseg_2, xseg_3"),
        ("masks", {"face_parser_regions": ["ear"]}, "unknown face parser region 'ear'; one of skin, left-eyebrow"),
        ("enhance", {"face": "gfpgan"}, "unknown face enhancer 'gfpgan'; available: codeformer, gfpgan_1.2"),
        ("runtime", {"execution_provider": "tpu"}, "unknown execution provider 'tpu'; one of cpu, cuda"),
    ],
)
def test_options_name_the_accepted_choices(field, value, message):
    with pytest.raises(ValueError, match=message):
        SwapOptions.model_validate({field: value})


def test_validating_options_imports_no_implementation():
    code = (
        "import sys\n"
        "from faceweave.options import SwapOptions\n"
        "SwapOptions.model_validate({'swapper': 'blendswap_256', 'analysis': {'face_detector': 'scrfd', "
        "'face_detector_size': 320}, 'masks': {'face_parser': 'bisenet_resnet_18'}, 'enhance': {'face': "
        "'codeformer'}})\n"
        "print(sorted(m for m in sys.modules if m.startswith(('faceweave.swappers', 'faceweave.enhancers', "
        "'faceweave.maskers', 'faceweave.analysis'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
