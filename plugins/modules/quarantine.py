#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: quarantine
short_description: Drain the Slurm nodes a run failed, resume those it passed, and write the run's baseline
version_added: 0.3.0
description:
  - Reads a finished run's C(results.json) on the controller (C(<results_dir>/<run_id>/results.json)) and decides
    per node, in C(plugins/plugin_utils/_quarantine/plan.py) - a node fails when one of its checks is C(FAIL),
    C(ERROR), C(UNREACHABLE) or C(OUTLIER) of its own (a check that did not run there, or that blames another node
    with C(failed_node), says nothing of it); a node passes when every check passed.
  - >-
    With O(slurm=true) it runs C(scontrol --oneliner show node) once on the host the task runs on (delegate it to
    the Slurm submit host), then one C(scontrol update) per change - a failing node Slurm still runs jobs on is
    drained with C(Reason=cvs: <check>: <short reason> (run <id>)), at most O(reason_max) characters; a node that
    passed is resumed only when it is drained or down with a reason that starts with C(cvs:) (NHC's convention -
    a node an admin drained keeps its state and reason); a node already drained or down keeps its reason.
  - When more than O(max_fraction) of the run's nodes would be drained, none is, and the task says why (with
    O(mode=drain) it fails).
  - Without Slurm it names the nodes to take out and the inventory group to move them to (O(group)), and the nodes
    of that group (O(group_members)) that passed.
  - With O(baseline=true) and a run that passed, writes C(<results_dir>/<run_id>/baseline.json) (schema 1, see
    docs/slurm.md) from the run's preflight facts and metrics, for M(cvs.cluster.health_program).
  - Writes C(<results_dir>/<run_id>/quarantine.json) (the decisions and what was done) unless in check mode.
  - Slurm that cannot be asked or refuses an update while O(mode=drain) fails the task naming every node that was
    not drained or resumed and Slurm's words.
  - This is an action plugin; it reads the results on the controller and runs C(scontrol) over the task's
    connection.
author:
  - cvs.cluster developers (@cvs-cluster)
options:
  results_dir:
    description: Controller directory holding one sub-directory per run.
    type: path
    required: true
  run_id:
    description: The run whose results decide.
    type: str
    required: true
  mode:
    description:
      - C(off) only writes the baseline; C(report) decides and says what it would do (a dry run); C(drain) acts.
    type: str
    choices: ['off', report, drain]
    default: report
  slurm:
    description: Whether the nodes are Slurm nodes (drain and resume them) or not (name them and O(group)).
    type: bool
    default: false
  nodes:
    description: Inventory node to its Slurm node name; a node not listed is its own Slurm name.
    type: dict
    default: {}
  conf:
    description: The slurm.conf the Slurm clients read (C(SLURM_CONF)); default the environment's.
    type: str
  scontrol:
    description: The C(scontrol) command on the submit host.
    type: str
    default: scontrol
  reason_max:
    description: Longest drain reason in characters (Slurm refuses 1024 and more; C(sinfo -R) shows short ones).
    type: int
    default: 128
  max_fraction:
    description: Largest share of the run's nodes drained at once (above it none is drained).
    type: float
    default: 0.5
  group:
    description: Without Slurm, the inventory group the failing nodes should be moved to.
    type: str
    default: cvs_quarantined
  group_members:
    description: Without Slurm, the nodes now in O(group) (those that passed may come back).
    type: list
    elements: str
    default: []
  baseline:
    description: Write the run's C(baseline.json) when the run passed.
    type: bool
    default: true
  cluster_name:
    description: The cluster's name kept in the baseline (C(cvs_cluster_name)); a baseline of another name is refused.
    type: str
extends_documentation_fragment:
  - cvs.cluster.attributes
attributes:
  check_mode:
    support: full
    description: Reads Slurm and says what would change; updates nothing, writes nothing.
  diff_mode:
    support: full
    description: Each node's Slurm state and reason before and after.
seealso:
  - module: cvs.cluster.report
  - module: cvs.cluster.health_program
"""

EXAMPLES = r"""
- name: Drain the nodes the run failed (on the Slurm submit host)
  cvs.cluster.quarantine:
    results_dir: /var/tmp/cvs-results
    run_id: 20261207-220000-abcdef
    mode: drain
    slurm: true
  delegate_to: login1
  run_once: true
"""

RETURN = r"""
actions:
  description: One row per node - C(node), C(slurm_node), C(outcome) (PASS, FAIL, UNJUDGED), C(action) (drain,
    resume, keep, held, unknown, none), C(state), C(reason) (before), C(new_reason), C(why), C(done) (applied).
  returned: with Slurm
  type: list
  elements: dict
take_out:
  description: Without Slurm, the failing nodes (C(node), C(check), C(why)) to move to C(group).
  returned: without Slurm
  type: list
  elements: dict
lines:
  description: One sentence per node that changes or is kept, as the console shows them.
  returned: always
  type: list
  elements: str
not_done:
  description: Nodes whose drain or resume did not happen, with Slurm's words.
  returned: always
  type: list
  elements: str
baseline:
  description: The baseline written, or null (with C(baseline_note) saying why not).
  returned: always
  type: str
  sample: /var/tmp/cvs-results/20261207-220000-abcdef/baseline.json
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC: dict[str, Any] = {
    "results_dir": {"type": "path", "required": True},
    "run_id": {"type": "str", "required": True},
    "mode": {"type": "str", "choices": ["off", "report", "drain"], "default": "report"},
    "slurm": {"type": "bool", "default": False},
    "nodes": {"type": "dict", "default": {}},
    "conf": {"type": "str"},
    "scontrol": {"type": "str", "default": "scontrol"},
    "reason_max": {"type": "int", "default": 128},
    "max_fraction": {"type": "float", "default": 0.5},
    "group": {"type": "str", "default": "cvs_quarantined"},
    "group_members": {"type": "list", "elements": "str", "default": []},
    "baseline": {"type": "bool", "default": True},
    "cluster_name": {"type": "str"},
}


def main() -> None:
    # Reached only when the action plugin of the same name is bypassed: the arguments are checked as the action
    # checks them, and nothing runs on the node.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="cvs.cluster.quarantine runs on the controller as an action plugin, not as a module on a node")


if __name__ == "__main__":
    main()
