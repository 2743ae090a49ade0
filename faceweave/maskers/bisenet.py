"""BiSeNet face parsers (FaceFusion's ``bisenet_resnet_18``, ``bisenet_resnet_34``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faceweave.errors import ModelSignatureError
from faceweave.maskers.base import MaskerSpec, check_regions
from faceweave.maskers.processing import parser_input, parser_output
from faceweave.runtime.model import RunnableModel


class BiSeNetParser:
    """The chosen regions of a face: the face at the model side, RGB
    normalised (ImageNet's mean/std) NCHW, into the ``input`` input; the
    best class per pixel of the first output, back at the face's side."""

    def __init__(self, model: RunnableModel, *, spec: MaskerSpec) -> None:
        if "input" not in [info.name for info in model.inputs]:
            have = ", ".join(str(info.name) for info in model.inputs) or "none"
            raise ModelSignatureError(f"{spec.name}: the model has no input 'input' (it has: {have})")
        self.name = spec.name
        self.spec = spec
        self.model = model

    def mask(self, face: np.ndarray, regions: Sequence[str]) -> np.ndarray:
        """``(S, S)`` float32, 1 on ``regions`` of the ``(S, S, 3)`` RGB face."""
        chosen = check_regions(regions)
        feed = parser_input(face, self.spec.size, self.spec.mean, self.spec.std)
        first = self.model.run({"input": feed})[self.model.outputs[0].name]
        return parser_output(first, chosen, int(face.shape[0]))
