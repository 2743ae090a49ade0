"""The face analyser with a chosen ONNX detector and landmarker: the faces'
five points are theirs (the mediapipe mesh still fitted inside the box), a
missing model file is named with how to get it before anything loads."""

from __future__ import annotations

import numpy as np
import pytest
from tests.analysis_fixtures import constant_model, landmarker_stand_in, yolo_head

from faceweave.analysis import FaceAnalyser
from faceweave.errors import ChosenModelMissingError, InputError, ModelNotFoundError
from faceweave.models import builtin_specs
from faceweave.options import AnalysisOptions, RuntimeOptions
from faceweave.sessions import ModelSessions

CATALOG = builtin_specs()


def _write(folder, name: str, proto) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CATALOG[name].file_name).write_bytes(proto.SerializeToString())


def _yolo_for(box, five) -> object:
    """A yolo_face stand-in that finds one face at ``box`` with points ``five``
    (a frame of at most 640 px is not scaled)."""
    x1, y1, x2, y2 = box
    row = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, 0.9]
    for x, y in five:
        row += [x, y, 1.0]
    return constant_model([1, 3, 640, 640], [yolo_head(8400, [(1234, row)])], name="yolo_face")


@pytest.fixture(scope="module")
def mediapipe_face(astronaut):
    with FaceAnalyser(AnalysisOptions(small_faces=False)) as analyser:
        faces = analyser.analyse(np.ascontiguousarray(astronaut))
    assert len(faces) == 1
    return faces[0]


def _analyse(tmp_path, astronaut, **fields):
    sessions = ModelSessions(RuntimeOptions(models_dir=str(tmp_path)))
    try:
        with FaceAnalyser(AnalysisOptions(small_faces=False, **fields), sessions=sessions) as analyser:
            return analyser.analyse(np.ascontiguousarray(astronaut))
    finally:
        sessions.close()


def test_the_chosen_detectors_points_are_the_faces_kps5_and_the_mesh_is_still_fitted(
    tmp_path, astronaut, mediapipe_face
):
    b = mediapipe_face.bbox
    five = mediapipe_face.kps5 + np.array([3.0, -2.0])
    _write(tmp_path, "yolo_face", _yolo_for((b.x1, b.y1, b.x2, b.y2), five))
    faces = _analyse(tmp_path, astronaut, face_detector="yolo_face")
    assert len(faces) == 1
    face = faces[0]
    np.testing.assert_allclose(face.kps5, five, atol=1e-3)
    assert face.landmarks68 is None and face.score == pytest.approx(0.9)
    # the mesh is mediapipe's, fitted inside the detector's box
    np.testing.assert_allclose(face.mesh, mediapipe_face.mesh, atol=2.0)
    # with the mediapipe detector the five points follow from the mesh as before
    assert mediapipe_face.landmarks5 is None


def test_2dfan4_points_replace_the_detectors_when_confident(tmp_path, astronaut, mediapipe_face):
    b = mediapipe_face.bbox
    _write(tmp_path, "yolo_face", _yolo_for((b.x1, b.y1, b.x2, b.y2), mediapipe_face.kps5))
    for name in ("2dfan4", "fan_68_5"):
        _write(tmp_path, name, landmarker_stand_in(name))
    face = _analyse(tmp_path, astronaut, face_detector="yolo_face", face_landmarker="2dfan4")[0]
    assert face.landmarks68 is not None and face.landmarks68.shape == (68, 2)
    eyes = face.landmarks68[36:42].mean(axis=0)
    np.testing.assert_allclose(face.kps5[0], eyes, atol=1e-3)
    low = _analyse(tmp_path, astronaut, face_detector="yolo_face", face_landmarker="2dfan4", face_landmarker_score=1.0)
    np.testing.assert_allclose(low[0].kps5, mediapipe_face.kps5, atol=1e-3)


def test_fan_68_5_with_the_mediapipe_detector_starts_from_the_mesh_points(tmp_path, astronaut, mediapipe_face):
    _write(tmp_path, "fan_68_5", landmarker_stand_in("fan_68_5"))
    face = _analyse(tmp_path, astronaut, face_landmarker="fan_68_5")[0]
    np.testing.assert_allclose(face.kps5, mediapipe_face.kps5, atol=1e-3)
    assert face.landmarks68 is not None


def test_a_missing_model_file_is_named_with_how_to_get_it_and_nothing_is_loaded(tmp_path, astronaut):
    _write(tmp_path, "scrfd", constant_model([1, 3, 640, 640], [np.zeros((1, 1))] * 9))
    sessions = ModelSessions(RuntimeOptions(models_dir=str(tmp_path)))
    with pytest.raises(ChosenModelMissingError) as caught:
        FaceAnalyser(AnalysisOptions(face_detector="scrfd", face_landmarker="2dfan4"), sessions=sessions)
    message = str(caught.value)
    assert (
        message.startswith("face landmarker 2dfan4: model 2dfan4 is not present in")
        and "faceweave models download 2dfan4" in message
    )
    assert sessions.pool is not None and sessions.pool.records == ()
    sessions.close()
    with pytest.raises(ModelNotFoundError, match="face detector yunet: .*faceweave models download yunet") as caught:
        FaceAnalyser(
            AnalysisOptions(face_detector="yunet"), sessions=ModelSessions(RuntimeOptions(models_dir=str(tmp_path)))
        )
    assert isinstance(caught.value, InputError)  # the CLI's exit code 2


def test_a_video_track_keeps_the_chosen_points_offset_from_its_mesh(astronaut, mediapipe_face):
    """Between detections the five points follow the mesh, kept where the
    chosen detector put them relative to it at the last detection."""
    from dataclasses import replace

    from faceweave.geometry.topology import kps5_from_mesh
    from faceweave.video.tracker import FaceTracker

    pixels = np.ascontiguousarray(astronaut)
    first = replace(mediapipe_face, landmarks5=mediapipe_face.kps5 + np.array([3.0, -2.0]))
    second = replace(mediapipe_face, landmarks5=mediapipe_face.kps5 + np.array([5.0, 1.0]))
    with (
        FaceAnalyser(AnalysisOptions(small_faces=False)) as analyser,
        FaceTracker(analyser, detect_every=50) as tracker,
    ):
        (track,) = tracker.update(pixels, 0.0, found=[first])
        np.testing.assert_allclose(track.face.kps5, first.landmarks5, atol=1e-4)
        for t, found in ((0.04, [second]), (0.08, None), (0.12, None)):  # a detection, then two followed frames
            (track,) = tracker.update(pixels, t, found=found)
            offset = track.face.kps5 - kps5_from_mesh(track.face.mesh[:, :2])
            np.testing.assert_allclose(offset, np.tile([5.0, 1.0], (5, 1)), atol=1e-3)
        assert track.face.landmarks5 is not None
        (plain,) = FaceTracker(analyser).update(pixels, 0.0, found=[mediapipe_face])
        assert plain.face.landmarks5 is None


def test_a_neural_swap_aligns_target_and_source_with_the_chosen_detectors_points(tmp_path, astronaut, mediapipe_face):
    """inswapper's stand-in behind the chosen yolo_face stand-in: the points the
    swapper warps the target with, and the source face's, are the detector's."""
    import cv2
    from tests.neural_fixtures import catalog_stand_in

    from faceweave.options import SwapOptions
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    b = mediapipe_face.bbox
    five = mediapipe_face.kps5 + np.array([4.0, 3.0])
    _write(tmp_path, "yolo_face", _yolo_for((b.x1, b.y1, b.x2, b.y2), five))
    for name in ("inswapper_128", "arcface_w600k_r50"):
        _write(tmp_path, name, catalog_stand_in(CATALOG[name]))
    photo = tmp_path / "astronaut.png"
    cv2.imwrite(str(photo), cv2.cvtColor(np.ascontiguousarray(astronaut), cv2.COLOR_RGB2BGR))
    options = SwapOptions(
        swapper="inswapper_128",
        analysis=AnalysisOptions(face_detector="yolo_face"),
        runtime=RuntimeOptions(models_dir=str(tmp_path)),
    )
    seen: list[np.ndarray] = []
    with FaceSwapper(options, provenance=Provenance.new(watermark=False)) as swapper:
        original = swapper.swapper.swap_frames

        def spy(source, faces):
            seen.extend(np.asarray(points) for _, points in faces)
            assert source.face.landmarks5 is not None
            np.testing.assert_allclose(source.face.kps5, five, atol=1e-3)
            return original(source, faces)

        swapper.swapper.swap_frames = spy  # type: ignore[method-assign]
        result = swapper.swap([photo], photo)
    assert len(result.swapped) == 1 and len(seen) == 1
    np.testing.assert_allclose(seen[0], five, atol=1e-3)
