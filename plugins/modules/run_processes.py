#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: run_processes
short_description: Find or stop every process a validation run started on a node
version_added: 0.2.0
description:
  - The roles of this collection start every workload process (RVS, the MaxText launcher and C(train.py)) with the
    environment variables C(CVS_RUN_ID=<run id>) and C(CVS_NODE=<node>); child processes inherit them whatever
    process group or session they move to. This module finds a run's processes on one node by reading
    C(/proc/<pid>/environ).
  - O(state=stopped) first disarms the run's guard on the node (M(cvs.cluster.run_guard)), then sends SIGTERM,
    waits O(grace) seconds, then SIGKILLs what is left and fails when a process
    survives. Processes of other runs and of other nodes sharing the process table (containers seen from their
    host) are never touched.
  - C(cvs.cluster.dispose) calls it on every node, so a failed, interrupted (Ctrl-C, SIGTERM, ansible-runner or
    AWX cancel followed by C(cvs_finish_run)) or finished run leaves nothing running.
extends_documentation_fragment:
  - cvs.cluster.run
  - cvs.cluster.attributes.no_diff
author:
  - cvs.cluster developers (@cvs-cluster)
options:
  state:
    description: C(stopped) stops the processes, C(present) only lists them.
    type: str
    choices: [stopped, present]
    default: stopped
attributes:
  check_mode:
    support: full
    description: Lists the processes that would be stopped.
notes:
  - Reading other users' C(/proc/<pid>/environ) needs root; processes this user may not read are counted in
    RV(unreadable). On the container backend a C(per_run) container is removed by C(cvs.cluster.dispose) in any
    case.
seealso:
  - module: cvs.cluster.run_lease
"""

EXAMPLES = r"""
- name: Stop what run 20261205-071500-ab12cd left on this node
  cvs.cluster.run_processes:
    node: "{{ cvs_node }}"
    run_id: 20261205-071500-ab12cd
    grace: 10
  become: true
"""

RETURN = r"""
processes:
  description: The run's processes found on the node before stopping (C(pid), C(args)).
  returned: always
  type: list
  elements: dict
  sample: [{pid: 4321, args: "/bin/bash ./launch.sh"}, {pid: 4325, args: "python3 train.py config.yml"}]
killed:
  description: PIDs that needed SIGKILL after the grace period.
  returned: when O(state=stopped)
  type: list
  elements: int
unreadable:
  description: Processes whose environment could not be read (not root).
  returned: always
  type: int
guards_disarmed:
  description: Guards of the run (M(cvs.cluster.run_guard)) ended before stopping, so they do not clean up too.
  returned: when O(state=stopped)
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cvs.cluster.plugins.module_utils._run_guard import (
    RUN_ARGUMENT_SPEC,
    disarm_guards,
    marked_processes,
    run_arguments_problem,
    stop_marked,
    survivors_message,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **RUN_ARGUMENT_SPEC,
            "state": {"type": "str", "choices": ["stopped", "present"], "default": "stopped"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if run_arguments_problem(p):
        module.fail_json(msg=f"run_processes: {run_arguments_problem(p)}")
    if p["state"] == "present" or module.check_mode:
        found = marked_processes(p["run_id"], p["node"])
        module.exit_json(
            changed=p["state"] == "stopped" and bool(found["processes"]),
            processes=found["processes"],
            unreadable=found["unreadable"],
        )
    # the run's guard first: it would otherwise start the same cleanup when the playbook ends
    guards = disarm_guards(p["run_id"], p["node"])
    outcome = stop_marked(p["run_id"], p["node"], p["grace"])
    if outcome["survivors"]:
        module.fail_json(
            msg=survivors_message(p["node"], p["run_id"], outcome["survivors"]),
            processes=outcome["stopped"],
            killed=outcome["killed"],
            unreadable=outcome["unreadable"],
            guards_disarmed=guards,
        )
    module.exit_json(
        changed=bool(outcome["stopped"]) or bool(guards),
        processes=outcome["stopped"],
        killed=outcome["killed"],
        unreadable=outcome["unreadable"],
        guards_disarmed=guards,
    )


if __name__ == "__main__":
    main()
