"""faceweave as an HTTP service: REST API, persistent jobs, embedded workers.

``create_app(settings)`` builds the FastAPI app; ``load_settings`` reads the
settings from a file, ``FACEWEAVE_*`` variables and flags.  Heavy modules
(FastAPI, SQLAlchemy, the models) load only when these are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from faceweave.service.app import create_app
    from faceweave.service.settings import ServiceSettings, load_settings

__all__ = ["ServiceSettings", "create_app", "load_settings"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from faceweave.service.app import create_app

        return create_app
    if name in ("ServiceSettings", "load_settings"):
        from faceweave.service import settings

        return getattr(settings, name)
    raise AttributeError(name)
