"""Run results and reports (controller only, pure logic).

A run of playbooks/validate.yml leaves one JSON file per node and check on the
controller: ``<results_dir>/<run_id>/checks/<node>/<check>.json`` (written by
the check roles, e.g. cvs.cluster.rvs and cvs.cluster.maxtext). This module
folds them into one run record and renders it three ways, next to them:

* ``results.json``: per node, per check: status, reason, metrics with
  thresholds, offending log lines, timings, backend, plus node facts;
* ``junit.xml``: one testcase per node per check (Jenkins JUnit format);
* ``report.html``: a self-contained nodes x checks table.

A requested check with no file for a node is ``MISSING`` (the run stopped
before the check finished there); the run is then incomplete.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import datetime, timezone
from typing import Any, Dict, Mapping, Optional, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils import _fleet
from ansible_collections.cvs.cluster.plugins.plugin_utils._report_render import to_html, to_junit

SCHEMA = "cvs.cluster/results/v1"
STATUSES = ("PASS", "FAIL", "ERROR", "MISSING")
BAD = ("FAIL", "ERROR")
MAX_LINES = 200
FACT_KEYS = (
    "hostname",
    "address",
    "kernel",
    "cpus",
    "memory_gib",
    "gpus",
    "gpu_model",
    "rvs_version",
    "rocm_version",
    "backend",
)
_CHECK_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class ReportError(Exception):
    """The report could not be written (message names the path and the cause)."""


# --------------------------------------------------------------------------- reading


def _parse_time(value: Any) -> Optional[datetime]:
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def duration(started: Any, finished: Any) -> Optional[float]:
    """Seconds between two ISO-8601 times, or None."""
    a, b = _parse_time(started), _parse_time(finished)
    if a is None or b is None:
        return None
    return max(0.0, (b - a).total_seconds())


def _line_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        for key in ("line", "text", "message"):
            if isinstance(item.get(key), str):
                prefix = f"[{item['path']}] " if isinstance(item.get("path"), str) and key == "line" else ""
                return prefix + item[key]
    return json.dumps(item, sort_keys=True, default=str)


def _rvs_details(raw: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """RVS per-test results as metrics rows, and the failing lines."""
    metrics: list[dict[str, Any]] = []
    lines: list[str] = []
    for t in raw.get("tests") or []:
        if not isinstance(t, Mapping):
            continue
        status = str(t.get("status") or "ERROR")
        metrics.append(
            {
                "metric": f"test {t.get('name', '?')}",
                "value": t.get("duration"),
                "status": "PASS" if status == "PASS" else "FAIL",
                "kind": "test",
                "threshold": None,
                "message": str(t.get("reason") or status),
            }
        )
        for f in t.get("failures") or []:
            text = _line_text(f)
            gpu = f.get("gpu") if isinstance(f, Mapping) else None
            lines.append(f"{t.get('name', '?')}: " + (f"GPU {gpu}: " if gpu is not None else "") + text.strip())
    return metrics, lines


def normalise_check(check: str, node: str, raw: Any, source: Optional[str] = None) -> dict[str, Any]:
    """One node's record of one check, in the common shape of results.json."""
    if not isinstance(raw, Mapping):
        return {
            "check": check,
            "node": node,
            "status": "ERROR",
            "reason": f"unreadable result file {source or ''}: {raw}".strip(),
            "metrics": [],
            "lines": [],
            "started": None,
            "finished": None,
            "duration": None,
            "backend": None,
            "source": source,
        }
    status = str(raw.get("status") or "ERROR").upper()
    if status not in STATUSES:
        status = "ERROR"
    metrics: list[dict[str, Any]] = []
    lines: list[str] = []
    if check == "rvs" or "tests" in raw:
        metrics, lines = _rvs_details(raw)
    raw_metrics = raw.get("metrics")
    for m in raw_metrics if isinstance(raw_metrics, list) else []:
        if isinstance(m, Mapping):
            metrics.append(
                {
                    "metric": str(m.get("metric", "?")),
                    "value": m.get("value"),
                    "status": str(m.get("status") or "RECORD").upper(),
                    "kind": m.get("kind"),
                    "threshold": m.get("threshold"),
                    "message": str(m.get("message") or ""),
                }
            )
    lines += [_line_text(x) for x in raw.get("lines") or []]
    err = raw.get("error")
    if isinstance(err, Mapping) and isinstance(err.get("line"), str) and err["line"] not in lines:
        lines.insert(0, err["line"])
    started, finished = raw.get("started"), raw.get("finished")
    rec: dict[str, Any] = {
        "check": check,
        "node": node,
        "status": status,
        "reason": str(raw.get("reason") or ""),
        "metrics": metrics,
        "lines": lines[:MAX_LINES],
        "lines_truncated": max(0, len(lines) - MAX_LINES),
        "started": started,
        "finished": finished,
        "duration": duration(started, finished),
        "backend": raw.get("backend"),
        "source": source,
    }
    for key in ("rvs_version", "config_folder", "mode", "level", "log", "failed_node"):
        if raw.get(key) is not None:
            rec[key] = raw[key]
    return rec


def missing_check(check: str, node: str) -> dict[str, Any]:
    return {
        "check": check,
        "node": node,
        "status": "MISSING",
        "reason": f"no {check} result for {node}: the check did not run to completion on this node",
        "metrics": [],
        "lines": [],
        "lines_truncated": 0,
        "started": None,
        "finished": None,
        "duration": None,
        "backend": None,
        "source": None,
    }


def read_checks(run_dir: str) -> dict[str, dict[str, Any]]:
    """{node: {check: raw record or error text}} from ``run_dir/checks/<node>/<check>.json``."""
    out: dict[str, dict[str, Any]] = {}
    base = os.path.join(run_dir, "checks")
    if not os.path.isdir(base):
        return out
    for node in sorted(os.listdir(base)):
        ndir = os.path.join(base, node)
        if not os.path.isdir(ndir):
            continue
        for name in sorted(os.listdir(ndir)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(ndir, name)
            try:
                with open(path, encoding="utf-8") as fh:
                    data: Any = json.load(fh)
            except (OSError, ValueError) as exc:
                data = str(exc)
            out.setdefault(node, {})[name[: -len(".json")]] = data
    return out


# --------------------------------------------------------------------------- aggregation


def node_facts(values: Mapping[str, Any]) -> dict[str, Any]:
    """Facts worth reporting from one host's variables (absent ones left out)."""
    facts: dict[str, Any] = {
        "hostname": values.get("ansible_hostname"),
        "address": (values.get("ansible_default_ipv4") or {}).get("address")
        if isinstance(values.get("ansible_default_ipv4"), Mapping)
        else None,
        "kernel": values.get("ansible_kernel"),
        "cpus": values.get("ansible_processor_vcpus"),
        "memory_gib": (int(values["ansible_memtotal_mb"]) // 1024)
        if isinstance(values.get("ansible_memtotal_mb"), int)
        else None,
        "gpus": (values.get("cvs_gpu_nodes") or {}).get("matched")
        if isinstance(values.get("cvs_gpu_nodes"), Mapping)
        else None,
        "gpu_model": values.get("cvs_gpu_model"),
        "rocm_version": values.get("cvs_rocm_version"),
        "backend": values.get("cvs_backend"),
    }
    return {k: v for k, v in facts.items() if v is not None}


def aggregate(
    run_id: str,
    checks: Sequence[str],
    nodes: Mapping[str, Mapping[str, Any]],
    found: Mapping[str, Mapping[str, Any]],
    *,
    complete: bool = True,
    run_dir: str = "",
    generated: Optional[str] = None,
) -> dict[str, Any]:
    """Fold the per-node check files into the run record.

    ``checks``: the requested checks (columns); ``nodes``: {node: {host, facts}}
    for the nodes of the run (rows; nodes that only appear in ``found`` are
    added); ``found``: :func:`read_checks` output. ``complete`` is false while
    the run is still going (or was interrupted).
    """
    checks = list(dict.fromkeys(checks))
    for c in checks:
        if not _CHECK_NAME.match(c):
            raise ValueError(f"invalid check name {c!r}")
    rows: dict[str, dict[str, Any]] = {}
    for node in list(nodes) + [n for n in found if n not in nodes]:
        info = nodes.get(node) or {}
        facts = dict(info.get("facts") or {})
        per: dict[str, Any] = {}
        for check in checks:
            raw = (found.get(node) or {}).get(check)
            src = os.path.join(run_dir, "checks", node, f"{check}.json") if run_dir else None
            per[check] = missing_check(check, node) if raw is None else normalise_check(check, node, raw, src)
            rec = per[check]
            if rec.get("rvs_version") and "rvs_version" not in facts:
                facts["rvs_version"] = rec["rvs_version"]
            if rec.get("config_folder") and "gpu_model" not in facts:
                facts["gpu_model"] = rec["config_folder"]
            if rec.get("backend") and "backend" not in facts:
                facts["backend"] = rec["backend"]
        rows[node] = {"node": node, "host": info.get("host", node), "facts": facts, "checks": per}
    counts = dict.fromkeys(STATUSES, 0)
    failing: list[dict[str, Any]] = []
    for node, row in rows.items():
        for check, rec in row["checks"].items():
            counts[rec["status"]] += 1
            if rec["status"] != "PASS":
                failing.append(
                    {
                        "node": node,
                        "check": check,
                        "status": rec["status"],
                        "reason": rec["reason"],
                        "line": rec["lines"][0] if rec["lines"] else None,
                    }
                )
    incomplete = not complete or counts["MISSING"] > 0 or sum(counts.values()) == 0
    status = "FAIL" if counts["FAIL"] or counts["ERROR"] else ("INCOMPLETE" if incomplete else "PASS")
    return {
        "schema": SCHEMA,
        "run_id": run_id,
        "generated": generated or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "complete": not incomplete,
        "checks": checks,
        "summary": {
            "status": status,
            "nodes": len(rows),
            "total": sum(counts.values()),
            "counts": counts,
            "failing_nodes": sorted({f["node"] for f in failing if f["status"] in BAD}),
            "incomplete_nodes": sorted({f["node"] for f in failing if f["status"] == "MISSING"}),
            "failures": failing,
        },
        "nodes": rows,
    }


# --------------------------------------------------------------------------- writing


def _atomic_write(path: str, text: str) -> None:
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def ensure_writable(directory: str) -> None:
    """Create ``directory`` and check a file can be written there; ReportError otherwise."""
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".cvs-probe-", dir=directory)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise ReportError(
            f"cannot write run results to {directory}: {exc.strerror or exc} "
            "(set cvs_results_dir to a writable directory on the controller)"
        ) from exc


def _previous_checks(run_dir: str) -> list[str]:
    try:
        with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as fh:
            checks = json.load(fh).get("checks")
    except (OSError, ValueError, AttributeError):
        return []
    return [str(c) for c in checks] if isinstance(checks, list) else []


def write_report(
    results_dir: str,
    run_id: str,
    checks: Optional[Sequence[str]],
    nodes: Mapping[str, Mapping[str, Any]],
    *,
    complete: bool = True,
    fleet: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """Read the check files of a run and write results.json, junit.xml, report.html. Returns the record.

    ``fleet``: options of the fleet comparison (plugin_utils/_fleet.py), e.g. ``{tolerance: 5%}``."""
    if not run_id or "/" in run_id or run_id in (".", ".."):
        raise ReportError(f"invalid run id {run_id!r}")
    run_dir = os.path.join(results_dir, run_id)
    ensure_writable(run_dir)
    found = read_checks(run_dir)
    if not checks:  # re-writing the report of an earlier run: its checks, or whatever has files
        checks = _previous_checks(run_dir) or sorted({c for per in found.values() for c in per})
    record = aggregate(run_id, checks, nodes, found, complete=complete, run_dir=run_dir)
    _fleet.extend(record, found, fleet)  # cross-node comparison + plot data: added fields only
    files: Dict[str, str] = {
        "results.json": json.dumps(record, indent=2, sort_keys=False, default=str) + "\n",
        "junit.xml": to_junit(record),
        "report.html": to_html(record),
    }
    try:
        for name, text in files.items():
            _atomic_write(os.path.join(run_dir, name), text)
    except OSError as exc:
        raise ReportError(f"cannot write the run report in {run_dir}: {exc.strerror or exc}") from exc
    record["files"] = {
        "results": os.path.join(run_dir, "results.json"),
        "junit": os.path.join(run_dir, "junit.xml"),
        "html": os.path.join(run_dir, "report.html"),
    }
    return record


def stats(record: Mapping[str, Any], run_dir: str) -> dict[str, Any]:
    """The summary published with set_stats (small: counts and failing nodes)."""
    s = record["summary"]
    return {
        "run_id": record["run_id"],
        "status": s["status"],
        "complete": record["complete"],
        "counts": s["counts"],
        "failing_nodes": s["failing_nodes"],
        "incomplete_nodes": s["incomplete_nodes"],
        "failures": [{k: f[k] for k in ("node", "check", "status", "reason")} for f in s["failures"]][:50],
        "results_dir": run_dir,
    }
