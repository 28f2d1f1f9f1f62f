# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""junit.xml of a run record (controller only, pure logic), valid against Jenkins' junit-10.xsd."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import timezone
from typing import Any, Mapping, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.view import (
    metric_text,
    metric_value,
    split_metrics,
    wall_time,
)

FAILURE_STATUSES = ("FAIL", "OUTLIER")  # JUnit <failure>; any other status that is not PASS is an <error>


def _xml_text(value: Any) -> str:
    """Text safe for XML 1.0 (control characters other than tab/newline replaced)."""
    return re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]", "\ufffd", str(value))


def _timestamp(value: Any) -> Optional[str]:
    t = fmt.parse_time(value)
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") if t else None


def to_junit(record: Mapping[str, Any]) -> str:
    """JUnit XML valid against Jenkins' junit-10.xsd: one testsuite per check, one testcase per node.

    Times are wall times (earliest start to latest finish): nodes run a check in parallel, so summing their
    times would overstate the run. A testcase's ``<system-out>`` has a line per metric judged against a
    threshold and one line for the metrics only recorded. FAIL and OUTLIER (when the fleet comparison fails the
    run) give ``<failure>``, every other status that is not PASS an ``<error>`` of that type (never counted as
    passed).
    """
    root = ET.Element("testsuites", name=f"cvs.cluster {record['run_id']}")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    fleet = record.get("fleet") or {}
    outliers: dict[tuple[str, str], list[str]] = {}
    for o in fleet.get("outliers") or []:
        outliers.setdefault((o["node"], o["check"]), []).append(o["reason"])
    all_recs = []
    for check in record["checks"]:
        suite = ET.SubElement(root, "testsuite", name=check)
        recs = [row["checks"][check] for row in record["nodes"].values() if check in row["checks"]]
        all_recs += recs
        props = [("fleet.status", str(fleet.get("status", "")))] if fleet else []
        props += [(f"fleet.outlier.{n}", "; ".join(r)) for (n, c), r in outliers.items() if c == check]
        props += [(f"fleet.fact.{f['fact']}", f["reason"]) for f in fleet.get("facts") or []]
        if props:
            pe = ET.SubElement(suite, "properties")
            for name, value in props:
                ET.SubElement(pe, "property", name=_xml_text(name), value=_xml_text(value))
        n = {"tests": 0, "failures": 0, "errors": 0}
        for node, row in record["nodes"].items():
            rec = row["checks"].get(check)
            if rec is None:
                continue
            n["tests"] += 1
            t = rec.get("duration")
            case = ET.SubElement(suite, "testcase", classname=f"cvs.{check}", name=_xml_text(node))
            if fmt.is_number(t):
                case.set("time", f"{t:.3f}")
            status = str(rec["status"])
            detail = "\n".join([*rec["lines"], *(metric_text(m) for m in rec["metrics"] if m["status"] == "FAIL")])
            msg = _xml_text(f"{node}: {check} {status}: {rec['reason']}")
            if status in FAILURE_STATUSES:
                n["failures"] += 1
                ET.SubElement(case, "failure", message=msg, type=status).text = _xml_text(detail)
            elif status != "PASS":
                n["errors"] += 1
                ET.SubElement(case, "error", message=msg, type=status).text = _xml_text(detail)
            out = [f"status: {status}", f"reason: {rec['reason']}"]
            if outliers.get((node, check)):
                out.insert(1, "fleet: OUTLIER - " + "; ".join(outliers[(node, check)]))
            if rec.get("duration") is not None:
                out.append(f"duration: {fmt.duration(rec['duration'])}")
            out += [f"{k}: {fmt.value(v, k)}" for k, v in row["facts"].items()]
            checked, recorded = split_metrics(rec["metrics"])
            out += [metric_text(m) for m in checked]
            if recorded:  # one line: what was only recorded, not judged
                out.append("recorded: " + "; ".join(f"{m['metric']} {metric_value(m)}" for m in recorded))
            ET.SubElement(case, "system-out").text = _xml_text("\n".join(out))
        for k, v in n.items():
            totals[k] += v
            suite.set(k, str(v))
        suite.set("skipped", "0")
        wall = wall_time(recs)
        if wall is not None:
            suite.set("time", f"{wall:.3f}")
        stamp = min((s for s in (_timestamp(r.get("started")) for r in recs) if s), default=None)
        if stamp:
            suite.set("timestamp", stamp)
    for k, v in totals.items():
        root.set(k, str(v))
    wall = wall_time(all_recs)
    if wall is not None:
        root.set("time", f"{wall:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
