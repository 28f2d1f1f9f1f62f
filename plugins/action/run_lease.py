# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of cvs.cluster.run_lease: adds the controller's identity to the lease, takes over a lease whose
holder is a gone process of this controller, and warns naming a dead run it took the node from.
Documentation: plugins/modules/run_lease.py.
Logic: module_utils/_run_guard.py (node), plugin_utils/_run/owner.py and _run/plan.py (controller)."""

from __future__ import annotations

import os
from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.cvs.cluster.plugins.plugin_utils._run.owner import controller_gone, controller_identity
from ansible_collections.cvs.cluster.plugins.plugin_utils._run.plan import stale_notice


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        # the worker process runs this; its parent is the ansible-playbook process that owns the run
        args.setdefault("controller", controller_identity(os.getppid()))
        result.update(self._execute_module("cvs.cluster.run_lease", module_args=args, task_vars=task_vars))
        holder = result.get("holder") or {}
        if result.get("failed") and holder.get("run_id") and controller_gone(holder.get("controller")):
            retry = {**args, "stale_run": holder["run_id"]}
            result = self._execute_module("cvs.cluster.run_lease", module_args=retry, task_vars=task_vars)
        # one warning where a dead run was taken over, instead of a task per node that is skipped on the others
        notice = stale_notice(str(args.get("node") or ""), result)
        if notice:
            result["warnings"] = [*result.get("warnings", []), notice]
        return result
