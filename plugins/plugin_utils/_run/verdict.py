# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The last word of validate.yml: why a node fails (its checks that did not pass) and why the run fails.

``report`` is what ``cvs.cluster.report`` returned (registered with ``ignore_errors``): ``nodes`` maps each node
to ``{check: status}``, ``summary`` holds ``status`` and ``results_dir``, ``msg`` the verdict line naming every
node with its status and why; ``failed`` is true when the report could not be written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

UNWRITTEN_FACT = "cvs_unwritten_records"  # the fact cvs.cluster.check_result keeps a verdict in when it cannot write
_RUN_HEAD = re.compile(r"^run (\S+): [A-Z]+$")
_STEP_TEXT = 500


def node_failure(report: Mapping[str, Any], node: str) -> str:
    """``<node>: <check> <status>; ... - see <results>/report.html`` naming the checks that did not pass, or ``""``."""
    mine = (report.get("nodes") or {}).get(node) or {}
    bad = [f"{check} {status}" for check, status in mine.items() if status != "PASS"]
    if not bad:
        return ""
    where = (report.get("summary") or {}).get("results_dir") or "the results directory"
    return f"{node}: {'; '.join(bad)} - see {where}/report.html"


def run_failure(report: Mapping[str, Any], dispose_errors: Sequence[tuple[str, str]]) -> str:
    """Why the run fails (the report's verdict, else that it was not written; the nodes dispose could not clean),
    or ``""`` when it passed. A run whose dispose failed never reads PASS."""
    summary = report.get("summary") or {}
    status = summary.get("status") or "ERROR"
    if not report.get("failed") and status == "PASS" and not dispose_errors:
        return ""
    message = str(report.get("msg") or "the run report was not written")
    if dispose_errors and not summary.get("dispose_errors"):  # the report's line already names them
        message = with_dispose(message, status, dispose_errors)[1]
    return message


def dispose_text(errors: Sequence[tuple[str, str]]) -> str:
    """``dispose failed on n2, n3: <error>; on n1: <error>``: nodes with the same error named once together."""
    by_error: dict[str, list[str]] = {}
    for node, error in errors:
        by_error.setdefault(str(error), []).append(str(node))
    parts = [f"{', '.join(nodes)}: {error}" for error, nodes in by_error.items()]
    return "dispose failed on " + "; on ".join(parts)


def with_dispose(msg: str, status: str, errors: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """(status, verdict line) of a run whose dispose failed on some nodes: PASS becomes ERROR (the run fails), and
    the line ``run <id>: <status> - <nodes>`` names the dispose failures right after the status."""
    if not errors:
        return status, msg
    new_status = "ERROR" if status == "PASS" else status
    head, sep, rest = msg.partition(" - ")
    match = _RUN_HEAD.match(head)
    if match is None:
        return new_status, f"{msg}; {dispose_text(errors)}"
    tail = f" - checks: {rest}" if sep else ""
    return new_status, f"run {match.group(1)}: {new_status} - {dispose_text(errors)}{tail}"


def dispose_errors(nodes: Sequence[str], node_vars: Sequence[Any]) -> list[tuple[str, str]]:
    """(node, why dispose failed there) for every node whose ``cvs_dispose_error`` is set, in ``nodes`` order."""
    return [
        (str(n), str(v.get("cvs_dispose_error")))
        for n, v in zip(nodes, node_vars)
        if hasattr(v, "get") and v.get("cvs_dispose_error") is not None
    ]


def step_failure(result: Any) -> Optional[str]:
    """The tool's own message of a failed (or unreachable) task result, on one bounded line; None when it did not
    fail. A command's stderr (its last lines) is the tool's message; Ansible's ``non-zero return code`` is not."""
    if not isinstance(result, Mapping) or not (result.get("failed") or result.get("unreachable")):
        return None
    lines = [line.strip() for line in str(result.get("stderr") or "").splitlines() if line.strip()]
    msg = " ".join(str(result.get("msg") or "").split())
    text = "; ".join(lines[-3:])
    if not text:
        text = msg or "failed"
    elif msg and msg != "non-zero return code" and msg not in text:
        text = f"{msg}: {text}"
    if isinstance(result.get("rc"), int) and result["rc"] not in (0, 1) and not result.get("unreachable"):
        text += f" (exit {result['rc']})"
    return text if len(text) <= _STEP_TEXT else text[: _STEP_TEXT - 3] + "..."


def dispose_failures(steps: Mapping[str, Any]) -> str:
    """``<step>: <the tool's message>; ...`` for every dispose step whose registered result failed, or ``""``."""
    failed = ((step, step_failure(result)) for step, result in steps.items())
    return "; ".join(f"{step}: {why}" for step, why in failed if why is not None)


def unwritten_records(values: Any) -> dict[str, dict[str, Any]]:
    """{check: {path, error, record}} of the verdicts cvs.cluster.check_result could not write for one host (its
    ``ansible_facts.cvs_unwritten_records``); ``{}`` when there are none."""
    facts = values.get("ansible_facts") if hasattr(values, "get") else None
    records = facts.get(UNWRITTEN_FACT) if hasattr(facts, "get") else None
    if not hasattr(records, "items"):
        return {}
    return {str(check): dict(entry) for check, entry in records.items() if isinstance(entry, Mapping)}


def unwritten_verdicts(hosts: Sequence[str], host_vars: Sequence[Any]) -> list[dict[str, Any]]:
    """Every verdict the run could not write, in host order: ``{node, check, path, error, record}`` (``record`` in
    full, as cvs.cluster.check_result checked it)."""
    out = []
    for host, values in zip(hosts, host_vars):
        for check, entry in unwritten_records(values).items():
            record = entry.get("record") if isinstance(entry.get("record"), Mapping) else {}
            node = record.get("node") or (values.get("cvs_node") if hasattr(values, "get") else None) or host
            out.append({"node": str(node), "check": check, "path": entry.get("path"), "error": entry.get("error"),
                        "record": record})  # fmt: skip
    return out


def verdict(
    report: Mapping[str, Any], host: str, node: str, nodes: Sequence[str], node_vars: Sequence[Mapping[str, Any]]
) -> str:
    """The failure of ``host`` in the verdict play: a workload host fails with its node's checks, ``localhost`` with
    the run's verdict (``nodes`` and their variables ``node_vars`` say where dispose failed)."""
    if host != "localhost":
        return node_failure(report, node)
    return run_failure(report, dispose_errors(nodes, node_vars))
