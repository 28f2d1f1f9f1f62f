# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of cvs.cluster.quarantine: reads a run's results on the controller, runs scontrol over the task's
connection (the Slurm submit host). Documentation: plugins/modules/quarantine.py. Logic:
plugin_utils/_quarantine/ (act.py, plan.py, reason.py, baseline.py)."""

from __future__ import annotations

import shlex
import time

from ansible.plugins.action import ActionBase

from ansible_collections.cvs.cluster.plugins.modules.quarantine import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.act import quarantine
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.plan import QuarantineError


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)

        def execute(argv: list[str]) -> tuple[int, str, str]:
            done = self._low_level_execute_command(shlex.join(argv))
            return int(done.get("rc", 1)), str(done.get("stdout", "")), str(done.get("stderr", ""))

        try:
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            result.update(quarantine(args, execute, bool(self._task.check_mode), now))
        except (QuarantineError, OSError, ValueError) as exc:
            result.update(failed=True, changed=False, msg=str(exc))
        if not self._task.diff:
            result.pop("diff", None)
        return result
