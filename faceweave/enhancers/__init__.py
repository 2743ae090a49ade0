"""Enhancers: face restoration (GFPGAN, CodeFormer, GPEN, RestoreFormer++),
background removers, frame colorizers (DDColor, DeOldify) and tiled frame
super-resolution (Real-ESRGAN), built by name around a model object the
caller owns."""

from faceweave.enhancers.background import BackgroundRemover
from faceweave.enhancers.base import (
    FACE_ENHANCERS,
    FRAME_ENHANCERS,
    FaceEnhancer,
    FaceEnhancerSpec,
    FrameEnhancer,
    FrameEnhancerSpec,
    InferenceModel,
    available_face_enhancers,
    available_frame_enhancers,
    create_face_enhancer,
    create_frame_enhancer,
    face_enhancer_spec,
    frame_enhancer_spec,
)
from faceweave.enhancers.colorizer import FrameColorizer
from faceweave.enhancers.face import CodeFormerEnhancer, RestorationEnhancer
from faceweave.enhancers.frame import TiledFrameEnhancer

__all__ = [
    "FACE_ENHANCERS",
    "BackgroundRemover",
    "FRAME_ENHANCERS",
    "CodeFormerEnhancer",
    "FaceEnhancer",
    "FaceEnhancerSpec",
    "FrameColorizer",
    "FrameEnhancer",
    "FrameEnhancerSpec",
    "InferenceModel",
    "RestorationEnhancer",
    "TiledFrameEnhancer",
    "available_face_enhancers",
    "available_frame_enhancers",
    "create_face_enhancer",
    "create_frame_enhancer",
    "face_enhancer_spec",
    "frame_enhancer_spec",
]
