"""Following faces through a video: detect on a schedule (and at scene cuts
or when a face is lost), in between follow each face by running the mesh on
its previous box, and smooth every face's mesh over time."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import cv2
import numpy as np

from faceweave.analysis import FaceAnalyser, mesh_box
from faceweave.analysis.follow import follow_points
from faceweave.analysis.landmarker import MeshFollower
from faceweave.analysis.pose import head_pose
from faceweave.geometry.topology import kps5_from_mesh
from faceweave.types import Face
from faceweave.video.smoothing import OneEuroFilter


def frame_signature(pixels: np.ndarray) -> np.ndarray:
    """A tiny ``(18, 32, 3)`` float32 CIELAB thumbnail used to spot scene cuts:
    each cell the mean of an 8 x 8 grid of pixels sampled evenly over its part
    of the frame (a thumbnail this small loses nothing by it; averaging every
    pixel of a 1080p frame costs milliseconds, sampling a grid microseconds)."""
    grid = cv2.resize(pixels, (256, 144), interpolation=cv2.INTER_NEAREST)
    small = cv2.resize(grid, (32, 18), interpolation=cv2.INTER_AREA)
    return cv2.cvtColor(small.astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)


def is_scene_cut(previous: np.ndarray | None, current: np.ndarray, *, threshold: float = 22.0) -> bool:
    """Whether two frame signatures differ like two different shots: mean
    CIELAB distance of the thumbnails above ``threshold``."""
    if previous is None:
        return False
    return float(np.linalg.norm(previous - current, axis=2).mean()) > threshold


@dataclass
class Track:
    """One face followed over time (mutable, owned by :class:`FaceTracker`).
    ``id`` is never reused: a track that ends is gone, and what a pipeline
    holds per track it keys by id (:class:`~faceweave.video.planning.TrackStates`)."""

    id: int
    face: Face
    filter: OneEuroFilter
    embedding: np.ndarray | None = None
    age: int = 0
    #: the mesh in video mode, following this face (made at its first follow)
    follower: MeshFollower | None = field(default=None, repr=False, compare=False)
    #: a chosen detector's or landmarker's five points minus the mesh's, at
    #: the last detection: the tracked faces' ``landmarks5`` follow the mesh
    #: with it (``None``: the five points are the mesh's)
    offset5: np.ndarray | None = None
    #: a 68-point landmarker's points and the mesh's ``(x, y)`` at the last
    #: detection: the tracked faces' ``landmarks68`` follow the mesh by the
    #: least-squares similarity from that mesh to the smoothed one
    points68: tuple[np.ndarray, np.ndarray] | None = None

    def release(self) -> MeshFollower | None:
        """Take this track's mesh graph away from it (to reuse or close)."""
        follower, self.follower = self.follower, None
        return follower


def _points68(face: Face) -> tuple[np.ndarray, np.ndarray] | None:
    """``face``'s 68 landmarks and its mesh's points, or ``None`` without 68 landmarks."""
    if face.landmarks68 is None:
        return None
    return np.asarray(face.landmarks68, np.float64), np.asarray(face.require_mesh()[:, :2], np.float64)


def _offset5(face: Face) -> np.ndarray | None:
    """``face``'s chosen five points minus its mesh's, or ``None`` when it has none."""
    if face.landmarks5 is None:
        return None
    return np.asarray(face.landmarks5, np.float64) - kps5_from_mesh(face.require_mesh()[:, :2])


def _meshed(found: list[Face]) -> list[Face]:
    """The faces of ``found`` with a mesh: the tracker follows faces by their
    mesh, so a face FaceFusion's detector kept without one is not tracked."""
    return [face for face in found if face.mesh is not None]


class FaceTracker:
    """Faces of consecutive frames with stable ids and smoothed meshes.

    ``detect_every``: run the detector on the whole frame every that many
    frames (the mesh alone follows faces in between; new faces appear at the
    next detection); a scene cut or a frame without tracks triggers it at
    once, and a face whose mesh is lost is looked for again in a window
    around its last place.  ``min_cutoff`` and
    ``beta`` tune the One Euro smoothing of the mesh (pixels).  Each
    followed face has its own mesh graph in video mode
    (:class:`~faceweave.analysis.landmarker.MeshFollower`), up to
    ``followers`` graphs (about 35 MB each) reused from face to face; faces
    beyond them are followed with the still-image mesh.  :meth:`close` (or
    leaving a ``with`` block) releases the graphs.

    A video pipeline may run the scheduled detections ahead, on another
    thread, as frames are decoded (:meth:`detect_ahead` on every frame
    :meth:`due`, the result handed to :meth:`update` with that frame); the
    result is the same as detecting in :meth:`update`, as the schedule
    depends only on the frame index.  The analyser's models are shared by
    the two threads under one lock."""

    def __init__(
        self,
        analyser: FaceAnalyser,
        *,
        detect_every: int = 8,
        small_faces: bool = False,
        min_cutoff: float = 1.5,
        beta: float = 0.02,
        followers: int = 8,
    ) -> None:
        self.analyser = analyser
        self.detect_every = max(1, detect_every)
        self.small_faces = small_faces
        self.min_cutoff = min_cutoff
        self.beta = beta
        self.tracks: list[Track] = []
        self._next_id = 0
        self._since_detect = 0
        self._signature: np.ndarray | None = None
        self.scene_cuts = 0
        #: lost faces looked for again around their last place
        self.redetections = 0
        #: the analyser's detector and still-image mesh are used under this
        #: lock (scheduled detections may run ahead on another thread)
        self._models = threading.Lock()
        self.followers = max(0, followers)
        #: mesh graphs made, and those not following a face now
        self._made = 0
        self._spare: list[MeshFollower] = []

    @property
    def models_lock(self) -> threading.Lock:
        """Held while the analyser's detector and still-image mesh run for
        this tracker; another thread that uses them while the tracker runs
        (a live session preparing new source photos) holds it too."""
        return self._models

    def _drop(self, tracks: list[Track]) -> None:
        """Take the mesh graphs of tracks that end back for other faces (a
        graph is reused rather than made anew: making and closing them
        leaves memory behind)."""
        for track in tracks:
            follower = track.release()
            if follower is not None:
                self._spare.append(follower)

    def _follower(self) -> MeshFollower | None:
        if self._spare:
            return self._spare.pop()
        if self._made < self.followers:
            self._made += 1
            return MeshFollower(self.analyser.mesher, lock=self._models)
        return None

    def _keep(self, kept: list[Track]) -> None:
        """Make ``kept`` the tracks, releasing the graphs of the others."""
        self._drop([t for t in self.tracks if all(t is not k for k in kept)])
        self.tracks = kept

    def reset(self) -> None:
        self._drop(self.tracks)
        self.tracks = []
        self._since_detect = 0
        self._signature = None

    def _new_track(self, face: Face, t: float) -> Track:
        flt = OneEuroFilter(min_cutoff=self.min_cutoff, beta=self.beta)
        flt(face.require_mesh(), t)
        track = Track(id=self._next_id, face=face, filter=flt, offset5=_offset5(face), points68=_points68(face))
        self._next_id += 1
        return track

    def _smoothed(self, track: Track, mesh: np.ndarray, score: float, t: float) -> Face:
        smooth = track.filter(mesh, t)
        five = None if track.offset5 is None else kps5_from_mesh(smooth[:, :2]) + track.offset5
        points68 = None
        if track.points68 is not None:
            points, then = track.points68
            points68 = follow_points(points, then, smooth[:, :2])
        return Face(
            bbox=mesh_box(smooth),
            score=score,
            mesh=smooth,
            pose=head_pose(smooth),
            landmarks5=five,
            landmarks68=points68,
        )

    def due(self, index: int) -> bool:
        """Whether frame ``index`` is on the detection schedule (every
        ``detect_every`` frames from the first)."""
        return index % self.detect_every == 0

    def detect_ahead(self, pixels: np.ndarray) -> list[Face]:
        """The faces of a frame that is :meth:`due`, found on any thread
        (hand them to :meth:`update` with that frame)."""
        with self._models:
            return self.analyser.analyse(pixels, small_faces=self.small_faces)

    def _detect(self, pixels: np.ndarray, t: float, found: list[Face] | None = None) -> None:
        if found is None:
            found = self.detect_ahead(pixels)
        kept: list[Track] = []
        free = list(self.tracks)
        for face in sorted(_meshed(found), key=lambda f: -f.bbox.area):
            best = max(free, key=lambda tr: tr.face.bbox.iou(face.bbox), default=None)
            if best is not None and best.face.bbox.iou(face.bbox) > 0.3:
                free.remove(best)
                best.offset5 = _offset5(face)
                best.points68 = _points68(face)
                best.face = self._smoothed(best, face.require_mesh(), face.score, t)
                best.age += 1
                kept.append(best)
            else:
                kept.append(self._new_track(face, t))
        self._keep(kept)
        self._since_detect = 0

    def _redetect_near(self, pixels: np.ndarray, track: Track) -> tuple[np.ndarray, float] | None:
        """Look for a lost face again in a window around its last box (three
        times its size): far cheaper than detecting on the whole frame.
        Returns the mesh (frame pixels) and score of the face of a similar
        size found nearest to the old place, or None."""
        h, w = pixels.shape[:2]
        window = track.face.bbox.scaled(3.0).clipped(w, h)
        x0, y0 = int(window.x1), int(window.y1)
        x1, y1 = int(np.ceil(window.x2)), int(np.ceil(window.y2))
        if x1 - x0 < 16 or y1 - y0 < 16:
            return None
        with self._models:
            found = self.analyser.analyse(np.ascontiguousarray(pixels[y0:y1, x0:x1]), small_faces=False)
        old = track.face.bbox
        best, best_gap = None, 1.2  # centre distance in old face widths
        for face in _meshed(found):
            mesh = face.require_mesh() + np.array([x0, y0, 0.0], np.float32)
            box = mesh_box(mesh)
            gap = float(np.hypot(box.center[0] - old.center[0], box.center[1] - old.center[1])) / max(old.width, 1.0)
            if gap < best_gap and 0.5 < box.width / max(old.width, 1.0) < 2.0:
                best, best_gap = (mesh, face.score), gap
        return best

    def _follow(self, pixels: np.ndarray, t: float) -> None:
        """Move every track by running the mesh on its last box.  A face the
        mesh loses is looked for again around its last place; a face not
        found there is dropped until the next detection."""
        kept = []
        for track in self.tracks:
            if track.follower is None:
                track.follower = self._follower()
            if track.follower is not None:
                mesh = track.follower.landmarks(pixels, track.face.bbox)
            else:
                with self._models:
                    mesh = self.analyser.mesher.landmarks(pixels, track.face.bbox)
            score = track.face.score
            if mesh is None or mesh_box(mesh).iou(track.face.bbox) < 0.3:
                found = self._redetect_near(pixels, track)
                self.redetections += 1
                if found is None:
                    continue
                mesh, score = found
            track.face = self._smoothed(track, mesh, score, t)
            track.age += 1
            kept.append(track)
        self._keep(kept)
        self._since_detect += 1

    def update(self, pixels: np.ndarray, t: float, *, found: list[Face] | None = None) -> list[Track]:
        """The tracks after frame ``pixels`` at time ``t`` (seconds).
        ``found``: the frame's faces from :meth:`detect_ahead` (a frame on
        the schedule); without it a due detection runs here."""
        signature = frame_signature(pixels)
        cut = is_scene_cut(self._signature, signature)
        self._signature = signature
        if cut:
            self.scene_cuts += 1
            self._keep([])
        if found is not None or not self.tracks or self._since_detect + 1 >= self.detect_every:
            self._detect(pixels, t, found)
        else:
            self._follow(pixels, t)
        return list(self.tracks)

    def close(self) -> None:
        """Close every mesh graph (the tracker can go on; its faces are then
        found again)."""
        self.reset()
        for follower in self._spare:
            follower.close()
        self._spare = []
        self._made = 0

    def __enter__(self) -> FaceTracker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
