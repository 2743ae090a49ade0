"""The :class:`SessionPool`: loaded models, once per (model, provider, device).

The caller owns the pool and closes it (``with SessionPool(...) as pool``).
Every model is warmed up with one inference on a dummy input when it is
loaded, and the load and warm-up times are kept in :attr:`SessionPool.records`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from faceweave.errors import ModelError, ProviderError
from faceweave.models.spec import ModelSpec, TensorSpec, is_dynamic
from faceweave.runtime.backend import Backend, InferenceModel, TensorInfo, create_backend, unavailable_message
from faceweave.runtime.batching import BatchingModel, batchable
from faceweave.runtime.providers import ProviderConfig

LOGGER_NAME = "faceweave"


@dataclass(frozen=True)
class LoadRecord:
    """How one model was loaded: ``requested`` and actual ``provider``
    labels (``cuda:0``), whether it ``fell_back`` to CPU, and the times."""

    model: str
    requested: str
    provider: str
    fell_back: bool
    load_ms: float
    warmup_ms: float


class SessionPool:
    """Loaded models keyed by (model, provider config), for one owner.

    ``store``: where named models are found (default: the XDG cache folder).
    ``backend``: a :class:`Backend` or a registered name.  ``fallback``: when
    the chosen provider is not available (or does not start), use the CPU
    and log a warning on the ``"faceweave"`` logger instead of raising
    :class:`ProviderError`.  ``warmup``: run one dummy inference at load.
    ``batch_window_ms`` above 0: the pool is shared by several threads (the
    live sessions of a node) and each model that takes any batch size is
    handed out as a :class:`~faceweave.runtime.batching.BatchingModel`, so
    their calls that come together run as one inference (a call waits for
    the others at most that long; ``batch_rows``: the most rows in one).
    """

    def __init__(
        self,
        *,
        store: Any = None,
        backend: str | Backend = "onnxruntime",
        fallback: bool = False,
        warmup: bool = True,
        logger: logging.Logger | None = None,
        batch_window_ms: float = 0.0,
        batch_rows: int = 16,
    ) -> None:
        if batch_window_ms < 0 or batch_rows < 1:
            raise ValueError("batch_window_ms must be 0 or more and batch_rows at least 1")
        self._store = store
        self.backend: Backend = create_backend(backend) if isinstance(backend, str) else backend
        self.fallback = fallback
        self.warmup = warmup
        self.log = logger or logging.getLogger(LOGGER_NAME)
        self.batch_window_ms = batch_window_ms
        self.batch_rows = batch_rows
        self._models: dict[Hashable, InferenceModel] = {}
        #: model argument -> (spec, path, key): found once, so a hot ``get`` reads no files
        self._found: dict[Hashable, tuple[ModelSpec | None, Path, Hashable]] = {}
        self._records: dict[Hashable, LoadRecord] = {}
        self._lock = threading.Lock()
        self._closed = False

    # -- life ---------------------------------------------------------------

    def __enter__(self) -> SessionPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len({id(m) for m in self._models.values()})

    def close(self) -> None:
        """Close every loaded model; the pool cannot be used afterwards."""
        with self._lock:
            seen: set[int] = set()
            for model in self._models.values():
                if id(model) not in seen:
                    seen.add(id(model))
                    model.close()
            self._models.clear()
            self._found.clear()
            self._closed = True

    @property
    def store(self):
        if self._store is None:
            from faceweave.models.cache import ModelStore

            self._store = ModelStore()
        return self._store

    # -- use ----------------------------------------------------------------

    def get(self, model: ModelSpec | str | Path, provider: ProviderConfig | None = None) -> InferenceModel:
        """The loaded model for ``model`` on ``provider`` (default CPU), loading
        and warming it up on first use.

        ``model``: a spec or a catalog name (found through the store, checked
        against the spec), or a path to an ONNX file (no spec check).

        Raises:
            ProviderError: the provider is not available and not ``fallback``.
            ModelNotFoundError, ModelFormatError, ModelSignatureError,
            ChecksumError: from finding, loading or checking the model.
        """
        config = provider or ProviderConfig()
        spec, path, model_key = self._identify(model)
        key = (model_key, config)
        with self._lock:
            if self._closed:
                raise ModelError("the session pool is closed")
            cached = self._models.get(key)
            if cached is not None:
                return cached
            loaded, record = self._load(path, spec, config)
            if self.batch_window_ms > 0 and batchable(loaded):
                loaded = BatchingModel(loaded, window_ms=self.batch_window_ms, max_rows=self.batch_rows)
            self._models[key] = loaded
            self._records[key] = record
            return loaded

    @property
    def records(self) -> tuple[LoadRecord, ...]:
        """One :class:`LoadRecord` per model loaded, in load order."""
        return tuple(self._records.values())

    def warmup_ms(self, model: ModelSpec | str | Path, provider: ProviderConfig | None = None) -> float:
        """The warm-up time of a model already loaded by :meth:`get`.

        Raises:
            ModelError: it was not loaded by this pool.
        """
        _, _, model_key = self._identify(model)
        record = self._records.get((model_key, provider or ProviderConfig()))
        if record is None:
            raise ModelError(f"{model} was not loaded by this pool on {(provider or ProviderConfig()).label()}")
        return record.warmup_ms

    # -- inside -------------------------------------------------------------

    def _identify(self, model: ModelSpec | str | Path) -> tuple[ModelSpec | None, Path, Hashable]:
        found = self._found.get(model)
        if found is None:
            found = self._find(model)
            self._found[model] = found
        return found

    def _find(self, model: ModelSpec | str | Path) -> tuple[ModelSpec | None, Path, Hashable]:
        if isinstance(model, Path):
            resolved = model.expanduser().resolve()
            return None, resolved, ("path", str(resolved))
        spec = self.store.spec(model) if isinstance(model, str) else model
        path = self.store.resolve(spec.name) if spec.name in self.store.catalog else self._spec_path(spec)
        sha = self.store.expected_sha256(spec)
        return spec, path, ("sha256", sha) if sha else ("path", str(path.resolve()))

    def _spec_path(self, spec: ModelSpec) -> Path:
        from faceweave.errors import ChosenModelMissingError

        path = self.store.locate(spec)
        if path is None:
            raise ChosenModelMissingError(f"model {spec.name} is not present in {self.store.folder}")
        return path

    def _load(self, path: Path, spec: ModelSpec | None, requested: ProviderConfig) -> tuple[InferenceModel, LoadRecord]:
        config = requested
        available = self.backend.available_providers()
        if requested.ort_name not in available:
            if not self.fallback:
                raise ProviderError(unavailable_message(requested, available))
            config = self._fall_back(requested, f"not available (available: {', '.join(available)})")
        start = time.perf_counter()
        try:
            loaded = self.backend.load(path, config, spec=spec)
        except ProviderError as exc:
            if not self.fallback or config.name == "cpu":
                raise
            config = self._fall_back(requested, str(exc))
            start = time.perf_counter()
            loaded = self.backend.load(path, config, spec=spec)
        load_ms = (time.perf_counter() - start) * 1000.0
        warm_ms = 0.0
        if self.warmup:
            try:
                warm_ms = warm_up(loaded, spec)
            except Exception:  # whatever the warm-up raised: the session is closed, then it goes on
                loaded.close()
                raise
        record = LoadRecord(
            model=spec.name if spec else str(path),
            requested=requested.label(),
            provider=config.label(),
            fell_back=config != requested,
            load_ms=load_ms,
            warmup_ms=warm_ms,
        )
        self.log.info("loaded %s on %s in %.0f ms, warm-up %.1f ms", record.model, record.provider, load_ms, warm_ms)
        return loaded, record

    def _fall_back(self, requested: ProviderConfig, why: str) -> ProviderConfig:
        self.log.warning(
            "execution provider %s is %s; falling back to the CPU (--provider-fallback)", requested.label(), why
        )
        return ProviderConfig("cpu")


def dummy_feeds(inputs: tuple[TensorInfo, ...], spec: ModelSpec | None = None) -> dict[str, np.ndarray]:
    """Zero arrays for every input; a dynamic dimension takes the spec's
    fixed size on that axis, else its ``warmup_dims`` entry by name, else 1."""
    by_name = {t.name: t for t in spec.inputs} if spec else {}
    feeds = {}
    for position, info in enumerate(inputs):
        declared: TensorSpec | None = by_name.get(info.name)
        if declared is None and spec is not None and position < len(spec.inputs) and spec.inputs[position].name is None:
            declared = spec.inputs[position]
        shape = []
        for axis, dim in enumerate(info.shape):
            if isinstance(dim, int) and not is_dynamic(dim):
                shape.append(dim)
                continue
            hint = declared.shape[axis] if declared and declared.shape and axis < len(declared.shape) else None
            if isinstance(hint, int) and hint > 0:
                shape.append(hint)
            elif spec is not None:
                name = hint if isinstance(hint, str) else (dim if isinstance(dim, str) else None)
                shape.append(spec.warmup_dim(name))
            else:
                shape.append(1)
        feeds[info.name] = np.zeros(shape, dtype=np.dtype(info.dtype))
    return feeds


def warm_up(model: InferenceModel, spec: ModelSpec | None = None) -> float:
    """Run ``model`` once on :func:`dummy_feeds`; return the time in ms."""
    feeds = dummy_feeds(model.inputs, spec)
    start = time.perf_counter()
    model.run(feeds)
    return (time.perf_counter() - start) * 1000.0
