# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run record as the renderers read it (controller only, pure logic): a status's tone, one-line reasons, the
nodes with problems first, the run's facts, metric rows as text.

The record is built in :mod:`_report.record` (with :mod:`_metrics.fleet`); the renderers (:mod:`_report.junit`,
:mod:`_report.html`, :mod:`_report.console`) only turn it into text and never change it. Statuses are read
generically: one in :data:`_report.status.BAD` is bad, ``PASS`` good, anything else (MISSING, OUTLIER, a status
added later) its own name on a neutral or warning colour.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt
from ansible_collections.cvs.cluster.plugins.plugin_utils._report import status as _status

ONE_LINE = 160  # characters of a one-line reason
FACT_LABELS = (
    ("gpu_model", ""),
    ("gpus", "GPUs"),
    ("rocm_version", "ROCm"),
    ("rvs_version", "RVS"),
    ("kernel", "kernel"),
    ("cpus", "CPUs"),
    ("memory_gib", "GiB"),
    ("address", ""),
    ("backend", ""),
)


def tone(status: Any) -> str:
    """Styling group of a status: ok, bad, warn (OUTLIER), missing, other."""
    s = str(status)
    if s == "PASS":
        return "ok"
    if s in _status.BAD or s == "FAIL":
        return "bad"
    if s == "OUTLIER":
        return "warn"
    if s in ("MISSING", "INCOMPLETE"):
        return "missing"
    return "other"


def wall_time(recs: Iterable[Mapping[str, Any]]) -> Optional[float]:
    """Seconds from the earliest start to the latest finish of check records (parallel nodes overlap)."""
    starts, ends = [], []
    for rec in recs:
        a, b = fmt.parse_time(rec.get("started")), fmt.parse_time(rec.get("finished"))
        if a is not None:
            starts.append(a)
        if b is not None:
            ends.append(b)
    if not starts or not ends:
        return None
    return max(0.0, (max(ends) - min(starts)).total_seconds())


def one_line(rec: Mapping[str, Any], limit: int = ONE_LINE) -> str:
    """The offending line of a check record (first line, else the reason's first clause), shortened."""
    text = ""
    for line in rec.get("lines") or []:
        if str(line).strip():
            text = str(line).strip()
            break
    if not text:
        text = str(rec.get("reason") or "").strip()
        if len(text) > limit and " - " in text:
            text = text.split(" - ", 1)[0]
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def problems(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per node that is not clean: {node, status, check, line}; bad first, then outliers, then the rest."""
    order = {"bad": 0, "warn": 1, "other": 2, "missing": 3}
    out = []
    outliers = {}
    for o in (record.get("fleet") or {}).get("outliers") or []:
        outliers.setdefault(o["node"], []).append(o)
    for node, row in record["nodes"].items():
        worst: Optional[tuple[int, str, str, str]] = None
        for check, rec in row["checks"].items():
            t = tone(rec["status"])
            if t == "ok":
                continue
            cand = (order[t], rec["status"], check, one_line(rec))
            if worst is None or cand[0] < worst[0]:
                worst = cand
        if node in outliers and (worst is None or worst[0] > order["warn"]):
            o = outliers[node][0]
            more = f" (+{len(outliers[node]) - 1} more)" if len(outliers[node]) > 1 else ""
            worst = (order["warn"], "OUTLIER", o["check"], o["reason"] + more)
        if worst is not None:
            out.append({"node": node, "rank": worst[0], "status": worst[1], "check": worst[2], "line": worst[3]})
    out.sort(key=lambda p: p["rank"])
    return out


def node_order(record: Mapping[str, Any]) -> list[str]:
    """Nodes with problems first (bad, outlier, other, missing), then the rest, each group in run order."""
    ranked = {p["node"]: p["rank"] for p in problems(record)}
    nodes = list(record["nodes"])
    return sorted(nodes, key=lambda n: (ranked.get(n, 9), nodes.index(n)))


def run_facts(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) of the run: backend, versions, GPU model, duration, nodes, checks, generated."""

    def values(key: str) -> str:
        seen: dict[str, int] = {}
        for row in record["nodes"].values():
            v = (row.get("facts") or {}).get(key)
            if v is not None:
                seen[fmt.value(v)] = seen.get(fmt.value(v), 0) + 1
        if not seen:
            return ""
        if len(seen) == 1:
            return next(iter(seen))
        return " / ".join(f"{k} ({n})" for k, n in sorted(seen.items(), key=lambda kv: -kv[1]))

    recs = [r for row in record["nodes"].values() for r in row["checks"].values()]
    wall = wall_time(recs)
    out = [
        ("nodes", str(len(record["nodes"]))),
        ("checks", ", ".join(record.get("checks") or []) or "none"),
        ("backend", values("backend")),
        ("GPU", values("gpu_model")),
        ("ROCm", values("rocm_version")),
        ("RVS", values("rvs_version")),
        ("kernel", values("kernel")),
        ("duration", fmt.duration(wall) if wall is not None else ""),
        ("generated", str(record.get("generated") or "")),
    ]
    return [(k, v) for k, v in out if v]


#: A fleet row whose values differ by less than this fraction of the median, and that has no outlier, is folded
#: (the first screen shows the metrics that differ between nodes).
FOLD_SPREAD = 0.01


def metric_value(m: Mapping[str, Any], key: str = "value") -> str:
    """A metric row's value (or another number of the row, e.g. ``median``) in the unit the row declares (the unit
    its name implies when it declares none)."""
    return fmt.value(m.get(key), m.get("metric"), m.get("unit"))


def metric_name(m: Mapping[str, Any]) -> str:
    """The metric's name, with its other names (upstream CVS's) when the check lists them."""
    aliases = [str(a) for a in m.get("aliases") or []]
    return str(m["metric"]) + (f" (also {', '.join(aliases)})" if aliases else "")


def threshold_text(m: Mapping[str, Any]) -> str:
    """What the value was judged against, in the row's unit: ``min 100 TFLOP/s``, ``target 8,600 tokens/s ±5%``;
    '' for none or a record-only threshold."""
    t = m.get("threshold")
    if t is None:
        return ""
    if isinstance(t, Mapping):
        parts = []
        for k, v in t.items():
            if k == "record":
                continue
            if k == "tolerance" and fmt.is_number(v):
                parts.append(f"\u00b1{v * 100:g}%")
            else:
                parts.append(f"{k} {fmt.value(v, m.get('metric'), m.get('unit'))}")
        return ", ".join(parts)
    return fmt.value(t)


def metric_text(m: Mapping[str, Any]) -> str:
    thr = threshold_text(m)
    return f"{m['metric']} = {metric_value(m)} [{m['status']}]" + (f" ({thr})" if thr else "")


def split_metrics(metrics: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(rows judged against a threshold, rows only recorded): the report shows the first and folds the second."""
    checked, recorded = [], []
    for m in metrics:
        (recorded if m.get("status") == "RECORD" else checked).append(m)
    return checked, recorded


def fleet_spread(row: Mapping[str, Any]) -> Optional[float]:
    """(max - min) / |median| of a fleet row's values (its ``spread``; computed for rows of older reports)."""
    if "spread" in row:
        return row["spread"]
    vals = [c.get("value") for c in (row.get("nodes") or {}).values()]
    vals = [v for v in vals if fmt.is_number(v)]
    med = row.get("median")
    if len(vals) < 2 or not fmt.is_number(med) or not med:
        return None
    return (max(vals) - min(vals)) / abs(med)


def fleet_rows(fleet: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(rows shown, rows folded) of the fleet comparison: shown are the metrics with an outlier or whose values
    differ by :data:`FOLD_SPREAD` of the median or more; folded the ones every node agrees on (and those that
    could not be compared, said in ``not_compared``)."""
    shown, folded = [], []
    for row in fleet.get("metrics") or []:
        outlier = any(c.get("status") == "OUTLIER" for c in (row.get("nodes") or {}).values())
        spread = fleet_spread(row)
        (shown if outlier or (spread is not None and spread >= FOLD_SPREAD) else folded).append(row)
    return shown, folded


def folded_text(count: int) -> str:
    """The line that stands for the folded fleet rows."""
    return (
        f"{count} more metric(s) agree on every node (values within {FOLD_SPREAD * 100:g}% of the median, no outlier)"
    )
