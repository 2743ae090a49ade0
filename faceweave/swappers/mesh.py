"""The default swapper: classical, from the dense face mesh, no neural
generator needed.

1. The source's 3D shape is fitted onto the target and becomes the new face
   geometry, with the target's lips and eyes moved only as blocks
   (:func:`faceweave.geometry.shape.transfer_shape`).
2. The target crop is reshaped by a smooth warp pinned on a ring around the
   face, so its own jaw and cheek outline follow the new shape.
3. The source texture is mapped onto the new mesh triangle by triangle
   (mediapipe's tessellation, nearer triangles drawn last, eye openings
   filled from the source, mouth opening left empty); where the source
   surface is turned away from its camera, the mirror-symmetric triangle's
   texture is used instead.
"""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np

from faceweave.geometry import topology as topo
from faceweave.geometry.shape import transfer_shape
from faceweave.geometry.warp import (
    ellipse_ring,
    piecewise_affine_maps,
    rasterize_triangles,
    tps_backward_map,
    triangle_affines,
    triangle_facing,
)
from faceweave.swappers.base import AlignedCrop, SourceFace, SwapOutput

#: below this facing cosine a source triangle's texture is taken from its mirror
_TURNED_AWAY = 0.25
#: pins of the reshaping warp, relative to the face's half-size
_PIN_RING = 1.45


def source_texture_coords(mesh: np.ndarray) -> np.ndarray:
    """``(T, 3, 2)`` source-crop coordinates of each triangle's corners, with
    turned-away triangles replaced by their mirror partner's corners."""
    tris = topo.triangles()
    mirror_tris = topo.mirror()[tris]
    facing = triangle_facing(mesh, tris)
    mirror_facing = -triangle_facing(mesh, mirror_tris)  # mirroring flips the winding
    use_mirror = (facing < _TURNED_AWAY) & (mirror_facing > facing + 0.1)
    corners = np.where(use_mirror[:, None], mirror_tris, tris)
    return np.asarray(mesh[:, :2], np.float32)[corners]


class MeshSwapper:
    """Shape-aware texture swap on mediapipe's 478-point mesh."""

    name = "mesh"

    def __init__(self, *, shape_transfer: float = 1.0) -> None:
        self.shape_transfer = shape_transfer

    def prepare(self) -> None:
        topo.triangles()  # load the mesh metadata once

    def prepare_source(self, source: SourceFace) -> SourceFace:
        coords = source_texture_coords(source.crop.mesh)
        return dataclasses.replace(source, prepared=coords)

    def close(self) -> None:
        """Nothing to release: the mesh swapper holds no model."""

    def swap(self, source: SourceFace, target: AlignedCrop) -> SwapOutput:
        size = target.size
        coords = source.prepared if source.prepared is not None else source_texture_coords(source.crop.mesh)
        new_mesh = transfer_shape(target.mesh, source.crop.mesh, amount=self.shape_transfer)
        background, changed = self._reshape(target, new_mesh)
        face, coverage = self._texture(source, coords, new_mesh, size)
        return SwapOutput(face=face, background=background, coverage=coverage, mesh=new_mesh, changed=changed)

    @staticmethod
    def _reshape(target: AlignedCrop, new_mesh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w, h = target.size
        anchors = np.concatenate([topo.face_oval(), topo.lips_inner(), [topo.NOSE_TIP]])
        dst = new_mesh[anchors, :2]
        src = target.mesh[anchors, :2]
        centre = target.mesh[topo.face_oval(), :2].mean(axis=0)
        half = target.face_size / 2.0
        ring = ellipse_ring((float(centre[0]), float(centre[1])), (half * _PIN_RING, half * _PIN_RING * 1.1), 24)
        border = ellipse_ring((w / 2.0, h / 2.0), (w * 0.72, h * 0.72), 16)
        pins = np.concatenate([ring, border])
        map_x, map_y = tps_backward_map(np.concatenate([dst, pins]), np.concatenate([src, pins]), (w, h))
        background = cv2.remap(target.pixels, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        xx, yy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
        moved = np.hypot(map_x - xx, map_y - yy)
        changed = np.clip(moved / 0.5, 0.0, 1.0).astype(np.float32)
        return background, changed

    @staticmethod
    def _texture(source: SourceFace, coords: np.ndarray, new_mesh: np.ndarray, size: tuple[int, int]):
        tris = topo.triangles()
        depth = new_mesh[tris, 2].mean(axis=1)
        ids = rasterize_triangles(new_mesh[:, :2], tris, depth, size)
        affines = triangle_affines(new_mesh[:, :2][tris], coords)
        map_x, map_y = piecewise_affine_maps(ids, affines)
        face = cv2.remap(source.crop.pixels, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        coverage = (ids >= 0).astype(np.float32)
        return face, coverage
