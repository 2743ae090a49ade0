"""Face analysis: detection, mesh, head pose and identity embedding.

:class:`FaceAnalyser` composes the models; each model is a small class with
``prepare`` / its one method / ``close``.
"""

from __future__ import annotations

import numpy as np

from faceweave.analysis.detector import MediapipeFaceDetector
from faceweave.analysis.embedder import DlibEmbedder, embedding_distance
from faceweave.analysis.landmarker import MediapipeFaceMesh
from faceweave.analysis.pose import head_pose
from faceweave.options import AnalysisOptions
from faceweave.timing import timed
from faceweave.types import BBox, Face

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

    def __init__(self, options: AnalysisOptions = AnalysisOptions()) -> None:
        self.options = options
        self.detector = MediapipeFaceDetector(min_confidence=options.min_confidence, small_faces=options.small_faces)
        self.mesher = MediapipeFaceMesh()
        self.embedder = DlibEmbedder()

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
            if mesh is None:
                continue
            box = mesh_box(mesh)
            # the mesh may lock onto a neighbouring face already found
            if any(box.iou(f.bbox) > 0.5 for f in faces) or box.iou(det.bbox) < 0.2:
                continue
            face = Face(bbox=box, score=det.score, mesh=mesh, pose=head_pose(mesh))
            if embeddings:
                with timed(timings, "embed"):
                    face = self.embed(pixels, face)
            faces.append(face)
            if len(faces) >= self.options.max_faces:
                break
        return faces

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

    def __enter__(self) -> FaceAnalyser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
