"""faceweave: face swapping that works offline, on a CPU.

>>> from faceweave import FaceSwapper
>>> result = FaceSwapper().swap(["me.jpg"], "photo.jpg")  # doctest: +SKIP
>>> result.image            # (H, W, 3) uint8 RGB          # doctest: +SKIP
>>> result.swapped          # which faces, from which source photo  # doctest: +SKIP
"""

from faceweave.errors import (
    FaceweaveError,
    ImageTooLargeError,
    InputError,
    InvalidOptionError,
    ModelError,
    NoFaceError,
    NoMatchingFaceError,
    OutputError,
    UnreadableFileError,
    UnsupportedFormatError,
)
from faceweave.options import AnalysisOptions, MaskOptions, SelectionOptions, SwapOptions
from faceweave.types import BBox, Face, Image, Pose, SwappedFace, SwapResult

__version__ = "0.1.0"


def __getattr__(name: str):
    # the pipeline pulls in mediapipe and dlib: import it only when asked for
    if name == "FaceSwapper":
        from faceweave.pipeline import FaceSwapper

        return FaceSwapper
    if name == "FaceAnalyser":
        from faceweave.analysis import FaceAnalyser

        return FaceAnalyser
    raise AttributeError(f"module 'faceweave' has no attribute {name!r}")


__all__ = [
    "AnalysisOptions", "BBox", "Face", "FaceAnalyser", "FaceSwapper", "FaceweaveError", "Image",
    "ImageTooLargeError", "InputError", "InvalidOptionError", "MaskOptions", "ModelError", "NoFaceError",
    "NoMatchingFaceError", "OutputError", "Pose", "SelectionOptions", "SwapOptions", "SwappedFace",
    "SwapResult", "UnreadableFileError", "UnsupportedFormatError", "__version__",
]
