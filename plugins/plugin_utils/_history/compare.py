# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two runs side by side, node by node (controller only, pure logic): what ``cvs.cluster.compare`` returns.

For every node of either run: each check whose status changed, and each key metric (throughput or time) with both
values, the relative change and whether that is worse, better or within the tolerance.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._history import index as _index
from ansible_collections.cvs.cluster.plugins.plugin_utils._history import trend as _trend
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet
from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt


def _run(value: Any, which: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not isinstance(value.get("nodes"), Mapping):
        raise _index.HistoryError(
            f"compare: the {which} run is not a run record (results.json with 'run_id' and 'nodes'); got "
            f"{type(value).__name__}: pass lookup('ansible.builtin.file', <run dir>/results.json) | from_json"
        )
    return value


def compare(a: Any, b: Any, options: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """Run ``a`` (the earlier) against run ``b`` (results.json records).

    ``options``: ``tolerance`` (5%) and ``metrics`` overrides, as the history options. Returns
    {run_a, run_b, tolerance, status SAME | CHANGED, rows: [{node, check, metric, a, b, change, direction, status
    WORSE | BETTER | SAME | ONLY_A | ONLY_B}], statuses: [{node, check, a, b}], nodes_only_a, nodes_only_b,
    worse_nodes, lines: one text line per difference}."""
    ra, rb = _run(a, "first"), _run(b, "second")
    opts = _trend.parse_options({k: v for k, v in dict(options or {}).items() if k in ("tolerance", "metrics")})
    va, vb = _index.recorded_values(ra), _index.recorded_values(rb)
    units = {**_index.recorded_units(ra), **_index.recorded_units(rb)}
    nodes_a, nodes_b = list(ra["nodes"]), list(rb["nodes"])
    nodes = nodes_a + [n for n in nodes_b if n not in nodes_a]
    rows: list[dict[str, Any]] = []
    statuses: list[dict[str, Any]] = []
    for node in nodes:
        ca = ((ra["nodes"].get(node) or {}).get("checks")) or {}
        cb = ((rb["nodes"].get(node) or {}).get("checks")) or {}
        if node in ra["nodes"] and node in rb["nodes"]:
            for check in list(ca) + [c for c in cb if c not in ca]:
                sa, sb = (ca.get(check) or {}).get("status"), (cb.get(check) or {}).get("status")
                if sa != sb:
                    statuses.append({"node": node, "check": check, "a": sa, "b": sb})
        ma, mb = va.get(node) or {}, vb.get(node) or {}
        for check in sorted(set(ma) | set(mb)):
            xa, xb = ma.get(check) or {}, mb.get(check) or {}
            for metric in sorted(set(xa) | set(xb)):
                unit = _index.unit_of(units, check, metric)
                direction = _fleet.direction_of(metric, opts["metrics"], unit)
                if direction is None:
                    continue
                x, y = xa.get(metric), xb.get(metric)
                row = {
                    "node": node,
                    "check": check,
                    "metric": metric,
                    "unit": unit,
                    "a": x,
                    "b": y,
                    "change": None,
                    "direction": direction,
                    "status": "ONLY_A" if y is None else "ONLY_B" if x is None else "SAME",
                }
                if x is not None and y is not None and math.isfinite(x) and math.isfinite(y) and x != 0:
                    tol = opts["metrics"].get(metric, {}).get("tolerance", opts["tolerance"])
                    change = (y - x) / abs(x)
                    row["change"] = change
                    if abs(change) > tol:
                        worse = change < 0 if direction == _fleet.HIGHER else change > 0
                        row["status"] = "WORSE" if worse else "BETTER"
                rows.append(row)
    rank = {"WORSE": 0, "ONLY_A": 1, "ONLY_B": 2, "BETTER": 3, "SAME": 4}
    rows.sort(key=lambda r: (rank[r["status"]], -abs(r["change"] or 0)))
    lines = [
        f"{s['node']} {s['check']}: {s['a'] or 'not run'} in {ra.get('run_id')} -> {s['b'] or 'not run'} in "
        f"{rb.get('run_id')}"
        for s in statuses
    ]
    for r in rows:
        if r["status"] == "SAME":
            continue
        if r["change"] is not None:
            text = f"{fmt.percent(r['change'])}, {'worse' if r['status'] == 'WORSE' else 'better'}"
        else:
            text = "only in " + (str(ra.get("run_id")) if r["status"] == "ONLY_A" else str(rb.get("run_id")))
        lines.append(
            f"{r['node']} {r['check']} {r['metric']}: {fmt.value(r['a'], r['metric'], r['unit'])} -> "
            f"{fmt.value(r['b'], r['metric'], r['unit'])} ({text})"
        )
    only_a = [n for n in nodes_a if n not in rb["nodes"]]
    only_b = [n for n in nodes_b if n not in ra["nodes"]]
    lines += [f"{n}: only in {ra.get('run_id')}" for n in only_a] + [f"{n}: only in {rb.get('run_id')}" for n in only_b]
    return {
        "run_a": ra.get("run_id"),
        "run_b": rb.get("run_id"),
        "tolerance": opts["tolerance"],
        "status": "CHANGED" if lines else "SAME",
        "rows": rows,
        "statuses": statuses,
        "nodes_only_a": only_a,
        "nodes_only_b": only_b,
        "worse_nodes": sorted({r["node"] for r in rows if r["status"] == "WORSE"}),
        "lines": lines or [f"{ra.get('run_id')} and {rb.get('run_id')}: no difference beyond the tolerance"],
    }
