"""What model-using components need of a loaded model: the two small
protocols the neural swappers, embedders and enhancers are written against.

:class:`faceweave.runtime.InferenceModel` (a pool's session) satisfies them,
and so does a ten-line adapter around an ``onnxruntime.InferenceSession`` in
the tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


class TensorLike(Protocol):
    """One declared model input or output: ``name`` and ``shape`` (ints for
    fixed dimensions; a string, ``None`` or a negative int for dynamic ones).
    Implementations may also carry the element type as ``dtype`` (a numpy
    name, as :mod:`faceweave.runtime` gives it) or ``type`` (onnxruntime's
    ``"tensor(float)"``)."""

    @property
    def name(self) -> str: ...

    @property
    def shape(self) -> Sequence[Any]: ...


@runtime_checkable
class RunnableModel(Protocol):
    """A loaded model: its inputs and outputs, and a run by name."""

    @property
    def inputs(self) -> Sequence[TensorLike]: ...

    @property
    def outputs(self) -> Sequence[TensorLike]: ...

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs by name for ``feeds`` (arrays by input name)."""
