"""Rendering of the run record (controller only, pure logic): junit.xml and report.html.

The record itself (reading the per-node check files, folding them into
results.json) is built in :mod:`_report`; this module only turns that record
into text and never changes it.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from typing import Any, Mapping

# --------------------------------------------------------------------------- JUnit


def _xml_text(value: Any) -> str:
    """Text safe for XML 1.0 (control characters other than tab/newline replaced)."""
    return re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]", "\ufffd", str(value))


def _fmt_metric(m: Mapping[str, Any]) -> str:
    return f"{m['metric']} = {m.get('value')} [{m['status']}] {m.get('message') or ''}".rstrip()


def to_junit(record: Mapping[str, Any]) -> str:
    """JUnit XML: one testsuite per check, one testcase per node."""
    root = ET.Element("testsuites", name=f"cvs.cluster {record['run_id']}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for check in record["checks"]:
        suite = ET.SubElement(root, "testsuite", name=check)
        n = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
        starts = []
        for node, row in record["nodes"].items():
            rec = row["checks"][check]
            n["tests"] += 1
            t = rec.get("duration") or 0.0
            n["time"] += t
            if rec.get("started"):
                starts.append(rec["started"])
            case = ET.SubElement(suite, "testcase", classname=f"cvs.{check}", name=node, time=f"{t:.3f}")
            status = rec["status"]
            detail = "\n".join([*rec["lines"], *(_fmt_metric(m) for m in rec["metrics"] if m["status"] == "FAIL")])
            msg = _xml_text(f"{node}: {check} {status}: {rec['reason']}")
            if status == "FAIL":
                n["failures"] += 1
                ET.SubElement(case, "failure", message=msg, type="FAIL").text = _xml_text(detail)
            elif status in ("ERROR", "MISSING"):
                n["errors"] += 1
                ET.SubElement(case, "error", message=msg, type=status).text = _xml_text(detail)
            out = [f"status: {status}", f"reason: {rec['reason']}"]
            out += [f"{k}: {v}" for k, v in row["facts"].items()]
            out += [_fmt_metric(m) for m in rec["metrics"]]
            ET.SubElement(case, "system-out").text = _xml_text("\n".join(out))
        for k, v in n.items():
            totals[k] += v
            suite.set(k, f"{v:.3f}" if k == "time" else str(v))
        if starts:
            suite.set("timestamp", min(starts).replace("Z", ""))
    for k, v in totals.items():
        root.set(k, f"{v:.3f}" if k == "time" else str(v))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}table{border-collapse:collapse}
th,td{border:1px solid #bbb;padding:.4em .6em;vertical-align:top;text-align:left}
th{background:#eee}.PASS{background:#d4f4d4}.FAIL{background:#f9d0d0}.ERROR{background:#f6c6a0}
.MISSING,.INCOMPLETE{background:#e4e4e4;color:#555}.RECORD{background:#dce8fa}
.badge{font-weight:bold}.reason{margin:.2em 0;max-width:50em}
table.metrics{margin:.3em 0;font-size:.9em}table.metrics td,table.metrics th{padding:.15em .4em}
pre{white-space:pre-wrap;max-width:70em;margin:.3em 0;font-size:.85em}
dl.facts{margin:0;font-size:.85em}dl.facts dt{display:inline;font-weight:bold}
dl.facts dd{display:inline;margin:0 .6em 0 .2em}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _threshold_text(m: Mapping[str, Any]) -> str:
    t = m.get("threshold")
    if t is None:
        return ""
    if isinstance(t, Mapping):
        return ", ".join(f"{k} {v}" for k, v in t.items())
    return str(t)


def _cell(rec: Mapping[str, Any]) -> str:
    status = rec["status"]
    parts = [
        f'<td class="cell {_e(status)}" data-node="{_e(rec["node"])}" data-check="{_e(rec["check"])}"'
        f' data-status="{_e(status)}">',
        f'<div class="badge">{_e(status)}</div>',
        f'<div class="reason">{_e(rec["reason"])}</div>',
    ]
    if rec.get("duration") is not None:
        parts.append(f'<div class="time">{rec["duration"]:.1f} s</div>')
    if rec["metrics"]:
        parts.append('<table class="metrics"><tr><th>metric</th><th>value</th><th>threshold</th><th>status</th></tr>')
        for m in rec["metrics"]:
            parts.append(
                f'<tr class="{_e(m["status"])}" title="{_e(m.get("message"))}"><td>{_e(m["metric"])}</td>'
                f"<td>{_e(m.get('value'))}</td><td>{_e(_threshold_text(m))}</td><td>{_e(m['status'])}</td></tr>"
            )
        parts.append("</table>")
    if rec["lines"]:
        more = f" (+{rec['lines_truncated']} more)" if rec.get("lines_truncated") else ""
        parts.append(
            f'<details class="lines"><summary>{len(rec["lines"])} line(s){more}</summary><pre>'
            + "\n".join(_e(x) for x in rec["lines"])
            + "</pre></details>"
        )
    parts.append("</td>")
    return "".join(parts)


def to_html(record: Mapping[str, Any]) -> str:
    """A self-contained HTML page (inline CSS, no scripts, every value escaped)."""
    s = record["summary"]
    counts = " ".join(f'<span class="{_e(k)}">{_e(k)}: {v}</span>' for k, v in s["counts"].items())
    head = "".join(f"<th>{_e(c)}</th>" for c in record["checks"])
    rows = []
    for node, row in record["nodes"].items():
        facts = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in row["facts"].items())
        cells = "".join(_cell(row["checks"][c]) for c in record["checks"])
        rows.append(
            f'<tr class="node" data-node="{_e(node)}"><th scope="row">{_e(node)}'
            f'<dl class="facts">{facts}</dl></th>{cells}</tr>'
        )
    state = "complete" if record["complete"] else "incomplete"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>cvs.cluster run {_e(record['run_id'])}</title><style>{_CSS}</style></head><body>"
        f"<h1>cvs.cluster run {_e(record['run_id'])}</h1>"
        f'<p id="summary" class="{_e(s["status"])}" data-status="{_e(s["status"])}">'
        f"<b>{_e(s['status'])}</b> ({_e(state)}) - {s['nodes']} node(s), {s['total']} result(s): {counts}"
        f" - generated {_e(record['generated'])}</p>"
        f'<table id="results"><thead><tr><th>node</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        "</body></html>\n"
    )
