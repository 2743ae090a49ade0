"""A processor's model file of the wrong shape (another model's graph
under its name in the models folder) is refused on the command line with
one line naming the model, before anything is written (exit code 1: a file
in the installation's models folder that cannot be loaded is a model error;
the same file given to ``faceweave models import`` is the user's input,
exit code 2, tests/test_models.py): the
lip syncer and its voice extractor, the age modifier and its face
classifier, the expression restorer, the face editor and the deep swapper."""

from __future__ import annotations

import subprocess
import sys

import onnx
import pytest
from tests.enhancer_fixtures import age_modifier_model, colorizer_model, lip_syncer_model, live_portrait_editor_models

from faceweave.models.catalog import find_spec

pytestmark = pytest.mark.slow

#: a case: the flags, the catalog entry given the wrong graph, the entries given their stand-ins, a video target
PORTRAIT = tuple(f"live_portrait_{part}" for part in ("feature_extractor", "motion_extractor", "generator"))
EDITOR = (*PORTRAIT, "live_portrait_eye_retargeter", "live_portrait_lip_retargeter", "live_portrait_stitcher")
CASES = {
    "lip_syncer": (["--lip-syncer", "wav2lip_96"], "wav2lip_96", (), False),
    "voice_extractor": (["--lip-syncer", "edtalk_256"], "kim_vocal_2", ("edtalk_256",), True),
    "age_modifier": (["--age-modifier", "styleganex_age"], "styleganex_age", (), False),
    "face_classifier": (["--age-modifier", "fran"], "fairface", ("fran",), False),
    "expression_restorer": (["--expression-restorer", "live_portrait"], "live_portrait_generator", PORTRAIT, False),
    "face_editor": (["--face-editor", "live_portrait"], "live_portrait_stitcher", EDITOR, False),
    "deep_swapper": (["--deep-swapper", "iperov/elon_musk_224"], "dfm_iperov_elon_musk_224", (), False),
}


def _good(name: str):
    """The stand-in of the catalog entry ``name``."""
    if name.startswith("live_portrait_"):
        return live_portrait_editor_models()[name.removeprefix("live_portrait_")]
    return {"edtalk_256": lip_syncer_model("edtalk"), "fran": age_modifier_model("fran")}[name]


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_model_file_of_the_wrong_shape_is_one_line(kind, faces_dir, tmp_path):
    flags, wrong, good, video = CASES[kind]
    models = tmp_path / "models"
    models.mkdir()
    onnx.save(colorizer_model("ddcolor").proto, models / find_spec(wrong).file_name)
    for name in good:
        if name != wrong:
            onnx.save(_good(name).proto, models / find_spec(name).file_name)
    target = faces_dir / ("video/lp_d18_talking_face.mp4" if video else "single/astronaut_eileen_collins.png")
    out = tmp_path / ("out.mp4" if video else "out.png")
    done = subprocess.run(
        [sys.executable, "-m", "faceweave.cli", "swap", "-s", faces_dir / "single/biden2.jpg", "-t", target]
        + ["-o", out, "--models-dir", models, "--no-watermark", "--audit-log", tmp_path / "a.jsonl", *flags],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert wrong in done.stderr and "does not match" in done.stderr, done.stderr
    assert not out.exists()
