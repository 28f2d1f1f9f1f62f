# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-node trends of the key metrics over earlier runs, and regressions against a node's own history
(controller only, pure logic).

A node's *history* of a metric: its values in the last ``runs`` earlier runs of the results directory (from the
index, see index.py) where that check passed on that node; its *baseline* is their median. A node regressed when
this run's value is more than ``tolerance`` worse than its baseline (below for throughput-type metrics, above for
time-type metrics: the directions of the fleet comparison, _metrics/fleet.py). With fewer than ``min_runs`` earlier
values the metric is not judged (said in ``notes``). The fleet comparison asks "is this node slower than the
others?"; this asks "is this node slower than it used to be?", which also catches a slow-down of every node, or of
the only node.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet
from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt

DEFAULT_RUNS = 5
DEFAULT_MIN_RUNS = 2
OPTION_KEYS = ("enabled", "runs", "min_runs", "tolerance", "metrics", "burn_in_id")


class HistoryOptionsError(ValueError):
    """The history options are invalid (the message names the variable, the value and the fix)."""


def _count(name: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise HistoryOptionsError(f"{name}: {value!r} must be a whole number >= {least}")
    try:
        number = int(value)
    except ValueError:
        raise HistoryOptionsError(f"{name}: {value!r} must be a whole number >= {least}") from None
    if number < least:
        raise HistoryOptionsError(f"{name}: {value!r} must be a whole number >= {least}")
    return number


def parse_options(options: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """Validated options: {enabled, runs, min_runs, tolerance (fraction), metrics (overrides), burn_in_id}.

    ``runs`` (variable ``cvs_history_runs``, default 5): how many earlier runs make a node's history (0: no
    history); ``min_runs`` (``cvs_history_min_runs``, 2): earlier values needed to judge; ``tolerance``
    (``cvs_history_tolerance``, the fleet default 5%); ``metrics``: per metric higher | lower | ignore |
    {direction, tolerance}, as the fleet comparison's option."""
    options = {k: v for k, v in dict(options or {}).items() if v is not None}
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        raise HistoryOptionsError(f"unknown history option(s) {', '.join(unknown)}; known: {', '.join(OPTION_KEYS)}")
    try:
        fleet = _fleet.parse_options(
            {"tolerance": options.get("tolerance", _fleet.DEFAULT_TOLERANCE), "metrics": options.get("metrics") or {}}
        )
    except _fleet.FleetOptionsError as exc:
        raise HistoryOptionsError(str(exc).replace("fleet option", "cvs_history_tolerance / metrics:", 1)) from None
    runs = _count("cvs_history_runs", options.get("runs", DEFAULT_RUNS), 0)
    enabled = options.get("enabled", True)
    if not isinstance(enabled, bool):
        raise HistoryOptionsError(f"history option enabled: {enabled!r} must be true or false")
    return {
        "enabled": enabled,
        "runs": runs,
        "min_runs": _count("cvs_history_min_runs", options.get("min_runs", DEFAULT_MIN_RUNS), 1),
        "tolerance": fleet["tolerance"],
        "metrics": fleet["metrics"],
        "burn_in_id": str(options["burn_in_id"]) if options.get("burn_in_id") else None,
    }


def earlier_runs(runs: Sequence[Mapping[str, Any]], run_id: str, generated: Any) -> list[Mapping[str, Any]]:
    """The index entries before run ``run_id`` (by the time their report was written), oldest first."""
    here = (str(generated or ""), run_id)
    return [r for r in runs if r.get("run_id") != run_id and (str(r.get("generated") or ""), r["run_id"]) < here]


def _status(cur: float, base: float, direction: str, tolerance: float) -> tuple[Optional[float], str]:
    if base == 0:
        return None, "NOT_COMPARED"
    dev = (cur - base) / abs(base)
    worse = dev < -tolerance if direction == _fleet.HIGHER else dev > tolerance
    return dev, "REGRESSED" if worse else "OK"


def node_trends(
    values: Mapping[str, Mapping[str, Mapping[str, float]]],
    earlier: Sequence[Mapping[str, Any]],
    options: Mapping[str, Any],
    units: Optional[Mapping[str, Mapping[str, str]]] = None,
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """({node: [trend rows]}, notes) of this run's key metric ``values`` ({node: {check: {metric: value}}}) against
    the ``earlier`` index entries (oldest first); ``units``: {check: {metric: unit}} the checks declare.

    A trend row: {check, metric, unit, direction, tolerance, points: [{run_id, value}] (the earlier values used, oldest
    first, then this run's), value, baseline, deviation, status OK | REGRESSED | NOT_COMPARED}."""
    out: dict[str, list[dict[str, Any]]] = {}
    notes: list[str] = []
    for node in values:
        rows = []
        for check in sorted(values[node]):
            for metric in sorted(values[node][check]):
                unit = ((units or {}).get(check) or {}).get(metric)
                direction = _fleet.direction_of(metric, options["metrics"], unit)
                if direction is None:
                    continue
                cur = values[node][check][metric]
                points = []
                for run in earlier:
                    past = (run.get("nodes") or {}).get(node) or {}
                    if (past.get("checks") or {}).get(check) not in ("PASS", "OUTLIER"):
                        continue  # a failed or missing check is no reference
                    v = ((past.get("metrics") or {}).get(check) or {}).get(metric)
                    if fmt.is_number(v) and math.isfinite(v):
                        points.append({"run_id": run["run_id"], "value": float(v)})
                points = points[-options["runs"] :]
                tol = options["metrics"].get(metric, {}).get("tolerance", options["tolerance"])
                row: dict[str, Any] = {
                    "check": check,
                    "metric": metric,
                    "unit": unit,
                    "direction": direction,
                    "tolerance": tol,
                    "points": points,
                    "value": cur,
                    "baseline": None,
                    "deviation": None,
                    "status": "NOT_COMPARED",
                }
                if len(points) < options["min_runs"]:
                    notes.append(
                        f"{node} {check} {metric}: {len(points)} earlier passing run(s) with a value, "
                        f"{options['min_runs']} needed to judge"
                    )
                else:
                    row["baseline"] = _fleet.median([p["value"] for p in points])
                    row["deviation"], row["status"] = _status(cur, row["baseline"], direction, tol)
                    if row["status"] == "NOT_COMPARED":
                        notes.append(f"{node} {check} {metric}: the baseline is 0, no deviation")
                rows.append(row)
        if rows:
            out[node] = rows
    return out, notes


def reason(node: str, row: Mapping[str, Any]) -> str:
    """``node3 rvs pebb_single bandwidth_gbps 51.9 GB/s is 10.0% below its own median 57.7 GB/s of 2 earlier
    run(s) (tolerance 5%)``."""
    side = "below" if row["direction"] == _fleet.HIGHER else "above"
    return (
        f"{node} {row['check']} {row['metric']} {fmt.value(row['value'], row['metric'], row.get('unit'))} is "
        f"{abs(row['deviation']) * 100:.1f}% {side} its own median "
        f"{fmt.value(row['baseline'], row['metric'], row.get('unit'))} of "
        f"{len(row['points'])} earlier run(s) (tolerance {row['tolerance'] * 100:g}%)"
    )


def regressions(trends: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The REGRESSED rows, worst first: [{node, check, metric, value, baseline, deviation, direction, reason}]."""
    out = []
    for node, rows in trends.items():
        for row in rows:
            if row["status"] == "REGRESSED":
                out.append(
                    {
                        "node": node,
                        **{k: row[k] for k in ("check", "metric", "value", "baseline", "deviation", "direction")},
                        "runs": [p["run_id"] for p in row["points"]],
                        "reason": reason(node, row),
                    }
                )
    out.sort(key=lambda r: -abs(r["deviation"]))
    return out
