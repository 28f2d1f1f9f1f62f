"""Fleet comparison of a run and the data of its plots (controller only, pure logic).

A node can pass every threshold and still be the slow one. This module
compares each node's metrics with the fleet: per metric the median over the
nodes that have a finite value, and each node's relative deviation from it.
A node beyond the tolerance on the bad side is an OUTLIER:

* throughput-type metrics (higher is better: TFLOP/s, tokens/s, GFLOPS,
  bandwidth, any metric whose declared unit is a rate, ``.../s``): more than
  ``tolerance`` below the median;
* time-type metrics (lower is better: step time, seconds, latency): more
  than ``tolerance`` above the median.

The values are the check records' metric rows (one row per metric, in the
unit the check declares: a target a tool printed is a row's threshold, not a
row), so every metric is compared once, under one name, and carries its unit.
Each row also says its ``spread`` (max - min over the median): the report
shows the metrics that differ between nodes and folds the rest.

Why a relative tolerance around the median and not a z-score: fleets are often
3-16 nodes, where a standard deviation is dominated by the outlier itself
(one slow node out of three can never reach z > 1.16), while the median of
three is a healthy node. Operators also think in "5 % slower than the rest".
The median makes one bad node unable to move the reference.

Facts that should be equal on every node (ROCm and RVS versions, GPU model and
count, kernel) are checked too; a node with a GPU model but 0 GPUs is flagged.

What cannot be compared (a single node, a metric only one node has, NaN or
infinite values, a median of 0) is said in ``not_compared``, never raised.
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import is_series

DEFAULT_TOLERANCE = 0.05
FACTS_EQUAL = ("rocm_version", "rvs_version", "gpu_model", "gpus", "kernel")
HIGHER = "higher"
LOWER = "lower"
IGNORE = "ignore"
_HIGHER = re.compile(r"tflop|gflop|tokens|throughput|bandwidth|gbps|per_sec", re.I)
_LOWER = re.compile(r"(^|_)(step_time|time|seconds|latency)(_|$)", re.I)
MAX_POINTS = 60


class FleetOptionsError(ValueError):
    """The fleet options are invalid (message names the key)."""


def direction_of(
    metric: str, overrides: Optional[Mapping[str, Any]] = None, unit: Optional[str] = None
) -> Optional[str]:
    """``higher``/``lower`` for a metric worth comparing, None otherwise (override by exact name first, then the
    name, then a declared ``unit`` that is a rate: ``GB/s``, ``TFLOP/s``, ... are higher-is-better)."""
    if overrides and metric in overrides:
        d = overrides[metric]
        d = d.get("direction") if isinstance(d, Mapping) else d
        return None if d == IGNORE else d
    if _HIGHER.search(metric):
        return HIGHER
    if _LOWER.search(metric):
        return LOWER
    if isinstance(unit, str) and unit.endswith("/s"):
        return HIGHER
    return None


def _fraction(key: str, value: Any) -> float:
    """A tolerance as a fraction: 0.05, 5 (taken as %), or '5%'."""
    raw = value
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            raise FleetOptionsError(f"fleet option {key}: {raw!r} is not a number or a percentage") from None
    if not fmt.is_number(value) or not math.isfinite(value) or value < 0:
        raise FleetOptionsError(f"fleet option {key}: {raw!r} must be a non-negative number or percentage")
    return float(value) / 100 if value >= 1 else float(value)


def parse_options(options: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """Validated options: {tolerance: 0.05, fail_on_outlier: False, metrics: {name: {direction, tolerance}}}."""
    options = dict(options or {})
    unknown = sorted(set(options) - {"tolerance", "fail_on_outlier", "metrics", "enabled"})
    if unknown:
        raise FleetOptionsError(
            f"unknown fleet option(s) {', '.join(unknown)}; known: enabled, tolerance, fail_on_outlier, metrics"
        )
    tol = _fraction("tolerance", options.get("tolerance", DEFAULT_TOLERANCE))
    fail = options.get("fail_on_outlier", False)
    enabled = options.get("enabled", True)
    for key, flag in (("fail_on_outlier", fail), ("enabled", enabled)):
        if not isinstance(flag, bool):
            raise FleetOptionsError(f"fleet option {key}: {flag!r} must be true or false")
    metrics: dict[str, dict[str, Any]] = {}
    raw_metrics = options.get("metrics") or {}
    if not isinstance(raw_metrics, Mapping):
        raise FleetOptionsError(
            "fleet option metrics must map metric names to higher|lower|ignore or {direction, tolerance}"
        )
    for name, spec in raw_metrics.items():
        spec = {"direction": spec} if isinstance(spec, str) else spec
        if not isinstance(spec, Mapping) or spec.get("direction", HIGHER) not in (HIGHER, LOWER, IGNORE):
            raise FleetOptionsError(
                f"fleet option metrics.{name}: {spec!r}; expected higher, lower, ignore or {{direction, tolerance}}"
            )
        metrics[str(name)] = {
            "direction": spec.get("direction", HIGHER),
            "tolerance": _fraction(f"metrics.{name}.tolerance", spec["tolerance"]) if "tolerance" in spec else tol,
        }
    return {"enabled": enabled, "tolerance": tol, "fail_on_outlier": fail, "metrics": metrics}


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _json_number(v: Any) -> Any:
    """NaN/inf as text (results.json stays valid JSON)."""
    return v if not fmt.is_number(v) or math.isfinite(v) else fmt.number(v)


def spread_of(values: Sequence[float], med: Optional[float]) -> Optional[float]:
    """(max - min) / |median| of finite values, None when it is undefined (fewer than 2 values, median 0)."""
    if len(values) < 2 or not med:
        return None
    return (max(values) - min(values)) / abs(med)


def compare_metric(
    check: str,
    metric: str,
    values: Mapping[str, Any],
    direction: str,
    tolerance: float,
    unit: Optional[str] = None,
) -> tuple[dict[str, Any], list[str]]:
    """One metric over the fleet: (row, not-compared notes). ``values``: {node: value}; ``unit``: the unit its
    check declares (None: unknown)."""
    notes: list[str] = []
    finite = {n: float(v) for n, v in values.items() if fmt.is_number(v) and math.isfinite(v)}
    for n, v in values.items():
        if n not in finite:
            notes.append(f"{check} {metric} on {n}: value {fmt.value(v)} is not a finite number")
    row: dict[str, Any] = {
        "check": check,
        "metric": metric,
        "unit": unit,
        "direction": direction,
        "tolerance": tolerance,
        "median": None,
        "spread": None,
        "compared": len(finite),
        "nodes": {},
    }
    for n, v in values.items():
        row["nodes"][n] = {"value": _json_number(v), "deviation": None, "status": "NOT_COMPARED"}
    if len(finite) < 2:
        notes.append(f"{check} {metric}: only {len(finite)} node(s) with a finite value, no fleet to compare")
        return row, notes
    med = median(list(finite.values()))
    row["median"] = med
    row["spread"] = spread_of(list(finite.values()), med)
    if med == 0:
        notes.append(f"{check} {metric}: the fleet median is 0, deviations are undefined")
        return row, notes
    for n, v in finite.items():
        dev = (v - med) / abs(med)
        bad = dev < -tolerance if direction == HIGHER else dev > tolerance
        row["nodes"][n].update(deviation=dev, status="OUTLIER" if bad else "OK")
    return row, notes


def compare_facts(facts: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Facts that differ between nodes, and GPU models with 0 GPUs: [{fact, values: {text: [nodes]}, reason}]."""
    out: list[dict[str, Any]] = []
    for key in FACTS_EQUAL:
        groups: dict[str, list[str]] = {}
        for node, f in facts.items():
            if f.get(key) is not None:
                groups.setdefault(str(f[key]), []).append(node)
        missing = [n for n, f in facts.items() if f.get(key) is None]
        if len(groups) > 1:
            parts = "; ".join(f"{v} on {', '.join(ns)}" for v, ns in sorted(groups.items(), key=lambda g: -len(g[1])))
            out.append({"fact": key, "values": groups, "missing": missing, "reason": f"{key} differs: {parts}"})
        elif groups and missing:
            only = next(iter(groups))
            out.append(
                {
                    "fact": key,
                    "values": groups,
                    "missing": missing,
                    "reason": f"{key} {only} on {len(groups[only])} node(s), unknown on {', '.join(missing)}",
                }
            )
    zero = [n for n, f in facts.items() if f.get("gpu_model") and f.get("gpus") in (0, "0")]
    if zero:
        out.append(
            {
                "fact": "gpus",
                "values": {"0": zero},
                "missing": [],
                "reason": f"0 GPUs found although a GPU model is set on {', '.join(zero)}",
            }
        )
    return out


def _rows(record: Mapping[str, Any]) -> Any:
    """(node, check, metric row) of every numeric metric row of the record (a test's duration row left out)."""
    for node, row in (record.get("nodes") or {}).items():
        for check, rec in (row.get("checks") or {}).items():
            if rec.get("status") in ("MISSING",):
                continue
            for m in rec.get("metrics") or []:
                if fmt.is_number(m.get("value")) and m.get("kind") != "test":
                    yield node, check, m


def collect_values(
    record: Mapping[str, Any], found: Optional[Mapping[str, Mapping[str, Any]]] = None
) -> dict[str, dict[str, Any]]:
    """{check: {metric: {node: value}}} of the numeric metrics of every node and check.

    From the normalised metric rows of the record only: one row per metric, under its one name (a check that
    knows other names for it lists them as the row's ``aliases``; a target is a threshold, not a row). ``found``
    (the raw check files) is not read; it is accepted for callers that pass it.
    """
    out: dict[str, dict[str, Any]] = {}
    for check in record.get("checks") or []:
        out.setdefault(str(check), {})
    for node, check, m in _rows(record):
        out.setdefault(check, {}).setdefault(str(m.get("metric")), {}).setdefault(node, m["value"])
    return {c: per for c, per in out.items() if per}


def collect_units(record: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """{check: {metric: unit}}: the unit the check declares for each numeric metric (the first row that has one)."""
    out: dict[str, dict[str, str]] = {}
    for _node, check, m in _rows(record):
        if isinstance(m.get("unit"), str):
            out.setdefault(check, {}).setdefault(str(m.get("metric")), m["unit"])
    return out


def compare(
    values: Mapping[str, Mapping[str, Mapping[str, Any]]],
    nodes: Sequence[str],
    facts: Mapping[str, Mapping[str, Any]],
    options: Optional[Mapping[str, Any]] = None,
    units: Optional[Mapping[str, Mapping[str, str]]] = None,
) -> dict[str, Any]:
    """The fleet section of results.json (see docs/results.md); ``units``: {check: {metric: unit}}."""
    units = units or {}
    opts = parse_options(options)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    if len(nodes) < 2:
        notes.append(f"single node ({', '.join(nodes) or 'none'}): no fleet to compare metrics or facts with")
    for check in sorted(values):
        for metric in sorted(values[check]):
            unit = (units.get(check) or {}).get(metric)
            direction = direction_of(metric, opts["metrics"], unit)
            if direction is None or len(nodes) < 2:
                continue
            tol = opts["metrics"].get(metric, {}).get("tolerance", opts["tolerance"])
            row, more = compare_metric(check, metric, values[check][metric], direction, tol, unit)
            missing = [n for n in nodes if n not in values[check][metric]]
            if missing and row["compared"] >= 1:
                more.append(f"{check} {metric}: no value on {', '.join(missing)}")
            rows.append(row)
            notes.extend(more)
    outliers: list[dict[str, Any]] = []
    for row in rows:
        for node, cell in row["nodes"].items():
            if cell["status"] != "OUTLIER":
                continue
            side = "below" if row["direction"] == HIGHER else "above"
            reason = (
                f"{row['metric']} {fmt.value(cell['value'], row['metric'], row['unit'])} is "
                f"{abs(cell['deviation']) * 100:.1f}% {side} the fleet median "
                f"{fmt.value(row['median'], row['metric'], row['unit'])} (tolerance {row['tolerance'] * 100:g}%)"
            )
            outliers.append(
                {
                    "node": node,
                    "check": row["check"],
                    "metric": row["metric"],
                    "value": cell["value"],
                    "median": row["median"],
                    "deviation": cell["deviation"],
                    "direction": row["direction"],
                    "reason": reason,
                }
            )
    outliers.sort(key=lambda o: (o["direction"] != HIGHER, -abs(o["deviation"])))
    fact_issues = compare_facts({n: facts.get(n) or {} for n in nodes}) if len(nodes) >= 2 else []
    if len(nodes) >= 2 and not rows:
        notes.append("no comparable metric (throughput or time) in any check")
    outlier_nodes = sorted({o["node"] for o in outliers})
    return {
        "tolerance": opts["tolerance"],
        "fail_on_outlier": opts["fail_on_outlier"],
        "status": "OUTLIER" if outliers else ("OK" if rows else "NOT_COMPARED"),
        "metrics": rows,
        "outliers": outliers,
        "outlier_nodes": outlier_nodes,
        "facts": fact_issues,
        "not_compared": notes,
    }


def annotate(
    record: dict[str, Any], found: Mapping[str, Mapping[str, Any]], options: Optional[Mapping[str, Any]] = None
) -> dict[str, Any]:
    """Add the fleet comparison to a run record (in place; returns it).

    Adds ``record["fleet"]``, ``record["summary"]["outlier_nodes"]`` / ``["fact_issues"]``, and per
    outlying check record a ``fleet`` entry. With ``fail_on_outlier`` an outlying check that passed gets
    the status ``OUTLIER``, counted in ``summary.counts`` and failing the run; existing fields keep their
    meaning otherwise.
    """
    opts = parse_options(options)
    if not opts["enabled"]:
        return record
    nodes = list(record.get("nodes") or {})
    facts = {n: (record["nodes"][n].get("facts") or {}) for n in nodes}
    fleet = compare(collect_values(record), nodes, facts, options, collect_units(record))
    record["fleet"] = fleet
    summary = record.setdefault("summary", {})
    summary["outlier_nodes"] = fleet["outlier_nodes"]
    summary["fact_issues"] = [f["reason"] for f in fleet["facts"]]
    for o in fleet["outliers"]:
        rec = record["nodes"][o["node"]]["checks"].get(o["check"])
        if rec is None:
            continue
        entry = rec.setdefault("fleet", {"status": "OUTLIER", "outliers": []})
        entry["outliers"].append({k: o[k] for k in ("metric", "value", "median", "deviation", "reason")})
    if opts["fail_on_outlier"] and fleet["outliers"]:
        counts = summary.setdefault("counts", {})
        for node in fleet["outlier_nodes"]:
            for check, rec in record["nodes"][node]["checks"].items():
                if "fleet" not in rec or rec.get("status") != "PASS":
                    continue
                rec["status"] = "OUTLIER"
                rec["reason"] = "; ".join(x["reason"] for x in rec["fleet"]["outliers"])
                counts["PASS"] = counts.get("PASS", 0) - 1
                counts["OUTLIER"] = counts.get("OUTLIER", 0) + 1
                summary.setdefault("failures", []).append(
                    {"node": node, "check": check, "status": "OUTLIER", "reason": rec["reason"], "line": None}
                )
        summary["failing_nodes"] = sorted(set(summary.get("failing_nodes") or []) | set(fleet["outlier_nodes"]))
        if summary.get("status") in ("PASS", "INCOMPLETE"):
            summary["status"] = "FAIL"
    return record


# --------------------------------------------------------------------------- plot data


def thin(points: List[List[Any]], limit: int = MAX_POINTS) -> List[List[Any]]:
    """At most ``limit`` points, evenly spaced, first and last kept."""
    if len(points) <= limit:
        return points
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def _round(v: Any) -> Any:
    return float(f"{v:.5g}") if fmt.is_number(v) and math.isfinite(v) else None


def series_from_steps(steps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """{step: [...], loss: [...], seconds: [...]} (parallel lists, at most MAX_POINTS, 5 significant digits,
    non-finite values as None) from step rows ``{step, loss, seconds}`` (a training role's parsed log lines).
    Compact because it goes into the check record (``series``) and results.json."""
    rows = [
        [s.get("step"), _round(s.get("loss")), _round(s.get("seconds"))]
        for s in steps
        if isinstance(s.get("step"), int)
    ]
    rows = thin(rows)
    return {"step": [r[0] for r in rows], "loss": [r[1] for r in rows], "seconds": [r[2] for r in rows]}


def pairs(series: Mapping[str, Any], key: str) -> List[List[Any]]:
    """[[step, value]] of one quantity of a series (for the plots)."""
    return [[x, y] for x, y in zip(series.get("step") or [], series.get(key) or [])]


def rvs_gpus(found: Mapping[str, Mapping[str, Any]], check: str = "rvs") -> dict[str, dict[str, Any]]:
    """{node: {test: {gpus: [...], failed: [...]}}} from raw RVS check files (for the per-GPU grid)."""
    out: dict[str, dict[str, Any]] = {}
    for node, per in found.items():
        raw = per.get(check)
        if not isinstance(raw, Mapping):
            continue
        for t in raw.get("tests") or []:
            if not isinstance(t, Mapping):
                continue
            failed = sorted(
                {
                    f["gpu"]
                    for f in t.get("failures") or []
                    if isinstance(f, Mapping) and isinstance(f.get("gpu"), int) and not isinstance(f.get("gpu"), bool)
                }
            )
            gpus = [g for g in t.get("gpus") or [] if isinstance(g, int) and not isinstance(g, bool)]
            gpus = sorted(set(gpus) | set(failed))
            if gpus:
                out.setdefault(node, {})[str(t.get("name", "?"))] = {
                    "gpus": gpus,
                    "failed": failed,
                    "status": str(t.get("status") or ""),
                }
    return out


def load_series(record: Mapping[str, Any], found: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """{node: {check: series}} of the step series the check records carry (``series``, see check_record.py), for
    every check of the run record that has one with at least one step. Reads the records only."""
    out: Dict[str, Any] = {}
    for node, row in (record.get("nodes") or {}).items():
        for check in row.get("checks") or {}:
            raw = (found.get(node) or {}).get(check)
            series = raw.get("series") if isinstance(raw, Mapping) else None
            if is_series(series) and series.get("step"):
                out.setdefault(node, {})[check] = {k: list(v) for k, v in series.items()}
    return out


def extend(
    record: dict[str, Any], found: Mapping[str, Mapping[str, Any]], options: Optional[Mapping[str, Any]] = None
) -> dict[str, Any]:
    """The hook of write_report: fleet comparison (:func:`annotate`) and plot data (``record["plots"]``)."""
    annotate(record, found, options)
    record["plots"] = {"series": load_series(record, found), "rvs_gpus": rvs_gpus(found)}
    return record
