"""The face detector and landmarker as flags, shared by the commands that
swap (``swap``, ``live``, ``evaluate``): ``--face-detector``,
``--face-detector-size``, ``--face-detector-score``, ``--face-detector-angles``,
``--face-detector-margin``, ``--face-landmarker`` and
``--face-landmarker-score``.  Use the ``Annotated`` aliases as parameter
types and :func:`~faceweave.option_fields.analysis_fields` to put the values
into :class:`~faceweave.options.AnalysisOptions`."""

from __future__ import annotations

from typing import Annotated

import typer

from faceweave import names
from faceweave.option_fields import analysis_fields, analysis_flag_fields, split_angles

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


__all__ = [
    "PANEL",
    "analysis_fields",
    "analysis_flag_fields",
    "split_angles",
]
