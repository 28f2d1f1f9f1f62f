# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options shared by the modules that act on one run's processes on a node, and by those that write a run's
results on the controller."""

from __future__ import annotations


class ModuleDocFragment:
    # run_guard, run_lease, run_processes (module_utils/_run_guard.RUN_ARGUMENT_SPEC)
    DOCUMENTATION = r"""
options:
  node:
    description: The node (C(cvs_node)); it names the lease file and the marks of the run's processes on this node.
    type: str
    required: true
  run_id:
    description: The run (C(cvs_run_id)).
    type: str
    required: true
  grace:
    description: Seconds between SIGTERM and SIGKILL when the run's processes are stopped.
    type: int
    default: 10
"""

    # check_result, report
    RESULTS = r"""
options:
  results_dir:
    description: Controller directory holding one sub-directory per run (usually C(cvs_results_dir)).
    type: path
    required: true
"""

    # run_guard, run_lease
    LEASE_DIR = r"""
options:
  dir:
    description: Directory of the lease files on the node (C(cvs_lease_dir)); created with mode 1777.
    type: path
    default: /var/tmp/cvs/leases
"""
