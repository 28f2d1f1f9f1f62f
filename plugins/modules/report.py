#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: report
short_description: Write the results of a validation run (results.json, junit.xml, report.html) on the controller
version_added: 0.1.0
description:
  - Reads the per-node check files of a run, C(<results_dir>/<run_id>/checks/<node>/<check>.json) (written by the
    M(cvs.cluster.log_poll)-based roles such as C(cvs.cluster.rvs) and C(cvs.cluster.maxtext)), and writes next to
    them C(results.json) (per node and check - status, reason, metrics against thresholds, offending log lines,
    timings, backend - plus node facts such as GPU model, RVS and ROCm versions when known), C(junit.xml) (one
    testcase per node per check, Jenkins JUnit format) and a self-contained C(report.html).
  - Every requested node is a row (see O(nodes)). A requested check without a file for a node is C(UNREACHABLE)
    when a registered task result of the node (or its workload host) says Ansible could not reach it - the reason
    quotes the connection error -, C(ERROR) when the node has C(cvs_prepare_error) (not prepared) or
    C(cvs_check_errors[check]) or a C(cvs_unwritten_records) fact from M(cvs.cluster.check_result) (its result
    could not be recorded), and C(MISSING) otherwise. C(UNREACHABLE) and
    C(ERROR) fail the run; C(MISSING) makes it C(INCOMPLETE). Call it after each stage with O(complete=false) so an
    interrupted run keeps a report of what finished.
  - When the files cannot be written (for example C(no space left on device)) the task fails naming the path, and
    still returns RV(summary), RV(nodes) and RV(msg), so a playbook can publish and judge the run with
    C(ignore_errors) and fail it at the end.
  - When dispose failed on a node (its C(cvs_dispose_error), set by validate.yml), RV(msg) names the nodes and the
    error right after the run's status, which reads C(ERROR) instead of C(PASS) (a failed run keeps its status), and
    RV(summary) gets C(dispose_errors) with that status; results.json keeps the checks' own status.
  - This is an action plugin; it runs on the controller only and never fails the hosts of the checks. Publish
    RV(summary) with M(ansible.builtin.set_stats) to show it in AWX and ansible-runner artifacts.
extends_documentation_fragment:
  - cvs.cluster.run.results
  - cvs.cluster.attributes
  - cvs.cluster.attributes.no_diff
author:
  - cvs.cluster developers (@cvs-cluster)
options:
  run_id:
    description: The run (C(cvs_run_id) set by C(cvs.cluster.prepare)). Required unless O(probe=true).
    type: str
  checks:
    description:
      - Checks requested in this run, the report's columns. A node without a file for one of them is C(MISSING).
      - Default - every check that has a file in the run directory.
    type: list
    elements: str
  hosts:
    description:
      - Workload hosts of the run, the report's rows (their C(cvs_node), C(cvs_node_index) and facts are read from
        hostvars). Default - the group C(cvs_exec), or C(cvs_nodes) when there is none (a run finished without
        prepare).
    type: list
    elements: str
  nodes:
    description:
      - Every requested node of the run (the report's rows, in C(cvs_node_index) order), also those that never got
        a workload host (unreachable, not prepared).
      - Default - the C(cvs_nodes) hosts that carry the registered result C(cvs_reach) of the playbooks' first
        contact (so a C(--limit) is honoured) plus the nodes of the workload hosts; without C(cvs_reach), the nodes
        of the workload hosts, else C(cvs_nodes).
    type: list
    elements: str
  complete:
    description: Whether the run is over. With C(false) the report says the run is incomplete.
    type: bool
    default: true
  probe:
    description: Only create O(results_dir) and check that a file can be written there; fail with a clear message
      otherwise. Use it before starting anything.
    type: bool
    default: false
  fleet:
    description:
      - Options of the fleet comparison, which compares every node's metrics with the fleet median and flags a node
        beyond the tolerance on the bad side as C(OUTLIER) (throughput-type metrics such as TFLOP/s or tokens/s
        below the median, time-type metrics such as step time above it), and facts that differ between nodes
        (ROCm and RVS versions, GPU model and count, kernel).
      - C(tolerance) - fraction or percentage, default C(5%). C(fail_on_outlier) - default C(false); with C(true)
        an outlying check that passed gets the status C(OUTLIER) and fails the run. C(metrics) - per metric name
        C(higher), C(lower), C(ignore) or C({direction, tolerance}). C(enabled) - default C(true).
      - Default - the variable C(cvs_fleet) when set, else the defaults above.
    type: dict
notes:
  - Statuses per node and check are C(PASS), C(FAIL), C(ERROR) (the check could not judge, or see above),
    C(UNREACHABLE) and C(MISSING); metric rows are C(PASS), C(FAIL) or C(RECORD) (recorded without a threshold).
    With C(fail_on_outlier=true) in O(fleet) also C(OUTLIER).
attributes:
  check_mode:
    support: full
    description: Runs in check mode as in a normal run - the report is written on the controller (a check-mode run
      has results to report too); nothing on the nodes changes.
"""

EXAMPLES = r"""
- name: Write the run report
  cvs.cluster.report:
    results_dir: "{{ cvs_results_dir }}"
    run_id: "{{ cvs_run_id }}"
    checks: [rvs, maxtext]
  register: cvs_report
  run_once: true

- name: Show the summary in AWX / ansible-runner artifacts
  ansible.builtin.set_stats:
    data:
      cvs_report: "{{ cvs_report.summary }}"
"""

RETURN = r"""
files:
  description: Paths of the files written.
  returned: success, unless probe
  type: dict
  sample: {results: /var/tmp/cvs-results/RUN/results.json, junit: /var/tmp/cvs-results/RUN/junit.xml,
           html: /var/tmp/cvs-results/RUN/report.html}
summary:
  description:
    - Status of the run (C(PASS), C(FAIL), C(INCOMPLETE)), counts per status, failing and incomplete nodes.
    - From the fleet comparison - C(fleet_status) (C(OK), C(OUTLIER), C(NOT_COMPARED)), C(outlier_nodes),
      C(outliers) (node, check, metric, reason) and C(fact_issues) (facts that differ between nodes).
    - C(dispose_errors) (C([{node, error}])) when dispose failed on a node; a C(PASS) status then reads C(ERROR).
  returned: success, unless probe
  type: dict
  sample: {run_id: 20260101-120000-ab12, status: FAIL, complete: true,
           counts: {PASS: 5, FAIL: 1, ERROR: 0, UNREACHABLE: 0, MISSING: 0},
           nodes: {node1: {rvs: PASS}, node2: {rvs: FAIL}}, failing_nodes: [node2], incomplete_nodes: [],
           unreachable_nodes: [], failures: [{node: node2, check: rvs, status: FAIL, reason: "..."}],
           results_dir: /var/tmp/cvs-results/RUN}
fleet_table:
  description: The fleet comparison as a few lines of text (metric, median, outlying nodes, fact mismatches) for the
    console; empty without a comparison.
  returned: success, unless probe
  type: list
  elements: str
  sample: ["fleet comparison: OUTLIER (tolerance 5%, median of the fleet)", "  metric  median  outliers",
           "  maxtext tflops_per_device  147.1 TFLOP/s  node2 -11.3%"]
nodes:
  description: Status of every check per node.
  returned: success, unless probe
  type: dict
  sample: {node1: {rvs: PASS, maxtext: PASS}, node2: {rvs: FAIL, maxtext: PASS}}
msg:
  description: The verdict in one line - the run's status, then every node with its status (and why, when not PASS),
    then where the report is or why it could not be written.
  returned: always
  type: str
  sample: "run R: FAIL - node1: PASS; node2: UNREACHABLE (rvs: node2: unreachable: ssh: connect to host 10.77.0.12
    port 22: Connection refused) - see /var/tmp/cvs-results/R/report.html"
write_error:
  description: Why the files could not be written (the task then fails).
  returned: when writing failed
  type: str
  sample: "no space left on device: cannot write /var/tmp/cvs-results/R/results.json (...)"
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC: dict[str, Any] = {
    "results_dir": {"type": "path", "required": True},
    "run_id": {"type": "str"},
    "checks": {"type": "list", "elements": "str"},
    "hosts": {"type": "list", "elements": "str"},
    "nodes": {"type": "list", "elements": "str"},
    "complete": {"type": "bool", "default": True},
    "probe": {"type": "bool", "default": False},
    "fleet": {"type": "dict"},
}


def main() -> None:
    # Reached only when the action plugin of the same name is bypassed: the arguments are checked as the action
    # checks them (so the documentation above and this spec cannot drift apart), and nothing runs on the node.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="cvs.cluster.report runs on the controller as an action plugin, not as a module on a node")


if __name__ == "__main__":
    main()
