#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: run_guard
short_description: Arm a guard on a node that stops the run there when its controller is gone
version_added: 0.2.0
description:
  - Starts a small guard program on the node (the node's Python, marked C(CVS_GUARD_RUN_ID=<run id>) and
    C(CVS_NODE=<node>)) and a holder process on the controller that keeps a session to it open for as long as the
    C(ansible-playbook) process of the task lives.
  - When that process is gone without having disposed of the run (an ansible-runner or AWX cancel, which is a
    SIGKILL of the playbook's process group; a controller that crashed), the session ends and the guard does on
    the node what C(cvs.cluster.dispose) would have done; it cancels the run's Slurm job when O(slurm_job) names
    one, stops the run's marked processes (see
    M(cvs.cluster.run_processes)), removes the run's C(per_run) container when O(container) names one and it
    carries the run's C(cvs.run_id) label, removes the result files of the run's async jobs from O(async_dir), and
    releases the run's lease (M(cvs.cluster.run_lease)).
  - M(cvs.cluster.run_processes) disarms the guard first (SIGTERM), so a dispose that runs, after Ctrl-C too, is
    never raced by it.
  - C(cvs.cluster.prepare) arms it on every node right after taking the node's lease, unless C(cvs_node_guard) is
    false.
  - Needs the ssh connection without a password, and a become method that asks for no password when the task
    uses become. Otherwise the task warns, naming the node and why, returns RV(armed=false), and a cancelled run's
    processes stay until the next run takes the node or C(-e cvs_finish_run=<run id>).
extends_documentation_fragment:
  - cvs.cluster.run
  - cvs.cluster.attributes.no_diff
  - cvs.cluster.run.lease_dir
author:
  - cvs.cluster developers (@cvs-cluster)
options:
  container:
    description: The run's C(per_run) container, removed by the guard; omit for the baremetal backend and for
      containers that outlive runs.
    type: dict
    suboptions:
      engine:
        description: The container engine's command on the node.
        type: str
        required: true
        choices: [docker, podman]
      name:
        description: The container's name.
        type: str
        required: true
  slurm_job:
    description: The name of the run's Slurm job (C(cvs-<run id>) on the Slurm backend), cancelled by the guard
      with C(scancel --name) before it stops the run's processes.
    type: str
  slurm_conf:
    description: The slurm.conf that C(scancel) reads on the node (the guard runs under privilege escalation, which
      drops C(SLURM_CONF) from the environment); default Slurm's own.
    type: path
  async_dir:
    description:
      - The directory on the node where the run's async jobs keep their result files, C(<scratch>/async) (the role
        C(cvs.cluster.rvs) sets C(ansible_async_dir) to it).
      - The guard removes those files (and the directory when nothing else is in it) after it has stopped the run's
        processes. Omit when the jobs run in a container.
    type: str
  ready_timeout:
    description: Seconds to wait for the guard to report that it listens.
    type: int
    default: 60
attributes:
  action:
    support: full
    description: Runs as an action plugin on the controller; the guard is sent over the task's connection.
  check_mode:
    support: full
    description: Arms nothing.
notes:
  - The guard reacts within about a second of the controller process going away, then needs up to O(grace)
    seconds to stop the processes. A controller whose network vanishes without closing its TCP connections is
    seen only when the node's sshd drops the session (C(ClientAliveInterval)).
  - What the guard did is printed on its session; the next run's lease step finds the node free.
seealso:
  - module: cvs.cluster.run_lease
  - module: cvs.cluster.run_processes
"""

EXAMPLES = r"""
- name: Guard the run on this node (docker per_run container)
  cvs.cluster.run_guard:
    node: "{{ inventory_hostname }}"
    run_id: "{{ cvs_run_id }}"
    container:
      engine: docker
      name: cvs-node
"""

RETURN = r"""
armed:
  description: Whether a guard listens on the node.
  returned: always
  type: bool
guard_pid:
  description: The guard's process id on the node.
  returned: when RV(armed)
  type: int
msg:
  description: Why no guard was armed.
  returned: when not RV(armed)
  type: str
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cvs.cluster.plugins.module_utils._run_guard import DEFAULT_LEASE_DIR, RUN_ARGUMENT_SPEC

ARGUMENT_SPEC: dict[str, Any] = {
    **RUN_ARGUMENT_SPEC,
    "dir": {"type": "path", "default": DEFAULT_LEASE_DIR},
    "container": {
        "type": "dict",
        "options": {
            "engine": {"type": "str", "required": True, "choices": ["docker", "podman"]},
            "name": {"type": "str", "required": True},
        },
    },
    "slurm_job": {"type": "str"},
    "slurm_conf": {"type": "path"},
    "async_dir": {"type": "str"},
    "ready_timeout": {"type": "int", "default": 60},
}


def main() -> None:
    # Reached only when the action plugin of the same name is bypassed: the arguments are checked as the action
    # checks them (so the documentation above and this spec cannot drift apart), and no guard is armed.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="cvs.cluster.run_guard runs on the controller as an action plugin, not as a module on a node")


if __name__ == "__main__":
    main()
