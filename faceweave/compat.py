"""Drop-in functions for code written against the classic face-swap scripts.

>>> import cv2
>>> from faceweave import swap_face_from_image
>>> out = swap_face_from_image(cv2.imread("me.jpg"), cv2.imread("photo.jpg"))  # doctest: +SKIP
>>> cv2.imwrite("out.jpg", out)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from faceweave.errors import InputError
from faceweave.options import RuntimeOptions, SwapOptions

if TYPE_CHECKING:
    from faceweave.pipeline import FaceSwapper


def swap_face_from_image(
    source_img: np.ndarray,
    target_img: np.ndarray,
    device: str = "cpu",
    *,
    swapper: FaceSwapper | None = None,
) -> np.ndarray:
    """Put the face of ``source_img`` on the faces of ``target_img``, both BGR
    ``uint8`` arrays as OpenCV gives them (``(H, W, 3)``; ``(H, W, 4)`` BGRA
    and ``(H, W)`` grey are taken too), and return the result as a BGR
    ``(H, W, 3)`` ``uint8`` array of the target's size.

    The result carries the invisible watermark, as every output of
    :meth:`FaceSwapper.swap` does.  ``device``: where neural models run:
    ``"cpu"``, ``"cuda"``, ``"cuda:1"``, or another execution provider's name
    (the default classical swapper runs on the CPU anyway).  ``swapper``: a
    :class:`FaceSwapper` to reuse across calls (else one is made and closed
    for this call, which loads the face models each time).

    Raises:
        InputError: an array of the wrong type, dtype or shape (the message shows them).
        NoFaceError: no face in the source or the target (``role`` says which).
    """
    source, target = _rgb(source_img, "source_img"), _rgb(target_img, "target_img")
    if swapper is not None:
        return _bgr(swapper.swap(source, target).image)
    from faceweave.pipeline import FaceSwapper

    with FaceSwapper(SwapOptions(runtime=runtime_for(device)), source_cache=0) as own:
        return _bgr(own.swap(source, target).image)


def runtime_for(device: str) -> RuntimeOptions:
    """``"cpu"``, ``"cuda"`` or ``"cuda:1"`` as :class:`RuntimeOptions` (provider, device index).

    Raises:
        InvalidOptionError: an unknown provider or a bad index.
    """
    from pydantic import ValidationError

    from faceweave.errors import InvalidOptionError

    name, _, index = str(device).strip().lower().partition(":")
    if index and not (index.isascii() and index.isdigit()):
        raise InvalidOptionError(f"device {device!r}: the index after ':' must be a number, e.g. 'cuda:1'")
    try:
        return RuntimeOptions(execution_provider=name, device_id=int(index or 0))
    except ValidationError as exc:
        message = str(exc.errors()[0].get("msg", "invalid")).removeprefix("Value error, ")
        raise InvalidOptionError(f"device {device!r}: {message}") from exc


def _rgb(image: object, name: str) -> np.ndarray:
    """An OpenCV BGR(A) or grey array as RGB(A) (a view)."""
    if not isinstance(image, np.ndarray):
        hint = " (cv2.imread returns None for a file it cannot read)" if image is None else ""
        raise InputError(f"{name} must be a numpy array as cv2.imread gives; got {type(image).__name__}{hint}")
    if image.dtype != np.uint8 or not (image.ndim == 2 or (image.ndim == 3 and image.shape[2] in (3, 4))):
        raise InputError(
            f"{name} must be a uint8 array of shape (H, W, 3) BGR, (H, W, 4) BGRA or (H, W) grey;"
            f" got {image.dtype} {image.shape}"
        )
    if image.ndim == 2:
        return image
    return image[..., [2, 1, 0, 3]] if image.shape[2] == 4 else image[..., ::-1]


def _bgr(rgb: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rgb[..., ::-1])
