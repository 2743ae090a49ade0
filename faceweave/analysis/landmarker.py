"""The 478-point face mesh (mediapipe, with iris refinement), run on a crop
around each detected face rather than on the whole frame."""

from __future__ import annotations

import threading

import cv2
import numpy as np

from faceweave.analysis.native_log import QuietGraph
from faceweave.errors import ModelError
from faceweave.types import MESH_POINTS, BBox

#: side of the square crop the mesh model sees (it works at 192 px inside)
CROP_SIZE = 256
#: crop side relative to the detected box side
CROP_SCALE = 2.0


def crop_square(rgb: np.ndarray, box: BBox, *, scale: float, size: int) -> tuple[np.ndarray, float, float, float]:
    """A ``(size, size, 3)`` crop centred on ``box`` with side ``scale * max(w, h)``,
    padded with edge pixels; returns ``(crop, x0, y0, factor)`` such that
    image point = ``(x0, y0) + crop point / factor``."""
    cx, cy = box.center
    side = max(box.width, box.height) * scale
    factor = size / side
    x0, y0 = cx - side / 2.0, cy - side / 2.0
    m = np.array([[factor, 0.0, -x0 * factor], [0.0, factor, -y0 * factor]], np.float32)
    interp = cv2.INTER_AREA if factor < 1.0 else cv2.INTER_LINEAR
    crop = cv2.warpAffine(rgb, m, (size, size), flags=interp, borderMode=cv2.BORDER_REPLICATE)
    return crop, x0, y0, factor


#: a landmark of a serialized ``NormalizedLandmarkList`` with x, y and z
#: alone: the list's field 1 (tag 0x0a) of 15 bytes, then x, y, z as
#: fixed32 fields 1-3 (tags 0x0d, 0x15, 0x1d), each followed by 4 bytes
_LANDMARK_BYTES = 17
_LANDMARK_TAGS = ((0, 0x0A), (1, 15), (2, 0x0D), (7, 0x15), (12, 0x1D))
_LANDMARK_FLOATS = (3, 4, 5, 6, 8, 9, 10, 11, 13, 14, 15, 16)


def landmark_array(landmarks) -> np.ndarray:
    """``(N, 3)`` float32 x, y, z of a mediapipe ``NormalizedLandmarkList``:
    read straight from its serialized bytes when every landmark holds
    exactly x, y and z (the face mesh's), a quarter of the time of reading
    each landmark's three attributes; otherwise (a landmark with a
    visibility, or a coordinate exactly 0, which protobuf leaves out) by
    the attributes.  The same values either way."""
    data = np.frombuffer(landmarks.SerializeToString(), np.uint8)
    if data.size and data.size % _LANDMARK_BYTES == 0:
        rows = data.reshape(-1, _LANDMARK_BYTES)
        if all(bool((rows[:, col] == tag).all()) for col, tag in _LANDMARK_TAGS):
            return np.ascontiguousarray(rows[:, _LANDMARK_FLOATS]).view("<f4").reshape(-1, 3).astype(np.float32)
    return np.array([[p.x, p.y, p.z] for p in landmarks.landmark], np.float32).reshape(-1, 3)


def _image_points(result, x0: float, y0: float, factor: float) -> np.ndarray | None:
    """The first face's mesh of a mediapipe result on a :func:`crop_square`
    crop, in image pixels, or ``None``."""
    if not result.multi_face_landmarks:
        return None
    pts = landmark_array(result.multi_face_landmarks[0]) * CROP_SIZE
    if pts.shape[0] != MESH_POINTS:
        raise ModelError(f"face mesh returned {pts.shape[0]} points, expected {MESH_POINTS}")
    pts[:, 0] = pts[:, 0] / factor + x0
    pts[:, 1] = pts[:, 1] / factor + y0
    pts[:, 2] = pts[:, 2] / factor
    return pts


def _face_mesh(*, video: bool, min_confidence: float):
    """mediapipe's 478-point face mesh (iris refinement, one face per crop),
    in still-image mode or in video mode (its region from its own last
    landmarks).  Its native log lines are kept off stderr: it is made, and
    run until its first face, quietly (:class:`QuietGraph`)."""
    try:
        from faceweave.mediapipe_import import load_mediapipe

        mp = load_mediapipe()

        return QuietGraph(
            lambda: mp.solutions.face_mesh.FaceMesh(
                static_image_mode=not video,
                max_num_faces=1,
                refine_landmarks=True,
                min_detection_confidence=min_confidence,
            ),
            settled=lambda result: bool(result.multi_face_landmarks),
        )
    except Exception as exc:  # pragma: no cover - broken install
        raise ModelError(f"cannot load mediapipe face mesh: {exc}") from exc


class MediapipeFaceMesh:
    """mediapipe FaceMesh with ``refine_landmarks`` (iris), single face per crop."""

    name = "mediapipe_face_mesh"

    def __init__(self, *, min_confidence: float = 0.3) -> None:
        self.min_confidence = min_confidence
        self._model: QuietGraph | None = None

    def prepare(self) -> None:
        self._graph()

    def _graph(self) -> QuietGraph:
        if self._model is None:
            self._model = _face_mesh(video=False, min_confidence=self.min_confidence)
        return self._model

    def landmarks(self, rgb: np.ndarray, box: BBox) -> np.ndarray | None:
        """``(478, 3)`` mesh in image pixels for the face in ``box``, or ``None``
        when the mesh model finds no face there."""
        model = self._graph()
        for scale in (CROP_SCALE, 1.5, 2.8):
            crop, x0, y0, factor = crop_square(rgb, box, scale=scale, size=CROP_SIZE)
            pts = _image_points(model.process(crop), x0, y0, factor)
            if pts is not None:
                return pts
        return None

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None


class MeshFollower:
    """The face mesh in mediapipe's video mode, for one face followed from
    frame to frame (a video track owns one).  The model then places its
    region of interest from its own previous landmarks instead of running
    its face detector on every crop: about 40 % cheaper per face and frame.
    The crop is still cut around the face's last box, so the face sits at
    the same place in it from frame to frame.  Falls back to ``fallback``
    (the still-image mesh, which tries wider crops) when it loses the face.
    One thread at a time; ``lock`` guards the shared fallback; :meth:`close`
    releases the graph."""

    def __init__(
        self, fallback: MediapipeFaceMesh, *, min_confidence: float = 0.3, lock: threading.Lock | None = None
    ) -> None:
        self.fallback = fallback
        self.min_confidence = min_confidence
        #: held while ``fallback`` (shared with other users) runs
        self.lock = lock or threading.Lock()
        self._model: QuietGraph | None = None

    def landmarks(self, rgb: np.ndarray, box: BBox) -> np.ndarray | None:
        """As :meth:`MediapipeFaceMesh.landmarks`, for the next frame of this face."""
        model = self._model
        if model is None:
            model = self._model = _face_mesh(video=True, min_confidence=self.min_confidence)
        crop, x0, y0, factor = crop_square(rgb, box, scale=CROP_SCALE, size=CROP_SIZE)
        pts = _image_points(model.process(crop), x0, y0, factor)
        if pts is not None:
            return pts
        with self.lock:
            return self.fallback.landmarks(rgb, box)

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None
