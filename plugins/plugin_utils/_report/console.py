# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run record as text for the end of the console run (controller only, pure logic)."""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.view import fleet_rows, folded_text


def fleet_table(record: Mapping[str, Any], width: int = 100) -> list[str]:
    """The fleet comparison as a short text table for the end of the console run ([] without one): the metrics
    that differ between nodes, one line counting the ones every node agrees on (listed in report.html)."""
    fleet = record.get("fleet")
    if not fleet:
        return []
    lines = [f"fleet comparison: {fleet['status']} (tolerance {fleet['tolerance'] * 100:g}%, median of the fleet)"]
    rows = []
    shown, folded = fleet_rows(fleet)
    for r in shown:
        if r["median"] is None:
            continue
        bad = [
            f"{n} {fmt.percent(c['deviation'])}"
            for n, c in sorted(
                r["nodes"].items(), key=lambda kv: kv[1]["deviation"] or 0, reverse=r["direction"] != "higher"
            )
            if c["status"] == "OUTLIER"
        ]
        rows.append(
            (f"{r['check']} {r['metric']}", fmt.value(r["median"], r["metric"], r.get("unit")), ", ".join(bad) or "-")
        )
    if rows:
        w1 = min(max(len(a) for a, _b, _c in rows), 40)
        w2 = max(len(b) for _a, b, _c in rows)
        lines.append(f"  {'metric':<{w1}}  {'median':>{w2}}  outliers")
        for a, b, c in rows:
            text = f"  {a[:w1]:<{w1}}  {b:>{w2}}  {c}"
            lines.append(text if len(text) <= width else text[: width - 1] + "…")
    compared = [r for r in folded if r["median"] is not None]
    if compared:
        lines.append(f"  {folded_text(len(compared))}: see report.html")
    lines += [f"  facts: {f['reason']}" for f in fleet.get("facts") or []]
    notes = fleet.get("not_compared") or []
    if notes:
        lines.append(
            f"  not compared: {notes[0]}" + (f" (+{len(notes) - 1} more in results.json)" if len(notes) > 1 else "")
        )
    return lines
