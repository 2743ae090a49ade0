"""Face analysis: detection, mesh, head pose and identity embedding.

:class:`FaceAnalyser` composes the models; each model is a small class with
``prepare`` / its one method / ``close``.  The detector and the five-point
landmarker are chosen by name (:class:`~faceweave.options.AnalysisOptions`):
mediapipe's by default, or FaceFusion's ONNX models.  The mediapipe mesh is
always fitted inside each detected box: faceweave's masks and geometry use
it, while the neural swappers align with the face's ``kps5``, which are the
chosen detector's or landmarker's points when one is chosen.  With one of
FaceFusion's detectors every face it keeps is kept, with the detector's box,
and without a mesh where none fits (:meth:`FaceAnalyser._face`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from faceweave.analysis.detector import MediapipeFaceDetector
from faceweave.analysis.embedder import DlibEmbedder, embedding_distance
from faceweave.analysis.face_detectors import FaceDetector, create_face_detection
from faceweave.analysis.face_landmarkers import FaceLandmarker, create_face_landmarker
from faceweave.analysis.landmarker import MediapipeFaceMesh
from faceweave.analysis.pose import five_point_pose, head_pose
from faceweave.geometry.topology import kps5_from_mesh
from faceweave.models.needed import analysis_models, check_present
from faceweave.options import AnalysisOptions, RuntimeOptions
from faceweave.timing import timed
from faceweave.types import BBox, Detection, Face

if TYPE_CHECKING:
    from faceweave.sessions import ModelSessions

__all__ = ["FaceAnalyser", "embedding_distance"]


def mesh_box(mesh: np.ndarray) -> BBox:
    pts = mesh[:, :2]
    x1, y1 = pts.min(axis=0)
    x2, y2 = pts.max(axis=0)
    return BBox(float(x1), float(y1), float(x2), float(y2))


class FaceAnalyser:
    """Finds faces and describes each with box, score, mesh, pose and (on
    request) a dlib embedding.  Owns its models; call :meth:`close` or use it
    as a context manager."""

    def __init__(self, options: AnalysisOptions = AnalysisOptions(), *, sessions: ModelSessions | None = None) -> None:
        """``sessions``: where the ONNX detector and landmarker are loaded
        from (default: a pool of its own on the CPU, from the default models
        folder).  Every model file they need is checked first, so a missing
        one raises :class:`~faceweave.errors.ChosenModelMissingError` (saying
        how to get it) before anything is loaded."""
        self.options = options
        self._own_sessions = sessions is None and bool(options.onnx_models())
        self.sessions = sessions
        if self._own_sessions:
            from faceweave.sessions import ModelSessions

            self.sessions = ModelSessions(RuntimeOptions())
        try:
            self.detector, self.landmarker = self._load_models()
        except BaseException:
            self._close_sessions()
            raise
        self.mesher = MediapipeFaceMesh()
        self.embedder = DlibEmbedder()

    def _load_models(self) -> tuple[FaceDetector, FaceLandmarker | None]:
        options = self.options
        if self.sessions is None or not options.onnx_models():
            detector: FaceDetector = MediapipeFaceDetector(
                min_confidence=options.min_confidence, small_faces=options.small_faces
            )
            return detector, None
        pool, provider = self.sessions.open(), self.sessions.provider
        check_present(pool.store, analysis_models(options))  # every file there before any is loaded
        if options.face_detector == "mediapipe":
            detector = MediapipeFaceDetector(min_confidence=options.min_confidence, small_faces=options.small_faces)
        else:
            detector = create_face_detection(
                options.face_detector,
                lambda name: pool.get(name, provider),
                size=options.face_detector_size,
                score=options.min_confidence,
                angles=options.face_detector_angles,
                margin=options.face_detector_margin,
            )
        landmarker = create_face_landmarker(
            options.face_landmarker, lambda name: pool.get(name, provider), min_score=options.face_landmarker_score
        )
        return detector, landmarker

    def prepare(self, *, embeddings: bool = True) -> None:
        """Load the models and run each once, so later calls are warm."""
        self.detector.prepare()
        self.mesher.prepare()
        if embeddings:
            self.embedder.prepare()

    def analyse(
        self,
        pixels: np.ndarray,
        *,
        embeddings: bool = False,
        small_faces: bool | None = None,
        timings: dict[str, float] | None = None,
    ) -> list[Face]:
        """Faces in an RGB ``(H, W, 3)`` uint8 image, in detection order (best
        score first).  ``small_faces=False`` skips the tiled detection pass
        for this call (when only the largest face matters).  Adds
        milliseconds per stage (detect, mesh, embed) to ``timings`` when given."""
        timings = {} if timings is None else timings
        with timed(timings, "detect"):
            detections = self.detector.detect(pixels, small_faces=small_faces)
        faces: list[Face] = []
        for det in detections:
            with timed(timings, "mesh"):
                mesh = self.mesher.landmarks(pixels, det.bbox)
            face = self._face(det, mesh, faces)
            if face is None:
                continue
            with timed(timings, "landmarks"):
                face = self._chosen_points(pixels, det, face)
            if embeddings:
                with timed(timings, "embed"):
                    face = self.embed(pixels, face)
            faces.append(face)
            if len(faces) >= self.options.max_faces:
                break
        return faces

    def _face(self, det: Detection, mesh: np.ndarray | None, found: list[Face]) -> Face | None:
        """The face of ``det`` with its ``mesh``, or ``None`` to drop it.

        A mesh that was not fitted, or that locked onto a neighbouring face
        already ``found`` (its box over 0.5 IoU with one) or onto something
        outside the detector's box (under 0.2 IoU with it), is no mesh of
        this face.  With mediapipe's detector such a face is dropped and the
        box is the mesh's.  FaceFusion keeps every face its detector keeps:
        with one of its detectors the box is the detector's, and a face
        without a fitting mesh is kept without one (its five points are the
        detector's, its pose guessed from them)."""
        box = None if mesh is None else mesh_box(mesh)
        fits = box is not None and not any(box.iou(f.bbox) > 0.5 for f in found) and box.iou(det.bbox) >= 0.2
        if self.options.face_detector == "mediapipe":
            if mesh is None or box is None or not fits:
                return None
            return Face(bbox=box, score=det.score, mesh=mesh, pose=head_pose(mesh))
        if mesh is None or not fits:
            five = np.asarray(det.keypoints, np.float64)
            return Face(bbox=det.bbox, score=det.score, mesh=None, pose=five_point_pose(five), landmarks5=five)
        return Face(bbox=det.bbox, score=det.score, mesh=mesh, pose=head_pose(mesh))

    def _chosen_points(self, pixels: np.ndarray, det: Detection, face: Face) -> Face:
        """``face`` with the five (and 68) points of the chosen detector and
        landmarker; unchanged with mediapipe's."""
        if self.options.face_detector == "mediapipe" and self.landmarker is None:
            return face
        onnx_five = self.options.face_detector != "mediapipe"
        five = np.asarray(det.keypoints, np.float64) if onnx_five else kps5_from_mesh(face.require_mesh()[:, :2])
        if self.landmarker is None:
            return replace(face, landmarks5=five)
        box = np.array([det.bbox.x1, det.bbox.y1, det.bbox.x2, det.bbox.y2])
        found = self.landmarker.points(pixels, box, five)
        pose = face.pose if face.mesh is not None else five_point_pose(found.five)
        return replace(face, pose=pose, landmarks5=found.five, landmarks68=found.points68)

    def embed(self, pixels: np.ndarray, face: Face) -> Face:
        """The same face with its dlib embedding."""
        if face.embedding is not None:
            return face
        return face.with_embedding(self.embedder.embed(pixels, face.bbox))

    def embedding(self, pixels: np.ndarray, face: Face) -> np.ndarray:
        """The face's ``(128,)`` float32 dlib embedding (its own, or computed now)."""
        if face.embedding is not None:
            return face.embedding
        return self.embedder.embed(pixels, face.bbox)

    def close(self) -> None:
        self.detector.close()
        self.mesher.close()
        self.embedder.close()
        self._close_sessions()

    def _close_sessions(self) -> None:
        if self._own_sessions and self.sessions is not None:
            self.sessions.close()

    def __enter__(self) -> FaceAnalyser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
