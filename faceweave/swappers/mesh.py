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
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from faceweave.analysis.pose import head_pose
from faceweave.geometry import topology as topo
from faceweave.geometry.expression import ExpressionCorrection
from faceweave.geometry.shape import eye_open_weight, transfer_shape
from faceweave.geometry.warp import (
    ellipse_ring,
    falloff_at,
    hull_falloff,
    piecewise_remap,
    rasterize_triangles,
    tps_grid,
    triangle_affines,
    triangle_facing,
)
from faceweave.kernels import warp_by_grid
from faceweave.swappers.base import AlignedCrop, Precomputed, SourceFace, SwapOutput, SwapperContext

#: below this facing cosine a source triangle's texture is taken from its mirror
_TURNED_AWAY = 0.05
#: texture magnified this many times more than the face as a whole is dropped
#: (from half of it on it fades)
_MAX_STRETCH = 6.0
#: head yaw (degrees) up to which the source shape is carried fully, and from which not at all
_SHAPE_FULL_YAW, _SHAPE_NO_YAW = 30.0, 55.0
#: output triangles facing the camera less than this (cosine) fade out, if
#: they lie within this many mesh rings of the face outline (a turned head's
#: silhouette; steep parts inside the face, the sides of the nose, the
#: nostrils and the eye sockets, keep the source's texture)
_SILHOUETTE = 0.3
_SILHOUETTE_RINGS = 2
#: source texture seen at less than this facing cosine fades out
_FORESHORTENED = 0.08
#: grid step (pixels) of the reshaping warp's spline
_RESHAPE_STEP = 12
#: pins of the reshaping warp, relative to the face's half-size
_PIN_RING = 1.45
#: nothing moves farther than this many face widths outside the face's
#: hull: the jaw and hairline reshape, the collar, hair and background stay
_HULL_REACH = 0.2
#: points that pull the target crop onto the new geometry: outline, mouth
#: (both lip lines: pinned by its inner line alone, the lower lip of a mouth
#: moved up stretched towards the chin and read as a wider opening), eyes,
#: brows, nose tip
_ANCHORS = np.concatenate(
    [
        topo.face_oval(),
        topo.lips_inner(),
        topo.lips_outer(),
        topo.right_eye(),
        topo.left_eye(),
        topo.right_eyebrow(),
        topo.left_eyebrow(),
        [topo.NOSE_TIP],
    ]
)


@dataclass(frozen=True, eq=False)
class MeshTexture(Precomputed):
    """Where each output triangle takes its texture in the source crop.

    ``coords`` ``(T, 3, 2)``: source-crop coordinates of each triangle's
    corners (its own, or its mirror partner's); ``quality`` ``(T,)`` in
    ``[0, 1]``: how squarely the source camera saw that texture (a sliver
    seen edge-on cannot be stretched over a face seen from the side)."""

    coords: np.ndarray
    quality: np.ndarray


def source_texture(mesh: np.ndarray) -> MeshTexture:
    """The source texture of each triangle.  A triangle turned away from the
    source's camera takes the texture of its mirror partner when that one is
    better seen.  (Covered parts of the source, such as hair over a cheek,
    are not mirrored: the side-to-side switch of lighting would show as
    patches; the source's clean map masks them out instead.)"""
    tris = topo.triangles()
    mirror_tris = topo.mirror()[tris]
    facing = triangle_facing(mesh, tris)
    mirror_facing = -triangle_facing(mesh, mirror_tris)  # mirroring flips the winding
    use_mirror = (facing < _TURNED_AWAY) & (mirror_facing > facing + 0.1)
    quality = np.clip(np.where(use_mirror, mirror_facing, facing) / _FORESHORTENED, 0.0, 1.0)
    # the eye fills are thin slivers whose facing is noise: an eye keeps its own texture
    fills = slice(len(topo.tessellation()), None)
    use_mirror[fills] = False
    quality[fills] = 1.0
    corners = np.where(use_mirror[:, None], mirror_tris, tris)
    return MeshTexture(coords=np.asarray(mesh[:, :2], np.float32)[corners], quality=quality.astype(np.float32))


def triangle_areas(corners: np.ndarray) -> np.ndarray:
    """``(T,)`` unsigned areas of ``(T, 3, 2)`` triangles."""
    a, b, c = corners[:, 0], corners[:, 1], corners[:, 2]
    return 0.5 * np.abs((b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0]))


def shape_confidence(source_yaw: float, target_yaw: float) -> float:
    """How much of the source's face shape to carry over, in ``[0, 1]``: all
    of it while both heads are within ``_SHAPE_FULL_YAW`` of frontal, none
    from ``_SHAPE_NO_YAW`` on (the mesh of a profile is mostly guessed, and
    a fitted shape from it distorts the mouth and nose)."""
    yaw = max(abs(source_yaw), abs(target_yaw))
    return float(np.clip((_SHAPE_NO_YAW - yaw) / (_SHAPE_NO_YAW - _SHAPE_FULL_YAW), 0.0, 1.0))


@lru_cache(maxsize=1)
def _eyes() -> tuple[tuple[np.ndarray, tuple[int, int], np.ndarray], ...]:
    """Each eye's lid loop, its corners, and which triangles touch the loop
    (read-only; the topology does not change)."""
    tris = topo.triangles()
    out = []
    for loop, corners, _ in topo.eyes():
        touching = np.isin(tris, loop).any(axis=1)
        touching.setflags(write=False)
        out.append((loop, corners, touching))
    return tuple(out)


@lru_cache(maxsize=1)
def _silhouette_triangles() -> np.ndarray:
    """``(T,)`` bool, read-only: the triangles that can form a turned head's
    silhouette (a corner within :data:`_SILHOUETTE_RINGS` of the outline)."""
    near = topo.oval_rings()[topo.triangles()].min(axis=1) <= _SILHOUETTE_RINGS
    near.setflags(write=False)
    return near


def _eyelid_weights(mesh: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """``(T,)`` weight of each triangle of ``tris`` (the mesh triangles): 1,
    except around an eye that is closing, where the triangles that touch its
    lid loop fade out (:func:`faceweave.geometry.shape.eye_open_weight`)."""
    weights = np.ones(len(tris), np.float32)
    for loop, corners, touching in _eyes():
        open_ = eye_open_weight(mesh, loop, corners)
        if open_ < 1.0:
            weights[touching] = np.minimum(weights[touching], open_)
    return weights


class MeshSwapper:
    """Shape-aware texture swap on mediapipe's 478-point mesh."""

    name = "mesh"
    #: :meth:`swap` takes a ``correction`` (see :class:`faceweave.expression.ExpressionChecker`)
    adjusts_expression = True
    #: no batched inference: each face is cut from the frame as swapped so far
    batches = False

    def __init__(self, *, shape_transfer: float = 1.0) -> None:
        self.shape_transfer = shape_transfer

    def prepare(self) -> None:
        topo.triangles()  # load the mesh metadata once

    def prepare_source(self, source: SourceFace) -> SourceFace:
        return dataclasses.replace(source, prepared=source_texture(source.crop.mesh))

    def close(self) -> None:
        """Nothing to release: the mesh swapper holds no model."""

    def swap(
        self, source: SourceFace, target: AlignedCrop, *, correction: ExpressionCorrection | None = None
    ) -> SwapOutput:
        """``correction``: changes to the new lips and eyelids (the
        pipeline's expression check)."""
        size = target.size
        texture = source.prepared if isinstance(source.prepared, MeshTexture) else source_texture(source.crop.mesh)
        pose = target.pose if target.pose is not None else head_pose(target.mesh)
        amount = self.shape_transfer * shape_confidence(source.face.pose.yaw, pose.yaw)
        new_mesh = transfer_shape(target.mesh, source.crop.mesh, amount=amount, correction=correction)
        background, changed, moved = self._reshape(target, new_mesh)
        face, coverage, clean = self._texture(source, texture, new_mesh, size, target.face_size)
        return SwapOutput(
            face=face,
            background=background,
            coverage=coverage,
            mesh=new_mesh,
            changed=changed,
            source_clean=clean,
            displacement=moved,
        )

    def swap_batch(self, source: SourceFace, targets: Sequence[AlignedCrop]) -> list[SwapOutput]:
        """:meth:`swap` for each crop (nothing is shared between faces)."""
        return [self.swap(source, target) for target in targets]

    @staticmethod
    def _reshape(target: AlignedCrop, new_mesh: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The target crop warped so that its face outline and features sit on
        the new mesh, with no movement at all beyond a ring around the face;
        where it moved; and the ``(S, S, 2)`` offsets it sampled at."""
        w, h = target.size
        src = target.mesh[_ANCHORS, :2]
        dst = new_mesh[_ANCHORS, :2]
        centre = target.mesh[topo.face_oval(), :2].mean(axis=0)
        radii = (target.face_size / 2.0 * _PIN_RING, target.face_size / 2.0 * _PIN_RING * 1.1)
        ring = ellipse_ring((float(centre[0]), float(centre[1])), radii, 24)
        # the spline, its fade to nothing at the ring, and how far each place
        # moves are all smooth: work on the spline's grid, interpolate once
        grid = tps_grid(np.concatenate([dst, ring]), np.concatenate([src, ring]), (w, h), step=_RESHAPE_STEP)
        gh, gw = grid.shape[:2]
        steps = np.arange(max(gw, gh), dtype=np.float32) * _RESHAPE_STEP
        grid *= falloff_at(steps[:gw], steps[:gh], (float(centre[0]), float(centre[1])), radii, inner=0.8)[..., None]
        face = target.mesh[topo.face_oval(), :2]
        reach = _HULL_REACH * max(float(np.ptp(face[:, 0])), 1.0)
        grid *= hull_falloff(face, steps[:gw], steps[:gh], reach=reach)[..., None]
        moved = np.clip(np.hypot(grid[..., 0], grid[..., 1]) / 0.3, 0.0, 1.0)
        # the field at every pixel and the crop moved by it, in one pass
        background, offsets, changed = warp_by_grid(target.pixels, np.dstack([grid, moved]), _RESHAPE_STEP)
        return background, changed, offsets

    @staticmethod
    def _texture(
        source: SourceFace, texture: MeshTexture, new_mesh: np.ndarray, size: tuple[int, int], target_face_size: float
    ):
        tris = topo.triangles()
        depth = new_mesh[tris, 2].mean(axis=1)
        ids = rasterize_triangles(new_mesh[:, :2], tris, depth, size)
        affines = triangle_affines(new_mesh[:, :2][tris], texture.coords)
        images = [source.crop.pixels] if source.clean is None else [source.crop.pixels, source.clean]
        mapped = piecewise_remap(images, ids, affines)
        face = mapped[0]
        # fade out: triangles seen edge-on in the output (the silhouette of a
        # turned head), texture the source saw edge-on, and texture magnified
        # far more than the face as a whole (a sliver of the source's cheek
        # spread over the near cheek of a head turned the other way)
        facing = np.clip(triangle_facing(new_mesh, tris) / _SILHOUETTE, 0.0, 1.0)
        facing[~_silhouette_triangles()] = 1.0
        scale = (target_face_size / source.crop.face_size) ** 2
        stretch = triangle_areas(new_mesh[:, :2][tris]) / np.maximum(triangle_areas(texture.coords) * scale, 1e-6)
        magnified = np.clip((_MAX_STRETCH - stretch) / (_MAX_STRETCH / 2.0), 0.0, 1.0)
        weight = np.minimum(np.minimum(facing, texture.quality), magnified)
        # a closed (or nearly closed) eye keeps the target's own lids: the
        # source's open eye squeezed into a slit shows as a white smear
        weight = weight * _eyelid_weights(new_mesh, tris)
        # no triangle (-1) takes the table's last entry: 0 (np.take: the gather
        # of fancy indexing, a third faster)
        coverage = np.take(np.append(weight, 0.0).astype(np.float32), ids)
        clean = mapped[1] if source.clean is not None else None
        return face, coverage, clean


def mesh_swapper(context: SwapperContext) -> MeshSwapper:
    """The registry's factory: a :class:`MeshSwapper` with the options' ``shape_transfer``."""
    return MeshSwapper(shape_transfer=context.options.shape_transfer)
