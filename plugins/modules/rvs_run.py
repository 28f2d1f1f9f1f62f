#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: rvs_run
short_description: Run a node's RVS tests one after another and return each one's output
version_added: 0.3.0
description:
  - Used by the role C(cvs.cluster.rvs), under C(async)/C(poll), to run the tests its plan (filter
    P(cvs.cluster.rvs_plan#filter)) lists in one task instead of one task per test. Each test's argv is run as it
    is, without a shell; the plan makes it C(timeout -k <grace> <timeout> rvs ...), behind the Slurm step prefix
    on the Slurm backend, so an overrunning rvs is killed and the next test still runs.
  - A test still running O(tests[].deadline) seconds after it started (a process that even SIGKILL does not end)
    is killed and not waited for; its result has no C(rc) and a C(msg) saying so, and the next test runs.
  - Each test's output is read as bytes, whatever the tool prints, and returned as text, split on newlines before it
    is decoded (UTF-8, invalid bytes and control characters such as NUL replaced by U+FFFD). It is bounded, each of
    stdout and stderr keeps its first and last 512 KiB, each line its first and last 4 KiB, and a note
    saying how many bytes were cut stands where they were; C(stdout_cut) and
    C(stderr_cut) of each result count them. So the result, and the async job file it becomes, stays small and valid.
  - Nothing is judged here; the filter P(cvs.cluster.rvs_verdict#filter) judges every test from its output.
  - The environment (C(LD_LIBRARY_PATH), the run's C(CVS_RUN_ID) and C(CVS_NODE) markers) is the task's.
author:
  - cvs.cluster developers (@cvs-cluster)
options:
  tests:
    description: The tests, in the order they run.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The test's name.
        type: str
        required: true
      argv:
        description: The command, as an argv list.
        type: list
        elements: str
        required: true
      deadline:
        description: Seconds after which the command is killed and no longer waited for.
        type: float
        required: true
attributes:
  check_mode:
    support: none
    description: The tests are not run in check mode.
  diff_mode:
    support: none
    description: Nothing to compare.
notes:
  - Run it with C(async) longer than the sum of the deadlines and C(poll=0), then wait with
    M(ansible.builtin.async_status) and C(until) as the role does, so that a node that stops answering is noticed
    at its next check (the built-in C(poll) retries an unreachable node until the async limit).
seealso:
  - module: cvs.cluster.rvs_probe
"""

EXAMPLES = r"""
- name: Run the RVS tests (killed at their timeout)
  cvs.cluster.rvs_run:
    tests:
      - name: mem
        argv: [timeout, -k, "10", "1800", /opt/rocm/bin/rvs, -c, /opt/rocm/share/rocm-validation-suite/conf/mem.conf]
        deadline: 1870
  environment:
    LD_LIBRARY_PATH: /opt/rocm/lib
  async: 1930
  poll: 0
  register: job

- name: Wait for them (an unreachable node ends its wait at once)
  ansible.builtin.async_status:
    jid: "{{ job.ansible_job_id }}"
  register: runs
  until: runs is finished
  retries: 386
  delay: 5
  ignore_unreachable: true
"""

RETURN = r"""
results:
  description: One per test, in order - C(name), C(rc) (null when it did not finish), C(stdout) and C(stderr) (without
    their trailing newline, bounded as described above), C(stdout_cut) and C(stderr_cut) (bytes of each not kept, 0
    when all was), C(delta) (C(H:MM:SS.ffffff), as M(ansible.builtin.command) says it), C(msg) (why there is no
    C(rc), else null).
  returned: always
  type: list
  elements: dict
  sample: [{name: mem, rc: 0, stdout: "...", stderr: "", stdout_cut: 0, stderr_cut: 0, delta: "0:00:12.345678",
            msg: null}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cvs.cluster.plugins.module_utils._rvs_run import run_tests


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "tests": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "argv": {"type": "list", "elements": "str", "required": True},
                    "deadline": {"type": "float", "required": True},
                },
            },
        },
        supports_check_mode=False,
    )
    module.exit_json(changed=False, results=run_tests(module.params["tests"]))


if __name__ == "__main__":
    main()
