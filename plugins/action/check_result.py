# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of cvs.cluster.check_result: checks one node's record of one check against the schema and writes
it atomically on the controller. Documentation: plugins/modules/check_result.py.
Schema: plugin_utils/_report/check_record.py.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.cvs.cluster.plugins.modules.check_result import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import atomic_write, path_component
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA, CheckRecordError, validate
from ansible_collections.cvs.cluster.plugins.plugin_utils._run.verdict import UNWRITTEN_FACT


def record_path(results_dir: str, run_id: str, node: str, check: str) -> str:
    """``<results_dir>/<run_id>/checks/<node>/<check>.json``, each name one path component."""
    return os.path.join(results_dir, path_component(run_id), "checks", path_component(node), f"{check}.json")


_COMMON_VARS = ("inventory_hostname", "cvs_backend", "cvs_orchestrator", "cvs_slurm_job")


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _read(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def common_fields(task_vars: dict[str, Any], steps: list[dict[str, Any]] | None, now: str) -> dict[str, Any]:
    """The fields every suite's record shares, from the run's variables: a record's own values win over these.

    ``scheduler`` is the Slurm job of the run (``cvs_slurm_job``, set by prepare) with the check's ``steps``.
    """
    job = task_vars.get("cvs_slurm_job")
    scheduler = None
    if isinstance(job, dict) and job.get("id"):
        scheduler = {"type": "slurm", "job_id": str(job["id"]), "job_name": job.get("name"), "steps": steps or []}
    return {
        "host": task_vars.get("inventory_hostname"),
        "backend": task_vars.get("cvs_backend") or task_vars.get("cvs_orchestrator") or "baremetal",
        "finished": now,
        "scheduler": scheduler,
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        node = args["node"] or str(task_vars.get("cvs_node") or task_vars.get("inventory_hostname"))
        check = args["check"]
        where = {}
        for key, var in (("results_dir", "cvs_results_dir"), ("run_id", "cvs_run_id")):
            where[key] = args[key] or self._templar.template(task_vars.get(var) or "")
            if not where[key]:
                result.update(failed=True, msg=f"check_result: {key} is not set and neither is {var}")
                return result
        shared = {k: v for k, v in task_vars.items() if k in _COMMON_VARS}
        common = common_fields(self._templar.template(shared), args["steps"], _utc_now())
        try:
            record = validate({**common, **args["record"], "schema": SCHEMA, "check": check, "node": node})
        except CheckRecordError as exc:
            result.update(failed=True, msg=f"check_result: the {check!r} record of {node} is invalid: {exc}")
            return result
        path = record_path(where["results_dir"], where["run_id"], node, check)
        before = _read(path)
        if "finished" not in args["record"] and isinstance(before, dict) and before.get("finished"):
            record["finished"] = before["finished"]  # the same record written again is not a change
            if json.loads(json.dumps(record, default=str)) != before:
                record["finished"] = common["finished"]
        text = json.dumps(record, indent=2, default=str) + "\n"
        result.update(path=path, status=record["status"], changed=before != json.loads(text))
        if self._task.check_mode or not result["changed"]:
            return result
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write(path, text)
        except OSError as exc:
            # Not a failure of the host: a failed host would skip dispose. The verdict is kept as a fact of the host
            # (ansible_facts.cvs_unwritten_records: the report names the error, the playbook prints the verdict in
            # full at the end and fails the run). The words describe_write_error() reads back: the path after
            # "into", the errno.
            error = f"check_result: could not write into '{path}': [Errno {exc.errno}] {exc.strerror or exc}"
            result.update(
                changed=False, write_error=error, ansible_facts=unwritten(task_vars, check, path, error, record)
            )
            result["warnings"] = [f"{error}; the {check} verdict of {node} is printed in full at the end of the run"]
        return result


def unwritten(
    task_vars: Mapping[str, Any], check: str, path: str, error: str, record: Mapping[str, Any]
) -> dict[str, Any]:
    """The fact that keeps a verdict that could not be written: ``cvs_unwritten_records[check]`` = {path, error,
    record}, merged with the host's earlier ones (read as ``ansible_facts``, never as an injected variable)."""
    facts = task_vars.get("ansible_facts")
    before = facts.get(UNWRITTEN_FACT) if isinstance(facts, Mapping) else None
    entry = {"path": path, "error": error, "record": json.loads(json.dumps(record, default=str))}
    return {UNWRITTEN_FACT: {**(before if isinstance(before, Mapping) else {}), check: entry}}
