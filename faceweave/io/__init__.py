"""Image input and output: decode by content, validate at the boundary, write atomically."""

from faceweave.io.atomic import atomic_output
from faceweave.io.images import (
    ACCEPTED_INPUT,
    READ_FORMATS,
    WRITE_FORMATS,
    Kind,
    image_from_array,
    probe_kind,
    read_image,
    write_image,
)

__all__ = [
    "ACCEPTED_INPUT",
    "READ_FORMATS",
    "WRITE_FORMATS",
    "Kind",
    "atomic_output",
    "image_from_array",
    "probe_kind",
    "read_image",
    "write_image",
]
