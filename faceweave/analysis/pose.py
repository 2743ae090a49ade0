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
