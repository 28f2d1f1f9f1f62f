#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: check_result
short_description: Record what one check found on one node, for the run report
version_added: 0.2.0
description:
  - Checks O(record) against the check record schema C(cvs.cluster/check/v1) and writes it atomically on the
    controller as C(<results_dir>/<run_id>/checks/<node>/<check>.json), where M(cvs.cluster.report) reads it. The
    roles C(cvs.cluster.rvs) and C(cvs.cluster.maxtext) use it; so does any suite written as docs/extending.md says.
  - The schema (docs/results.md) - C(status) (C(PASS), C(FAIL) or C(ERROR)) and C(reason) are required;
    C(metrics) (rows C({metric, value, unit, threshold, status, kind, message}) with C(status) one of C(PASS),
    C(FAIL), C(RECORD), as M(cvs.cluster.check_thresholds) returns them), C(lines) (offending log lines),
    C(error) (the error pattern that matched, C({name, pattern, line})), C(started) and C(finished) (UTC
    C(%Y-%m-%dT%H:%M:%SZ)), C(backend), C(failed_node), C(log) and C(facts) (node facts the check learned, such as
    C(rvs_version) or C(gpu_model)) are optional and typed. Any other key is the check's own; it is kept in the
    file and not read by the report.
  - A record that does not match fails the task naming the field (C(metrics[2].status - 'GOOD' is not one of
    PASS, FAIL, RECORD)) and writes nothing.
  - A valid record that cannot be written (C([Errno 30] Read-only file system), a full disk) does not fail the task -
    a failed node would skip dispose. The task warns, returns RV(write_error), and keeps the record as the node's
    fact C(cvs_unwritten_records) (C(check) mapped to C(path), C(error) and C(record)); M(cvs.cluster.report)
    names the error and the playbooks print every such record in full at the end of the run, which then fails
    (filter C(cvs.cluster.unwritten_verdicts)).
  - This is an action plugin; it runs on the controller whatever host the task is for.
author:
  - cvs.cluster developers (@cvs-cluster)
options:
  run_id:
    description: The run. Default - C(cvs_run_id).
    type: str
  results_dir:
    description: Controller directory holding one sub-directory per run. Default - C(cvs_results_dir).
    type: path
  check:
    description: The check's name (letters, digits, C(_), C(.), C(-)); the file's name and the report's column.
    type: str
    required: true
  node:
    description: The node the record is about. Default - C(cvs_node), else C(inventory_hostname).
    type: str
  record:
    description:
      - What the check found; C(schema), C(check) and C(node) are set from the options.
      - The fields every suite shares are filled from the run's variables when the record does not set them -
        C(host) (C(inventory_hostname)), C(backend) (C(cvs_backend)), C(finished) (now, UTC; the same record
        written again keeps the time it was first written) and C(scheduler) (the run's Slurm job C(cvs_slurm_job)
        with O(steps), on the Slurm backend; null elsewhere).
    type: dict
    required: true
  steps:
    description: The scheduler steps the check ran (C({id, name, state, exit_code, nodes})), put in C(scheduler.steps).
    type: list
    elements: dict
extends_documentation_fragment:
  - cvs.cluster.attributes
  - cvs.cluster.attributes.no_diff
attributes:
  check_mode:
    support: full
    description: Checks the record and returns RV(path) and whether it would change; writes nothing.
seealso:
  - module: cvs.cluster.report
"""

EXAMPLES = r"""
- name: Record this node's result
  cvs.cluster.check_result:
    check: inference
    record:
      status: "{{ 'FAIL' if failure else 'PASS' }}"
      reason: "{{ failure or 'benchmark completed' }}"
      metrics: "{{ benchmark | cvs.cluster.check_thresholds(inference_thresholds) }}"
      lines: "{{ [poll.error.line] if poll.error else [] }}"
      started: "{{ started }}"
      benchmark: "{{ benchmark }}"
"""

RETURN = r"""
path:
  description: The record's file on the controller.
  returned: when the record is valid
  type: str
  sample: /var/tmp/cvs-results/20261205-101500-ab12cd/checks/node1/inference.json
status:
  description: The record's C(status).
  returned: when the record is valid
  type: str
  sample: PASS
write_error:
  description: Why the record could not be written (the path and the errno); the record is then kept as the fact
    C(cvs_unwritten_records).
  returned: when the record could not be written
  type: str
  sample: "check_result: could not write into '/r/R/checks/node1/rvs.json': [Errno 30] Read-only file system"
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC: dict[str, Any] = {
    "results_dir": {"type": "path"},
    "run_id": {"type": "str"},
    "check": {"type": "str", "required": True},
    "node": {"type": "str"},
    "record": {"type": "dict", "required": True},
    "steps": {"type": "list", "elements": "dict"},
}


def main() -> None:
    # Reached only when the action plugin of the same name is bypassed: the arguments are checked as the action
    # checks them (so the documentation above and this spec cannot drift apart), and nothing runs on the node.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="cvs.cluster.check_result runs on the controller as an action plugin, not as a module on a node"
    )


if __name__ == "__main__":
    main()
