"""The face detector and landmarker as flags, shared by the commands that
swap (``swap``, ``live``, ``evaluate``): ``--face-detector``,
``--face-detector-size``, ``--face-detector-score``, ``--face-detector-angles``,
``--face-detector-margin``, ``--face-landmarker`` and
``--face-landmarker-score``.  Use the ``Annotated`` aliases as parameter
types and :func:`analysis_fields` to put the values into
:class:`~faceweave.options.AnalysisOptions`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from faceweave import names

#: the help panel these options are listed under
PANEL = "Face detection"

FaceDetectorOption = Annotated[
    str | None,
    typer.Option(
        "--face-detector",
        metavar="NAME",
        help=f"Face detector: {'|'.join(names.FACE_DETECTORS)} (default mediapipe, offline; the others are "
        "FaceFusion's ONNX models: download or import the file first). Its five points align the neural swappers.",
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
FaceDetectorAnglesOption = Annotated[
    list[str] | None,
    typer.Option(
        "--face-detector-angles",
        metavar="DEGREES",
        help="ONNX detectors: also look for faces in the frame turned by these angles, 0 90 180 270 (repeat, or "
        "comma-separate; default 0), as FaceFusion.",
        rich_help_panel=PANEL,
    ),
]
FaceDetectorMarginOption = Annotated[
    tuple[int, int, int, int] | None,
    typer.Option(
        "--face-detector-margin",
        metavar="TOP RIGHT BOTTOM LEFT",
        help="ONNX detectors: a zero border added around the frame before detection, four whole percentages "
        "0-100 (100: half the frame; default 0 0 0 0), as FaceFusion; finds faces cut by the frame's edge.",
        rich_help_panel=PANEL,
    ),
]
FaceLandmarkerOption = Annotated[
    str | None,
    typer.Option(
        "--face-landmarker",
        metavar="NAME",
        help=f"Where the five alignment points come from: {'|'.join(names.FACE_LANDMARKERS)} (default mediapipe: the "
        "detector's points, or the mesh's with the mediapipe detector; 2dfan4, peppa_wutz: FaceFusion's 68 points, "
        "each needs fan_68_5 too; many: both, FaceFusion's choice between them).",
        rich_help_panel=PANEL,
    ),
]
FaceLandmarkerScoreOption = Annotated[
    float | None,
    typer.Option(
        "--face-landmarker-score",
        metavar="F",
        help="2dfan4, peppa_wutz: the confidence, 0-1, above which their points replace the detector's (default 0.5).",
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
