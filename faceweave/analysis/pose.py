"""Head pose from the 3D face mesh (no camera model needed): the rotation of
a least-squares fit of a frontal reference shape onto the mesh's stable
points, which is robust to one person's face shape differing from another's."""

from __future__ import annotations

import numpy as np

from faceweave.geometry import topology as topo
from faceweave.geometry.align import procrustes
from faceweave.types import Pose


def head_rotation(mesh: np.ndarray) -> np.ndarray:
    """``(3, 3)`` rotation taking the frontal reference shape to the face, in
    camera coordinates (x right, y down, z away from the camera), from a
    ``(478, 3)`` mesh."""
    stable = topo.stable_points()
    _, r, _ = procrustes(topo.reference_mesh()[stable], np.asarray(mesh, np.float64)[stable])
    return r


def head_pose(mesh: np.ndarray) -> Pose:
    """Yaw, pitch and roll in degrees (see :class:`faceweave.types.Pose`)."""
    r = head_rotation(mesh)
    normal = r @ np.array([0.0, 0.0, -1.0])  # towards the camera on a frontal face
    right = r @ np.array([1.0, 0.0, 0.0])
    yaw = np.degrees(np.arctan2(normal[0], -normal[2]))
    pitch = np.degrees(np.arctan2(-normal[1], np.hypot(normal[0], normal[2])))
    roll = np.degrees(np.arctan2(right[1], right[0]))
    return Pose(yaw=float(yaw), pitch=float(pitch), roll=float(roll))


def five_point_pose(kps5: np.ndarray) -> Pose:
    """A rough pose from ``(5, 2)`` alignment points (insightface order), for a
    face without a mesh: roll from the eye line, yaw from how far the nose
    tip sits off the middle of the eyes and mouth corners (across the eye
    distance, read as the sine of the turn); pitch is not read (0)."""
    pts = np.asarray(kps5, np.float64).reshape(5, 2)
    eyes = pts[1] - pts[0]
    roll = float(np.degrees(np.arctan2(eyes[1], eyes[0])))
    span = float(np.hypot(eyes[0], eyes[1]))
    if span < 1e-6:
        return Pose(yaw=0.0, pitch=0.0, roll=roll)
    across = eyes / span
    middle = pts[[0, 1, 3, 4]].mean(axis=0)
    off = float((pts[2] - middle) @ across) / span
    yaw = float(np.degrees(np.arcsin(np.clip(2.0 * off, -1.0, 1.0))))
    return Pose(yaw=yaw, pitch=0.0, roll=roll)
