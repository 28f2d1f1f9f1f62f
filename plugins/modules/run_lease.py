#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: run_lease
short_description: Hold a node for one validation run (a lease file that a dead controller stops renewing)
version_added: 0.2.0
description:
  - A machine is held by one cvs.cluster run at a time, whatever the inventory calls it. O(state=acquired) takes or
    renews the lease file C(<dir>/machine-<key>.lease) for O(ttl) seconds, C(key) being the machine's identity
    (see RV(machine)). When another run holds a lease that has not expired the task fails naming that run, the
    inventory name it gave the machine when it is not O(node), when its lease ends and how to stop it
    (C(-e cvs_finish_run=<run id>)).
  - When this run already holds the machine under another inventory name (two names for one machine, for example
    C(node1) and C(node1-again) at one address), the task fails naming both names; the run must give each machine
    one inventory name.
  - An expired lease of another run means its controller died without disposing (for example SIGKILLed). With
    O(stop_stale=true) the module first stops every process that run left on the node (see
    M(cvs.cluster.run_processes)), so what a killed controller could not stop is cleaned up by the next run.
  - O(state=released) removes the machine's lease only when O(run_id) holds it (under any name); a lease of another
    run is left as it is.
  - The roles of this collection take the lease in C(cvs.cluster.prepare), extend it before each long step (RVS,
    MaxText) to cover that step's timeout, and release it in C(cvs.cluster.dispose).
extends_documentation_fragment:
  - cvs.cluster.run
  - cvs.cluster.attributes.no_diff
  - cvs.cluster.run.lease_dir
author:
  - cvs.cluster developers (@cvs-cluster)
options:
  state:
    description: C(acquired) takes or renews the lease, C(released) gives it back.
    type: str
    choices: [acquired, released]
    default: acquired
  ttl:
    description:
      - Seconds the lease lasts beyond O(step_seconds) (O(state=acquired)); a controller that dies leaves the node
        held this long after its last step should have ended.
    type: int
    default: 900
  step_seconds:
    description: The longest the step about to start may take (its timeout); the lease covers it plus O(ttl).
    type: int
    default: 0
  controller:
    description:
      - Who takes the lease, shown to a run that is refused. The action plugin sets it to the controller process
        running the playbook (C(user), C(host), C(pid), C(start), C(boot_id)).
      - When a refusal names a holder that is a process of the same controller machine and boot that no longer
        lives (the playbook ended or was killed without disposing), the action plugin takes the node over at once
        as with an expired lease (see O(stale_run)).
    type: dict
  stale_run:
    description: A run known to be over; its lease is treated as expired (its processes are stopped first).
    type: str
    default: ""
  stop_stale:
    description: Stop the processes of a run whose lease expired before taking the node.
    type: bool
    default: true
  machine_name:
    description:
      - Tell machines apart by this name instead of their host name (the third part of the identity, see notes), so
        that several inventory names of one machine each hold a lease of their own.
      - Only for benchmarks that reach one machine under many inventory names on purpose (C(bench/)); on a cluster
        it defeats the refusal of two names for one machine. The roles pass C(cvs_lease_machine_name).
    type: str
attributes:
  check_mode:
    support: full
    description: Reports what would happen; writes, removes and stops nothing.
notes:
  - Times in the lease file are epoch seconds of the node's clock, so controller clock skew does not matter.
  - The machine's identity is its C(/etc/machine-id) (else C(/var/lib/dbus/machine-id)), its boot id
    (C(/proc/sys/kernel/random/boot_id)) and its host name. The machine-id tells installed machines apart, the boot
    id machines cloned from one image, the host name nodes that share one kernel and one C(/etc) (network or
    container namespaces, as in the simulated cluster of the tests). A reboot gives a machine a new identity (no
    process of a run survives it).
seealso:
  - module: cvs.cluster.run_processes
"""

EXAMPLES = r"""
- name: Hold the node for this run (refused while another run holds it)
  cvs.cluster.run_lease:
    node: "{{ cvs_node }}"
    run_id: "{{ cvs_run_id }}"
    ttl: 3600

- name: Give the node back
  cvs.cluster.run_lease:
    node: "{{ cvs_node }}"
    run_id: "{{ cvs_run_id }}"
    state: released
"""

RETURN = r"""
lease:
  description: The lease now on the node (O(state=acquired)).
  returned: when acquired
  type: dict
  sample: {run_id: 20261205-071500-ab12cd, node: node1, taken: 1796454900.1, expires: 1796455800.1,
           machine: {machine_id: 3d1219c7c4c5404aaa1f6d2a48adfda4, boot_id: 462858a4-5db0-4868-8ab8-56a138bae239,
                     hostname: node1, key: 0c5b2b0f5cbd4b6f8b8e1f1d0e0a9c3e},
           controller: {user: root, host: ctl, pid: 4242, start: 81234, boot_id: 6f1c0e8a-0d5e-4c61-9d55-2b0a5e0f4c11}}
machine:
  description:
    - The identity of the machine the task ran on (C(machine_id), C(boot_id), C(hostname)) and its C(key), the same
      for every inventory name of one machine; returned also when the task fails, so that a run can name the nodes
      of its inventory that are one machine.
  returned: always
  type: dict
  sample: {machine_id: 3d1219c7c4c5404aaa1f6d2a48adfda4, boot_id: 462858a4-5db0-4868-8ab8-56a138bae239,
           hostname: node1, key: 0c5b2b0f5cbd4b6f8b8e1f1d0e0a9c3e}
stale_run:
  description:
    - The run whose expired lease was taken over, empty when there was none.
    - The action plugin then warns C(<node> - run <run id> died holding this node ...) naming the processes it stopped.
  returned: when acquired
  type: str
stale_stopped:
  description: Processes of the stale run that were stopped (C(pid), C(args)).
  returned: when acquired
  type: list
  elements: dict
held_by:
  description: O(state=released) - the other run holding the node, whose lease was left alone.
  returned: when released
  type: str
holder:
  description: The lease of the other run that holds the node, when the task failed because of it.
  returned: failure
  type: dict
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cvs.cluster.plugins.module_utils._run_guard import (
    DEFAULT_LEASE_DIR,
    RUN_ARGUMENT_SPEC,
    LeaseHeld,
    acquire,
    decide_acquire,
    lease_path,
    machine_identity,
    read_lease,
    release,
    run_arguments_problem,
    stop_marked,
    survivors_message,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **RUN_ARGUMENT_SPEC,
            "state": {"type": "str", "choices": ["acquired", "released"], "default": "acquired"},
            "ttl": {"type": "int", "default": 900},
            "step_seconds": {"type": "int", "default": 0},
            "dir": {"type": "path", "default": DEFAULT_LEASE_DIR},
            "controller": {"type": "dict"},
            "stale_run": {"type": "str", "default": ""},
            "stop_stale": {"type": "bool", "default": True},
            "machine_name": {"type": "str"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if run_arguments_problem(p):
        module.fail_json(msg=f"run_lease: {run_arguments_problem(p)}")
    if p["ttl"] <= 0 or p["step_seconds"] < 0:
        module.fail_json(
            msg=f"run_lease: ttl must be positive and step_seconds not negative, got {p['ttl']}, {p['step_seconds']}"
        )
    # read once here, returned in every answer: the controller compares the machines of all the run's nodes
    machine = machine_identity(hostname=p["machine_name"])
    try:
        if p["state"] == "released":
            if module.check_mode:
                current = read_lease(lease_path(p["dir"], machine)) or {}
                held_by = "" if current.get("run_id") == p["run_id"] else str(current.get("run_id") or "")
                module.exit_json(changed=not held_by and bool(current), held_by=held_by, machine=machine)
            result = release(p["dir"], p["node"], p["run_id"], machine)
            module.exit_json(changed=result["released"], held_by=result["held_by"], machine=machine)
        if module.check_mode:
            current = read_lease(lease_path(p["dir"], machine))
            decision = decide_acquire(current, p["run_id"], p["node"], time.time(), p["stale_run"])
            if decision["held_by"]:
                module.fail_json(msg=decision["held_by"], holder=current, machine=machine)
            module.exit_json(
                changed=True, lease=current or {}, stale_run=decision["stale_run"], stale_stopped=[], machine=machine
            )
        taken = acquire(
            p["dir"],
            p["node"],
            p["run_id"],
            p["ttl"] + p["step_seconds"],
            p["controller"] or {},
            p["stale_run"],
            machine=machine,
        )
    except LeaseHeld as exc:
        module.fail_json(msg=str(exc), holder=exc.holder, machine=machine)
    except OSError as exc:
        module.fail_json(msg=f"{p['node']}: cannot use the lease directory {p['dir']}: {exc}", machine=machine)
    stopped: list = []
    if taken["stale_run"] and p["stop_stale"]:
        outcome = stop_marked(taken["stale_run"], p["node"], p["grace"])
        stopped = outcome["stopped"]
        if outcome["survivors"]:
            module.fail_json(
                msg=survivors_message(p["node"], taken["stale_run"], outcome["survivors"]),
                machine=machine,
                lease=taken["lease"],
                stale_run=taken["stale_run"],
                stale_stopped=stopped,
            )
    module.exit_json(
        changed=not taken["renewed"] or bool(stopped),
        machine=machine,
        lease=taken["lease"],
        stale_run=taken["stale_run"],
        stale_stopped=stopped,
    )


if __name__ == "__main__":
    main()
