"""Frame enhancers: a super-resolution model (Real-ESRGAN) run over
overlapping tiles of the whole frame and reassembled without seams.

The model takes ``input`` ``[N, 3, h, w]`` float RGB in ``[0, 1]`` and returns
``[N, 3, h * scale, w * scale]`` in ``[0, 1]`` (clipped).
"""

from __future__ import annotations

from collections.abc import Iterator

import cv2
import numpy as np

from faceweave.enhancers.base import (
    FrameEnhancerSpec,
    InferenceModel,
    check_image_input,
    find_input,
    first_output,
    is_dynamic,
    tensor_dtype,
)
from faceweave.enhancers.face import check_blend, check_frame
from faceweave.enhancers.tiles import TileGrid, make_grid, merge_tiles, split_tiles
from faceweave.errors import InvalidOptionError, ModelSignatureError


class TiledFrameEnhancer:
    """Upscale whole frames tile by tile.

    ``tile_size`` (input pixels; a model with fixed spatial dimensions
    imposes its own), ``tile_overlap`` between neighbouring tiles (at most
    half a tile), ``tile_pad``: mirrored border added around the frame so
    that its edges get context too; ``restore_size``: resize the result back
    to the input size (sharper than the input, same shape); ``max_batch``:
    tiles per model run when the batch dimension is dynamic.
    The caller owns ``model``.
    """

    def __init__(
        self,
        model: InferenceModel,
        *,
        spec: FrameEnhancerSpec,
        tile_size: int | None = None,
        tile_overlap: int | None = None,
        tile_pad: int | None = None,
        restore_size: bool = False,
        max_batch: int = 1,
    ) -> None:
        self.name = spec.name
        self.spec = spec
        self.model = model
        self.scale = spec.scale
        self.restore_size = restore_size
        info = find_input(model, "input", model_name=spec.name)
        check_image_input(info, model_name=spec.name, size=None)
        self._dtype = tensor_dtype(info)
        h, w = info.shape[2], info.shape[3]
        self.fixed: tuple[int, int] | None = None
        if not is_dynamic(h) and not is_dynamic(w):
            self.fixed = (int(h), int(w))
            if int(h) != int(w):
                raise ModelSignatureError(
                    f"{spec.name}: input {info.name!r} expected square tiles, got {list(info.shape)}"
                )
            if tile_size is not None and tile_size != int(h):
                raise InvalidOptionError(
                    f"{spec.name}: the model takes {h}x{w} tiles; tile_size {tile_size} cannot be used"
                )
        elif is_dynamic(h) != is_dynamic(w):
            raise ModelSignatureError(
                f"{spec.name}: input {info.name!r} has one fixed spatial side: {list(info.shape)}"
            )
        self.tile_size = int(self.fixed[0]) if self.fixed else int(tile_size or spec.tile_size)
        self.tile_overlap = int(spec.tile_overlap if tile_overlap is None else tile_overlap)
        self.tile_pad = int(spec.tile_pad if tile_pad is None else tile_pad)
        if self.tile_size < 8:
            raise InvalidOptionError(f"tile_size must be at least 8, got {self.tile_size}")
        if not 0 <= 2 * self.tile_overlap <= self.tile_size:
            raise InvalidOptionError(f"tile_overlap must be in [0, tile_size / 2], got {self.tile_overlap}")
        if self.tile_pad < 0:
            raise InvalidOptionError(f"tile_pad must be >= 0, got {self.tile_pad}")
        if max_batch < 1:
            raise InvalidOptionError(f"max_batch must be at least 1, got {max_batch}")
        self.batch = max_batch if is_dynamic(info.shape[0]) else 1

    # -- steps ---------------------------------------------------------------
    def _padded(self, frame: np.ndarray) -> np.ndarray:
        """The frame with ``tile_pad`` mirrored pixels around it, grown at the
        bottom/right to a whole tile when the model's tile size is fixed."""
        p = self.tile_pad
        h, w = frame.shape[:2]
        extra_y = max(0, self.tile_size - (h + 2 * p)) if self.fixed else 0
        extra_x = max(0, self.tile_size - (w + 2 * p)) if self.fixed else 0
        if p == 0 and extra_y == 0 and extra_x == 0:
            return frame
        return cv2.copyMakeBorder(frame, p, p + extra_y, p, p + extra_x, cv2.BORDER_REFLECT_101)

    def _run_tiles(self, image: np.ndarray, grid: TileGrid) -> Iterator[np.ndarray]:
        """Model outputs ``(th * s, tw * s, 3)`` float32 in ``[0, 1]`` per tile."""
        s = self.scale
        pending: list[np.ndarray] = []

        def flush() -> list[np.ndarray]:
            x = np.stack(pending).astype(np.float32).transpose(0, 3, 1, 2) / np.float32(255.0)
            y = first_output(self.model, self.model.run({"input": np.ascontiguousarray(x, dtype=self._dtype)}))
            want = (len(pending), 3, grid.tile_h * s, grid.tile_w * s)
            if y.shape != want:
                raise ModelSignatureError(f"{self.name}: output expected shape {list(want)}, got {list(y.shape)}")
            pending.clear()
            return list(np.clip(y.astype(np.float32), 0.0, 1.0).transpose(0, 2, 3, 1))

        for tile in split_tiles(image, grid):
            pending.append(tile)
            if len(pending) == self.batch:
                yield from flush()
        if pending:
            yield from flush()

    def upscale(self, frame: np.ndarray) -> np.ndarray:
        """``(H * s, W * s, 3)`` uint8 RGB: the model's output, tiled."""
        check_frame(frame)
        h, w = frame.shape[:2]
        s, p = self.scale, self.tile_pad
        padded = self._padded(frame)
        grid = make_grid(padded.shape[0], padded.shape[1], tile=self.tile_size, overlap=self.tile_overlap)
        merged = merge_tiles(self._run_tiles(padded, grid), grid.scaled(s))
        out = merged[p * s : (p + h) * s, p * s : (p + w) * s]
        return np.round(out * np.float32(255.0)).astype(np.uint8)

    def enhance(self, frame: np.ndarray, *, blend: float = 1.0) -> np.ndarray:
        """The enhanced frame: ``(H * scale, W * scale, 3)`` uint8 RGB, or
        ``(H, W, 3)`` with ``restore_size``.  ``blend`` mixes the model's
        result with the plainly resized frame (0: no enhancement)."""
        check_frame(frame)
        blend = check_blend(blend)
        h, w = frame.shape[:2]
        if blend == 0.0:
            return (
                frame.copy()
                if self.restore_size
                else cv2.resize(frame, (w * self.scale, h * self.scale), interpolation=cv2.INTER_LINEAR)
            )
        up = self.upscale(frame)
        if self.restore_size:
            up, base = cv2.resize(up, (w, h), interpolation=cv2.INTER_AREA), frame
        else:
            base = cv2.resize(frame, (w * self.scale, h * self.scale), interpolation=cv2.INTER_LINEAR)
        if blend == 1.0:
            return up
        return cv2.addWeighted(base, 1.0 - blend, up, blend, 0.0)
