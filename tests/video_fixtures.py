"""Helpers for the video tests: small generated clips."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def black_video(
    path: Path, width: int, height: int, frames: int, *, fmt: str | None = None, options: dict | None = None
) -> Path:
    """An H.264 clip of ``frames`` black frames at 25 fps; ``fmt``/``options``
    pick the muxer (``"matroska"`` with ``{"live": "1"}`` states no length)."""
    import av

    with av.open(str(path), "w", format=fmt, options=options or {}) as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        black = av.VideoFrame.from_ndarray(np.zeros((height, width, 3), np.uint8), format="rgb24")
        for _ in range(frames):
            for packet in stream.encode(black):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
