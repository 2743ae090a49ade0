"""Frozen values passed between the compositing steps, with their array
shapes.  ``S`` is the side of the working crop; ``s = S // 2`` the side of
the half-resolution grid where masks and shading are made.  Each value
checks its arrays' shapes and dtypes when made (a wrong one is a bug, so
it raises ``ValueError`` naming the expected and the actual shape) and
holds them as read-only views, like :mod:`faceweave.types`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from faceweave.compositing.colour import ColourMatch
from faceweave.compositing.occlusion import OcclusionPlan
from faceweave.types import MESH_POINTS, checked_array


def _grid(array: np.ndarray, name: str) -> tuple[int, int]:
    """``(H, W)`` of an ``(H, W, ...)`` array."""
    if array.ndim < 2:
        raise ValueError(f"{name}: expected an (H, W, ...) array, got shape {array.shape}")
    return int(array.shape[0]), int(array.shape[1])


@dataclass(frozen=True, eq=False)
class HalfCrop:
    """The swap at half resolution, where the smooth maps are made.

    ``face_lab`` ``(s, s, 3)`` float32 CIELAB of the new face; ``behind_lab``
    ``(s, s, 3)`` float32 CIELAB of the target behind it (hands in front
    already put back); ``mesh`` ``(478, 3)`` float32 the output's mesh in
    half-crop pixels; ``face_size`` the face's size in half-crop pixels."""

    face_lab: np.ndarray
    behind_lab: np.ndarray
    mesh: np.ndarray
    face_size: float

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        h, w = _grid(self.face_lab, "half face")
        set_(self, "face_lab", checked_array(self.face_lab, shape=(h, w, 3), dtype=np.float32, name="half face"))
        set_(self, "behind_lab", checked_array(self.behind_lab, shape=(h, w, 3), dtype=np.float32, name="half behind"))
        set_(self, "mesh", checked_array(self.mesh, shape=(MESH_POINTS, 3), dtype=np.float32, name="half mesh"))
        if not self.face_size > 0:
            raise ValueError(f"half face_size must be positive; got {self.face_size}")

    @property
    def size(self) -> tuple[int, int]:
        """``(W, H)`` of the half-resolution grid."""
        return int(self.face_lab.shape[1]), int(self.face_lab.shape[0])


@dataclass(frozen=True, eq=False)
class CompositeMasks:
    """The masks of one composite.

    ``mask`` ``(S, S)`` float32 in ``[0, 1]``: the blend mask (1 = new face);
    ``paste`` ``(S, S)`` float32 in ``[0, 1]``: where the crop replaces the
    frame; ``detail`` ``(S, S)`` float32: the new face's bare skin;
    ``skin`` ``(s, s)`` float32: the bare skin both faces show, where the
    colour statistics are measured."""

    mask: np.ndarray
    paste: np.ndarray
    detail: np.ndarray
    skin: np.ndarray

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        full = _grid(self.mask, "blend mask")
        for name in ("mask", "paste", "detail"):
            set_(self, name, checked_array(getattr(self, name), shape=full, dtype=np.float32, name=f"{name} mask"))
        set_(self, "skin", checked_array(self.skin, shape=(None, None), dtype=np.float32, name="skin mask"))


@dataclass(frozen=True, eq=False)
class TonePlan:
    """The slow part of a face's colour, made once and reusable over the
    next frames of its track while the face holds still in its crop
    (:mod:`faceweave.compositing.plans`): ``shading`` ``(s, s, 3)`` float32
    CIELAB offset, the target's low-frequency shading minus the matched and
    tinted face's, added ``amount`` (0..1) times; ``tint`` ``(s, s, 3)``
    float32 CIELAB offset added whole, the target's skin tint and lids (and,
    under a coloured light, the shading's colour).  The whites of the eyes
    are not in it: they open and shut from frame to frame."""

    shading: np.ndarray
    amount: float
    tint: np.ndarray

    def __post_init__(self) -> None:
        shading = checked_array(self.shading, shape=(None, None, 3), dtype=np.float32, name="shading offset")
        object.__setattr__(self, "shading", shading)
        tint = checked_array(self.tint, shape=shading.shape, dtype=np.float32, name="tint offset")
        object.__setattr__(self, "tint", tint)
        if not 0.0 <= self.amount <= 1.0:
            raise ValueError(f"shading amount must be in [0, 1]; got {self.amount}")

    def fits(self, size: tuple[int, int]) -> bool:
        """Whether the plan is made for a half grid of ``size = (W, H)``."""
        return (int(self.shading.shape[1]), int(self.shading.shape[0])) == size


@dataclass(frozen=True, eq=False)
class MaskPlan:
    """The masks of a face that follow its mesh and its slow looks, made
    once and reusable over the next frames of its track, all ``(s, s)``
    float32 on the half grid: ``skin``, its skin region; ``fade``, the fade
    from the top of the forehead; ``inner``, the face inside the mesh's
    outline; ``bare``, away from the eyes, brows and lips; ``shaven``, away
    from the target's beard; ``occlusion``, the slow part of the occlusion
    test (``None`` when it is off).  The mouth, the lips, the swapper's
    coverage and what is in front are this frame's."""

    skin: np.ndarray
    fade: np.ndarray
    inner: np.ndarray
    bare: np.ndarray
    shaven: np.ndarray
    occlusion: OcclusionPlan | None = None

    def __post_init__(self) -> None:
        shape = _grid(self.skin, "skin")
        for name in ("skin", "fade", "inner", "bare", "shaven"):
            object.__setattr__(self, name, checked_array(getattr(self, name), shape=shape, dtype=np.float32, name=name))

    def fits(self, size: tuple[int, int]) -> bool:
        """Whether the plan is made for a half grid of ``size = (W, H)``."""
        return (int(self.skin.shape[1]), int(self.skin.shape[0])) == size


@dataclass(frozen=True, eq=False)
class FacePlan:
    """A face's plan: its slow masks and the slow part of its colour, made
    on one frame of its track and reused by the next ones
    (:mod:`faceweave.compositing.plans`; how its detail is matched after the
    paste, a :class:`~faceweave.compositing.blend.DetailPlan`, follows in
    the slot's second part)."""

    masks: MaskPlan
    tone: TonePlan

    def fits(self, size: tuple[int, int]) -> bool:
        """Whether the plan is made for a half grid of ``size = (W, H)``."""
        return self.masks.fits(size) and self.tone.fits(size)


@dataclass(frozen=True, eq=False)
class ColourPlan:
    """How the new face's colour is changed: ``match`` maps its skin colour
    to the target's; ``regional`` gives it the target's skin tint;
    ``shading`` ``(s, s, 3)`` float32 CIELAB offset, the target's
    low-frequency shading minus the matched and tinted face's, added
    ``amount`` (0..1) times; ``share`` (0..1) of ``match`` is taken."""

    match: ColourMatch
    shading: np.ndarray
    amount: float
    #: ``(s, s, 3)`` float32 CIELAB offset added whole: the target's skin tint
    #: where its skin shows it (:func:`~faceweave.compositing.composite.skin_tint`); zeros when not given
    regional: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 3), np.float32))
    share: float = 1.0

    def __post_init__(self) -> None:
        shading = checked_array(self.shading, shape=(None, None, 3), dtype=np.float32, name="shading offset")
        object.__setattr__(self, "shading", shading)
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"colour share must be in [0, 1]; got {self.share}")
        regional = np.zeros_like(shading) if self.regional.size == 0 else self.regional
        regional = checked_array(regional, shape=shading.shape, dtype=np.float32, name="regional offset")
        object.__setattr__(self, "regional", regional)
        if not 0.0 <= self.amount <= 1.0:
            raise ValueError(f"shading amount must be in [0, 1]; got {self.amount}")


@dataclass(frozen=True, eq=False)
class Composite:
    """``pixels`` ``(S, S, 3)`` uint8 result crop; ``mask`` ``(S, S)``
    float32 the blend mask; ``paste`` ``(S, S)`` float32: where the crop
    replaces the frame; ``detail`` ``(S, S)`` float32: the bare skin of the
    new face, where the target's own fine grain may be added back at full
    resolution; ``warp`` ``(S, S, 2)`` float32 or ``None``: the reshaping
    warp's offsets in crop pixels, to apply to the frame itself before the
    paste (nothing moves under hands); ``plan``: the slow masks and colour
    it was made with (made here, or reused from an earlier frame)."""

    pixels: np.ndarray
    mask: np.ndarray
    paste: np.ndarray
    detail: np.ndarray
    warp: np.ndarray | None = None
    plan: FacePlan | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        h, w = _grid(self.pixels, "result crop")
        set_(self, "pixels", checked_array(self.pixels, shape=(h, w, 3), dtype=np.uint8, name="result crop"))
        for name in ("mask", "paste", "detail"):
            set_(self, name, checked_array(getattr(self, name), shape=(h, w), dtype=np.float32, name=f"{name} mask"))
        if self.warp is not None:
            set_(self, "warp", checked_array(self.warp, shape=(h, w, 2), dtype=np.float32, name="warp"))
