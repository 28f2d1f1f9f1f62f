# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of cvs.cluster.check_result: checks one node's record of one check against the schema and writes
it atomically on the controller. Documentation: plugins/modules/check_result.py.
Schema: plugin_utils/_report/check_record.py.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import atomic_write, path_component
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA, CheckRecordError, validate

ARGUMENT_SPEC: dict[str, Any] = {
    "results_dir": {"type": "path", "required": True},
    "run_id": {"type": "str", "required": True},
    "check": {"type": "str", "required": True},
    "node": {"type": "str"},
    "record": {"type": "dict", "required": True},
}


def record_path(results_dir: str, run_id: str, node: str, check: str) -> str:
    """``<results_dir>/<run_id>/checks/<node>/<check>.json``, each name one path component."""
    return os.path.join(results_dir, path_component(run_id), "checks", path_component(node), f"{check}.json")


def _read(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


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
        try:
            record = validate({**args["record"], "schema": SCHEMA, "check": check, "node": node})
        except CheckRecordError as exc:
            result.update(failed=True, msg=f"check_result: the {check!r} record of {node} is invalid: {exc}")
            return result
        path = record_path(args["results_dir"], args["run_id"], node, check)
        text = json.dumps(record, indent=2, default=str) + "\n"
        result.update(path=path, status=record["status"], changed=_read(path) != json.loads(text))
        if self._task.check_mode or not result["changed"]:
            return result
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write(path, text)
        except OSError as exc:
            # the words describe_write_error() reads back: the path after "into", the errno
            result.update(failed=True, msg=f"check_result: could not write into '{path}': [Errno {exc.errno}] "
                          f"{exc.strerror or exc}")  # fmt: skip
        return result
