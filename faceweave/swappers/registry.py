"""The swappers by name: :func:`create_swapper` builds the one an option
names, from its factory (``mesh``, the classical swapper, ``none``, which
keeps the faces for the processors alone, and every neural model of
:data:`faceweave.names.NEURAL_SWAPPERS`).

Apart from :mod:`faceweave.swappers.base` so that the implementations,
which import the base, are imported by nothing below them; the factories'
modules are imported when a swapper is first asked for (the neural stack
is not needed by a classical swap).
"""

from __future__ import annotations

from collections.abc import Mapping

from faceweave import names
from faceweave.errors import InvalidOptionError
from faceweave.swappers.base import Swapper, SwapperContext, SwapperFactory


def _registry() -> Mapping[str, SwapperFactory]:
    """Swapper factories by name: ``mesh`` and the neural models."""
    from functools import partial

    from faceweave.swappers.keep import keep_swapper
    from faceweave.swappers.mesh import mesh_swapper
    from faceweave.swappers.neural import NEURAL_SWAPPERS
    from faceweave.swappers.neural.factory import load_neural_swapper

    factories: dict[str, SwapperFactory] = {names.MESH_SWAPPER: mesh_swapper, names.NO_SWAPPER: keep_swapper}
    factories.update({name: partial(load_neural_swapper, name) for name in NEURAL_SWAPPERS})
    return names.registered("swapper", names.SWAPPERS, factories)


def available_swappers() -> list[str]:
    return list(names.SWAPPERS)


def swapper_factory(name: str) -> SwapperFactory:
    """The factory registered as ``name``; :class:`InvalidOptionError` for
    an unknown name, listing the known ones (the one place that says so)."""
    if name not in names.SWAPPERS:
        raise InvalidOptionError(names.unknown("swapper", name, names.SWAPPERS, listed="available:"))
    return _registry()[name]


def create_swapper(name: str, context: SwapperContext) -> Swapper:
    """Build the swapper registered as ``name``."""
    return swapper_factory(name)(context)
