"""The :class:`Backend` protocol and its ONNX Runtime implementation.

A backend turns a model file (or its bytes) and a :class:`ProviderConfig`
into an :class:`InferenceModel`: declared inputs/outputs and a ``run`` that
maps input names to arrays.  ``onnxruntime`` is imported only when
:class:`OnnxBackend` is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from faceweave.errors import (
    ModelError,
    ModelFormatError,
    ModelNotFoundError,
    ModelSignatureError,
    ProviderError,
)
from faceweave.models.spec import Dim, ModelSpec, TensorSpec, is_dynamic
from faceweave.runtime.providers import PROVIDERS, ProviderConfig, ort_providers, provider_name_for

#: ORT's tensor type strings -> numpy dtype names
_ORT_DTYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int16)": "int16",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(uint16)": "uint16",
    "tensor(bool)": "bool",
}


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output as the runtime sees it: ``shape`` has ints for
    fixed sizes and ``str``/``None`` for dynamic ones; ``dtype`` a numpy name."""

    name: str
    shape: tuple[Dim, ...]
    dtype: str

    def as_spec(self) -> TensorSpec:
        return TensorSpec(self.name, self.shape, self.dtype)


@runtime_checkable
class InferenceModel(Protocol):
    """A loaded model, ready to run; closed by whoever owns it (a pool)."""

    label: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    #: the runtime's providers actually in use, best first
    providers: tuple[str, ...]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs by name for ``feeds`` (every input by name)."""

    def close(self) -> None:
        """Release the session."""


@runtime_checkable
class Backend(Protocol):
    name: str

    def available_providers(self) -> list[str]:
        """The runtime's own provider names that are installed here."""

    def load(
        self, model: Path | bytes, provider: ProviderConfig, *, spec: ModelSpec | None = None, label: str | None = None
    ) -> InferenceModel:
        """Load ``model`` on ``provider``; check it against ``spec`` when given."""


class OnnxBackend:
    """ONNX Runtime.  ``threads``: intra-op threads (``None``: ORT's default)."""

    name = "onnxruntime"

    def __init__(self, *, threads: int | None = None) -> None:
        self.threads = threads

    def available_providers(self) -> list[str]:
        import onnxruntime

        return list(onnxruntime.get_available_providers())

    def load(
        self, model: Path | bytes, provider: ProviderConfig, *, spec: ModelSpec | None = None, label: str | None = None
    ) -> OnnxModel:
        """Create the session with :func:`ort_providers`.

        Raises:
            ProviderError: the provider is not installed, or ORT did not start
                it (it would otherwise have run on CPU without saying so).
            ModelNotFoundError: the file does not exist.
            ModelFormatError: not an ONNX model.
            ModelSignatureError: inputs/outputs do not match ``spec``.
        """
        import onnxruntime

        name = label or (spec.name if spec else (str(model) if isinstance(model, (str, Path)) else "model bytes"))
        available = self.available_providers()
        if provider.ort_name not in available:
            raise ProviderError(unavailable_message(provider, available))
        if isinstance(model, (str, Path)) and not Path(model).is_file():
            raise ModelNotFoundError(f"model file {model} does not exist")
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        if self.threads is not None:
            options.intra_op_num_threads = self.threads
        source = str(model) if isinstance(model, (str, Path)) else bytes(model)
        try:
            session = onnxruntime.InferenceSession(
                source, sess_options=options, providers=ort_providers(provider, available)
            )
        except Exception as exc:  # noqa: BLE001 - ORT raises its own pybind classes
            raise _load_error(exc, name, provider) from exc
        used = tuple(session.get_providers())
        if not used or used[0] != provider.ort_name:
            raise ProviderError(
                f"{name}: ONNX Runtime did not start {provider.ort_name} (it would run on "
                f"{', '.join(used) or 'nothing'}); "
                f"check the {provider.name} libraries and drivers"
            )
        loaded = OnnxModel(session, label=name, providers=used)
        if spec is not None:
            from faceweave.models.signature import Signature, check_signature

            actual = Signature(tuple(t.as_spec() for t in loaded.inputs), tuple(t.as_spec() for t in loaded.outputs))
            try:
                check_signature(spec.inputs, spec.outputs, actual, model=name)
            except ModelSignatureError:
                loaded.close()
                raise
        return loaded


def unavailable_message(provider: ProviderConfig, available: list[str]) -> str:
    ours = [n for n in (provider_name_for(a) for a in available) if n]
    return (
        f"execution provider {provider.name!r} ({provider.ort_name}) is not available in this onnxruntime; "
        f"available: {', '.join(available) or 'none'} (faceweave names: {', '.join(ours) or 'none'}); "
        f"choose one of those, install the onnxruntime build for {provider.name}, or pass --provider-fallback "
        "to use the CPU"
    )


def _load_error(exc: Exception, name: str, provider: ProviderConfig) -> Exception:
    kind = type(exc).__name__
    text = " ".join(str(exc).split())
    if kind in ("InvalidProtobuf", "InvalidGraph") or "protobuf parsing failed" in text.lower():
        return ModelFormatError(f"{name} is not a valid ONNX model ({kind})")
    if kind == "NoSuchFile":
        return ModelNotFoundError(f"model file {name} does not exist")
    if provider.name != "cpu":
        return ProviderError(f"{name}: {provider.label()} failed to start: {text[:300]}")
    return ModelError(f"{name}: onnxruntime could not load it: {text[:300]}")


class OnnxModel:
    """An ORT session behind :class:`InferenceModel`; feeds are checked
    against the declared inputs before running (names, rank, fixed sizes, dtype)."""

    def __init__(self, session: Any, *, label: str, providers: tuple[str, ...]) -> None:
        self._session = session
        self.label = label
        self.providers = providers
        self.inputs = tuple(_info(v) for v in session.get_inputs())
        self.outputs = tuple(_info(v) for v in session.get_outputs())

    def __repr__(self) -> str:
        return f"OnnxModel({self.label!r}, providers={self.providers})"

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Raises :class:`ModelSignatureError` for feeds that do not fit the
        inputs (showing expected and actual), :class:`ModelError` when closed
        or when the runtime fails."""
        if self._session is None:
            raise ModelError(f"{self.label}: the model was closed")
        check_feeds(self.inputs, feeds, model=self.label)
        try:
            values = self._session.run(None, {k: np.asarray(v) for k, v in feeds.items()})
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{self.label}: inference failed: {' '.join(str(exc).split())[:300]}") from exc
        return {info.name: value for info, value in zip(self.outputs, values, strict=True)}

    def close(self) -> None:
        self._session = None


def check_feeds(inputs: tuple[TensorInfo, ...], feeds: Mapping[str, np.ndarray], *, model: str) -> None:
    """Raise :class:`ModelSignatureError` unless ``feeds`` gives every input
    with a fitting rank, fixed sizes and dtype."""
    expected = {i.name for i in inputs}
    if set(feeds) != expected:
        raise ModelSignatureError(f"{model}: feeds {sorted(feeds)} do not match the inputs {sorted(expected)}")
    for info in inputs:
        value = np.asarray(feeds[info.name])
        shown = "[" + ", ".join("?" if is_dynamic(d) else str(d) for d in info.shape) + "]"
        fits = value.ndim == len(info.shape) and all(
            is_dynamic(want) or want == got for want, got in zip(info.shape, value.shape, strict=True)
        )
        if not fits:
            raise ModelSignatureError(f"{model}: input {info.name} has shape {tuple(value.shape)}, expected {shown}")
        if value.dtype.name != info.dtype:
            raise ModelSignatureError(f"{model}: input {info.name} is {value.dtype.name}, expected {info.dtype}")


def _info(value: Any) -> TensorInfo:
    shape = tuple(d if (isinstance(d, str) or d is None or d > 0) else None for d in (value.shape or ()))
    return TensorInfo(name=value.name, shape=shape, dtype=_ORT_DTYPES.get(value.type, value.type))


def _backends() -> dict[str, type]:
    return {"onnxruntime": OnnxBackend}


def available_backends() -> list[str]:
    return sorted(_backends())


def create_backend(name: str = "onnxruntime", **kwargs: Any) -> Backend:
    """Build a registered backend by name.

    Raises:
        ProviderError: unknown backend name.
    """
    factories = _backends()
    if name not in factories:
        raise ProviderError(f"unknown inference backend {name!r}; available: {', '.join(sorted(factories))}")
    return factories[name](**kwargs)


__all__ = [
    "PROVIDERS",
    "Backend",
    "InferenceModel",
    "OnnxBackend",
    "OnnxModel",
    "TensorInfo",
    "available_backends",
    "check_feeds",
    "create_backend",
    "unavailable_message",
]
