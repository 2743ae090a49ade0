"""What the command line's flags and the HTTP job's fields set in the
options, by the names both surfaces share: used by the CLI
(:mod:`faceweave.cli`) and the service (:mod:`faceweave.service`) alike,
so that neither imports the other.

* :func:`analysis_fields`: the face detector and landmarker values (flag
  names ``face_detector``, ``face_detector_size``, ``face_detector_score``,
  ``face_landmarker``, ``face_landmarker_score``, ``face_detector_angles``,
  ``face_detector_margin``) as :class:`~faceweave.options.AnalysisOptions`
  fields; :func:`analysis_flag_fields` the same read off an object that has
  them as attributes (the CLI's arguments, an HTTP job's options).
"""

from __future__ import annotations

from typing import Any


def analysis_fields(
    *,
    face_detector: str | None,
    face_detector_size: int | None,
    face_detector_score: float | None,
    face_landmarker: str | None,
    face_landmarker_score: float | None,
    face_detector_angles: list[str] | list[int] | tuple[int, ...] | None = None,
    face_detector_margin: tuple[int, int, int, int] | None = None,
) -> dict[str, Any]:
    """The ``analysis`` fields the flags set (those not given keep their defaults)."""
    fields: dict[str, Any] = {
        "face_detector": face_detector,
        "face_detector_size": face_detector_size,
        "min_confidence": face_detector_score,
        "face_landmarker": face_landmarker,
        "face_landmarker_score": face_landmarker_score,
        "face_detector_angles": split_angles(face_detector_angles),
        "face_detector_margin": face_detector_margin,
    }
    return {k: v for k, v in fields.items() if v is not None}


def split_angles(given: list[str] | list[int] | tuple[int, ...] | None) -> tuple[int | str, ...] | None:
    """The angles of repeated ``--face-detector-angles`` values, each of which
    may list several (``0,90`` or ``'0 90'``), as whole numbers where they are
    (the options refuse the rest, naming the accepted ones); ``None`` when none was given."""
    if not given:
        return None
    words = [word for value in given for word in str(value).replace(",", " ").split()]
    return tuple(int(word) if word.lstrip("-").isdigit() else word for word in words)


def analysis_flag_fields(args: Any) -> dict[str, Any]:
    """:func:`analysis_fields` of the flags above, read by name off ``args``."""
    return analysis_fields(
        face_detector=args.face_detector,
        face_detector_size=args.face_detector_size,
        face_detector_score=args.face_detector_score,
        face_landmarker=args.face_landmarker,
        face_landmarker_score=args.face_landmarker_score,
        face_detector_angles=args.face_detector_angles,
        face_detector_margin=args.face_detector_margin,
    )
