"""Faces FaceFusion's detectors keep where the mediapipe mesh does not fit
(issue 31, gap 4): with an ONNX detector every face it keeps is kept, with
the detector's box and its own five points; a neural swapper swaps it, the
mesh swapper skips it with a reason; mediapipe's detector is unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import cv2
import numpy as np
import pytest
from tests.analysis_fixtures import constant_model, yolo_head
from tests.neural_fixtures import catalog_stand_in

from faceweave.analysis import FaceAnalyser, mesh_box
from faceweave.errors import MeshlessFaceError, NoMatchingFaceError
from faceweave.models import builtin_specs
from faceweave.options import AnalysisOptions, RuntimeOptions, SelectionOptions, SwapOptions
from faceweave.pipeline import FaceSwapper
from faceweave.provenance.stamp import Provenance
from faceweave.sessions import ModelSessions
from faceweave.types import BBox, Face

CATALOG = builtin_specs()
GREY = 128


def _write(folder, name: str, proto) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CATALOG[name].file_name).write_bytes(proto.SerializeToString())


def _same(a: BBox, b: BBox) -> bool:
    """The same box, to the model's float32 outputs."""
    return bool(np.allclose(a.as_list(), b.as_list(), atol=1e-3))


def _five(box: BBox) -> np.ndarray:
    """Plausible five points inside ``box`` (eyes, nose, mouth corners)."""
    x, y, w, h = box.x1, box.y1, box.width, box.height
    rel = np.array([[0.33, 0.4], [0.67, 0.4], [0.5, 0.58], [0.37, 0.75], [0.63, 0.75]])
    return rel * (w, h) + (x, y)


def _yolo_for(*faces: tuple[BBox, np.ndarray]) -> object:
    """A yolo_face stand-in that finds ``faces`` (box, five points) in any
    frame of at most 640 px (not scaled), the first the most confident."""
    hits = []
    for k, (box, five) in enumerate(faces):
        row = [box.center[0], box.center[1], box.width, box.height, 0.9 - 0.1 * k]
        for x, y in five:
            row += [x, y, 1.0]
        hits.append((1234 + 50 * k, row))
    return constant_model([1, 3, 640, 640], [yolo_head(8400, hits)], name="yolo_face")


@pytest.fixture(scope="module")
def mediapipe_face(astronaut) -> Face:
    with FaceAnalyser(AnalysisOptions(small_faces=False)) as analyser:
        (face,) = analyser.analyse(np.ascontiguousarray(astronaut))
    return face


#: a box on the grey strip added right of the astronaut (no face there)
BLANK = BBox(540.0, 200.0, 620.0, 300.0)


def _with_strip(astronaut: np.ndarray) -> np.ndarray:
    """The astronaut with a grey strip on its right: ``(512, 640, 3)``."""
    strip = np.full((512, 128, 3), GREY, np.uint8)
    return np.ascontiguousarray(np.concatenate([astronaut, strip], axis=1))


@contextmanager
def _analyser(tmp_path, **fields) -> Iterator[FaceAnalyser]:
    sessions = ModelSessions(RuntimeOptions(models_dir=str(tmp_path)))
    try:
        with FaceAnalyser(AnalysisOptions(small_faces=False, **fields), sessions=sessions) as analyser:
            yield analyser
    finally:
        sessions.close()


def test_a_detection_the_mesh_cannot_fit_is_kept_with_the_detectors_box_and_points(tmp_path, astronaut, mediapipe_face):
    grown = mediapipe_face.bbox.scaled(1.2)
    _write(tmp_path, "yolo_face", _yolo_for((grown, mediapipe_face.kps5), (BLANK, _five(BLANK))))
    with _analyser(tmp_path, face_detector="yolo_face") as analyser:
        faces = analyser.analyse(_with_strip(astronaut))
    assert len(faces) == 2
    real, blank = faces
    # the detector's box, as FaceFusion's, and still the mesh inside it
    assert _same(real.bbox, grown) and real.mesh is not None
    np.testing.assert_allclose(real.mesh, mediapipe_face.mesh, atol=2.0)
    assert blank.mesh is None and _same(blank.bbox, BLANK)
    np.testing.assert_allclose(blank.kps5, _five(BLANK), atol=1e-3)
    assert abs(blank.pose.roll) < 1.0 and abs(blank.pose.yaw) < 1.0
    with pytest.raises(MeshlessFaceError, match="no face mesh"):
        blank.require_mesh()


def test_a_mesh_off_the_detectors_box_no_longer_drops_the_face(tmp_path, astronaut, mediapipe_face, monkeypatch):
    """The 0.2 IoU rule: a mesh that locked onto something else is not the
    face's mesh; the face stays, without one."""
    box = mediapipe_face.bbox
    _write(tmp_path, "yolo_face", _yolo_for((box, mediapipe_face.kps5)))
    far = np.array(mediapipe_face.mesh) + np.array([400.0, 0.0, 0.0], np.float32)
    with _analyser(tmp_path, face_detector="yolo_face") as analyser:
        monkeypatch.setattr(analyser.mesher, "landmarks", lambda pixels, bbox: far)
        (face,) = analyser.analyse(np.ascontiguousarray(astronaut))
    assert face.mesh is None and _same(face.bbox, box)
    np.testing.assert_allclose(face.kps5, mediapipe_face.kps5, atol=1e-3)


def test_the_default_detector_still_drops_such_faces_and_keeps_the_meshs_box(astronaut, mediapipe_face, monkeypatch):
    with FaceAnalyser(AnalysisOptions(small_faces=False)) as analyser:
        (face,) = analyser.analyse(_with_strip(astronaut))  # nothing on the grey strip
        assert face.mesh is not None and face.bbox == mesh_box(face.mesh)  # the mesh's box
        far = np.array(mediapipe_face.mesh) + np.array([400.0, 0.0, 0.0], np.float32)
        monkeypatch.setattr(analyser.mesher, "landmarks", lambda pixels, bbox: far)
        assert analyser.analyse(np.ascontiguousarray(astronaut)) == []
        monkeypatch.setattr(analyser.mesher, "landmarks", lambda pixels, bbox: None)
        assert analyser.analyse(np.ascontiguousarray(astronaut)) == []


def _photos(tmp_path, astronaut) -> tuple[str, str]:
    source, target = tmp_path / "source.png", tmp_path / "target.png"
    cv2.imwrite(str(source), cv2.cvtColor(_with_strip(astronaut), cv2.COLOR_RGB2BGR))
    # the target: the astronaut's face hidden under grey, where the detector still finds it
    hidden = _with_strip(astronaut)
    hidden[50:200, 160:290] = GREY
    cv2.imwrite(str(target), cv2.cvtColor(hidden, cv2.COLOR_RGB2BGR))
    return str(source), str(target)


def _stand_ins(tmp_path, mediapipe_face) -> None:
    _write(tmp_path, "yolo_face", _yolo_for((mediapipe_face.bbox, mediapipe_face.kps5), (BLANK, _five(BLANK))))
    for name in ("inswapper_128", "arcface_w600k_r50"):
        _write(tmp_path, name, catalog_stand_in(CATALOG[name]))


@pytest.mark.parametrize("compositing", ["facefusion", "faceweave"])
def test_a_neural_swapper_swaps_a_face_without_a_mesh(tmp_path, astronaut, mediapipe_face, compositing):
    _stand_ins(tmp_path, mediapipe_face)
    source, target = _photos(tmp_path, astronaut)
    options = SwapOptions(
        swapper="inswapper_128",
        compositing=compositing,
        analysis=AnalysisOptions(face_detector="yolo_face"),
        runtime=RuntimeOptions(models_dir=str(tmp_path)),
        selection=SelectionOptions(mode="many"),
    )
    with FaceSwapper(options, provenance=Provenance.new(watermark=False)) as swapper:
        result = swapper.swap([source], target)
    assert [f.mesh is None for f in result.faces] == [True, True]
    swapped = sorted(result.swapped, key=lambda s: s.bbox.x1)
    assert len(swapped) == 2 and result.skipped == ()
    assert _same(swapped[0].bbox, mediapipe_face.bbox) and _same(swapped[1].bbox, BLANK)
    before = cv2.cvtColor(cv2.imread(target), cv2.COLOR_BGR2RGB)
    for box in (mediapipe_face.bbox, BLANK):
        y1, y2, x1, x2 = int(box.y1), int(box.y2), int(box.x1), int(box.x2)
        assert np.abs(result.image[y1:y2, x1:x2].astype(int) - before[y1:y2, x1:x2]).max() > 0


def test_the_mesh_swapper_skips_a_face_without_a_mesh_and_says_why(tmp_path, astronaut, mediapipe_face):
    _stand_ins(tmp_path, mediapipe_face)
    source = tmp_path / "source.png"
    cv2.imwrite(str(source), cv2.cvtColor(_with_strip(astronaut), cv2.COLOR_RGB2BGR))
    options = SwapOptions(
        analysis=AnalysisOptions(face_detector="yolo_face"),
        runtime=RuntimeOptions(models_dir=str(tmp_path)),
        selection=SelectionOptions(mode="many"),
    )
    with FaceSwapper(options, provenance=Provenance.new(watermark=False)) as swapper:
        result = swapper.swap([str(source)], str(source))
        (done,) = result.swapped
        (skipped,) = result.skipped
        assert _same(done.bbox, mediapipe_face.bbox)
        assert _same(skipped.bbox, BLANK) and "needs one" in skipped.reason and "neural swapper" in skipped.reason
        _, target = _photos(tmp_path, astronaut)  # no face with a mesh at all
        with pytest.raises(NoMatchingFaceError, match="none of the 2 selected face"):
            swapper.swap([str(source)], target)
