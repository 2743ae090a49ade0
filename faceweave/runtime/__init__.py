"""Inference runtime: providers, the :class:`Backend` protocol (ONNX Runtime) and the :class:`SessionPool`.

``onnxruntime`` is imported only when a backend is used.
"""

from faceweave.runtime.backend import (
    Backend,
    InferenceModel,
    OnnxBackend,
    TensorInfo,
    available_backends,
    create_backend,
)
from faceweave.runtime.batching import BatchingModel, batchable
from faceweave.runtime.pool import LoadRecord, SessionPool, dummy_feeds, warm_up
from faceweave.runtime.providers import PROVIDERS, ProviderConfig, ort_providers

__all__ = [
    "PROVIDERS",
    "Backend",
    "BatchingModel",
    "InferenceModel",
    "LoadRecord",
    "OnnxBackend",
    "ProviderConfig",
    "SessionPool",
    "TensorInfo",
    "available_backends",
    "batchable",
    "create_backend",
    "dummy_feeds",
    "ort_providers",
    "warm_up",
]
