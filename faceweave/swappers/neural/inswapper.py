"""insightface's ``inswapper_128``: the target crop (``arcface_128``, 128 px,
RGB in ``[0, 1]``) and a 512-D latent made from the source's ArcFace
w600k_r50 embedding through the model's own ``emap`` matrix (its last
initializer): ``latent = embedding @ emap / |embedding|`` as FaceFusion
computes it.  (insightface itself also L2-normalises the latent afterwards:
``renormalize_latent=True``.)"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from faceweave.errors import ModelFormatError, ModelSignatureError
from faceweave.swappers.neural.base import NeuralSpec, NeuralSwapper, catalog_spec

INSWAPPER_128 = catalog_spec("inswapper_128", family="inswapper", denormalize=False)
INSWAPPER_128_FP16 = catalog_spec("inswapper_128_fp16", family="inswapper", denormalize=False)


def read_emap(model: str | os.PathLike | Any) -> np.ndarray:
    """The ``(512, 512)`` float32 ``emap`` of an inswapper ONNX file (a path)
    or an already loaded ``onnx.ModelProto``: its initializer named
    ``emap``, else its last initializer (as insightface and FaceFusion)."""
    import onnx
    from onnx import numpy_helper

    if isinstance(model, (str, os.PathLike)):
        try:
            model = onnx.load(os.fspath(model))
        except Exception as exc:  # onnx.load raises what protobuf meets: one ModelFormatError
            raise ModelFormatError(f"{os.fspath(model)}: not a readable ONNX model ({exc})") from exc
    inits = list(model.graph.initializer)
    if not inits:
        raise ModelSignatureError("inswapper: the model has no initializers, so no emap")
    chosen = next((i for i in inits if i.name == "emap"), inits[-1])
    emap = numpy_helper.to_array(chosen).astype(np.float32)
    if emap.shape != (512, 512):
        raise ModelSignatureError(f"inswapper: the emap should have shape (512, 512); {chosen.name!r} has {emap.shape}")
    return emap


def inswapper_latent(embedding: np.ndarray, emap: np.ndarray, *, renormalize: bool = False) -> np.ndarray:
    """``(1, 512)`` float32 latent of a raw ``(512,)`` embedding."""
    e = np.asarray(embedding, np.float32).reshape(1, -1)
    latent = e @ np.asarray(emap, np.float32) / max(float(np.linalg.norm(e)), 1e-12)
    if renormalize:
        latent = latent / max(float(np.linalg.norm(latent)), 1e-12)
    return latent.astype(np.float32)


class InSwapper(NeuralSwapper):
    """``inswapper_128`` (and its fp16 twin); ``emap`` from :func:`read_emap`."""

    def __init__(
        self,
        model: Any,
        *,
        emap: np.ndarray,
        spec: NeuralSpec = INSWAPPER_128,
        renormalize_latent: bool = False,
        **kwargs: Any,
    ) -> None:
        emap = np.asarray(emap, np.float32)
        if emap.shape != (512, 512):
            raise ModelSignatureError(f"{spec.name}: emap should have shape (512, 512); got {emap.shape}")
        super().__init__(model, spec=spec, **kwargs)
        self.emap = emap
        self.renormalize_latent = renormalize_latent

    def embedding_tensor(self, embedding: np.ndarray, embedding_norm: np.ndarray) -> np.ndarray:
        return inswapper_latent(embedding, self.emap, renormalize=self.renormalize_latent)
