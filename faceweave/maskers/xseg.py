"""DeepFaceLab's XSeg occluders (FaceFusion's ``xseg_1``, ``xseg_2``, ``xseg_3``)."""

from __future__ import annotations

import numpy as np

from faceweave.errors import ModelSignatureError
from faceweave.maskers.base import MaskerSpec
from faceweave.maskers.processing import occluder_input, occluder_output
from faceweave.runtime.model import RunnableModel


class XsegOccluder:
    """Where the face shows on a template crop: the crop at the model side,
    BGR ``[0, 1]`` NHWC, into the ``input`` input; the first output back at
    the crop's side (:mod:`~faceweave.maskers.processing`)."""

    def __init__(self, model: RunnableModel, *, spec: MaskerSpec) -> None:
        if "input" not in [info.name for info in model.inputs]:
            have = ", ".join(str(info.name) for info in model.inputs) or "none"
            raise ModelSignatureError(f"{spec.name}: the model has no input 'input' (it has: {have})")
        self.name = spec.name
        self.spec = spec
        self.model = model

    def mask(self, crop: np.ndarray) -> np.ndarray:
        """``(S, S)`` float32 in ``[0, 1]`` for an ``(S, S, 3)`` uint8 RGB crop."""
        outputs = self.model.run({"input": occluder_input(crop, self.spec.size)})
        first = outputs[self.model.outputs[0].name]
        return occluder_output(first, int(crop.shape[0]))
