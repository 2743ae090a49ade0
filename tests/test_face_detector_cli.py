"""``--face-detector`` / ``--face-landmarker`` and their knobs on swap, live
and evaluate: a bad name or size is one line naming what is accepted (exit
2), a chosen model whose file is missing says which and how to get it (exit
2, no output), and a present stand-in is used."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from tests.analysis_fixtures import constant_model, yolo_head
from tests.test_cli import assert_clean_error, faceweave

from faceweave.models import builtin_specs


@pytest.fixture(scope="module")
def photo(tmp_path_factory, astronaut):
    path = tmp_path_factory.mktemp("photo") / "astronaut.png"
    cv2.imwrite(str(path), cv2.cvtColor(np.ascontiguousarray(astronaut), cv2.COLOR_RGB2BGR))
    return path


@pytest.mark.parametrize(
    "flags, fragments",
    [
        (["--face-detector", "mtcnn"], ["--face-detector", "one of mediapipe, yolo_face, scrfd, retinaface, yunet"]),
        (["--face-landmarker", "hrnet"], ["--face-landmarker", "one of mediapipe, 2dfan4, peppa_wutz, many, fan_68_5"]),
        (["--face-detector", "yunet", "--face-detector-size", "320"], ["--face-detector-size", "one of 640"]),
        (["--face-detector-score", "0"], ["--face-detector-score"]),
        (["--face-landmarker-score", "1.5"], ["--face-landmarker-score"]),
    ],
)
def test_bad_detector_flags_are_one_line_naming_what_is_accepted(tmp_path, photo, flags, fragments):
    out = tmp_path / "out.png"
    proc = faceweave("swap", "-s", photo, "-t", photo, "-o", out, *flags)
    assert_clean_error(proc, 2, *fragments)
    assert not out.exists()


def test_a_missing_detector_or_landmarker_file_is_named_with_how_to_get_it(tmp_path, photo):
    out = tmp_path / "out.png"
    models = tmp_path / "models"
    swap = ["swap", "-s", photo, "-t", photo, "-o", out, "--models-dir", models]
    proc = faceweave(*swap, "--face-detector", "retinaface")
    assert_clean_error(proc, 2, "face detector retinaface", "faceweave models download retinaface", "models import")
    proc = faceweave(*swap, "--face-landmarker", "2dfan4")
    assert_clean_error(proc, 2, "face landmarker 2dfan4", "faceweave models download 2dfan4")
    assert not out.exists()


def test_evaluate_and_live_take_the_flags(tmp_path, faces_dir):
    proc = faceweave("evaluate", faces_dir, "--out", tmp_path / "eval", "--face-detector", "blazeface")
    assert_clean_error(proc, 2, "--face-detector", "yolo_face")
    video = next(iter(sorted((faces_dir / "video").glob("*.mp4"))))
    single = next(iter(sorted((faces_dir / "single").glob("*.jpg"))))
    live = ["live", video, "-s", single, "-o", tmp_path / "rec.mp4", "--models-dir", tmp_path / "none"]
    assert_clean_error(faceweave(*live, "--face-landmarker", "68"), 2, "--face-landmarker", "2dfan4")
    assert_clean_error(faceweave(*live, "--face-detector", "yunet"), 2, "faceweave models download yunet")


def test_a_present_stand_in_detector_is_used_by_swap(tmp_path, photo, astronaut):
    """A yolo_face stand-in that puts its face where the astronaut's is: the
    swap runs; one that puts it in an empty corner finds no face."""
    from faceweave.analysis import FaceAnalyser
    from faceweave.options import AnalysisOptions

    with FaceAnalyser(AnalysisOptions(small_faces=False)) as analyser:
        face = analyser.analyse(np.ascontiguousarray(astronaut))[0]
    models = tmp_path / "models"
    models.mkdir()
    file = models / builtin_specs()["yolo_face"].file_name

    def write(box, five):
        x1, y1, x2, y2 = box
        row = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, 0.9] + [v for p in five for v in (*p, 1.0)]
        file.write_bytes(constant_model([1, 3, 640, 640], [yolo_head(8400, [(7, row)])]).SerializeToString())

    b = face.bbox
    write((b.x1, b.y1, b.x2, b.y2), face.kps5)
    out = tmp_path / "out.png"
    swap = ["swap", "-s", photo, "-t", photo, "-o", out, "--models-dir", models, "--face-detector", "yolo_face"]
    proc = faceweave(*swap)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()
    write((0, 0, 40, 40), [(10, 10), (30, 10), (20, 20), (12, 30), (28, 30)])
    out.unlink()
    proc = faceweave(*swap)
    assert proc.returncode == 2 and "no face" in proc.stderr.lower(), proc.stderr
    assert not out.exists()


def test_people_takes_the_detector_flags(tmp_path, faces_dir):
    """``faceweave people`` finds faces as ``swap --map`` will, with the same detector flags."""
    video = faces_dir / "video" / "lp_d18_talking_face.mp4"
    people = ["people", video, "--models-dir", tmp_path / "none"]
    assert_clean_error(faceweave(*people, "--face-detector", "yunet"), 2, "faceweave models download yunet")
    assert_clean_error(faceweave(*people, "--face-detector-score", "2"), 2, "--face-detector-score")
    done = faceweave("people", video, "--every", "2", "--face-detector-score", "0.6", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["person"] == 0
