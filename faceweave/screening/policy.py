"""What to do with content the screening detector flags: nothing, log it, blur it, or refuse.

:func:`screen` runs a detector on one input, keeps the detections whose label
the :class:`ScreeningPolicy` counts and whose score reaches its threshold,
and then (by the policy's action) records them, pixelates their boxes in a
copy of the input, or raises :class:`~faceweave.errors.ContentRefusedError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import cv2
import numpy as np

from faceweave.errors import ContentRefusedError, InvalidOptionError
from faceweave.screening.nudenet import LABELS, ContentDetection

ACTIONS = ("off", "log", "blur", "refuse")
#: the labels that count by default: exposed sexual body parts (not feet, belly, armpits or a bare chest)
EXPOSED_LABELS = frozenset(
    {
        "FEMALE_BREAST_EXPOSED",
        "FEMALE_GENITALIA_EXPOSED",
        "MALE_GENITALIA_EXPOSED",
        "BUTTOCKS_EXPOSED",
        "ANUS_EXPOSED",
    }
)


class ContentDetector(Protocol):
    def detect(self, pixels: np.ndarray) -> Sequence[ContentDetection]: ...


@dataclass(frozen=True)
class ScreeningPolicy:
    """``action``: ``off`` (no screening), ``log`` (record only), ``blur``
    (pixelate flagged regions of the input) or ``refuse``; ``labels``: the
    NudeNet labels that count; ``threshold``: the lowest score that counts."""

    action: str = "off"
    labels: frozenset[str] = field(default=EXPOSED_LABELS)
    threshold: float = 0.5

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise InvalidOptionError(f"--screening must be one of {'|'.join(ACTIONS)}; got {self.action!r}")
        unknown = sorted(set(self.labels) - set(LABELS))
        if unknown:
            raise InvalidOptionError(f"unknown screening label(s) {', '.join(unknown)}; known: {', '.join(LABELS)}")
        if (
            isinstance(self.threshold, bool)
            or not isinstance(self.threshold, (int, float))
            or not 0 < self.threshold <= 1
        ):
            raise InvalidOptionError(f"screening threshold must be in (0, 1]; got {self.threshold!r}")
        object.__setattr__(self, "labels", frozenset(self.labels))

    @property
    def enabled(self) -> bool:
        return self.action != "off"

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "labels": sorted(self.labels), "threshold": self.threshold}


@dataclass(frozen=True)
class ScreeningResult:
    """The outcome for one input: ``pixels`` ``(H, W, 3)`` uint8 (blurred
    under ``blur``, else the input), ``flagged`` the detections that counted."""

    role: str
    path: str | None
    action: str
    flagged: tuple[ContentDetection, ...]
    pixels: np.ndarray

    @property
    def changed(self) -> bool:
        return self.action == "blur" and bool(self.flagged)

    def as_dict(self) -> dict[str, Any]:
        """For the audit line."""
        return {
            "role": self.role,
            "path": self.path,
            "action": self.action,
            "flagged": [{"label": d.label, "score": round(d.score, 3), "box": list(d.box)} for d in self.flagged],
        }


def screen(
    pixels: np.ndarray,
    policy: ScreeningPolicy,
    detector: ContentDetector | None,
    *,
    role: str,
    path: str | None = None,
) -> ScreeningResult:
    """Screen one input under ``policy`` (the detector is not run when it is ``off``).

    Raises:
        ContentRefusedError: ``refuse`` and a detection counted (the message
            names the input, the label and the score).
    """
    if not policy.enabled or detector is None:
        return ScreeningResult(role=role, path=path, action=policy.action, flagged=(), pixels=pixels)
    flagged = tuple(
        sorted(
            (d for d in detector.detect(pixels) if d.label in policy.labels and d.score >= policy.threshold),
            key=lambda d: -d.score,
        )
    )
    if flagged and policy.action == "refuse":
        top = flagged[0]
        where = f" {path}" if path else ""
        raise ContentRefusedError(
            f"{role}{where} refused by content screening: {top.label} (score {top.score:.2f},"
            f" threshold {policy.threshold:.2f})"
        )
    if flagged and policy.action == "blur":
        pixels = pixelate_boxes(pixels, [d.box for d in flagged])
    return ScreeningResult(role=role, path=path, action=policy.action, flagged=flagged, pixels=pixels)


def pixelate_boxes(pixels: np.ndarray, boxes: Sequence[tuple[int, int, int, int]], *, blocks: int = 8) -> np.ndarray:
    """A copy of ``(H, W, 3)`` uint8 ``pixels`` with every ``(x, y, w, h)`` box
    pixelated to about ``blocks`` cells along its shorter side (pure; pixels
    outside the boxes are unchanged)."""
    out = np.array(pixels, dtype=np.uint8, copy=True)
    height, width = out.shape[:2]
    for x, y, w, h in boxes:
        x0, y0 = max(0, int(x)), max(0, int(y))
        x1, y1 = min(width, int(x) + int(w)), min(height, int(y) + int(h))
        if x1 <= x0 or y1 <= y0:
            continue
        region = out[y0:y1, x0:x1]
        cell = max(2, min(x1 - x0, y1 - y0) // blocks)  # at least 2 x 2 pixels per cell
        small = cv2.resize(region, (max(1, (x1 - x0) // cell), max(1, (y1 - y0) // cell)), interpolation=cv2.INTER_AREA)
        out[y0:y1, x0:x1] = cv2.resize(small, (x1 - x0, y1 - y0), interpolation=cv2.INTER_NEAREST)
    return out
