"""Build the enhancers an :class:`~faceweave.options.EnhancerOptions` asks
for, with their models loaded through a caller-owned session pool."""

from __future__ import annotations

from typing import Any

from faceweave.enhancers.base import (
    FaceEnhancer,
    FrameEnhancer,
    create_face_enhancer,
    create_frame_enhancer,
    face_enhancer_spec,
)
from faceweave.options import EnhancerOptions


def load_enhancers(
    options: EnhancerOptions, *, pool: Any, provider: Any = None, facefusion: bool = False
) -> tuple[FaceEnhancer | None, FrameEnhancer | None]:
    """``(face_enhancer, frame_enhancer)``; ``None`` for each one not asked
    for (``facefusion``: the face enhancer cuts, pastes and blends as
    FaceFusion does, for ``compositing="facefusion"``)."""
    face = frame = None
    if options.face is not None:
        extra: dict[str, Any] = {"weight": options.face_weight} if face_enhancer_spec(options.face).weight_input else {}
        if facefusion:
            extra["facefusion"] = True
        face = create_face_enhancer(options.face, pool.get(options.face, provider), **extra)
    if options.frame is not None:
        frame = create_frame_enhancer(
            options.frame, pool.get(options.frame, provider), restore_size=options.frame_restore_size
        )
    return face, frame
