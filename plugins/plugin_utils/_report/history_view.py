# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The history section of a run report (controller only, pure logic): per node the trend of each key metric over
the earlier runs of the results directory and the regressions against the node's own history, as HTML (a section
of report.html) and as console lines. The data: ``record["history"]`` (plugin_utils/_history/report.py)."""

from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt

MAX_ROWS = 400  # rows of the (collapsed) table of every trend; regressions are always shown


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def sparkline(values: Sequence[float], bad: bool = False, width: int = 90, height: int = 18) -> str:
    """An inline SVG polyline of the values (oldest left, this run right, its last point marked)."""
    nums = [float(v) for v in values if fmt.is_number(v)]
    if len(nums) < 2:
        return ""
    lo, hi = min(nums), max(nums)
    span = (hi - lo) or 1.0
    step = (width - 4) / (len(nums) - 1)
    pts = [(2 + i * step, height - 2 - (v - lo) / span * (height - 4)) for i, v in enumerate(nums)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
    colour = "#c62828" if bad else "#2e7d32"
    x, y = pts[-1]
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="trend"><polyline fill="none" stroke="#888" stroke-width="1.2" points="{line}"/>'
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}"/></svg>'
    )


def _row(node: str, r: Mapping[str, Any]) -> str:
    bad = r["status"] == "REGRESSED"
    values = [p["value"] for p in r["points"]] + [r["value"]]
    trail = " \u2192 ".join(fmt.value(v, r["metric"], r.get("unit")) for v in values)
    dev = fmt.percent(r["deviation"]) if r.get("deviation") is not None else "\u2014"
    base = fmt.value(r["baseline"], r["metric"], r.get("unit")) if r.get("baseline") is not None else "\u2014"
    return (
        f'<tr data-node="{_e(node)}" data-status="{_e(r["status"])}" data-tone="{"warn" if bad else "ok"}">'
        f"<td>{_e(node)}</td><td>{_e(r['check'])}</td><td>{_e(r['metric'])}</td>"
        f'<td>{sparkline(values, bad)}</td><td>{_e(trail)}</td><td class="num">{_e(base)}</td>'
        f'<td class="num">{_e(dev)}</td><td>{_e(r["status"])}</td></tr>'
    )


_HEAD = (
    "<thead><tr><th>node</th><th>check</th><th>metric</th><th>trend</th><th>earlier runs \u2192 this run</th>"
    '<th class="num">own median</th><th class="num">change</th><th>status</th></tr></thead>'
)


def section(record: Mapping[str, Any]) -> str:
    """``<section id="history">``: the rule, the regressions, and a collapsed table of every node's trends ('' when
    the record has no history)."""
    hist = record.get("history")
    if not isinstance(hist, Mapping) or not hist.get("runs"):
        return ""
    nodes = hist.get("nodes") or {}
    rule = (
        f"Each node against its own last {hist['runs']} passing run(s) of this results directory: a throughput "
        f"metric more than {hist['tolerance'] * 100:g}% below the node's own median, or a time metric that much above "
        "it, is REGRESSED (reported; does not fail the run)."
    )
    regs = hist.get("regressions") or []
    bad_rows = [_row(n, r) for n, rows in nodes.items() for r in rows if r["status"] == "REGRESSED"]
    body = ""
    if regs:
        items = "".join(f'<li data-node="{_e(r["node"])}">{_e(r["reason"])}</li>' for r in regs[:50])
        body += f'<ul class="problems">{items}</ul>'
        body += f'<div class="scroll"><table class="fleet">{_HEAD}<tbody>{"".join(bad_rows)}</tbody></table></div>'
    elif nodes:
        body += f"<p>No node regressed against its own history ({_e(hist['status'])}).</p>"
    every = [_row(n, r) for n, rows in nodes.items() for r in rows]
    if every:
        more = (
            f'<p class="notes">\u2026 {len(every) - MAX_ROWS} more rows in results.json</p>'
            if len(every) > MAX_ROWS
            else ""
        )
        body += (
            f'<details><summary>every trend ({len(every)})</summary><div class="scroll"><table class="fleet">{_HEAD}'
            f"<tbody>{''.join(every[:MAX_ROWS])}</tbody></table></div>{more}</details>"
        )
    notes = hist.get("notes") or []
    if notes:
        shown = "".join(f"<li>{_e(x)}</li>" for x in notes[:100])
        body += f'<details class="notes"><summary>not judged ({len(notes)})</summary><ul>{shown}</ul></details>'
    return f'<section id="history"><h2>History</h2><p class="notes">{_e(rule)}</p>{body}</section>'


def console_lines(record: Mapping[str, Any]) -> list[str]:
    """The history verdict for the end of the console run: one line, then one per regression ([] when nothing could be
    judged)."""
    hist = record.get("history")
    if not isinstance(hist, Mapping) or not hist.get("runs") or hist.get("status") == "NOT_COMPARED":
        return []
    regs = hist.get("regressions") or []
    lines = [
        f"history: {hist['status']} (each node against its own last {hist['runs']} run(s), "
        f"tolerance {hist['tolerance'] * 100:g}%)"
    ]
    lines += [f"  {r['reason']}" for r in regs[:20]]
    if len(regs) > 20:
        lines.append(f"  ... {len(regs) - 20} more in results.json")
    return lines
