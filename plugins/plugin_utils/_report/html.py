# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.html of a run record (controller only, pure logic): one self-contained page, no network, no libraries."""

from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet
from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt
from ansible_collections.cvs.cluster.plugins.plugin_utils._report import history_view, plots
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.view import (
    FACT_LABELS,
    fleet_rows,
    folded_text,
    metric_value,
    node_order,
    one_line,
    problems,
    run_facts,
    split_metrics,
    threshold_text,
    tone,
)

_CSS = """
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{font:14px/1.35 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;padding:12px;color:#1d1d1f;
max-width:1600px}
h1{font-size:1.25em;margin:.2em 0}h2{font-size:1.1em;margin:1em 0 .4em}h3{font-size:.95em;margin:.2em 0}
code,pre{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3em 0;max-height:24em;overflow-y:auto;background:#f6f6f6;
padding:.3em}
[data-tone=ok]{background:#dff3df}[data-tone=bad]{background:#f9d3d3}[data-tone=warn]{background:#ffe8b8}
[data-tone=missing]{background:#e6e6e6;color:#444}[data-tone=other]{background:#e3e3f3}
.RECORD{background:#e3ecfa}
.badge{display:inline-block;font-weight:700;font-size:.8em;padding:0 .4em;border-radius:3px;white-space:nowrap}
.badge[data-tone=ok]{background:#2e7d32;color:#fff}.badge[data-tone=bad]{background:#c62828;color:#fff}
.badge[data-tone=warn]{background:#b26a00;color:#fff}.badge[data-tone=missing]{background:#757575;color:#fff}
.badge[data-tone=other]{background:#4a4a8a;color:#fff}
#summary{padding:.6em .8em;border-radius:6px;margin-bottom:.6em}
#summary .lead{font-size:1.05em;margin:.2em 0}
ul.problems{list-style:none;margin:.4em 0;padding:0}
ul.problems li{padding:.15em 0;overflow-wrap:anywhere}
ul.problems code{background:rgba(255,255,255,.6);padding:0 .2em}
.counts span{display:inline-block;margin:.1em .4em .1em 0;padding:0 .4em;border-radius:3px}
dl.run{display:flex;flex-wrap:wrap;gap:.1em 1.2em;margin:.4em 0 0;font-size:.9em}
dl.run div{display:flex;gap:.3em}dl.run dt{color:#555}dl.run dd{margin:0;font-weight:600;overflow-wrap:anywhere}
.notes{font-size:.9em;color:#444}
table{border-collapse:collapse;width:100%}
th,td{border:1px solid #ccc;padding:.25em .4em;vertical-align:top;text-align:left}
thead th{background:#eee;position:sticky;top:0}
table#results{table-layout:fixed}
table#results th.nodecol{width:13em}
tr.node th{font-weight:600;overflow-wrap:anywhere}
tr.node th .facts{display:block;font-weight:400;font-size:.8em;color:#555}
td.cell .head{display:flex;gap:.35em;align-items:baseline;min-width:0;cursor:pointer}
td.cell summary.head{list-style:none}td.cell summary.head::-webkit-details-marker{display:none}
td.cell summary.head::before{content:"\\25b8";color:#777}td.cell details[open]>summary.head::before{content:"\\25be"}
td.cell .line{flex:1 1 auto;min-width:0;font-size:.9em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
td.cell .time{flex:none;font-size:.8em;color:#555}
td.cell details.cell>:not(summary){font-size:.85em}td.cell details.lines summary{cursor:pointer;color:#333}
table.metrics{margin:.2em 0;font-size:.95em;table-layout:auto}
table.metrics td,table.metrics th{padding:.05em .3em;border-color:#ddd;overflow-wrap:anywhere}
.aka{display:block;font-size:.85em;color:#666}details.recorded>summary,details.fleet-quiet>summary{cursor:pointer}
table.fleet{width:auto;max-width:100%}table.fleet td.num,table.fleet th.num{text-align:right;white-space:nowrap}
.tools{display:flex;flex-wrap:wrap;gap:.5em;align-items:center;margin:.4em 0}
.tools input{font:inherit;padding:.25em .4em;min-width:0;flex:1 1 14em;max-width:30em}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,460px),1fr));gap:.8em}
figure.plot{margin:0;border:1px solid #ddd;border-radius:4px;padding:.4em;min-width:0}
figure.plot svg{width:100%;height:auto;display:block}
figcaption,.legend{font-size:.8em;color:#555}
.legend .key{display:inline-block;margin-right:.8em}
.legend i{display:inline-block;width:.9em;height:.3em;margin-right:.2em;vertical-align:middle}
svg text{font:10px system-ui,sans-serif;fill:#333}svg .label{font-size:11px}
svg .frame{fill:none;stroke:#999}svg .grid{stroke:#eee}
svg .line{fill:none;stroke-width:1.4}svg .hl{stroke-width:2.4}
svg .band{fill:#1f77b4;opacity:.18}svg .median{stroke:#333;stroke-width:1.2}
svg .limit{stroke:#d62728;stroke-dasharray:4 3}svg .box line,svg .box rect{stroke:#1f77b4;fill:#cfe0f3}
svg .box .med{stroke:#000;stroke-width:2}svg .gpu.ok{fill:#66bb6a}svg .gpu.bad{fill:#d62728}svg .gpu.na{fill:#e0e0e0}
.scroll{overflow-x:auto;max-width:100%}
@media (max-width:760px){
 body{padding:8px;font-size:13px}
 table#results,table#results tbody,table#results tr,table#results td,table#results th{display:block;width:auto}
 table#results thead{display:none}
 table#results tr.node{border:1px solid #bbb;border-radius:4px;margin:.4em 0}
 table#results td,table#results th{border:0;border-top:1px solid #ddd}
 table#results td.cell::before{content:attr(data-check);font-weight:600;margin-right:.4em;float:left}
 td.cell .line{white-space:normal}
 td.cell .head{flex-wrap:wrap}
 table.fleet .opt{display:none}table.fleet td.num,table.fleet th.num{white-space:normal}
}
"""

_SCRIPT = """
(function(){var f=document.getElementById('filter');if(!f)return;
var rows=[].slice.call(document.querySelectorAll('#results tr.node'));
var only=document.getElementById('only-problems');var n=document.getElementById('shown');
function run(){var q=f.value.toLowerCase().trim();var c=0;rows.forEach(function(r){
var ok=(!q||r.textContent.toLowerCase().indexOf(q)>=0)&&(!only.checked||r.getAttribute('data-tone')!=='ok');
r.style.display=ok?'':'none';if(ok)c++;});n.textContent=c+' of '+rows.length+' node(s)';}
f.addEventListener('input',run);only.addEventListener('change',run);run();})();
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _badge(status: Any) -> str:
    return f'<span class="badge" data-tone="{tone(status)}">{_e(status)}</span>'


def _short_facts(facts: Mapping[str, Any]) -> str:
    parts = []
    for key, label in FACT_LABELS:
        v = facts.get(key)
        if v is None or key == "backend":
            continue
        text = fmt.value(v)
        parts.append(f"{text} {label}".strip() if key in ("gpus", "cpus", "memory_gib") else f"{label} {text}".strip())
    return " · ".join(parts)


def _metric_name(m: Mapping[str, Any]) -> str:
    aliases = ", ".join(str(a) for a in m.get("aliases") or [])
    return _e(m["metric"]) + (f'<span class="aka">also {_e(aliases)}</span>' if aliases else "")


def _metrics_table(rec: Mapping[str, Any]) -> str:
    """The metrics judged against a threshold as a table; the ones only recorded folded under it."""
    checked, recorded = split_metrics(rec["metrics"])
    out = []
    if checked:
        rows = ['<table class="metrics"><tr><th>metric</th><th>value</th><th>threshold</th><th>status</th></tr>']
        for m in checked:
            rows.append(
                f'<tr class="{_e(m["status"])}" title="{_e(m.get("message"))}"><td>{_metric_name(m)}</td>'
                f"<td>{_e(metric_value(m))}</td><td>{_e(threshold_text(m))}</td>"
                f"<td>{_e(m['status'])}</td></tr>"
            )
        rows.append("</table>")
        out.append("".join(rows))
    if recorded:
        rows = [
            f'<details class="recorded"><summary>{len(recorded)} recorded metric(s)</summary>'
            '<table class="metrics"><tr><th>metric</th><th>value</th></tr>'
        ]
        for m in recorded:  # a message that only restates the value is left out (a report of 256 nodes stays small)
            message = str(m.get("message") or "")
            title = "" if message.endswith("(recorded, no threshold)") else f' title="{_e(message)}"'
            rows.append(f'<tr class="RECORD"{title}><td>{_metric_name(m)}</td><td>{_e(metric_value(m))}</td></tr>')
        rows.append("</table></details>")
        out.append("".join(rows))
    return "".join(out)


def _cell(rec: Mapping[str, Any], outlier: Sequence[str] = ()) -> str:
    """One node x check: a one-line head (status, offending line or reason, duration) that opens the details
    (full reason, outlier reasons, metrics against thresholds, log lines)."""
    status = rec["status"]
    t = tone(status)
    shown_tone = "warn" if outlier and t == "ok" else t
    if outlier:
        line = outlier[0] + (f" (+{len(outlier) - 1} more)" if len(outlier) > 1 else "")
    else:
        line = one_line(rec) if t != "ok" else str(rec.get("reason") or "")
    head = [_badge(status)]
    if outlier and status != "OUTLIER":
        head.append(_badge("OUTLIER"))
    head.append(f'<span class="line" title="{_e(line)}">{_e(line)}</span>')
    if rec.get("duration") is not None:
        head.append(f'<span class="time">{_e(fmt.duration(rec["duration"]))}</span>')
    inner = []
    if rec.get("reason") and (t != "ok" or outlier):
        inner.append(f'<div class="reason">{_e(rec["reason"])}</div>')
    if outlier:
        inner.append('<ul class="outliers">' + "".join(f"<li>{_e(x)}</li>" for x in outlier) + "</ul>")
    if rec["metrics"]:
        inner.append(_metrics_table(rec))
    if rec["lines"]:
        more = f" (+{rec['lines_truncated']} more)" if rec.get("lines_truncated") else ""
        inner.append(
            f'<details class="lines"><summary>{len(rec["lines"])} log line(s){more}</summary><pre>'
            + "\n".join(_e(x) for x in rec["lines"])
            + "</pre></details>"
        )
    open_tag = (
        f'<td class="cell {_e(status)}" data-node="{_e(rec["node"])}" data-check="{_e(rec["check"])}"'
        f' data-status="{_e(status)}" data-tone="{shown_tone}">'
    )
    if inner:
        body = f'<details class="cell"><summary class="head">{" ".join(head)}</summary>{"".join(inner)}</details>'
    else:
        body = f'<div class="head">{" ".join(head)}</div>'
    return open_tag + body + "</td>"


def _summary(record: Mapping[str, Any]) -> str:
    s = record["summary"]
    status = s["status"]
    probs = problems(record)
    bad = [p for p in probs if p["rank"] == 0]
    warn = [p for p in probs if p["status"] == "OUTLIER"]
    n = len(record["nodes"])
    lead = []
    if bad:
        lead.append(f"{len(bad)} of {n} node(s) failing: " + ", ".join(p["node"] for p in bad[:12]))
        if len(bad) > 12:
            lead[-1] += f" and {len(bad) - 12} more"
    if warn:
        lead.append(f"{len(warn)} outlier(s): " + ", ".join(p["node"] for p in warn[:12]))
    if not probs:
        lead.append(f"all {n} node(s) passed every check")
    if not record.get("complete", True):
        lead.append("run incomplete")
    items = []
    for p in probs[:50]:
        items.append(
            f'<li data-node="{_e(p["node"])}" data-status="{_e(p["status"])}">{_badge(p["status"])} '
            f"<b>{_e(p['node'])}</b> {_e(p['check'])}: <code>{_e(p['line'])}</code></li>"
        )
    if len(probs) > 50:
        items.append(f"<li>… and {len(probs) - 50} more node(s): see the table</li>")
    for f in (record.get("fleet") or {}).get("facts") or []:
        items.append(f'<li data-status="FACTS">{_badge("FACTS")} {_e(f["reason"])}</li>')
    counts = "".join(
        f'<span data-tone="{tone(k)}">{_e(k)} {v}</span>'
        for k, v in (s.get("counts") or {}).items()
        if v or k == "PASS"
    )
    facts = "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in run_facts(record))
    return (
        f'<header id="summary" class="{_e(status)}" data-status="{_e(status)}" data-tone="{tone(status)}">'
        f"<h1>{_badge(status)} cvs.cluster run {_e(record['run_id'])}</h1>"
        f'<p class="lead">{_e("; ".join(lead))}</p>'
        + (f'<ul class="problems" id="problems">{"".join(items)}</ul>' if items else "")
        + f'<div class="counts">{counts}</div><dl class="run">{facts}</dl></header>'
    )


def _fleet_table(rows_in: Sequence[Mapping[str, Any]], table_id: str) -> str:
    rows = []
    for r in rows_in:
        unit = r.get("unit")
        vals = [c["value"] for c in r["nodes"].values() if fmt.is_number(c["value"])]
        outl = [n for n, c in r["nodes"].items() if c["status"] == "OUTLIER"]
        med = fmt.value(r["median"], r["metric"], unit) if r["median"] is not None else "—"
        spread = (
            f"{fmt.value(min(vals), r['metric'], unit)} \u2013 {fmt.value(max(vals), r['metric'], unit)}"
            if vals
            else "—"
        )
        rows.append(
            f'<tr data-tone="{"warn" if outl else "ok"}"><td>{_e(r["check"])}</td><td>{_e(r["metric"])}</td>'
            f'<td class="opt">{_e(r["direction"])}</td><td class="num">{_e(med)}</td>'
            f'<td class="num opt">{_e(spread)}</td>'
            f'<td class="num opt">{r["compared"]}</td><td class="num opt">{r["tolerance"] * 100:g}%</td>'
            f"<td>{_e(', '.join(outl) or '—')}</td></tr>"
        )
    head = (
        '<tr><th>check</th><th>metric</th><th class="opt">better</th><th class="num">median</th>'
        '<th class="num opt">range</th><th class="num opt">nodes</th><th class="num opt">tolerance</th>'
        "<th>outliers</th></tr>"
    )
    return (
        f'<div class="scroll"><table class="fleet" id="{table_id}"><thead>{head}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _fleet_section(record: Mapping[str, Any]) -> str:
    """The metrics that differ between nodes (an outlier, or a spread of FOLD_SPREAD or more) as a table; the
    rest folded under one line that counts them."""
    fleet = record.get("fleet")
    if not fleet:
        return ""
    shown, folded = fleet_rows(fleet)
    notes = fleet.get("not_compared") or []
    table = _fleet_table(shown, "fleet-metrics") if shown else ""
    if folded:
        table += (
            f'<details class="fleet-quiet" id="fleet-folded"><summary>{_e(folded_text(len(folded)))}</summary>'
            f"{_fleet_table(folded, 'fleet-folded-metrics')}</details>"
        )
    rule = (
        f"A node is an OUTLIER when a throughput metric is more than {fleet['tolerance'] * 100:g}% below the fleet "
        "median, or a time metric that much above it"
        + (" (this fails the run)." if fleet.get("fail_on_outlier") else " (reported; does not fail the run).")
    )
    note_html = ""
    if notes:
        shown = "".join(f"<li>{_e(x)}</li>" for x in notes[:100])
        more = f"<li>… {len(notes) - 100} more</li>" if len(notes) > 100 else ""
        note_html = (
            f'<details class="notes"><summary>not compared ({len(notes)})</summary><ul>{shown}{more}</ul></details>'
        )
    return f'<section id="fleet"><h2>Fleet comparison</h2><p class="notes">{_e(rule)}</p>{table}{note_html}</section>'


def _plots(record: Mapping[str, Any], order: Sequence[str]) -> str:
    data = record.get("plots") or {}
    fleet = record.get("fleet") or {}
    outlier_nodes = list(fleet.get("outlier_nodes") or [])
    bad_nodes = list((record.get("summary") or {}).get("failing_nodes") or [])
    figs = []
    series = data.get("series") or {}
    for check in sorted({c for per in series.values() for c in per}):
        loss = {n: _fleet.pairs(series[n][check], "loss") for n in order if check in series.get(n, {})}
        marked = {**dict.fromkeys(outlier_nodes, "OUTLIER"), **dict.fromkeys(bad_nodes, "FAIL")}
        figs.append(plots.lines(f"plot-loss-{check}", f"{check}: loss per step", loss, "loss", marked))
        secs = {n: _fleet.pairs(series[n][check], "seconds") for n in order if check in series.get(n, {})}
        figs.append(plots.boxes(f"plot-steptime-{check}", f"{check}: step time per node", secs))
    for r in fleet.get("metrics") or []:
        if (
            r["direction"] == "higher"
            and r["median"] is not None
            and r["metric"] in ("tflops_per_device", "tokens_per_device")
        ):
            vals = {n: r["nodes"].get(n, {}).get("value") for n in order}
            figs.append(
                plots.bars(
                    f"plot-{r['check']}-{r['metric']}",
                    f"{r['check']}: {r['metric']} per node",
                    vals,
                    r["metric"],
                    r["median"],
                    r["tolerance"],
                    r["direction"],
                    [n for n, c in r["nodes"].items() if c["status"] == "OUTLIER"],
                    unit=r.get("unit"),
                )
            )
    grid = data.get("rvs_gpus") or {}
    figs.append(plots.gpu_grid("plot-rvs-gpus", "RVS results per GPU", {n: grid[n] for n in order if n in grid}))
    if len(order) >= 8:
        figs.append(
            plots.heatmap(
                "plot-heatmap",
                "Nodes \u00d7 metrics (deviation from the fleet median)",
                fleet.get("metrics") or [],
                order,
            )
        )
    figs = [f for f in figs if f]
    if not figs:
        return ""
    return f'<section id="plots"><h2>Plots</h2><div class="plots">{"".join(figs)}</div></section>'


def to_html(record: Mapping[str, Any]) -> str:
    """A self-contained page: summary first, fleet comparison, plots, then nodes x checks (problems first).

    Inline CSS and SVG, one small inline script (the filter box; the page reads fine without it), no external
    assets; every value is escaped.
    """
    order = node_order(record)
    outliers: dict[tuple[str, str], list[str]] = {}
    for o in (record.get("fleet") or {}).get("outliers") or []:
        outliers.setdefault((o["node"], o["check"]), []).append(o["reason"])
    head = "".join(f"<th>{_e(c)}</th>" for c in record["checks"])
    rows = []
    for node in order:
        row = record["nodes"][node]
        cells = "".join(
            _cell(row["checks"][c], outliers.get((node, c), ())) for c in record["checks"] if c in row["checks"]
        )
        tones = [tone(r["status"]) for r in row["checks"].values()]
        row_tone = next((t for t in ("bad", "warn", "other", "missing") if t in tones), "ok")
        if row_tone == "ok" and any(k[0] == node for k in outliers):
            row_tone = "warn"
        facts = row.get("facts") or {}
        full = "; ".join(f"{k}: {fmt.value(v, k)}" for k, v in facts.items())
        rows.append(
            f'<tr class="node" data-node="{_e(node)}" data-tone="{row_tone}"><th scope="row">{_e(node)}'
            f'<span class="facts" title="{_e(full)}">{_e(_short_facts(facts))}</span></th>{cells}</tr>'
        )
    tools = (
        '<div class="tools"><input id="filter" type="search" placeholder="filter: node, status, text" '
        'aria-label="filter nodes"><label><input id="only-problems" type="checkbox"> only problems</label>'
        '<span id="shown" class="notes"></span></div>'
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(record['summary']['status'])} - cvs.cluster run {_e(record['run_id'])}</title>"
        f"<style>{_CSS}</style></head><body>"
        + _summary(record)
        + _fleet_section(record)
        + history_view.section(record)
        + _plots(record, order)
        + f'<section id="nodes"><h2>Nodes</h2>{tools}<table id="results"><thead><tr><th class="nodecol">node</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
