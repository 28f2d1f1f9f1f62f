"""Run results and reports (controller only, pure logic).

A run of playbooks/validate.yml leaves one JSON file per node and check on the
controller: ``<results_dir>/<run_id>/checks/<node>/<check>.json`` (written by
the check roles, e.g. cvs.cluster.rvs and cvs.cluster.maxtext). This module
folds them into one run record and renders it three ways, next to them:

* ``results.json``: per node, per check: status, reason, metrics with
  thresholds, offending log lines, timings, backend, plus node facts;
* ``junit.xml``: one testcase per node per check (Jenkins JUnit format);
* ``report.html``: a self-contained nodes x checks table.

Every requested node is a row. A requested check with no file for a node is
``UNREACHABLE`` when Ansible could not reach the node (the reason quotes the
connection error Ansible reported), ``ERROR`` when the node could not be
prepared or its record could not be written (the reason says why), and
``MISSING`` otherwise (the run stopped before the check finished there; the
run is then incomplete). ``UNREACHABLE`` and ``ERROR`` fail the run.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from datetime import datetime, timezone
from typing import Any, Dict, Mapping, Optional, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import atomic_write, path_component
from ansible_collections.cvs.cluster.plugins.plugin_utils._history import report as _history
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import CheckRecordError, validate
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.format import parse_time
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.html import to_html
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.junit import to_junit
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.status import BAD, STATUSES
from ansible_collections.cvs.cluster.plugins.plugin_utils._run.node_facts import node_facts

SCHEMA = "cvs.cluster/results/v1"
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
    """The report could not be written (message names the path and the cause).

    ``record`` is the run record when it could be computed (only writing it failed)."""

    def __init__(self, msg: str, record: Optional[dict[str, Any]] = None) -> None:
        super().__init__(msg)
        self.record = record


# --------------------------------------------------------------------------- reading


def duration(started: Any, finished: Any) -> Optional[float]:
    """Seconds between two ISO-8601 times, or None."""
    a, b = parse_time(started), parse_time(finished)
    if a is None or b is None:
        return None
    return max(0.0, (b - a).total_seconds())


def _bare_record(check: str, node: str, status: str, reason: str, source: Optional[str]) -> dict[str, Any]:
    """A results.json row for a node without a usable check record (no metrics, lines or timings)."""
    return {
        "check": check,
        "node": node,
        "status": status,
        "reason": reason,
        "metrics": [],
        "lines": [],
        "lines_truncated": 0,
        "started": None,
        "finished": None,
        "duration": None,
        "backend": None,
        "source": source,
    }


def _error_record(check: str, node: str, reason: str, source: Optional[str]) -> dict[str, Any]:
    return _bare_record(check, node, "ERROR", reason, source)


def normalise_check(check: str, node: str, raw: Any, source: Optional[str] = None) -> dict[str, Any]:
    """One node's check record (see _report/check_record.py) in the shape of results.json; a file that is not one is an
    ERROR naming the file and the field at fault."""
    if not isinstance(raw, Mapping):
        return _error_record(check, node, f"unreadable result file {source or ''}: {raw}".strip(), source)
    try:
        record = validate(raw, check=check, node=node)
    except CheckRecordError as exc:
        where = source or f"checks/{node}/{check}.json"
        return _error_record(check, node, f"invalid check record {where}: {exc}", source)
    lines = list(record.get("lines") or [])
    err = record.get("error")
    if isinstance(err, Mapping) and err.get("line") and err["line"] not in lines:
        lines.insert(0, err["line"])
    started, finished = record.get("started"), record.get("finished")
    rec: dict[str, Any] = {
        "check": check,
        "node": node,
        "status": record["status"],
        "reason": record["reason"],
        "metrics": record["metrics"],
        "lines": lines[:MAX_LINES],
        "lines_truncated": max(0, len(lines) - MAX_LINES),
        "started": started,
        "finished": finished,
        "duration": duration(started, finished),
        "backend": record.get("backend"),
        "source": source,
        "facts": dict(record.get("facts") or {}),
    }
    for key in ("log", "failed_node", "scheduler"):
        if record.get(key) is not None:
            rec[key] = record[key]
    return rec


def missing_check(check: str, node: str) -> dict[str, Any]:
    reason = f"no {check} result for {node}: the check did not run to completion on this node"
    return _bare_record(check, node, "MISSING", reason, None)


# --------------------------------------------------------------------------- nodes without a result

# Ansible's generic wrappers around the connection error (the part after them is ssh's own text)
_CONNECT_PREFIX = re.compile(
    r"""^\s*(?:Task failed:\s*|Failed to connect to the host via [\w.-]+:\s*"""
    r"""|Data could not be sent to remote host "[^"]*"\.\s*Make sure this host can be reached over [\w.-]+:\s*)+""",
    re.I,
)
_ENOSPC_TEXT = re.compile(rf"\[Errno {errno.ENOSPC}\]|no space left on device", re.I)
_DEST_TEXT = re.compile(r"""(?:replace|into(?: to)?) b?['"]([^'"]+)['"]""")


def _one_line(text: str, limit: int = 600) -> str:
    out = " ".join(str(text).split())
    return out if len(out) <= limit else out[: limit - 3] + "..."


def unreachable_reason(node: str, msg: Any) -> str:
    """``<node>: unreachable: <the error Ansible reported>`` (its generic "Failed to connect ..." prefix dropped)."""
    text = _CONNECT_PREFIX.sub("", _one_line(msg or "")) if msg else ""
    return f"{node}: unreachable: {text or 'Ansible could not connect to the node'}"


def _unreachable_msg(result: Any) -> Optional[str]:
    if not isinstance(result, Mapping) or result.get("unreachable") is not True:
        return None
    items = [r for r in result.get("results") or [] if isinstance(r, Mapping) and r.get("unreachable") is True]
    msg = next((r.get("msg") for r in items if r.get("msg")), None) or result.get("msg")
    return str(msg or "") or "unreachable"


def find_unreachable(values: Mapping[str, Any], probe: str = "cvs_reach") -> Optional[str]:
    """The connection error of a host that Ansible could not reach, from its registered task results.

    ``values``: the host's variables. The playbooks register their first contact with every node as ``probe``;
    any other registered result that says ``unreachable`` counts as well (a node lost later in the run).
    None when no registered result says the host was unreachable."""
    first = _unreachable_msg(values.get(probe))
    if first is not None:
        return first
    for key, value in values.items():
        if key != probe and isinstance(value, Mapping) and "unreachable" in value:
            msg = _unreachable_msg(value)
            if msg is not None:
                return msg
    return None


def describe_write_error(msg: Any, path: Optional[str] = None) -> str:
    """A write failure in plain words; a full disk always reads ``no space left on device: <path>``."""
    text = _one_line(msg or "")
    if _ENOSPC_TEXT.search(text):
        dest = _DEST_TEXT.search(text)
        where = dest.group(1) if dest else path
        return f"no space left on device: {where}" if where else "no space left on device"
    return text


def absent_check(check: str, node: str, info: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a requested check that left no file for ``node``.

    ``info``: what the run knows about the node: ``unreachable`` (Ansible's connection error),
    ``errors`` ({check: why its record is missing}), ``prepare_error`` (why the node was not prepared)."""
    rec = missing_check(check, node)
    if info.get("unreachable"):
        rec.update(status="UNREACHABLE", reason=unreachable_reason(node, info["unreachable"]))
    elif (info.get("errors") or {}).get(check):
        why = describe_write_error(info["errors"][check])
        rec.update(status="ERROR", reason=f"{node}: {check} result not recorded: {why}")
    elif info.get("prepare_error"):
        rec.update(status="ERROR", reason=f"{node}: {check} not run: {_one_line(info['prepare_error'])}")
    return rec


def read_checks(run_dir: str) -> dict[str, dict[str, Any]]:
    """{node: {check: raw record or error text}} from ``run_dir/checks/<node>/<check>.json``.

    The directory is the node's name as one path component (see _common/paths.path_component); a record whose ``node``
    gives that directory names the node."""
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
            named = data.get("node") if isinstance(data, dict) else None
            key = named if isinstance(named, str) and path_component(named) == node else node
            out.setdefault(key, {})[name[: -len(".json")]] = data
    return out


# --------------------------------------------------------------------------- aggregation


def _vars(source: Any, host: str) -> Mapping[str, Any]:
    try:
        values = source(host) if callable(source) else source.get(host)
    except Exception:  # an unknown host or a variable that does not template: nothing known
        return {}
    return values if isinstance(values, Mapping) else {}


def run_nodes(
    groups: Mapping[str, Sequence[str]],
    hostvars: Mapping[str, Mapping[str, Any]],
    raw: Optional[Any] = None,
    *,
    nodes: Optional[Sequence[str]] = None,
    hosts: Optional[Sequence[str]] = None,
    probe: str = "cvs_reach",
) -> dict[str, dict[str, Any]]:
    """The rows of the report: every requested node with its workload host, facts and what went wrong.

    ``groups``/``hostvars``: Ansible's (``hostvars[h]`` templated); ``raw``: ``hostvars.raw_get`` (un-templated
    variables, to look for unreachable results), default ``hostvars``. Requested nodes: ``nodes``; else the nodes
    of ``hosts``; else the ``cvs_nodes`` hosts that carry the playbooks' first-contact result ``probe`` (so a
    ``--limit`` is honoured) plus the nodes of ``cvs_exec``; else ``cvs_exec``'s nodes; else ``cvs_nodes``.
    Order: ``cvs_node_index`` (head = 0), else the head first and then ``cvs_nodes`` order.
    Returns {node: {host, facts, unreachable, errors, prepare_error}} (see :func:`absent_check`)."""
    raw = raw if raw is not None else hostvars
    exec_hosts = list(hosts) if hosts is not None else list(groups.get("cvs_exec") or [])
    exec_of: dict[str, str] = {}
    for h in exec_hosts:
        exec_of.setdefault(str(_vars(hostvars, h).get("cvs_node") or h), h)
    inventory = [str(n) for n in groups.get("cvs_nodes") or []]
    if nodes is not None:
        wanted = [str(n) for n in nodes]
    elif hosts is not None:
        wanted = list(exec_of)
    else:
        reached = [n for n in inventory if probe in _vars(hostvars, n)]
        wanted = (reached + [n for n in exec_of if n not in reached]) if reached else (list(exec_of) or inventory)
    wanted = list(dict.fromkeys(wanted))
    order = list(dict.fromkeys([*(groups.get("cvs_head") or [])[:1], *inventory]))

    def index(pos: int, node: str) -> tuple[int, int]:
        for values in (_vars(hostvars, exec_of.get(node, node)), _vars(hostvars, node)):
            try:
                return int(values["cvs_node_index"]), pos
            except (KeyError, TypeError, ValueError):
                continue
        return (order.index(node) if node in order else len(order) + pos), pos

    rows: dict[str, dict[str, Any]] = {}
    for _key, node in sorted((index(p, n), n) for p, n in enumerate(wanted)):
        host = exec_of.get(node, node)
        values = _vars(hostvars, host)
        errors = values.get("cvs_check_errors")
        unreachable = find_unreachable(_vars(raw, host)) or (
            find_unreachable(_vars(raw, node)) if host != node else None
        )
        prepare_error = _vars(hostvars, node).get("cvs_prepare_error")
        rows[node] = {
            "host": host,
            "facts": node_facts(values),
            "unreachable": unreachable,
            "errors": dict(errors) if isinstance(errors, Mapping) else {},
            "prepare_error": str(prepare_error) if prepare_error else None,
        }
    return rows


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

    ``checks``: the requested checks (columns); ``nodes``: {node: {host, facts,
    unreachable, errors, prepare_error}} for every requested node of the run
    (rows; nodes that only appear in ``found`` are added; see
    :func:`absent_check` for the optional keys); ``found``: :func:`read_checks`
    output. ``complete`` is false while the run is still going (or was
    interrupted).
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
            src = os.path.join(run_dir, "checks", path_component(node), f"{check}.json") if run_dir else None
            per[check] = absent_check(check, node, info) if raw is None else normalise_check(check, node, raw, src)
            rec = per[check]
            if info.get("prepare_error") and rec["status"] == "PASS":
                # prepare failed after the node got its workload host: what ran there is no validated pass
                why = _one_line(info["prepare_error"])
                rec.update(status="ERROR", reason=f"{node}: {check} passed, but preparing the node failed: {why}")
            learned = {**(rec.get("facts") or {}), "backend": rec.get("backend")}
            for key, value in learned.items():
                if value is not None and key not in facts:
                    facts[key] = value
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
    status = "FAIL" if any(counts[b] for b in BAD) else ("INCOMPLETE" if incomplete else "PASS")
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
            "unreachable_nodes": sorted({f["node"] for f in failing if f["status"] == "UNREACHABLE"}),
            "failures": failing,
        },
        "nodes": rows,
    }


# --------------------------------------------------------------------------- writing


PROBE_BYTES = 4096


def _os_error_text(exc: OSError, path: str) -> str:
    if exc.errno == errno.ENOSPC:
        return f"no space left on device: {path}"
    return f"{exc.strerror or exc}"


def ensure_writable(directory: str) -> None:
    """Create ``directory`` and check a small file can be written there; ReportError otherwise."""
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".cvs-probe-", dir=directory)
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"\0" * PROBE_BYTES)  # an empty file would pass on a full disk
    except OSError as exc:
        raise ReportError(
            f"cannot write run results to {directory}: {_os_error_text(exc, directory)} "
            "(set cvs_results_dir to a writable directory on the controller with free space)"
        ) from exc
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


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
    history: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """Read the check files of a run and write results.json, junit.xml, report.html. Returns the record.

    ``fleet``: options of the fleet comparison (plugin_utils/_metrics/fleet.py), e.g. ``{tolerance: 5%}``."""
    if not run_id or "/" in run_id or run_id in (".", ".."):
        raise ReportError(f"invalid run id {run_id!r}")
    run_dir = os.path.join(results_dir, run_id)
    found = read_checks(run_dir)
    if not checks:  # re-writing the report of an earlier run: its checks, or whatever has files
        checks = _previous_checks(run_dir) or sorted({c for per in found.values() for c in per})
    record = aggregate(run_id, checks, nodes, found, complete=complete, run_dir=run_dir)
    _fleet.extend(record, found, fleet)  # cross-node comparison + plot data: added fields only
    _history.extend(record, found, results_dir, history)  # the run index, each node against its own history
    record["files"] = {
        "results": os.path.join(run_dir, "results.json"),
        "junit": os.path.join(run_dir, "junit.xml"),
        "html": os.path.join(run_dir, "report.html"),
    }
    files: Dict[str, str] = {
        "results.json": json.dumps({k: v for k, v in record.items() if k != "files"}, indent=2, default=str) + "\n",
        "junit.xml": to_junit(record),
        "report.html": to_html(record),
    }
    try:
        ensure_writable(run_dir)
    except ReportError as exc:
        raise ReportError(str(exc), record) from exc
    for name, text in files.items():
        path = os.path.join(run_dir, name)
        try:
            atomic_write(path, text)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                msg = (
                    f"no space left on device: cannot write {path} "
                    "(free space on the controller or set cvs_results_dir elsewhere)"
                )
            else:
                msg = f"cannot write the run report in {run_dir}: {exc.strerror or exc} ({path})"
            raise ReportError(msg, record) from exc
    return record


def node_statuses(record: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """{node: {check: status}} for every node of the run."""
    return {n: {c: r["status"] for c, r in row["checks"].items()} for n, row in record["nodes"].items()}


def stats(record: Mapping[str, Any], run_dir: str, write_error: Optional[str] = None) -> dict[str, Any]:
    """The summary published with set_stats (small: counts, every node's statuses, failing nodes)."""
    s = record["summary"]
    out = {
        "run_id": record["run_id"],
        "status": s["status"],
        "complete": record["complete"],
        "counts": s["counts"],
        "nodes": node_statuses(record),
        "failing_nodes": s["failing_nodes"],
        "incomplete_nodes": s["incomplete_nodes"],
        "unreachable_nodes": s.get("unreachable_nodes", []),
        "failures": [{k: f[k] for k in ("node", "check", "status", "reason")} for f in s["failures"]][:50],
        "results_dir": run_dir,
    }
    if write_error:
        out["write_error"] = write_error
    return out


_RANK = {"UNREACHABLE": 0, "ERROR": 1, "FAIL": 2, "MISSING": 3, "PASS": 4}


def verdict_line(record: Mapping[str, Any], run_dir: str, write_error: Optional[str] = None) -> str:
    """One line for the console: the run's status, then every node with its status (and why, when not PASS)."""
    parts = []
    for node, row in record["nodes"].items():
        bad = [r for r in row["checks"].values() if r["status"] != "PASS"]
        if not row["checks"]:
            parts.append(f"{node}: no checks")
        elif not bad:
            parts.append(f"{node}: PASS")
        else:
            worst = min(bad, key=lambda r: _RANK.get(r["status"], 0))
            reason = _one_line(worst["reason"], 300)
            reason = reason if reason.startswith(f"{node}: ") else f"{node}: {reason}"
            more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
            parts.append(f"{node}: {worst['status']} ({worst['check']}: {reason}){more}")
    line = f"run {record['run_id']}: {record['summary']['status']} - " + "; ".join(parts or ["no nodes"])
    if write_error:
        return f"{line} - the report could not be written: {write_error}"
    return f"{line} - see {run_dir}/report.html"
