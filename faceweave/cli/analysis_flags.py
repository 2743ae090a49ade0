"""The face detector and landmarker as flags, shared by the commands that
swap (``swap``, ``live``, ``evaluate``): ``--face-detector``,
``--face-detector-size``, ``--face-detector-score``, ``--face-landmarker`` and
``--face-landmarker-score``.  Use the ``Annotated`` aliases as parameter
types and :func:`analysis_fields` to put the values into
:class:`~faceweave.options.AnalysisOptions`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from faceweave.analysis.face_detectors import FACE_DETECTORS
from faceweave.analysis.face_landmarkers import FACE_LANDMARKERS

#: the help panel these options are listed under
PANEL = "Face detection"

FaceDetectorOption = Annotated[
    str | None,
    typer.Option(
        "--face-detector",
        metavar="NAME",
        help=f"Face detector: {'|'.join(FACE_DETECTORS)} (default mediapipe, offline; the others are FaceFusion's "
        "ONNX models: download or import the file first). Its five points align the neural swappers.",
        rich_help_panel=PANEL,
    ),
]
FaceDetectorSizeOption = Annotated[
    int | None,
    typer.Option(
        "--face-detector-size",
        metavar="PX",
        help="ONNX detectors: side of the square the frame is fitted into (scrfd, retinaface: 160, 320, 480, 512, "
        "640; yolo_face, yunet: 640; default 640).",
        rich_help_panel=PANEL,
    ),
]
FaceDetectorScoreOption = Annotated[
    float | None,
    typer.Option(
        "--face-detector-score",
        metavar="F",
        help="Lowest detector score that counts as a face, 0.05-1 (default 0.5).",
        rich_help_panel=PANEL,
    ),
]
FaceLandmarkerOption = Annotated[
    str | None,
    typer.Option(
        "--face-landmarker",
        metavar="NAME",
        help=f"Where the five alignment points come from: {'|'.join(FACE_LANDMARKERS)} (default mediapipe: the "
        "detector's points, or the mesh's with the mediapipe detector; 2dfan4: FaceFusion's 68 points, needs "
        "2dfan4 and fan_68_5).",
        rich_help_panel=PANEL,
    ),
]
FaceLandmarkerScoreOption = Annotated[
    float | None,
    typer.Option(
        "--face-landmarker-score",
        metavar="F",
        help="2dfan4: the confidence, 0-1, above which its points replace the detector's (default 0.5).",
        rich_help_panel=PANEL,
    ),
]


def analysis_fields(
    *,
    face_detector: str | None,
    face_detector_size: int | None,
    face_detector_score: float | None,
    face_landmarker: str | None,
    face_landmarker_score: float | None,
) -> dict[str, Any]:
    """The ``analysis`` fields the flags set (those not given keep their defaults)."""
    fields: dict[str, Any] = {
        "face_detector": face_detector,
        "face_detector_size": face_detector_size,
        "min_confidence": face_detector_score,
        "face_landmarker": face_landmarker,
        "face_landmarker_score": face_landmarker_score,
    }
    return {k: v for k, v in fields.items() if v is not None}


def analysis_flag_fields(args: Any) -> dict[str, Any]:
    """:func:`analysis_fields` of the flags above, read by name off ``args``."""
    return analysis_fields(
        face_detector=args.face_detector,
        face_detector_size=args.face_detector_size,
        face_detector_score=args.face_detector_score,
        face_landmarker=args.face_landmarker,
        face_landmarker_score=args.face_landmarker_score,
    )
