"""Head pose from the 3D face mesh (no camera model needed)."""

from __future__ import annotations

import numpy as np

from faceweave.geometry import topology as topo
from faceweave.types import Pose

#: mediapipe's forehead-to-chin line leans back by about this much on a
#: frontal face; subtracting it makes a frontal face read pitch ~ 0
_PITCH_OFFSET_DEG = 0.0


def head_rotation(mesh: np.ndarray) -> np.ndarray:
    """``(3, 3)`` rotation whose rows are the face's right, down and backward
    axes in camera coordinates (x right, y down, z away), from a ``(478, 3)`` mesh."""
    p = np.asarray(mesh, dtype=np.float64)
    x = p[topo.LEFT_EYE_OUTER] - p[topo.RIGHT_EYE_OUTER]
    x /= np.linalg.norm(x) + 1e-9
    down = p[topo.CHIN] - p[topo.FOREHEAD_TOP]
    down -= x * (down @ x)
    down /= np.linalg.norm(down) + 1e-9
    back = np.cross(x, down)
    return np.stack([x, down, back])


def head_pose(mesh: np.ndarray) -> Pose:
    """Yaw, pitch and roll in degrees (see :class:`faceweave.types.Pose`)."""
    r = head_rotation(mesh)
    normal = -r[2]  # towards the camera
    yaw = np.degrees(np.arctan2(normal[0], -normal[2]))
    pitch = np.degrees(np.arctan2(-normal[1], np.hypot(normal[0], normal[2]))) - _PITCH_OFFSET_DEG
    roll = np.degrees(np.arctan2(r[0][1], r[0][0]))
    return Pose(yaw=float(yaw), pitch=float(pitch), roll=float(roll))
