"""``faceweave evaluate``: score face swaps between different people.

:func:`evaluate_folder` runs a swapper over deterministic pairs from a folder
with ``identities.csv`` and writes ``report.json``, ``summary.txt`` and
``contact_sheet.png``; :func:`format_summary` renders the summary text.  The
metrics (:mod:`.metrics`) and masks (:mod:`.regions`) are pure functions.
"""

from faceweave.evaluate.pairs import Photo, SwapPair, build_pairs, read_identities
from faceweave.evaluate.report import (
    CHECKS,
    Check,
    EvaluationReport,
    EvaluationSettings,
    PairResult,
    format_summary,
)
from faceweave.evaluate.runner import evaluate_folder

__all__ = [
    "CHECKS",
    "Check",
    "EvaluationReport",
    "EvaluationSettings",
    "PairResult",
    "Photo",
    "SwapPair",
    "build_pairs",
    "evaluate_folder",
    "format_summary",
    "read_identities",
]
