"""faceweave: face swapping that works offline, on a CPU.

>>> from faceweave import FaceSwapper
>>> result = FaceSwapper().swap(["me.jpg"], "photo.jpg")  # doctest: +SKIP
>>> result.image            # (H, W, 3) uint8 RGB          # doctest: +SKIP
>>> result.swapped          # which faces, from which source photo  # doctest: +SKIP
>>> result.save("out.png")  # the watermark is in the pixels; the label goes in the file  # doctest: +SKIP

Outputs are marked by default; ``FaceSwapper(provenance=Provenance.new(watermark=False))``
turns the invisible watermark off and keeps the "AI-generated" label.
"""

from faceweave.errors import (
    FaceweaveError,
    ImageTooLargeError,
    InputError,
    InvalidOptionError,
    MeshlessFaceError,
    ModelError,
    NoFaceError,
    NoMatchingFaceError,
    OutputError,
    UnreadableFileError,
    UnsupportedFormatError,
)
from faceweave.options import AnalysisOptions, MaskOptions, SelectionOptions, SwapOptions
from faceweave.types import BBox, Face, Image, Pose, SkippedFace, SwappedFace, SwapResult

__version__ = "0.1.0"


def __getattr__(name: str):
    # the pipeline pulls in mediapipe and dlib: import it only when asked for
    if name == "FaceSwapper":
        from faceweave.pipeline import FaceSwapper

        return FaceSwapper
    if name == "FaceAnalyser":
        from faceweave.analysis import FaceAnalyser

        return FaceAnalyser
    if name == "swap_face_from_image":
        from faceweave.compat import swap_face_from_image

        return swap_face_from_image
    if name == "Provenance":
        from faceweave.provenance.stamp import Provenance

        return Provenance
    raise AttributeError(f"module 'faceweave' has no attribute {name!r}")


__all__ = [
    "AnalysisOptions",
    "BBox",
    "Face",
    "FaceAnalyser",
    "FaceSwapper",
    "FaceweaveError",
    "Image",
    "ImageTooLargeError",
    "InputError",
    "InvalidOptionError",
    "MaskOptions",
    "MeshlessFaceError",
    "ModelError",
    "NoFaceError",
    "NoMatchingFaceError",
    "OutputError",
    "Pose",
    "Provenance",
    "SelectionOptions",
    "SkippedFace",
    "SwapOptions",
    "SwappedFace",
    "SwapResult",
    "UnreadableFileError",
    "UnsupportedFormatError",
    "__version__",
    "swap_face_from_image",
]
