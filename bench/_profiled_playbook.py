# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible-playbook with cProfile in the main process and around every worker's TaskExecutor.run.

Used by round_vs_ssh.py --profile to attribute controller time. Writes into
CVS_BENCH_PROFILE_DIR: main.prof, worker-PID.prof and worker-PID.json (the worker's own
CPU and its children's, i.e. the ssh clients it ran). Profiling slows Python code down,
so only the proportions are meaningful.
"""

from __future__ import annotations

import cProfile
import json
import os
import sys
import time

from ansible.cli.playbook import main
from ansible.executor import task_executor

OUT = os.environ["CVS_BENCH_PROFILE_DIR"]
_original_run = task_executor.TaskExecutor.run


def _profiled_run(self: task_executor.TaskExecutor) -> dict:
    prof = cProfile.Profile()
    t0, w0 = os.times(), time.perf_counter()
    prof.enable()
    try:
        return _original_run(self)
    finally:
        prof.disable()
        t1 = os.times()
        pid = os.getpid()
        prof.dump_stats(os.path.join(OUT, f"worker-{pid}.prof"))
        with open(os.path.join(OUT, f"worker-{pid}.json"), "w") as fh:
            json.dump(
                {
                    "wall": time.perf_counter() - w0,
                    "self_cpu": (t1.user - t0.user) + (t1.system - t0.system),
                    "children_cpu": (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system),
                },
                fh,
            )


task_executor.TaskExecutor.run = _profiled_run  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.argv[0] = "ansible-playbook"
    main_prof = cProfile.Profile()
    m0 = os.times()
    main_prof.enable()
    try:
        code = main()
    finally:
        main_prof.disable()
        m1 = os.times()
        main_prof.dump_stats(os.path.join(OUT, "main.prof"))
        with open(os.path.join(OUT, "main.json"), "w") as fh:
            json.dump({"self_cpu": (m1.user - m0.user) + (m1.system - m0.system)}, fh)
    sys.exit(code)
