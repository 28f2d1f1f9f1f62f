# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of cvs.cluster.report: folds the per-node check files of a run into results.json, junit.xml and
report.html on the controller. Documentation: plugins/modules/report.py. Logic: plugin_utils/_report/record.py."""

from __future__ import annotations

import os
from typing import Any, Mapping

from ansible.plugins.action import ActionBase

from ansible_collections.cvs.cluster.plugins.modules.report import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._history import report as _history
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.console import fleet_table
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.history_view import console_lines
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.record import (
    ReportError,
    ensure_writable,
    node_statuses,
    run_nodes,
    stats,
    verdict_line,
    write_report,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._run.verdict import (
    dispose_errors,
    unwritten_records,
    with_dispose,
)


def _fleet_summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """The fleet comparison's part of the published summary (outlying nodes, their reasons, fact mismatches)."""
    fleet = record.get("fleet")
    if not fleet:
        return {}
    return {
        "fleet_status": fleet["status"],
        "outlier_nodes": fleet["outlier_nodes"],
        "outliers": [{k: o[k] for k in ("node", "check", "metric", "reason")} for o in fleet["outliers"]][:50],
        "fact_issues": [f["reason"] for f in fleet["facts"]],
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result["changed"] = False
        try:
            if args["probe"]:
                ensure_writable(args["results_dir"])
                result["results_dir"] = args["results_dir"]
                return result
            if not args["run_id"]:
                result.update(failed=True, msg="run_id is required unless probe=true")
                return result
            record = write_report(
                args["results_dir"],
                args["run_id"],
                args["checks"],
                self._nodes(task_vars, args["hosts"], args["nodes"]),
                complete=args["complete"],
                fleet=args["fleet"] if args["fleet"] is not None else task_vars.get("cvs_fleet"),
                history=_history.options_from_vars(task_vars),
            )
            write_error = None
        except ReportError as exc:
            if exc.record is None:
                result.update(failed=True, msg=str(exc))
                return result
            record, write_error = exc.record, str(exc)
        except ValueError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        run_dir = os.path.join(args["results_dir"], args["run_id"])
        summary = {**stats(record, run_dir, write_error), **_fleet_summary(record), **_history.summary(record)}
        # a run whose dispose failed on a node never reads PASS: the line names the nodes and the tool's message
        errors = self._dispose_errors(task_vars, list(record["nodes"]))
        status, msg = with_dispose(verdict_line(record, run_dir, write_error), summary["status"], errors)
        if errors:
            summary.update(status=status, dispose_errors=[{"node": n, "error": e} for n, e in errors])
        result.update(
            changed=write_error is None,
            files=record["files"],
            summary=summary,
            fleet_table=fleet_table(record) + console_lines(record),
            nodes=node_statuses(record),
            msg=msg,
        )
        if write_error is not None:  # the summary above is still returned: the playbook can publish and judge it
            result.update(failed=True, write_error=write_error)
        return result

    @staticmethod
    def _dispose_errors(task_vars: Mapping[str, Any], nodes: list[str]) -> list[tuple[str, str]]:
        """(node, why dispose failed on it) for the report's nodes (``cvs_dispose_error``, set by validate.yml)."""
        hostvars = task_vars.get("hostvars") or {}
        return dispose_errors(nodes, [_host_vars(hostvars, n) for n in nodes])

    @staticmethod
    def _nodes(
        task_vars: Mapping[str, Any], hosts: list[str] | None, nodes: list[str] | None
    ) -> dict[str, dict[str, Any]]:
        """Every requested node of the run with its workload host, facts and problems (see _report.run_nodes)."""
        hostvars = task_vars.get("hostvars") or {}
        raw = getattr(hostvars, "raw_get", None)
        rows = run_nodes(task_vars.get("groups") or {}, hostvars, raw, nodes=nodes, hosts=hosts)
        for row in rows.values():  # a verdict check_result could not write: the report names the write error
            unwritten = unwritten_records(_host_vars(hostvars, row.get("host")))
            row["errors"] = {**{c: u["error"] for c, u in unwritten.items()}, **(row.get("errors") or {})}
        return rows


def _host_vars(hostvars: Any, host: Any) -> Mapping[str, Any]:
    try:
        values = hostvars[host]
    except (KeyError, TypeError):
        return {}
    return values if isinstance(values, Mapping) or hasattr(values, "get") else {}
