"""run_image gives what mediapipe's own SolutionBase.process gives, graph by graph."""

from __future__ import annotations

from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from faceweave.analysis.solution import TIME_STEP_US, has_internals, run_image

mp = pytest.importorskip("mediapipe")


def _graphs():
    s = mp.solutions
    return {
        "face_mesh_still": lambda: s.face_mesh.FaceMesh(static_image_mode=True, max_num_faces=1, refine_landmarks=True),
        "face_mesh_video": lambda: s.face_mesh.FaceMesh(
            static_image_mode=False, max_num_faces=1, refine_landmarks=True
        ),
        "face_detection": lambda: s.face_detection.FaceDetection(model_selection=1, min_detection_confidence=0.3),
        "selfie_segmentation": lambda: s.selfie_segmentation.SelfieSegmentation(model_selection=0),
        "hands": lambda: s.hands.Hands(static_image_mode=False, max_num_hands=2),
    }


def _frames(astronaut: np.ndarray) -> list[np.ndarray]:
    """A few frames of a moving face (a video graph carries state between them)."""
    out = []
    for dx in (0, 6, 12, 18):
        m = np.float32([[1, 0, dx], [0, 1, dx / 2]])
        out.append(cv2.warpAffine(astronaut, m, (astronaut.shape[1], astronaut.shape[0])))
    return out


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return a == b  # protobuf messages compare field by field


@pytest.mark.parametrize("name", list(_graphs()))
def test_run_image_matches_process(name: str, astronaut: np.ndarray) -> None:
    make = _graphs()[name]
    ours, theirs = make(), make()
    try:
        assert has_internals(ours)
        fields = list(ours._output_stream_type_info)
        for frame in _frames(astronaut):
            mine, reference = run_image(ours, frame), theirs.process(frame)
            assert isinstance(mine, SimpleNamespace)
            for field in fields:
                assert _same(getattr(mine, field), getattr(reference, field)), field
        assert ours._simulated_timestamp == theirs._simulated_timestamp == 4 * TIME_STEP_US
    finally:
        ours.close()
        theirs.close()


def test_face_found_through_run_image(astronaut: np.ndarray) -> None:
    graph = _graphs()["face_mesh_still"]()
    try:
        result = run_image(graph, astronaut)
        assert result.multi_face_landmarks and len(result.multi_face_landmarks[0].landmark) == 478
        assert run_image(graph, np.zeros((64, 64, 3), np.uint8)).multi_face_landmarks is None
    finally:
        graph.close()


def test_bad_image_is_refused_as_process_refuses_it(astronaut: np.ndarray) -> None:
    graph = _graphs()["face_detection"]()
    try:
        with pytest.raises(ValueError, match="three channel"):
            run_image(graph, np.zeros((32, 32, 4), np.uint8))
    finally:
        graph.close()


class _Other:
    """A graph without the pinned release's internals: its own process runs."""

    def __init__(self) -> None:
        self.calls = 0

    def process(self, image: np.ndarray) -> str:
        self.calls += 1
        return "own"


def test_other_graphs_run_their_own_process() -> None:
    other = _Other()
    assert not has_internals(other)
    assert run_image(other, np.zeros((8, 8, 3), np.uint8)) == "own" and other.calls == 1
