# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The history part of a run report: the hook ``write_report`` (_report/record.py) calls after the fleet comparison.

It records the run in the results directory's index (index.py) and adds ``record["history"]``: every node's key
metric values (``values``, what ``cvs.cluster.compare`` reads), per node the trend of each key metric over the
earlier runs and whether it regressed against the node's own history (trend.py). See docs/results.md, "History".
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._history import index as _index
from ansible_collections.cvs.cluster.plugins.plugin_utils._history import trend as _trend
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet


def options_from_vars(task_vars: Mapping[str, Any]) -> dict[str, Any]:
    """History options from the play's variables: ``cvs_history`` (a mapping of options) overridden by
    ``cvs_history_runs``, ``cvs_history_min_runs``, ``cvs_history_tolerance``; ``cvs_burn_in_id`` labels the run."""
    base = task_vars.get("cvs_history")
    if base is not None and not isinstance(base, Mapping):
        raise _trend.HistoryOptionsError(
            f"cvs_history: {base!r} must be a mapping of history options ({', '.join(_trend.OPTION_KEYS)})"
        )
    opts = dict(base or {})
    for key in ("runs", "min_runs", "tolerance"):
        if task_vars.get(f"cvs_history_{key}") is not None:
            opts[key] = task_vars[f"cvs_history_{key}"]
    if task_vars.get("cvs_burn_in_id"):
        opts["burn_in_id"] = task_vars["cvs_burn_in_id"]
    return opts


def extend(
    record: dict[str, Any],
    found: Mapping[str, Mapping[str, Any]],
    results_dir: str,
    options: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """Record the run in the index and add its history section (in place; returns the record).

    Adds ``record["history"]`` (see docs/results.md), ``record["summary"]["regressed_nodes"]`` and, on a check
    record with a regressed metric, ``history: {status: REGRESSED, regressions: [...]}``. A regression is reported,
    it does not change a status. An index that cannot be written is said in ``history.notes``, never raised;
    invalid options raise HistoryOptionsError (a ValueError naming the variable)."""
    opts = _trend.parse_options(options)
    if not opts["enabled"]:
        return record
    units = _fleet.collect_units(record)
    values = _index.key_metrics(_fleet.collect_values(record, found), opts["metrics"], units)
    hist: dict[str, Any] = {
        "runs": opts["runs"],
        "min_runs": opts["min_runs"],
        "tolerance": opts["tolerance"],
        "status": "NOT_COMPARED",
        "earlier_runs": [],
        "values": values,
        "units": {c: u for c, u in units.items() if any(c in v for v in values.values())},
        "nodes": {},
        "regressions": [],
        "regressed_nodes": [],
        "notes": [],
    }
    if opts["burn_in_id"]:
        hist["burn_in_id"] = opts["burn_in_id"]
    record["history"] = hist
    try:
        runs = _index.update(results_dir, _index.entry(record, values, opts["burn_in_id"]))
    except OSError as exc:
        hist["notes"].append(f"the run index {results_dir}/{_index.INDEX} could not be updated: {exc}")
        runs = _index.read(results_dir)
    if opts["runs"] == 0:  # the index only
        return record
    earlier = _trend.earlier_runs(runs, record["run_id"], record.get("generated"))
    trends, notes = _trend.node_trends(values, earlier, opts, units)
    used = {p["run_id"] for rows in trends.values() for row in rows for p in row["points"]}
    regs = _trend.regressions(trends)
    hist.update(
        earlier_runs=[r["run_id"] for r in earlier if r["run_id"] in used],
        nodes=trends,
        regressions=regs,
        regressed_nodes=sorted({r["node"] for r in regs}),
        status="REGRESSED"
        if regs
        else ("OK" if any(r["status"] == "OK" for v in trends.values() for r in v) else hist["status"]),
    )
    hist["notes"].extend(notes if len(notes) <= 200 else [*notes[:200], f"... {len(notes) - 200} more"])
    if not earlier:
        hist["notes"].insert(0, f"no earlier run in {results_dir}: this run starts the history")
    record.setdefault("summary", {})["regressed_nodes"] = hist["regressed_nodes"]
    for r in regs:
        rec = (record["nodes"].get(r["node"]) or {}).get("checks", {}).get(r["check"])
        if rec is not None:
            rec.setdefault("history", {"status": "REGRESSED", "regressions": []})["regressions"].append(
                {k: r[k] for k in ("metric", "value", "baseline", "deviation", "reason")}
            )
    return record


def summary(record: Mapping[str, Any], limit: int = 50) -> dict[str, Any]:
    """The history part of the published summary (the ``cvs_report`` artifact): status, regressed nodes, the
    regressions (node, check, metric, value, baseline, deviation, reason) and per node its key metrics' trends
    (earlier values then this run's)."""
    hist = record.get("history")
    if not hist:
        return {}
    trends = {
        node: {f"{r['check']} {r['metric']}": [p["value"] for p in r["points"]] + [r["value"]] for r in rows}
        for node, rows in list((hist.get("nodes") or {}).items())[:limit]
    }
    return {
        "history_status": hist["status"],
        "regressed_nodes": hist["regressed_nodes"],
        "regressions": [
            {k: r[k] for k in ("node", "check", "metric", "value", "baseline", "deviation", "reason")}
            for r in hist["regressions"][:limit]
        ],
        "trends": trends,
    }
