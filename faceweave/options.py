"""Options, validated with pydantic at the boundary.

Every option object is frozen and serialisable (``model_dump_json``), so a
saved job reproduces a run exactly.  Unknown fields are rejected.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SelectionMode = Literal["one", "many", "reference", "index"]
FaceOrder = Literal["left-right", "right-left", "top-bottom", "bottom-top", "large-small", "small-large", "best-score"]
FACE_ORDERS: tuple[str, ...] = FaceOrder.__args__  # type: ignore[attr-defined]
SELECTION_MODES: tuple[str, ...] = SelectionMode.__args__  # type: ignore[attr-defined]


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AnalysisOptions(_Options):
    """How faces are found and described."""

    min_confidence: float = Field(0.5, ge=0.05, le=1.0, description="detector score threshold")
    small_faces: bool = Field(True, description="tiled, upscaled second detection pass for small faces")
    max_faces: int = Field(64, ge=1, le=1000, description="at most this many faces per image")


class SelectionOptions(_Options):
    """Which target faces are swapped (FaceFusion's face selector modes)."""

    mode: SelectionMode = "one"
    order: FaceOrder = "large-small"
    indices: tuple[int, ...] = Field((0,), description="face indices (after ordering) for mode 'index'")
    reference_distance: float = Field(0.6, gt=0.0, le=2.0, description="max dlib distance to the reference face")
    min_face_size: int = Field(0, ge=0, description="ignore faces smaller than this many pixels")


class MaskOptions(_Options):
    """Masks combined by minimum; each can be switched off."""

    box: bool = True
    box_blur: float = Field(0.25, ge=0.0, le=1.0, description="feather of the box mask, fraction of the crop")
    region: bool = True
    mouth: bool = True
    occlusion: bool = Field(True, description="keep hair, hands and glasses in front of the face (skin-colour test)")
    segmentation: bool = Field(False, description="also keep non-person objects in front of the face (selfie segmentation model)")


class SwapOptions(_Options):
    """Everything that decides how a swap is done."""

    swapper: str = Field("mesh", description="registered swapper name")
    working_size: int = Field(256, ge=96, le=1024, description="face size in pixels in the working crop")
    shape_transfer: float = Field(1.0, ge=0.0, le=1.0, description="how much of the source face shape is carried over")
    shading: float = Field(0.5, ge=0.0, le=1.0, description="how much of the target's low-frequency shading the result takes")
    multi_source: Literal["pose", "first"] = Field("pose", description="with several source photos: closest head pose, or the first")
    selection: SelectionOptions = SelectionOptions()
    masks: MaskOptions = MaskOptions()
    analysis: AnalysisOptions = AnalysisOptions()
    max_pixels: int = Field(40_000_000, ge=1, description="refuse images with more pixels than this")
