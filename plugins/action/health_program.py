# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of cvs.cluster.health_program: checks the baseline and gathers the program's files on the
controller, then writes them on the node with the module of the same name. Documentation and the module:
plugins/modules/health_program.py. Logic: plugin_utils/_quarantine/install.py, the program health.py."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.cvs.cluster.plugins.modules.health_program import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.install import InstallError, files, read_baseline


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        module_args: dict[str, Any] = {"state": args["state"], "dest": args["dest"]}
        if args["state"] == "present":
            node = args["node"] or task_vars.get("cvs_node") or task_vars.get("inventory_hostname")
            if not args["baseline"]:
                result.update(failed=True, msg="baseline is required with state=present (a run's baseline.json)")
                return result
            try:
                data = read_baseline(args["baseline"], args["cluster_name"], str(node))
                module_args["files"] = files(data, args["config"], args["cluster_name"], args["python"])
            except (InstallError, OSError) as exc:
                result.update(failed=True, msg=f"{task_vars.get('inventory_hostname')}: {exc}")
                return result
        result.update(self._execute_module("cvs.cluster.health_program", module_args=module_args, task_vars=task_vars))
        return result
