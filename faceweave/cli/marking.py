"""What ``swap`` and ``batch`` share about provenance: the watermark switch,
content screening before any work, and the audit line written after the run
(whatever its outcome)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faceweave.errors import InvalidOptionError, OutputError

if TYPE_CHECKING:
    from faceweave.provenance.audit import Outcome

SCREENING_HELP = "Content screening of inputs: off|log|blur|refuse (needs 'faceweave[screening]')."
NO_WATERMARK_HELP = (
    "Do not embed the invisible watermark (recorded in the audit log); the AI-generated label is still written."
)
AUDIT_HELP = "Append the run's audit line (JSON) here (default $XDG_STATE_HOME/faceweave/audit.jsonl)."
#: frames of a video target that screening looks at
SCREEN_VIDEO_FRAMES = 4


def make_provenance(*, no_watermark: bool):
    from faceweave.provenance.stamp import Provenance

    return Provenance.new(watermark=not no_watermark)


def open_audit(path: Path | None):
    """The :class:`AuditLog` (checked writable now, before any work)."""
    from faceweave.provenance.audit import AuditLog, default_audit_path

    log = AuditLog(path if path is not None else default_audit_path())
    if log.path.is_dir():
        raise InvalidOptionError(f"--audit-log {log.path}: is a folder; give a file name")
    try:
        log.path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(log.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
    except OSError as exc:
        raise OutputError(f"cannot write the audit log '{log.path}': {exc.strerror or exc}") from exc
    return log


class Screener:
    """Screens inputs under a policy; the detector is loaded on first use and
    released by :meth:`close`.  ``results`` keeps what was screened, for the audit line."""

    def __init__(self, action: str) -> None:
        from faceweave.screening.policy import ScreeningPolicy

        self.policy = ScreeningPolicy(action=action)
        self.results: list[Any] = []
        self._detector = None
        if self.policy.enabled:
            from faceweave.screening.nudenet import NudeNetDetector, find_model

            find_model()  # fail now, before any work, when nudenet is not installed
            self._detector = NudeNetDetector()

    @property
    def enabled(self) -> bool:
        return self.policy.enabled

    def image(self, path: Path, *, role: str, max_pixels: int | None = None):
        """The photo at ``path`` as an :class:`~faceweave.types.Image`, screened
        (blurred under ``blur``); ``path`` itself when screening is off."""
        if not self.enabled:
            return path
        from faceweave.io.images import read_image

        kwargs = {"max_pixels": max_pixels} if max_pixels else {}
        return self.screen_image(read_image(path, role=f"{role} image", **kwargs), role=role)

    def screen_image(self, image, *, role: str):
        """A decoded :class:`~faceweave.types.Image`, screened (a blurred copy under ``blur``)."""
        from faceweave.screening.policy import screen

        if not self.enabled:
            return image
        result = screen(image.pixels, self.policy, self._detector, role=role, path=image.path)
        self.results.append(result)
        if not result.changed:
            return image
        pixels = result.pixels.copy()
        pixels.setflags(write=False)
        return dataclasses.replace(image, pixels=pixels)

    def video(self, path: Path, *, role: str = "target") -> None:
        """Screen a few frames of a video; ``blur`` cannot change a video, so it refuses instead."""
        if not self.enabled:
            return
        from faceweave.provenance.verify import sample_video_frames
        from faceweave.screening.policy import ScreeningPolicy, screen

        policy = self.policy
        if policy.action == "blur":  # the frames are not ours to change here
            policy = ScreeningPolicy(action="refuse", labels=policy.labels, threshold=policy.threshold)
        for index, pixels in enumerate(sample_video_frames(path, SCREEN_VIDEO_FRAMES)):
            self.results.append(
                screen(pixels, policy, self._detector, role=f"{role} video", path=f"{path} (sample {index})")
            )

    def audit(self) -> dict[str, Any]:
        return {"policy": self.policy.as_dict(), "screened": [r.as_dict() for r in self.results if r.flagged]}

    def close(self) -> None:
        if self._detector is not None:
            self._detector.close()


def write_audit(
    log,
    *,
    command: str,
    inputs: Sequence[tuple[str, Path | str] | Any],
    options: dict[str, Any],
    provenance,
    output: Path | str | None,
    error: BaseException | None,
    screener: Screener | None = None,
    outcome: Outcome | None = None,
) -> None:
    """Append the run's line to ``log``."""
    from faceweave.provenance.audit import AuditEntry, outcome_of
    from faceweave.provenance.stamp import audit_watermark

    entry = AuditEntry(
        command=command,
        inputs=hashed_inputs(inputs),
        options=options,
        watermark=audit_watermark(provenance),
        output=None if output is None else str(output),
        run_id=provenance.run_hex if provenance is not None else None,
        screening=screener.audit() if screener is not None and screener.enabled else None,
        **(outcome if outcome is not None else outcome_of(error)),
    )
    log.append(entry)


def hashed_inputs(inputs: Sequence[tuple[str, Path | str] | Any]) -> tuple:
    """``(role, path)`` pairs (files that exist) hashed; :class:`AuditInput` values kept as they are."""
    from faceweave.provenance.audit import AuditInput

    out = []
    for item in inputs:
        if isinstance(item, AuditInput):
            out.append(item)
        elif Path(item[1]).is_file():
            out.append(AuditInput.of(item[0], item[1]))
    return tuple(out)
