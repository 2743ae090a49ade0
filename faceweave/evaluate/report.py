"""What ``faceweave evaluate`` records: the metric constants
(:class:`EvaluationSettings`), one pair's figures (:class:`PairResult`), the
summary statistics over all pairs, the check list and its targets, and the
report (``report.json``) and summary text it writes."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import mean, median
from typing import Any

from faceweave.evaluate.tone import ToneSettings

REPORT_VERSION = 2


@dataclass(frozen=True)
class EvaluationSettings:
    """Constants of the metrics; saved in ``report.json`` with the results."""

    psnr_box_scale: float = 1.6  #: face box scale left out of psnr_outside
    seam_threshold: float = 6.0  #: grey levels of |result - target| that count as changed
    seam_border_width: int = 1  #: half-width of the border band, pixels
    seam_box_scale: float = 2.5  #: only border pixels inside the face box scaled by this count
    tone: ToneSettings = ToneSettings()  #: the skin-tone metric's constants (the judge's)
    blotch_delta_e: float = 12.0  #: ΔE from the smoothed face that makes a pixel a blotch
    blotch_sigma: float = 0.1  #: smoothing sigma as a fraction of the face size
    match_iou: float = 0.3  #: a result face matches the target face above this box IoU
    thumbnail_scale: float = 2.2
    thumbnail_size: int = 256
    write_results: bool = True  #: also write each swapped image to results/


@dataclass(frozen=True)
class PairResult:
    """Figures of one swap pair; ``None`` where not measurable."""

    index: int
    source: str
    source_identity: str
    target: str
    target_identity: str
    found: bool  #: a face was found in the target and in the result
    swapped: bool  #: the swapper reports swapping the target face
    error: str | None = None
    id_dist_source: float | None = None
    id_dist_target: float | None = None
    nearest_identity: str | None = None
    retrieval: bool | None = None
    pose_error: float | None = None
    expression_error: float | None = None
    mouth_open_error: float | None = None  #: the three parts of expression_error
    mouth_width_error: float | None = None
    eye_open_error: float | None = None
    psnr_outside: float | None = None
    tone_error: float | None = None  #: ΔE76 length of tone_dlab
    tone_dlab: tuple[float, float, float] | None = None  #: excess (dL*, da*, db*): + paler, redder, yellower
    seam_ratio: float | None = None
    blotch_fraction: float | None = None
    sharpness_ratio: float | None = None
    runtime_ms: float | None = None
    result_file: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: _rounded(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Check:
    """One target of the check list: ``low <= value <= high``."""

    name: str
    key: str
    value: float | None
    low: float | None = None
    high: float | None = None

    @property
    def passed(self) -> bool:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return False
        return (self.low is None or self.value >= self.low) and (self.high is None or self.value <= self.high)

    @property
    def goal(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in [{self.low:g}, {self.high:g}]"
        return f">= {self.low:g}" if self.low is not None else f"<= {self.high:g}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "value": _rounded(self.value),
            "goal": self.goal,
            "passed": self.passed,
        }


#: the check list: (label, summary key, low, high)
CHECKS: tuple[tuple[str, str, float | None, float | None], ...] = (
    ("retrieval rate", "retrieval_rate", 0.95, None),
    ("median id_dist_source", "id_dist_source_median", None, 0.45),
    ("mean tone_error", "tone_error_mean", None, 2.0),
    ("max tone_error", "tone_error_max", None, 4.0),
    ("median seam_ratio", "seam_ratio_median", None, 1.05),
    ("median sharpness_ratio", "sharpness_ratio_median", 0.9, 1.15),
    ("median pose_error", "pose_error_median", None, 2.0),
    ("median expression_error", "expression_error_median", None, 0.02),
    ("min psnr_outside", "psnr_outside_min", 40.0, None),
)


@dataclass(frozen=True, eq=False)
class EvaluationReport:
    """Everything ``report.json`` holds: options, per-pair results, summary
    statistics and the check list."""

    data_dir: str
    out_dir: str
    options: Mapping[str, Any]
    pairs: tuple[PairResult, ...]
    summary: Mapping[str, Any]
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": REPORT_VERSION,
            "data_dir": self.data_dir,
            "options": dict(self.options),
            "summary": {k: _rounded(v) for k, v in self.summary.items()},
            "checks": [c.as_dict() for c in self.checks],
            "pairs": [p.as_dict() for p in self.pairs],
        }


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return round(value, 4)
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _mean_vector(vectors: Sequence[Sequence[float]]) -> list[float] | None:
    """Component-wise mean of equal-length vectors; ``None`` when there are none."""
    if not vectors:
        return None
    return [float(mean(column)) for column in zip(*vectors, strict=True)]


def summarize(results: Sequence[PairResult], *, photos_without_face: Sequence[str] = ()) -> dict[str, Any]:
    """Summary statistics; averages are over the pairs with ``found`` and a value."""
    found = [r for r in results if r.found]

    def values(key: str) -> list[float]:
        return [float(getattr(r, key)) for r in found if getattr(r, key) is not None]

    def stat(fn: Callable[[list[float]], float], key: str) -> float | None:
        v = values(key)
        return float(fn(v)) if v else None

    ids = values("id_dist_source")
    retrieval = [bool(r.retrieval) for r in found if r.retrieval is not None]
    runtimes = [r.runtime_ms for r in results if r.runtime_ms is not None]
    return {
        "pairs": len(results),
        "pairs_found": len(found),
        "all_faces_found": len(found) == len(results) and not photos_without_face,
        "pairs_not_found": [r.index for r in results if not r.found],
        "pairs_swapped": sum(1 for r in results if r.swapped),
        "photos_without_face": list(photos_without_face),
        "retrieval_rate": (sum(retrieval) / len(retrieval)) if retrieval else None,
        "id_dist_source_median": stat(median, "id_dist_source"),
        "id_dist_source_mean": stat(mean, "id_dist_source"),
        "id_dist_source_below_0_6": (sum(d < 0.6 for d in ids) / len(ids)) if ids else None,
        "id_dist_target_mean": stat(mean, "id_dist_target"),
        "tone_error_mean": stat(mean, "tone_error"),
        "tone_error_max": stat(max, "tone_error"),
        "tone_dlab_mean": _mean_vector([r.tone_dlab for r in found if r.tone_dlab is not None]),
        "seam_ratio_median": stat(median, "seam_ratio"),
        "blotch_fraction_mean": stat(mean, "blotch_fraction"),
        "sharpness_ratio_median": stat(median, "sharpness_ratio"),
        "pose_error_median": stat(median, "pose_error"),
        "pose_error_max": stat(max, "pose_error"),
        "expression_error_median": stat(median, "expression_error"),
        "expression_error_max": stat(max, "expression_error"),
        "mouth_open_error_median": stat(median, "mouth_open_error"),
        "mouth_width_error_median": stat(median, "mouth_width_error"),
        "eye_open_error_median": stat(median, "eye_open_error"),
        "psnr_outside_min": stat(min, "psnr_outside"),
        "psnr_outside_median": stat(median, "psnr_outside"),
        "runtime_ms_median": float(median(runtimes)) if runtimes else None,
    }


def run_checks(summary: Mapping[str, Any]) -> tuple[Check, ...]:
    """The :data:`CHECKS` list evaluated on a :func:`summarize` dict."""
    return tuple(Check(name=n, key=k, value=summary.get(k), low=lo, high=hi) for n, k, lo, hi in CHECKS)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _fmt_vector(values: Sequence[float] | None, digits: int = 2) -> str:
    return "n/a" if values is None else "(" + ", ".join(f"{v:+.{digits}f}" for v in values) + ")"


def _pair_origin(options: Mapping[str, Any]) -> str:
    listed = options.get("pairs_from")
    return f"listed in {listed}" if listed else f"seed {options.get('seed')}"


def _settings(options: Mapping[str, Any]) -> str:
    return settings_line(options.get("swap_options") or {})


def settings_line(swap: Mapping[str, Any]) -> str:
    """The swap settings a reader compares runs by, from ``SwapOptions``
    dumped to a mapping: swapper, working size, skin tone, shading."""
    if not swap:
        return "not recorded"
    return (
        f"swapper {swap.get('swapper')}  working size {swap.get('working_size')}"
        f"  skin tone {swap.get('skin_tone')}  shading {swap.get('shading')}"
    )


def format_summary(report: EvaluationReport) -> str:
    """Short human-readable summary with PASS/FAIL per check (plain text)."""
    s = report.summary
    lines = [
        f"faceweave evaluate: {s['pairs']} pairs from {report.data_dir} ({_pair_origin(report.options)})",
        f"settings:        {_settings(report.options)}",
        f"faces found:     {s['pairs_found']}/{s['pairs']} pairs"
        + (
            ""
            if s["all_faces_found"]
            else f"  (pairs without: {s['pairs_not_found']}; photos without: {s['photos_without_face']})"
        ),
        f"target swapped:  {s['pairs_swapped']}/{s['pairs']}",
        f"identity:        retrieval {_fmt(s['retrieval_rate'])}  id_dist_source median "
        f"{_fmt(s['id_dist_source_median'])}"
        f" mean {_fmt(s['id_dist_source_mean'])}  <0.6 {_fmt(s['id_dist_source_below_0_6'])}"
        f"  id_dist_target mean {_fmt(s['id_dist_target_mean'])}",
        f"tone:            mean {_fmt(s['tone_error_mean'], 2)} max {_fmt(s['tone_error_max'], 2)} dE"
        f"  mean (dL, da, db) {_fmt_vector(s['tone_dlab_mean'])}",
        f"blend:           seam median {_fmt(s['seam_ratio_median'])}"
        f"  blotch mean {_fmt(s['blotch_fraction_mean'], 4)}  sharpness median {_fmt(s['sharpness_ratio_median'])}",
        f"fidelity:        pose median {_fmt(s['pose_error_median'], 2)} max {_fmt(s['pose_error_max'], 2)} deg"
        f"  expression median {_fmt(s['expression_error_median'], 4)} max {_fmt(s['expression_error_max'], 4)}"
        f" (medians: mouth open {_fmt(s['mouth_open_error_median'], 4)}, width "
        f"{_fmt(s['mouth_width_error_median'], 4)},"
        f" eyes {_fmt(s['eye_open_error_median'], 4)})",
        f"untouched:       psnr_outside min {_fmt(s['psnr_outside_min'], 1)} median "
        f"{_fmt(s['psnr_outside_median'], 1)} dB",
        f"runtime:         median {_fmt(s['runtime_ms_median'], 0)} ms per swap",
        "checks:",
    ]
    for c in report.checks:
        lines.append(f"  {'PASS' if c.passed else 'FAIL'}  {c.name:<24} {_fmt(c.value, 4):>8}  {c.goal}")
    lines.append(
        f"{sum(c.passed for c in report.checks)}/{len(report.checks)} checks passed; report in {report.out_dir}"
    )
    return "\n".join(lines)


def pair_label(result: PairResult) -> tuple[str, ...]:
    """The two label lines of a pair on the contact sheet (ASCII)."""
    head = f"#{result.index} {result.source_identity} -> {result.target_identity}"
    if not result.found:
        return head, f"FAILED: {result.error or 'no face'}"[:90]
    ret = "n/a" if result.retrieval is None else ("ok" if result.retrieval else "X")
    return head, (
        f"id {_fmt(result.id_dist_source, 2)} ret {ret} tone {_fmt(result.tone_error, 1)}"
        f" seam {_fmt(result.seam_ratio, 2)} sharp {_fmt(result.sharpness_ratio, 2)}"
        f" pose {_fmt(result.pose_error, 1)} expr {_fmt(result.expression_error, 3)}"
    )
