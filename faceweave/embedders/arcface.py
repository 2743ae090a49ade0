"""ArcFace identity embedders (ONNX), as FaceFusion's ``face_recognizer``.

A face is aligned by its five points onto the model's template (ArcFace
w600k_r50: ``arcface_112_v2`` at 112 px), scaled to ``[-1, 1]`` by
``(x - 127.5) / 127.5`` in RGB order (FaceFusion flips its BGR frames to
RGB; insightface's ``blobFromImage(..., swapRB=True)`` does the same), run
NCHW, and the 512-D output is L2-normalised.  One class per model kind;
the model object is owned by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from faceweave.errors import ModelSignatureError
from faceweave.geometry.templates import points5, warp_to_template


def _dynamic(dim: Any) -> bool:
    return not isinstance(dim, (int, np.integer)) or int(dim) < 0


def arcface_input(crops: np.ndarray) -> np.ndarray:
    """``(N, S, S, 3)`` uint8 RGB -> ``(N, 3, S, S)`` float32 ``(x - 127.5) / 127.5``."""
    x = (crops.astype(np.float32) - 127.5) / 127.5
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows of ``(N, D)`` scaled to unit length (zero rows stay zero)."""
    v = np.asarray(vectors, np.float32)
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    return (v / np.maximum(norm, 1e-12)).astype(np.float32)


class ArcFaceEmbedder:
    """ArcFace ResNet-50 trained on WebFace600K (insightface ``w600k_r50``).

    ``model``: an object with ``inputs``/``outputs`` (name, shape) and
    ``run(feeds) -> dict`` (see :class:`faceweave.swappers.neural.base.InferenceModel`).
    """

    name: ClassVar[str] = "arcface_w600k_r50"
    template: ClassVar[str] = "arcface_112_v2"
    size: ClassVar[int] = 112
    dim: ClassVar[int] = 512

    def __init__(self, model: Any, *, max_batch: int = 32) -> None:
        self.model = model
        self.max_batch = max(1, int(max_batch))
        if not model.inputs or not model.outputs:
            raise ModelSignatureError(f"{self.name}: the model declares no inputs or outputs")
        info = model.inputs[0]
        shape = list(info.shape)
        fixed = [None if _dynamic(d) else int(d) for d in shape]
        if len(shape) != 4 or fixed[1:] not in ([3, self.size, self.size], [3, None, None]):
            raise ModelSignatureError(
                f"{self.name}: input {info.name!r} should have shape [N, 3, {self.size}, {self.size}]; the "
                f"model has {shape}"
            )
        self._input = info.name
        self._output = model.outputs[0].name
        self._dynamic = _dynamic(shape[0])

    def align(self, pixels: np.ndarray, points: np.ndarray) -> np.ndarray:
        """``(112, 112, 3)`` uint8 RGB crop of the face with five ``points`` ``(5, 2)``."""
        return warp_to_template(pixels, points5(points), self.template, self.size)[0]

    def embed_raw(self, items: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """``(N, 512)`` float32 raw embeddings of ``(pixels (H, W, 3) uint8 RGB,
        points (5, 2))`` pairs: one inference per ``max_batch`` when the model's
        batch dimension is dynamic, else one per face."""
        if not items:
            return np.zeros((0, self.dim), np.float32)
        batch = arcface_input(np.stack([self.align(px, pts) for px, pts in items]))
        step = self.max_batch if self._dynamic else 1
        parts = [
            np.asarray(self.model.run({self._input: batch[i : i + step]})[self._output], np.float32).reshape(
                -1, self.dim
            )
            for i in range(0, len(batch), step)
        ]
        return np.concatenate(parts)

    def embed(self, pixels: np.ndarray, points: np.ndarray) -> np.ndarray:
        """``(512,)`` float32 L2-normalised embedding of one face."""
        return l2_normalize(self.embed_raw([(pixels, points)]))[0]

    def close(self) -> None:
        """Nothing to release: the caller owns the model."""


class EmbeddingConverter:
    """FaceFusion's ``crossface_*`` models: map an ArcFace w600k embedding
    into the identity space of a swapper trained on another ArcFace
    (``crossface_simswap``, ``crossface_ghost``, ``crossface_hififace``).
    Input ``input`` ``(N, 512)``, first output ``(N, 512)``."""

    def __init__(self, model: Any, *, name: str = "crossface") -> None:
        self.name = name
        self.model = model
        names = [i.name for i in model.inputs]
        if "input" not in names:
            raise ModelSignatureError(f"{name}: expected an input named 'input'; the model has {names}")
        self._output = model.outputs[0].name
        self._dynamic = _dynamic(next(i for i in model.inputs if i.name == "input").shape[0])

    def convert(self, embeddings: np.ndarray) -> np.ndarray:
        """``(N, 512)`` raw embeddings -> ``(N, 512)`` converted (not normalised)."""
        x = np.asarray(embeddings, np.float32).reshape(-1, 512)
        step = len(x) if self._dynamic else 1
        parts = [
            np.asarray(self.model.run({"input": x[i : i + step]})[self._output], np.float32)
            for i in range(0, len(x), step)
        ]
        return np.concatenate(parts).reshape(len(x), -1)

    def close(self) -> None:
        """Nothing to release: the caller owns the model."""


#: embedder classes by model name
EMBEDDERS: Mapping[str, type[ArcFaceEmbedder]] = MappingProxyType({ArcFaceEmbedder.name: ArcFaceEmbedder})
