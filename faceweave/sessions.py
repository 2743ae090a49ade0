"""The neural models' sessions of one owner (a :class:`~faceweave.pipeline.FaceSwapper`).

:class:`ModelSessions` opens a :class:`~faceweave.runtime.SessionPool` on
first use only, so the classical swapper never imports a runtime; the
swapper and enhancer factories take their models from it, and its owner
closes it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from faceweave.options import RuntimeOptions

if TYPE_CHECKING:
    from faceweave.runtime import ProviderConfig, SessionPool


class ModelSessions:
    """Loaded models for one owner, on the provider of ``runtime``;
    ``batch_window_ms`` above 0 for an owner that shares them among
    threads (a node's live sessions): their calls to a model that takes any
    batch size run together (:class:`~faceweave.runtime.SessionPool`).

    ``pool`` is ``None`` until :meth:`open` is first called."""

    def __init__(self, runtime: RuntimeOptions, *, batch_window_ms: float = 0.0) -> None:
        self.runtime = runtime
        self.batch_window_ms = batch_window_ms
        self.pool: SessionPool | None = None
        self._lock = threading.Lock()

    @property
    def provider(self) -> ProviderConfig:
        """The :class:`~faceweave.runtime.ProviderConfig` of the runtime options."""
        from faceweave.runtime import ProviderConfig

        rt = self.runtime
        return ProviderConfig(
            name=rt.execution_provider.strip().lower(),
            device_id=rt.device_id,
            trt_engine_cache=rt.tensorrt_cache,
            trt_fp16=rt.tensorrt_fp16,
        )

    def open(self) -> SessionPool:
        """The session pool, made on the first call (models from
        ``runtime.models_dir`` or the default folder)."""
        with self._lock:
            if self.pool is None:
                from faceweave.models import ModelStore
                from faceweave.runtime import SessionPool

                models_dir = Path(self.runtime.models_dir) if self.runtime.models_dir else None
                self.pool = SessionPool(
                    store=ModelStore(models_dir),
                    fallback=self.runtime.provider_fallback,
                    batch_window_ms=self.batch_window_ms,
                )
            return self.pool

    def loads(self) -> list[dict]:
        """Per model loaded: provider, whether it fell back, load and warm-up
        milliseconds (empty while no model is loaded)."""
        if self.pool is None:
            return []
        return [
            {
                "model": r.model,
                "provider": r.provider,
                "requested": r.requested,
                "fell_back": r.fell_back,
                "load_ms": round(r.load_ms, 1),
                "warmup_ms": round(r.warmup_ms, 1),
            }
            for r in self.pool.records
        ]

    def close(self) -> None:
        """Close every loaded model; a later :meth:`open` starts a new pool."""
        with self._lock:
            if self.pool is not None:
                self.pool.close()
                self.pool = None
