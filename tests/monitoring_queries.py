"""The monitoring files as data: every PromQL expression of the Grafana
dashboards (``deploy/grafana/dashboards``) and of the Prometheus rules
(``deploy/prometheus/rules``), the metric names ``docs/METRICS.md`` documents,
and what a query needs before a real Prometheus can run it.

Used by ``tests/test_monitoring_rules.py`` (static checks, promtool) and by
the live-scrape test, which runs every query against a Prometheus that has
scraped an API and two workers::

    for dashboard, panel, expr in dashboard_queries():
        result = query(substitute(expr))
        if panel in CORE_PANELS:
            assert result, (dashboard, panel)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
GRAFANA = DEPLOY / "grafana"
DASHBOARDS = GRAFANA / "dashboards"
RULES = PROMETHEUS / "rules"
RULE_TESTS = PROMETHEUS / "tests"
METRICS_DOC = REPO / "docs" / "METRICS.md"
#: the Prometheus Operator's copy of the rules (spec.groups = the rule files' groups)
PROMETHEUS_RULE = DEPLOY / "k8s" / "prometheus-operator" / "prometheusrule.yaml"

#: the fleet overview dashboard (the other one, faceweave.json, is the API node's)
FLEET_DASHBOARD = DASHBOARDS / "faceweave-fleet.json"

#: panels of the fleet dashboard that must return series once an API and two
#: workers have run jobs (on a CPU machine the host device monitor gives the
#: device series)
CORE_PANELS: frozenset[str] = frozenset(
    {
        "Jobs finished per second by state",
        "Queue depth",
        "Job run time p95 by kind",
        "Stage time p95 by stage",
        "Device utilisation",
        "Device memory used and total",
    }
)

#: names the dashboards may use that have no series until something happens (prefixes): the live
#: sessions' labelled counters, whose series start with a node's first live frame or refusal
FUTURE_METRICS: tuple[str, ...] = ("faceweave_live_frames", "faceweave_live_sessions_refused")
#: Prometheus' own series
BUILTIN_METRICS: frozenset[str] = frozenset({"up"})

#: what :func:`substitute` puts for Grafana's variables
RATE_INTERVAL = "1m"
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "atan2",
        "inf",
        "nan",
    }
)


# ---------------------------------------------------------------- dashboards
def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def load_dashboard(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows included, and the panels inside collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def dashboard_queries() -> list[tuple[str, str, str]]:
    """``(dashboard title, panel title, expr)`` for every query of every
    dashboard, with Grafana's variables left in (see :func:`substitute`)."""
    found = []
    for path in dashboard_files():
        dashboard = load_dashboard(path)
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                expr = target.get("expr")
                if expr:
                    found.append((dashboard["title"], panel["title"], expr))
    return found


def substitute(expr: str) -> str:
    """``expr`` as Prometheus can run it: Grafana's ``$__rate_interval`` and
    ``$__interval`` become ``1m``, the ``worker`` variable ``.*`` (panels
    match it with ``=~``); ``${datasource}`` is not part of any expression."""
    expr = re.sub(r"\$__rate_interval\b|\$\{__rate_interval\}|\$__interval\b|\$\{__interval\}", RATE_INTERVAL, expr)
    return re.sub(r"\$\{worker\}|\$worker\b", ".*", expr)


# ---------------------------------------------------------------- rules
def rule_files() -> list[Path]:
    return sorted(RULES.glob("*.yml"))


def rule_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = []
    for path in rule_files():
        groups.extend(yaml.safe_load(path.read_text(encoding="utf-8"))["groups"])
    return groups


def rules() -> list[dict[str, Any]]:
    return [rule for group in rule_groups() for rule in group["rules"]]


def rule_expressions() -> list[tuple[str, str]]:
    """``(alert or record name, expr)`` for every rule."""
    return [(rule.get("alert") or rule["record"], rule["expr"]) for rule in rules()]


def recording_rules() -> set[str]:
    return {rule["record"] for rule in rules() if "record" in rule}


def alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


# ---------------------------------------------------------------- metric names
def documented_metrics(path: Path = METRICS_DOC) -> set[str]:
    """The names in the first column of docs/METRICS.md's metric tables (those
    whose header starts ``| name |``); a histogram also gives its ``_bucket``,
    ``_sum`` and ``_count`` series."""
    names: set[str] = set()
    in_table = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells and cells[0] == "name":
            in_table = True
            continue
        if not in_table or set(cells[0]) <= set("-: "):
            continue
        kind = cells[1] if len(cells) > 1 else ""
        for name in re.findall(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)`", cells[0]):
            names.add(name)
            if kind == "histogram":
                names.update(name + suffix for suffix in _HISTOGRAM_SUFFIXES)
    return names


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects: identifiers outside
    strings, label matchers, ranges and grouping clauses, that are not a
    function (followed by ``(``) or a keyword.  Recording rules' names
    (``level:metric:operation``) are included."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    found = set()
    for match in re.finditer(r"(?<![\w.$])[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        name = match.group()
        if name.lower() in _KEYWORDS or text[match.end() :].lstrip().startswith("("):
            continue
        found.add(name)
    return found


def unknown_metrics(expr: str) -> set[str]:
    """The names in ``expr`` that are neither documented, nor recording rules,
    nor Prometheus' own, nor announced (:data:`FUTURE_METRICS`)."""
    allowed = documented_metrics() | recording_rules() | BUILTIN_METRICS
    return {n for n in metric_names(expr) if n not in allowed and not n.startswith(FUTURE_METRICS)}


# ---------------------------------------------------------------- the Prometheus Operator's copy
def prometheus_rule_manifest() -> dict[str, Any]:
    """The PrometheusRule that ``deploy/k8s/prometheus-operator`` applies: the rule files' groups."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "faceweave"},
        "spec": {"groups": rule_groups()},
    }


def write_prometheus_rule(path: Path = PROMETHEUS_RULE) -> None:
    """Write :func:`prometheus_rule_manifest` to ``path`` (after a change to the rules)."""

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    Dumper.add_representer(str, text)
    head = (
        "# GENERATED from deploy/prometheus/rules/faceweave.rules.yml (spec.groups is that file's groups);\n"
        "# tests/test_monitoring_rules.py fails when they differ and prints how to write this file again.\n"
    )
    body = yaml.dump(prometheus_rule_manifest(), Dumper=Dumper, sort_keys=False, allow_unicode=True, width=200)
    path.write_text(head + body, encoding="utf-8")
