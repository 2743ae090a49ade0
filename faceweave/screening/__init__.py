"""Optional content screening of inputs (``pip install 'faceweave[screening]'``), off by default.

:mod:`faceweave.screening.nudenet` runs NudeNet's ONNX detector (AGPL-3.0
upstream, hence optional); :mod:`faceweave.screening.policy` decides what a
detection means: log it, blur it, or refuse the input.
"""

from faceweave.screening.nudenet import LABELS, ContentDetection, NudeNetDetector, find_model
from faceweave.screening.policy import ACTIONS, EXPOSED_LABELS, ScreeningPolicy, ScreeningResult, pixelate_boxes, screen

__all__ = [
    "ACTIONS",
    "EXPOSED_LABELS",
    "LABELS",
    "ContentDetection",
    "NudeNetDetector",
    "ScreeningPolicy",
    "ScreeningResult",
    "find_model",
    "pixelate_boxes",
    "screen",
]
