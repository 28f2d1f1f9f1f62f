# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of cvs.cluster.run_guard: arms a guard on the node that cleans up the run once this controller is
gone. Documentation: plugins/modules/run_guard.py. Node side: module_utils/_run_guard.guard; controller side:
plugin_utils/_run/guard_holder.py (a process of its own that outlives this task)."""

from __future__ import annotations

import json
import os
import selectors
import shlex
import subprocess
import sys
import time
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.cvs.cluster.plugins.module_utils import _run_guard
from ansible_collections.cvs.cluster.plugins.module_utils._run_guard import (
    GUARD_ARMED,
    GUARD_MARK,
    NODE_MARK,
    run_arguments_problem,
)
from ansible_collections.cvs.cluster.plugins.modules.run_guard import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.session import (
    SERVE_BOOTSTRAP,
    kept_session_argv,
    node_interpreter,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._run import guard_holder as _guard_holder

display = Display()


def guard_program(args: dict[str, Any]) -> str:
    """The guard's source for the node: the run-guard module and a call with this run's values as literals."""
    with open(_run_guard.__file__, encoding="utf-8") as handle:
        source = handle.read()
    container = dict(args["container"]) if args.get("container") else None
    call = (
        args["run_id"],
        args["node"],
        args["dir"],
        container,
        float(args["grace"]),
        args.get("slurm_job") or None,
        args.get("slurm_conf") or None,
    )
    keywords = f", async_dir={args['async_dir']!r}" if args.get("async_dir") else ""
    return source + "\nguard(" + ", ".join(repr(v) for v in call) + keywords + ")\n"


def guard_command(interpreter: str, run_id: str, node: str) -> str:
    """The node's command line: the interpreter, marked as this run's guard, runs the program sent on stdin."""
    marks = (f"{GUARD_MARK}={run_id}", f"{NODE_MARK}={node}")
    return " ".join(["env", *map(shlex.quote, marks), shlex.quote(interpreter), "-c", shlex.quote(SERVE_BOOTSTRAP)])


def start_holder(config: dict[str, Any], timeout: float) -> str:
    """Start the holder in a session of its own; its one-line answer (``armed <pid>`` or ``failed: ...``)."""
    holder = subprocess.Popen(
        [sys.executable, _guard_holder.__file__],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    if holder.stdin is None or holder.stdout is None:  # for the type checker: both are pipes
        raise RuntimeError("the holder's pipes are missing")
    holder.stdin.write(json.dumps(config).encode("utf-8") + b"\n")
    holder.stdin.close()
    answer = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(holder.stdout, selectors.EVENT_READ)
        while b"\n" not in answer and time.monotonic() < deadline:
            if selector.select(max(0.0, deadline - time.monotonic())):
                chunk = os.read(holder.stdout.fileno(), 4096)
                if not chunk:
                    break
                answer += chunk
    holder.stdout.close()
    if b"\n" not in answer:
        holder.kill()
        return f"failed: no answer from the guard within {int(timeout)} s"
    return answer.decode("utf-8", "replace").splitlines()[0]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        problem = run_arguments_problem(args)
        if problem:
            return {**result, "failed": True, "msg": f"run_guard: {problem}"}
        if self._task.check_mode:
            return {**result, "changed": False, "armed": False, "msg": "check mode: no guard armed"}
        command = guard_command(node_interpreter(task_vars, self._templar), args["run_id"], args["node"])
        argv, why = kept_session_argv(self._connection, command, become=True)
        if argv is None:
            return self._not_armed(result, args["node"], why)
        config = {
            "argv": [a.decode("utf-8", "surrogateescape") if isinstance(a, bytes) else a for a in argv],
            "program": guard_program(args),
            "armed": GUARD_ARMED,
            # this worker's parent: the ansible-playbook process that owns the run
            "watch_pid": os.getppid(),
            "watch_start": _guard_holder.start_time(os.getppid()),
            "ready_timeout": args["ready_timeout"],
            "cleanup_timeout": args["grace"] + 110,
        }
        answer = start_holder(config, args["ready_timeout"] + 10)
        if not answer.startswith("armed "):
            return self._not_armed(result, args["node"], answer.removeprefix("failed: "))
        return {**result, "changed": True, "armed": True, "guard_pid": int(answer.split()[1])}

    def _not_armed(self, result: dict[str, Any], node: str, why: str) -> dict[str, Any]:
        msg = (
            f"{node}: no guard armed ({why}); if this run is cancelled, what it started on {node} stays until the "
            "next run takes the node or -e cvs_finish_run=<run id>"
        )
        display.warning(msg)
        return {**result, "changed": False, "armed": False, "msg": msg}
