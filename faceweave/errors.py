"""One exception hierarchy for faceweave.

Library code raises these and never prints or exits; the CLI and the HTTP
service turn them into one-line messages and exit codes / status codes.
"""

from __future__ import annotations


class FaceweaveError(Exception):
    """Base class of every error faceweave raises on purpose."""

    #: short stable code, used by the CLI and the HTTP service
    code: str = "faceweave_error"


class InputError(FaceweaveError):
    """Bad input given by the user (files, options)."""

    code = "bad_input"


class UnreadableFileError(InputError):
    """A file is missing, cannot be opened, or cannot be decoded."""

    code = "unreadable_file"


class UnsupportedFormatError(InputError):
    """The file's content is not a format faceweave accepts here."""

    code = "unsupported_format"


class ImageTooLargeError(InputError):
    """An image exceeds the configured pixel limit (decompression-bomb guard)."""

    code = "image_too_large"


class InvalidOptionError(InputError):
    """An option has a value that is not accepted."""

    code = "invalid_option"


class NoFaceError(FaceweaveError):
    """No face was found where one is required.

    ``role`` says which image: ``"source"``, ``"target"`` or ``"reference"``.
    """

    code = "no_face"

    def __init__(self, message: str, *, role: str, path: str | None = None) -> None:
        super().__init__(message)
        self.role = role
        self.path = path


class NoMatchingFaceError(FaceweaveError):
    """Faces were found but none matches the selection (reference, index, size)."""

    code = "no_matching_face"


class ModelError(FaceweaveError):
    """A model could not be loaded or run."""

    code = "model_error"


class OutputError(FaceweaveError):
    """The result could not be written."""

    code = "output_error"
