"""mediapipe, imported without matplotlib's pyplot: :func:`load_mediapipe`.

mediapipe 0.10's package imports its drawing helpers
(``mediapipe.python.solutions.drawing_utils``), which import
``matplotlib.pyplot`` when they are imported, for plotting faceweave never
does: about 0.7 of the 0.9-1.1 s that importing mediapipe took, in every
process that finds faces (a photo's whole ``faceweave swap`` took about
3.5 s).  :func:`load_mediapipe` imports mediapipe with ``matplotlib`` and
``matplotlib.pyplot`` held by stand-ins (:class:`DeferredModule`) that
import the real modules the first time anything is read from them, so
mediapipe's own plotting (``drawing_utils.plot_landmarks``) still works.
The stand-ins leave ``sys.modules`` as soon as mediapipe is imported: a
later ``import matplotlib`` anywhere in the process is the real one (a
thread that imports it in the 0.2 s of mediapipe's import gets a
stand-in, whose attributes are the real module's once mediapipe is in).  A process that has
imported matplotlib already imports mediapipe as it is.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType
from typing import Any

#: what mediapipe's drawing helpers import
_DEFERRED = ("matplotlib", "matplotlib.pyplot")
#: one import at a time (two threads finding faces for the first time):
#: the stand-ins are put in the interpreter's shared ``sys.modules``
_IMPORTING = threading.Lock()


class DeferredModule(ModuleType):
    """Stands in for the module of its name until an attribute is read from
    it, then reads it from the real module (imported then).  While it is
    itself the module of that name in ``sys.modules`` (during the import it
    stands in for), an attribute it lacks is missing."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or sys.modules.get(self.__name__) is self:
            raise AttributeError(name)
        return getattr(importlib.import_module(self.__name__), name)


def load_mediapipe() -> ModuleType:
    """The ``mediapipe`` package, imported without importing matplotlib."""
    if "mediapipe" in sys.modules:  # (waits for a thread still importing it)
        return importlib.import_module("mediapipe")
    with _IMPORTING:
        if any(name in sys.modules for name in _DEFERRED):
            return importlib.import_module("mediapipe")
        package, pyplot = DeferredModule(_DEFERRED[0]), DeferredModule(_DEFERRED[1])
        package.__path__ = []  # a package, for the import system
        package.__dict__["pyplot"] = pyplot  # what ``import matplotlib.pyplot as plt`` reads
        sys.modules.update({_DEFERRED[0]: package, _DEFERRED[1]: pyplot})
        try:
            return importlib.import_module("mediapipe")
        finally:
            for name, stand_in in zip(_DEFERRED, (package, pyplot), strict=True):
                if sys.modules.get(name) is stand_in:
                    del sys.modules[name]
