#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: burn_in
short_description: Run the validation suites again and again, past failing nodes, and rank the nodes
version_added: 0.1.0
description:
  - Runs O(playbook) (the collection's C(validate.yml)) once per iteration as a child C(ansible-playbook) with the
    inventory, limit, extra vars, connection and vault options of the playbook that called it, each iteration a run
    of its own with run id C(<burn_in_id>-iNN) in O(results_dir). Ansible cannot loop over plays; this is the loop.
  - An iteration that wrote its final report (C(results.json) with C(complete=true)) goes on to the next, whatever
    its nodes did (failed, unreachable). An interrupted iteration, or one that left no complete report (a broken
    inventory, a killed controller), stops the burn-in, which then fails naming it.
  - Stops after O(repeat) iterations or when O(duration) has passed, whichever comes first (an iteration that started
    in time finishes). Then reads the C(results.json) of every iteration and ranks the nodes - most failures first,
    then the largest spread of a key metric (throughput or time) over the iterations - and writes
    C(<results_dir>/burn-in-<burn_in_id>/burn_in.json) next to each iteration's console output (C(iNN.log)).
  - This is an action plugin; it runs on the controller only. C(playbooks/burn_in.yml) calls it with C(cvs_repeat)
    and C(cvs_duration). In check mode nothing runs; the plan is returned.
extends_documentation_fragment:
  - cvs.cluster.attributes
  - cvs.cluster.attributes.no_diff
attributes:
  check_mode:
    support: full
    description: Returns the plan (iterations, run ids) without running anything.
author:
  - cvs.cluster developers (@cvs-cluster)
options:
  results_dir:
    description: The results directory of every iteration (C(cvs_results_dir)).
    type: path
    required: true
  repeat:
    description:
      - Number of iterations (C(cvs_repeat)), 1 to 10000. At least one of O(repeat) and O(duration) is needed.
    type: raw
  duration:
    description:
      - How long to keep starting iterations (C(cvs_duration)) - seconds, or a number with C(s), C(m), C(h) or C(d)
        (V(8h), V(90m)).
    type: raw
  burn_in_id:
    description: Names the burn-in and prefixes its iterations' run ids. Default - a new id like a run id.
    type: str
  playbook:
    description: The playbook of one iteration. Default - the collection's C(playbooks/validate.yml).
    type: path
  extra_vars:
    description: Extra vars given to every iteration, after the caller's own.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Run validate.yml's suites three times and rank the nodes
  cvs.cluster.burn_in:
    results_dir: /var/tmp/cvs-results
    repeat: 3
  register: burn_in

- name: Eight hours of RVS
  cvs.cluster.burn_in:
    results_dir: /var/tmp/cvs-results
    duration: 8h
    extra_vars:
      cvs_validate_checks: [rvs]
"""

RETURN = r"""
burn_in_id:
  description: The burn-in's id.
  returned: always
  type: str
  sample: 20261207-220000-ab12cd
iterations:
  description: Per iteration - iteration, run_id, rc (exit status of its ansible-playbook), seconds, finished.
  returned: always
  type: list
  elements: dict
ranking:
  description:
    - Per node, best last - rank, node, iterations, failures, failed_checks (C(<check> <status>) to count),
      failed_runs, metrics (per key metric - values, median, spread), max_spread, max_spread_metric.
  returned: when not in check mode
  type: list
  elements: dict
lines:
  description: The ranking as text, one line per node.
  returned: when not in check mode
  type: list
  elements: str
  sample: ["1. node2: failed 2 of 2 iteration(s) (rvs FAIL x2); largest spread 0.3% (rvs pebb_single bandwidth_gbps)"]
failing_nodes:
  description: Nodes that failed in at least one iteration.
  returned: when not in check mode
  type: list
  elements: str
file:
  description: Path of C(burn_in.json).
  returned: when not in check mode
  type: str
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC: dict[str, Any] = {
    "results_dir": {"type": "path", "required": True},
    "repeat": {"type": "raw"},
    "duration": {"type": "raw"},
    "burn_in_id": {"type": "str"},
    "playbook": {"type": "path"},
    "extra_vars": {"type": "dict", "default": {}},
}


def main() -> None:
    # Reached only when the action plugin of the same name is bypassed: the arguments are checked as the action
    # checks them, and nothing runs on the node.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="cvs.cluster.burn_in runs on the controller as an action plugin, not as a module on a node")


if __name__ == "__main__":
    main()
