"""Enhancer protocols, the model protocol they run on, and the registry.

A face enhancer restores the faces of a frame (GFPGAN, CodeFormer, GPEN,
RestoreFormer++); a frame enhancer upscales the whole frame (Real-ESRGAN).
Each is a small class that receives an already loaded model object: the
caller owns the model (its session, provider and cache) and closes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from faceweave import names
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.models.catalog import FRAME_ENHANCER_TILING, find_spec
from faceweave.runtime.model import RunnableModel, TensorLike
from faceweave.types import Face

# -- the model an enhancer runs ------------------------------------------------
#: the model protocols are shared by every model-using component
TensorInfo = TensorLike
InferenceModel = RunnableModel


_DTYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16}


def is_dynamic(dim: Any) -> bool:
    """Whether a shape entry is a dynamic dimension."""
    return not isinstance(dim, (int, np.integer)) or int(dim) < 0


def tensor_dtype(info: TensorInfo) -> np.dtype:
    """numpy dtype a float model input expects (float32 unless it says otherwise)."""
    name = getattr(info, "dtype", None)
    if isinstance(name, str) and name in ("float16", "float32", "float64"):
        return np.dtype(name)
    return np.dtype(_DTYPES.get(str(getattr(info, "type", "tensor(float)")), np.float32))


def find_input(model: InferenceModel, name: str, *, model_name: str) -> TensorInfo:
    """The input called ``name``; raises :class:`ModelSignatureError` naming
    the inputs the model has."""
    for info in model.inputs:
        if info.name == name:
            return info
    have = ", ".join(f"{i.name}{list(i.shape)}" for i in model.inputs) or "none"
    raise ModelSignatureError(f"{model_name}: the model has no input {name!r} (it has: {have})")


def check_image_input(info: TensorInfo, *, model_name: str, size: tuple[int, int] | None) -> None:
    """Raise :class:`ModelSignatureError` unless ``info`` is ``[N, 3, H, W]``
    with ``(H, W) == size`` where both are fixed (``size`` ``None``: any)."""
    shape = list(info.shape)
    want = ["N", 3, "H" if size is None else size[0], "W" if size is None else size[1]]
    bad = len(shape) != 4 or (not is_dynamic(shape[1]) and int(shape[1]) != 3)
    if not bad and size is not None:
        bad = any(not is_dynamic(d) and int(d) != s for d, s in zip(shape[2:], size, strict=False))
    if bad:
        raise ModelSignatureError(f"{model_name}: input {info.name!r} expected shape {want}, got {shape}")


def first_output(model: InferenceModel, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """The model's first declared output from a run's result."""
    return np.asarray(outputs[model.outputs[0].name])


# -- enhancers -----------------------------------------------------------------
#: a face to enhance: a :class:`Face`, or its ``(5, 2)`` key points (eye image
#: left, eye image right, nose tip, mouth corner image left, image right)
FaceLike = Face | np.ndarray


@runtime_checkable
class FaceEnhancer(Protocol):
    name: str

    def enhance(self, frame: np.ndarray, faces: Sequence[FaceLike], *, blend: float = 0.8) -> np.ndarray:
        """A new ``(H, W, 3)`` uint8 RGB frame with ``faces`` restored;
        ``blend`` in ``[0, 1]`` (0: the frame unchanged)."""


@runtime_checkable
class FrameEnhancer(Protocol):
    name: str
    scale: int

    def enhance(self, frame: np.ndarray, *, blend: float = 1.0) -> np.ndarray:
        """``(H * scale, W * scale, 3)`` uint8 RGB (``(H, W, 3)`` with
        ``restore_size``); ``blend`` 0 gives the plainly resized frame."""


@dataclass(frozen=True)
class FaceEnhancerSpec:
    """What a face-enhancer model needs: 5-point ``template`` name, square
    crop ``size`` in pixels, and whether it takes a fidelity ``weight``."""

    name: str
    template: str
    size: int
    weight_input: bool = False


@dataclass(frozen=True)
class FrameEnhancerSpec:
    """A frame enhancer: upscale factor and default tiling (pixels of input)."""

    name: str
    scale: int
    tile_size: int = 256
    tile_overlap: int = 32
    tile_pad: int = 16


def _face(name: str) -> FaceEnhancerSpec:
    """The face enhancer ``name`` as the catalog describes it (its one source)."""
    model = find_spec(name)
    weight = "weight" in [t.name for t in model.inputs]
    return FaceEnhancerSpec(
        name=name, template=str(model.template), size=int(model.crop_size or 0), weight_input=weight
    )


FACE_ENHANCERS: Mapping[str, FaceEnhancerSpec] = names.registered(
    "face enhancer", names.FACE_ENHANCERS, {name: _face(name) for name in names.FACE_ENHANCERS}
)

#: every frame enhancer tiled at FaceFusion's tile side (and its pad, a sixteenth of the tile),
#: with faceweave's overlap of an eighth of the tile (the catalog's :data:`FRAME_ENHANCER_TILING`)
FRAME_ENHANCERS: Mapping[str, FrameEnhancerSpec] = names.registered(
    "frame enhancer",
    names.FRAME_ENHANCERS,
    {
        name: FrameEnhancerSpec(name, scale=scale, tile_size=tile, tile_overlap=tile // 8, tile_pad=tile // 16)
        for name, (scale, tile) in FRAME_ENHANCER_TILING.items()
    },
)


def _face_factories() -> dict[str, Callable[..., FaceEnhancer]]:
    from faceweave.enhancers.face import CodeFormerEnhancer, RestorationEnhancer

    return {
        name: CodeFormerEnhancer if spec.weight_input else RestorationEnhancer for name, spec in FACE_ENHANCERS.items()
    }


def available_face_enhancers() -> list[str]:
    return sorted(FACE_ENHANCERS)


def available_frame_enhancers() -> list[str]:
    return sorted(FRAME_ENHANCERS)


def face_enhancer_spec(name: str) -> FaceEnhancerSpec:
    if name not in FACE_ENHANCERS:
        raise InvalidOptionError(
            names.unknown("face enhancer", name, tuple(available_face_enhancers()), listed="available:")
        )
    return FACE_ENHANCERS[name]


def frame_enhancer_spec(name: str) -> FrameEnhancerSpec:
    if name not in FRAME_ENHANCERS:
        raise InvalidOptionError(
            names.unknown("frame enhancer", name, tuple(available_frame_enhancers()), listed="available:")
        )
    return FRAME_ENHANCERS[name]


def create_face_enhancer(name: str, model: InferenceModel, **options: Any) -> FaceEnhancer:
    """Build a registered face enhancer by name around a loaded ``model``
    (``options``: e.g. ``weight=`` for CodeFormer, ``mask_blur=``)."""
    spec = face_enhancer_spec(name)
    return _face_factories()[name](model, spec=spec, **options)


def create_frame_enhancer(name: str, model: InferenceModel, **options: Any) -> FrameEnhancer:
    """Build a registered frame enhancer by name around a loaded ``model``
    (``options``: ``tile_size``, ``tile_overlap``, ``tile_pad``, ``restore_size``)."""
    from faceweave.enhancers.frame import TiledFrameEnhancer

    return TiledFrameEnhancer(model, spec=frame_enhancer_spec(name), **options)
