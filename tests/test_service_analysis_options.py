"""The service takes the CLI's face detector and landmarker options
(``face_detector``, ``face_detector_size``, ``face_detector_score``,
``face_landmarker``, ``face_landmarker_score``) on POST /v1/swap and
/v1/jobs, and each job is analysed with an analyser for its own options
(kept per configuration, a bounded number), not one default for all.

Stand-ins with the real signatures (tests/analysis_fixtures.py): a
yolo_face that finds the target's face where mediapipe does, a retinaface
that finds nothing, so which analyser a job ran on shows in its outcome."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.analysis_fixtures import anchor_heads, constant_model
from tests.test_face_analysis_models import _yolo_for

from faceweave.models import builtin_specs
from faceweave.options import AnalysisOptions, RuntimeOptions

pytestmark = pytest.mark.slow

CATALOG = builtin_specs()
PHOTO = "single/astronaut_eileen_collins.png"


@pytest.fixture(scope="module")
def client(tmp_path_factory, faces_dir):
    from tests.service_fixtures import running_app, settings

    from faceweave.analysis import FaceAnalyser
    from faceweave.io.images import read_image

    pixels = np.ascontiguousarray(read_image(faces_dir / PHOTO).pixels)
    with FaceAnalyser(AnalysisOptions(small_faces=False)) as analyser:
        face = analyser.analyse(pixels)[0]
    tmp = tmp_path_factory.mktemp("analysis")
    models = tmp / "models"
    models.mkdir()
    b = face.bbox
    made = {
        "yolo_face": _yolo_for((b.x1, b.y1, b.x2, b.y2), face.kps5),
        "retinaface": constant_model([1, 3, "height", "width"], anchor_heads(640, 2, []), name="retinaface"),
    }
    for name, model in made.items():
        (models / CATALOG[name].file_name).write_bytes(model.SerializeToString())
    config = settings(tmp, workers=1, sync_slots=1, runtime={"models_dir": str(models)})
    with running_app(config) as c:
        yield c


def _parts(faces_dir: Path, options: dict) -> list:
    photo = (faces_dir / PHOTO).read_bytes()
    return [
        ("source", ("s.png", photo, "image/png")),
        ("target", ("t.png", photo, "image/png")),
        ("options", (None, json.dumps(options).encode())),
    ]


def _swap(client, faces_dir, **options):
    return client.post("/v1/swap", files=_parts(faces_dir, options))


def _job(client, faces_dir, **options):
    return client.post("/v1/jobs", files=_parts(faces_dir, options))


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        ({"face_detector": "yolo"}, ("unknown face detector 'yolo'", "yolo_face", "scrfd", "retinaface", "yunet")),
        ({"face_landmarker": "fan"}, ("face landmarker", "'fan'", "2dfan4", "fan_68_5")),
        ({"face_detector": "retinaface", "face_detector_size": 300}, ("face detector size 300", "160, 320")),
        ({"face_detector_score": 0.0}, ("face_detector_score",)),
        ({"face_landmarker_score": 1.5}, ("face_landmarker_score",)),
    ],
    ids=["detector", "landmarker", "size", "score", "landmarker-score"],
)
def test_a_bad_analysis_option_is_422_naming_what_is_accepted(client, faces_dir, options, fragments):
    for post in (_swap, _job):
        response = post(client, faces_dir, **options)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_option", error
        for fragment in fragments:
            assert fragment in error["message"], error


def test_each_swap_runs_on_the_analyser_of_its_options(client, faces_dir):
    assert _swap(client, faces_dir).status_code == 200
    blind = _swap(client, faces_dir, face_detector="retinaface", face_detector_score=0.3)
    assert blind.status_code == 422, blind.text
    assert blind.json()["error"]["code"] == "no_face"
    found = _swap(client, faces_dir, swapper="mesh", face_detector="yolo_face")
    assert found.status_code == 200, found.text
    assert _swap(client, faces_dir).status_code == 200  # the default analyser is still the default's


def test_a_detector_that_is_not_installed_is_a_clear_error(client, faces_dir):
    from tests.service_fixtures import wait_state

    response = _swap(client, faces_dir, face_detector="scrfd")
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "model_not_found"
    assert error["message"].startswith("face detector scrfd: model scrfd is not present in the server's folder")
    submitted = _job(client, faces_dir, face_landmarker="2dfan4")
    assert submitted.status_code == 202, submitted.text
    done = wait_state(client, submitted.json()["id"], ("succeeded", "failed"))
    assert done["state"] == "failed" and done["error"]["code"] == "model_not_found", done
    assert done["error"]["message"].startswith("face landmarker 2dfan4: model")


def test_jobs_run_on_their_own_analyser(client, faces_dir):
    from tests.service_fixtures import wait_state

    outcomes = {}
    for name in ("yolo_face", "retinaface"):
        submitted = _job(client, faces_dir, face_detector=name)
        assert submitted.status_code == 202, submitted.text
        outcomes[name] = wait_state(client, submitted.json()["id"], ("succeeded", "failed"))
    assert outcomes["yolo_face"]["state"] == "succeeded", outcomes
    assert outcomes["retinaface"]["state"] == "failed" and outcomes["retinaface"]["error"]["code"] == "no_face"


def test_the_analysers_are_kept_per_configuration_and_bounded(tmp_path, monkeypatch):
    from faceweave.service import models

    class Made:
        def __init__(self, analysis, runtime):
            self.analyser, self.options, self.closed = self, analysis, False

        def close(self):
            self.closed = True

    monkeypatch.setattr(models, "_open_analyser", Made)
    runtime = RuntimeOptions(models_dir=str(tmp_path))
    cache = models.AnalyserCache(2)
    a, b = (cache.get(AnalysisOptions(min_confidence=s), runtime) for s in (0.3, 0.4))
    assert cache.get(AnalysisOptions(min_confidence=0.3), runtime) is a  # kept, not made again
    other = cache.get(AnalysisOptions(min_confidence=0.3), RuntimeOptions(models_dir=str(tmp_path / "x")))
    assert other is not a  # another models folder is another configuration
    assert b.closed and not a.closed and len(cache) == 2  # b was used longest ago
    cache.close()
    assert a.closed and other.closed and len(cache) == 0


def test_the_face_list_uses_the_same_analyser_as_a_job_with_those_options(client, faces_dir):
    """POST /v1/faces takes the analysis options too, so the faces it lists
    (and their face_index order) are those a job with the same options finds."""
    photo = (faces_dir / PHOTO).read_bytes()

    def faces(**fields):
        data = {name: str(value) for name, value in fields.items()}
        return client.post("/v1/faces", files={"target": ("t.png", photo, "image/png")}, data=data)

    plain = faces()
    assert plain.status_code == 200, plain.text
    assert len(plain.json()["faces"]) == 1
    assert faces(face_detector="retinaface").json()["faces"] == []  # the job's detector finds nothing either
    found = faces(face_detector="yolo_face", face_detector_angles="0")
    assert found.status_code == 200 and len(found.json()["faces"]) == 1
    bad = faces(face_detector="yolo")
    assert bad.status_code == 422 and "unknown face detector 'yolo'" in bad.json()["error"]["message"]
    angle = faces(face_detector="yolo_face", face_detector_angles="0,45")
    assert angle.status_code == 422 and "0, 90, 180, 270" in angle.json()["error"]["message"]
    missing = faces(face_detector="scrfd")
    assert missing.status_code == 422 and missing.json()["error"]["code"] == "model_not_found"
