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


class MeshlessFaceError(NoMatchingFaceError):
    """A face needs its mediapipe mesh but has none: FaceFusion's detector
    kept it and the mesh could not be fitted.  Faceweave's mesh swapper,
    its compositing and the video tracker need the mesh; the neural
    swappers do not (they align on the face's five points)."""

    code = "meshless_face"


class ModelError(FaceweaveError):
    """A model could not be loaded or run."""

    code = "model_error"


class OutputError(FaceweaveError):
    """The result could not be written."""

    code = "output_error"


class DeviceFaultError(FaceweaveError):
    """The accelerator (or the CPU runtime) a worker runs on failed its
    self-test: the job is handed to another worker, this one is unhealthy."""

    code = "device_fault"


class ModelNotFoundError(ModelError):
    """A model name is unknown, or its file is not present (and may not be downloaded)."""

    code = "model_not_found"


class ModelFormatError(ModelError):
    """A model file is not a readable ONNX graph."""

    code = "model_format"


class ModelSignatureError(ModelError):
    """A model's inputs/outputs do not match the spec it is used or imported as."""

    code = "model_signature"


class DownloadError(ModelError):
    """A download failed, was cut short, or its checksum did not match."""

    code = "download_failed"


class ChecksumError(DownloadError):
    """A file's sha256 differs from the one its spec pins (the file is deleted)."""

    code = "checksum_mismatch"


class ProviderError(ModelError):
    """An execution provider is unknown, not installed, or failed to start."""

    code = "provider_unavailable"


class UnknownProviderError(ProviderError, InvalidOptionError):
    """An execution provider name that faceweave does not know: an invalid
    option (exit code 2, HTTP 422), unlike a known one that is missing here."""

    code = "unknown_provider"


class ExportError(ModelError):
    """A model cannot be exported as asked (shape, precision, target)."""

    code = "export_failed"


class ContentRefusedError(InputError):
    """Content screening refused an input under the configured policy."""

    code = "content_refused"


class LimitExceededError(InputError):
    """An upload, an image's pixels or a video's length is over a configured limit."""

    code = "too_large"


class VideoTooLargeError(LimitExceededError, ImageTooLargeError):
    """A video is over a configured limit: pixels per frame, duration or
    frames (found from its header, or while it is decoded when the header
    does not say)."""

    code = "video_too_large"


class TooSmallToMarkError(InputError):
    """A picture or video is too small to carry the invisible watermark
    (under 64 pixels on a side) while marking is on."""

    code = "too_small_to_mark"


class RequestTimeoutError(InputError):
    """A request body did not arrive in time (too slow overall, or idle too long between chunks)."""

    code = "request_timeout"


class ClientDisconnectedError(InputError):
    """The client closed the connection before its request body had arrived (not a server error)."""

    code = "client_closed"


class JobStateError(InputError):
    """A job is not in a state that allows the request (e.g. its result is not ready)."""

    code = "job_not_ready"


class RangeNotSatisfiableError(InputError):
    """An HTTP ``Range`` lies outside the file."""

    code = "range_not_satisfiable"


class ServiceError(FaceweaveError):
    """A request to the HTTP service was refused (authentication, access, rate, readiness)."""

    code = "service_error"


class AuthenticationError(ServiceError):
    """No credentials, or credentials that are wrong, forged or expired."""

    code = "unauthorized"


class PermissionDeniedError(ServiceError):
    """The caller is known but may not do this."""

    code = "forbidden"


class NotFoundError(ServiceError):
    """No such job for this caller (unknown and foreign jobs look the same)."""

    code = "not_found"


class LiveSessionElsewhereError(NotFoundError):
    """A live session id made by another node: its state is in that node's
    process, and this request was routed to another one (HTTP 421)."""

    code = "live_session_elsewhere"


class RateLimitedError(ServiceError):
    """The caller sent more requests than the configured rate allows."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotReadyError(ServiceError):
    """The service is starting (models not loaded) or has no capacity now;
    ``retry_after``: the seconds a client should wait (HTTP ``Retry-After``)."""

    code = "not_ready"

    def __init__(self, message: str, *, retry_after: float = 5.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StorageUnavailableError(NotReadyError):
    """The job storage (the S3 bucket) does not answer, or answers that it
    cannot serve now; nothing was stored or changed (HTTP 503)."""

    code = "storage_unavailable"


class AtCapacityError(NotReadyError):
    """Every place of a bounded resource of this node is taken (the live
    sessions of ``live.sessions``); try again once one ends (``retry_after``
    seconds, a guess: HTTP's ``Retry-After``), or another node."""

    code = "at_capacity"

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LiveCallerLimitError(RateLimitedError):
    """The caller already holds as many live places as one caller may
    (``live.sessions_per_caller``), however many the node has free."""

    code = "live_sessions_per_caller"


class NoVideoTrackError(InvalidOptionError):
    """A live session's WebRTC offer sends no video track (no camera)."""

    code = "no_video_track"


class UnknownModelError(ModelNotFoundError, InvalidOptionError):
    """A model name that no catalog entry has (the user's input: exit code 2, HTTP 422)."""

    code = "unknown_model"


class BadModelFileError(ModelError, InputError):
    """A model file the user hands over (``models import``, ``--from-facefusion``)
    is not the model it is named as; nothing of it is registered or copied."""

    code = "bad_model_file"


class ModelFileFormatError(BadModelFileError, ModelFormatError):
    """A file the user imports is not a readable ONNX graph."""

    code = "model_format"


class ModelFileSignatureError(BadModelFileError, ModelSignatureError):
    """A file the user imports has inputs/outputs other than its model's spec."""

    code = "model_signature"


class ModelFileChecksumError(BadModelFileError, ChecksumError):
    """A file the user imports has another hash than its spec pins, or than
    FaceFusion's ``.hash`` file beside it records (CRC32)."""

    code = "checksum_mismatch"


class StreamLostError(FaceweaveError):
    """A live input stopped sending and did not come back within the
    reconnect attempts (the outputs written up to then are kept)."""

    code = "stream_lost"


class OutputUnavailableError(InvalidOptionError):
    """A live output cannot be given on this machine: no display for a
    preview window, no virtual camera device or its optional package."""

    code = "output_unavailable"


class ChosenModelMissingError(ModelNotFoundError, InputError):
    """A catalogued model the options need has no file in the models folder:
    a swapper and the embedder or converter it uses, a face or frame
    enhancer, a face detector or landmarker, an occluder or a face parser.

    One rule for every kind: the options named a model this installation
    does not have, which the user fixes by choosing another or by getting the
    file (the message says how), so it is the user's input: exit code 2, HTTP
    422.  A model whose file is present but cannot be loaded or run (corrupt,
    wrong signature, a provider that fails) is a :class:`ModelError`: exit
    code 1, HTTP 500."""

    code = "model_not_found"
