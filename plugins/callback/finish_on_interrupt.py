# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Finish a run interrupted with Ctrl-C or SIGTERM: dispose of what it started and write its final report."""

from __future__ import annotations

DOCUMENTATION = r"""
name: finish_on_interrupt
type: notification
short_description: On Ctrl-C or SIGTERM, dispose of what the interrupted cvs.cluster run started and write its report
version_added: 1.0.0
description:
  - When C(ansible-playbook) gets SIGINT (Ctrl-C) after the C(cvs.cluster.prepare) role fixed the run id, this
    callback lets ansible-core stop the run as usual, then runs the collection's validate
    playbook again with the same inventory, limit and extra vars plus C(cvs_finish_run=<run id>). That run prepares
    nothing and runs no checks; it disposes of the run's containers and, when the interrupted playbook was
    validate.yml, writes the final report, marked incomplete where checks had not finished.
  - When the interrupted playbook was not validate.yml (for example health_rvs.yml), only dispose runs.
  - A second Ctrl-C stops the finishing run. It can be finished later with
    C(ansible-playbook -i <inventory> cvs.cluster.validate -e cvs_finish_run=<run id>).
  - SIGTERM (C(kill), a service manager, a CI job timeout) is handled like Ctrl-C; a second SIGTERM ends the process.
  - The finishing run stops every process the interrupted run started on the nodes (C(cvs.cluster.run_processes)),
    removes its C(per_run) containers and gives its nodes back (C(cvs.cluster.run_lease)); other runs' processes,
    containers and leases are never touched.
  - Nothing happens in check mode, for a run that is itself finishing one (C(cvs_finish_run) set), before a run id
    exists, or when the playbook reached its end. SIGKILL (what an AWX or ansible-runner cancel ends with) leaves
    no chance to finish; finish such a run with C(cvs_finish_run), or let the next run on the same controller take
    its nodes over (it stops what the killed run left; from another controller, once the run's lease expires).
requirements:
  - Enabled in C(callbacks_enabled) of C(ansible.cfg), or with
    C(ANSIBLE_CALLBACKS_ENABLED=cvs.cluster.finish_on_interrupt).
options:
  enabled:
    description: Set to V(false) to keep the callback loaded but inactive, for example when the caller finishes
      interrupted runs itself.
    type: bool
    default: true
    env:
      - name: CVS_FINISH_ON_INTERRUPT
    ini:
      - section: cvs
        key: finish_on_interrupt
"""

import atexit
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from ansible import context
from ansible.plugins.callback import CallbackBase

from ansible_collections.cvs.cluster.plugins.plugin_utils._run.finish import finish_argv, is_validate_playbook

VALIDATE_PLAYBOOK = Path(__file__).resolve().parents[2] / "playbooks" / "validate.yml"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "cvs.cluster.finish_on_interrupt"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._armed = False
        self._interrupted = False
        self._reached_end = False
        self._run_id = ""
        self._playbooks: list[str] = []
        self._chained: Any = None

    def v2_playbook_on_start(self, playbook: Any) -> None:
        if not self.get_option("enabled") or context.CLIARGS.get("check"):
            return
        self._playbooks = list(context.CLIARGS.get("args") or ())
        # ansible-core's handler (installed before callbacks load) turns SIGINT into KeyboardInterrupt; keep it
        self._chained = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, self._on_sigint)
        # SIGTERM (kill, systemd, a CI job timeout) would end ansible-playbook on the spot: treat it as Ctrl-C
        if signal.getsignal(signal.SIGTERM) != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, self._on_sigterm)
        atexit.register(self._finish_if_interrupted)
        self._armed = True

    def v2_playbook_on_play_start(self, play: Any) -> None:
        if self._armed and "cvs_finish_run" in play.get_variable_manager().extra_vars:
            self._armed = False

    def v2_runner_on_ok(self, result: Any) -> None:
        run_id = (result._result.get("ansible_facts") or {}).get("cvs_run_id")
        if self._armed and isinstance(run_id, str) and run_id:
            self._run_id = run_id

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._reached_end = True

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self._chained == signal.SIG_IGN:
            return
        self._interrupted = True
        if callable(self._chained):
            self._chained(signum, frame)
        raise KeyboardInterrupt()

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process
        self._on_sigint(signal.SIGINT, frame)

    def _finish_if_interrupted(self) -> None:
        if not (self._armed and self._interrupted and self._run_id) or self._reached_end:
            return
        program = sys.argv[0] if os.path.isfile(sys.argv[0]) else shutil.which("ansible-playbook")
        if not program:
            self._display.error(f"cvs.cluster: cannot find ansible-playbook to finish run {self._run_id}")
            return
        args = finish_argv(sys.argv[1:], self._playbooks, self._run_id, str(VALIDATE_PLAYBOOK))
        self._display.vvv(f"cvs.cluster: finishing with {program} {args}")
        what = "write its report" if all(is_validate_playbook(p) for p in self._playbooks) else "nothing else"
        self._display.display(
            f"[cvs] run {self._run_id} was interrupted: disposing of what it started, then {what} "
            f"(Ctrl-C again to stop; finish later with -e cvs_finish_run={self._run_id})",
            stderr=True,
        )
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C stops the child, not us first
        try:
            # ansible-core marks the standard descriptors close-on-exec; naming them makes the child inherit them
            rc = subprocess.call([sys.executable, program, *args], stdin=0, stdout=1, stderr=2)
        finally:
            signal.signal(signal.SIGINT, previous)
        if rc in (0, 2):  # 2: the final verdict of an incomplete run, after dispose and report
            self._display.display(f"[cvs] run {self._run_id} finished after the interrupt (rc {rc})", stderr=True)
        else:
            self._display.error(
                f"cvs.cluster: finishing run {self._run_id} failed (rc {rc}); run it again with "
                f"-e cvs_finish_run={self._run_id}"
            )
