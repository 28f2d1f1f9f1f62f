# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The last word of validate.yml: why a node fails (its checks that did not pass) and why the run fails.

``report`` is what ``cvs.cluster.report`` returned (registered with ``ignore_errors``): ``nodes`` maps each node
to ``{check: status}``, ``summary`` holds ``status`` and ``results_dir``, ``msg`` the verdict line naming every
node with its status and why; ``failed`` is true when the report could not be written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


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
    or ``""`` when it passed."""
    status = (report.get("summary") or {}).get("status") or "ERROR"
    if not report.get("failed") and status == "PASS" and not dispose_errors:
        return ""
    message = str(report.get("msg") or "the run report was not written")
    if dispose_errors:
        message += "; dispose failed on " + "; ".join(f"{node}: {error}" for node, error in dispose_errors)
    return message


def verdict(
    report: Mapping[str, Any], host: str, node: str, nodes: Sequence[str], node_vars: Sequence[Mapping[str, Any]]
) -> str:
    """The failure of ``host`` in the verdict play: a workload host fails with its node's checks, ``localhost`` with
    the run's verdict (``nodes`` and their variables ``node_vars`` say where dispose failed)."""
    if host != "localhost":
        return node_failure(report, node)
    errors = [
        (str(n), str(v["cvs_dispose_error"]))
        for n, v in zip(nodes, node_vars)
        if isinstance(v, Mapping) and v.get("cvs_dispose_error") is not None
    ]
    return run_failure(report, errors)
