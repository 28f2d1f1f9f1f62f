# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of cvs.cluster.log_poll: one call is one or more poll rounds for one host.

Polled with ``until: result.finished``. This plugin holds what needs Ansible: the arguments and task vars, the
transport to the node's reader (a reader kept on the node between rounds, else one ssh exec per read) and
save_dir. What a round decides is the round engine's (plugin_utils/_log_poll_engine.py); what crosses the wire is
the reader protocol's (plugin_utils/_reader_protocol.py); state between rounds lives in files on the controller
(plugin_utils/_log_poll_state.py) so the per-host worker processes can decide completion together.
"""

from __future__ import annotations

import os
import threading
import time

from ansible import context
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.cvs.cluster.plugins.module_utils._log_poll_spec import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll import POLICIES, LogPollError, LogSpec
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll_engine import RoundEngine, arm, drain
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll_settings import (
    PollSettings,
    RunFacts,
    poll_settings,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll_spool import (
    SPOOL_LINES_ENV,
    SpoolWriter,
    spool_dir,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll_state import (
    StateStore,
    digest,
    playbook_run_key,
    playbook_run_started,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._paths import path_component
from ansible_collections.cvs.cluster.plugins.plugin_utils._reader_protocol import (
    END_OF_REPLY,
    parse_reply,
    reader_command,
    reader_program,
    reply_problem,
    request_literal,
    serve_program,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._reader_session import (
    SERVE_BOOTSTRAP,
    ReaderSession,
    kept_session_argv,
    node_interpreter,
)

display = Display()

# Readers kept between rounds, per (host, task) of this worker process: `until` retries of a task run in the
# worker that ran its first try, so the next round finds the session here.
_SESSIONS: dict[tuple[str, str], ReaderSession] = {}
# how often a worker checks that its ansible-playbook is still there (see _watch_parent)
PARENT_CHECK = 0.5
_WATCHDOG_PID: int | None = None


def _watch_parent() -> None:
    """End this worker (and its kept readers) within a second of its ansible-playbook going away.

    Ansible's workers call setsid(), so a SIGKILL of the playbook's process group (ansible-runner's and AWX's
    cancel) does not reach them, and a worker in an `until` loop would poll on until its timeout. A daemon
    thread per worker process notices that the parent changed and exits the process.
    """
    global _WATCHDOG_PID
    if os.getpid() == _WATCHDOG_PID:
        return
    _WATCHDOG_PID = os.getpid()
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK)
        for session in list(_SESSIONS.values()):
            session.kill()
        os._exit(1)

    threading.Thread(target=watch, name="cvs-log-poll-parent", daemon=True).start()


class SaveDir:
    """save_dir: every byte read, per host and log (``<save_dir>/<host>/<label>.log``)."""

    def __init__(self, save_dir: str | None, host: str, logs: list[LogSpec]) -> None:
        # one directory per host, whatever its name holds ('/', '..', 253-character FQDNs with a suffix)
        self._paths = {
            s.label: os.path.join(save_dir, path_component(host), path_component(s.label + ".log")) for s in logs
        } if save_dir else {}  # fmt: skip

    def reset(self) -> None:
        for path in self._paths.values():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb"):
                pass

    def append(self, label: str, raw: bytes) -> None:
        path = self._paths.get(label)
        if path:
            with open(path, "ab") as fh:
                fh.write(raw)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        self._host = task_vars.get("inventory_hostname", "?")
        self._task_vars_cache = task_vars
        _watch_parent()
        try:
            _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
            self._settings = settings = poll_settings(args, self._run_facts(task_vars))
        except (LogPollError, AnsibleActionFail) as exc:
            # finished=True so that `until: x.finished` ends at once on bad input
            result.update(failed=True, finished=True, msg=f"log_poll: {exc}")
            return result
        try:
            if settings.start == "arm":
                result.update(arm(settings, self._read))
            elif settings.start == "drain":
                result.update(drain(settings, self._read, SaveDir(args.get("save_dir"), self._host, settings.logs)))
            else:
                result = self._poll(result, args, task_vars, settings)
        finally:
            if settings.start in ("arm", "drain") or result.get("finished") or result.get("failed"):
                self._close_kept_reader()
        return result

    def _run_facts(self, task_vars: dict) -> RunFacts:
        batch = list(task_vars.get("ansible_play_batch") or [self._host])
        return RunFacts(
            host=self._host,
            batch=batch,
            play_hosts=list(task_vars.get("ansible_play_hosts_all") or batch),
            delay=float(getattr(self._task, "delay", 0) or 0),
            forks=(context.CLIARGS or {}).get("forks"),
            throttle=getattr(self._task, "throttle", 0) or 0,
            env=dict(os.environ),
        )

    def _poll(self, result: dict, args: dict, task_vars: dict, settings: PollSettings) -> dict:
        loop_var = task_vars.get("ansible_loop_var", "item")
        looping = self._task.loop is not None or bool(getattr(self._task, "loop_with", None))
        item = task_vars.get(loop_var) if looping else None
        task_key = args.get("state_key") or digest(self._task._uuid, item)
        store = StateStore(args["state_dir"], playbook_run_key(), task_key)
        sink = SaveDir(args.get("save_dir"), self._host, settings.logs)
        engine = RoundEngine(settings, store, self._read, sink=sink, run_started=playbook_run_started)
        wants_lines = os.environ.get(SPOOL_LINES_ENV) == "1"
        spool = SpoolWriter(spool_dir(os.environ, os.getppid()), self._host, str(self._task._uuid), wants_lines)
        return engine.call(result, spool)

    # ---- transport -------------------------------------------------------------------------

    def _read(self, request: dict) -> tuple[dict | None, str | None]:
        """Run the reader on the node: (reply, None) or (None, transport error).

        Through the reader this poll keeps on the node when it can (keep_reader), else, or when that session
        fails, through one ssh exec of a one-shot reader, which also reports the transport error.
        """
        timeout = self._settings.cmd_timeout
        request = dict(request, cmd_timeout=timeout)
        if self._settings.keep_reader:
            kept = self._kept_read(request, timeout)
            if kept is not None:
                return kept
        cmd = reader_command(node_interpreter(self._task_vars_cache, self._templar), timeout)
        # The play's shell, named explicitly: for the default one Ansible appends `; sleep 0`, a work-around for a
        # Linux kernel race fixed in 2016 (ansible/ansible#13876; ansible-core drops it in #86420) that costs
        # every round a fork and an exec of sleep on the node.
        executable = self._play_context.executable
        try:
            res = self._low_level_execute_command(
                cmd, in_data=reader_program(request), sudoable=True, executable=executable
            )
        except AnsibleConnectionFailure as exc:
            return None, f"{self._host}: connection failed: {exc}"
        stdout = res.get("stdout", "")
        if res.get("rc") == 137 and timeout:
            return None, f"{self._host}: remote read killed after cmd_timeout ({timeout}s)"
        reply = parse_reply(stdout)
        if reply is None:
            detail = (res.get("stderr") or stdout or "").strip()[-500:]
            return None, f"{self._host}: reader returned rc={res.get('rc')} and no reply: {detail}"
        return self._checked(reply)

    def _checked(self, reply: dict) -> tuple[dict | None, str | None]:
        problem = reply_problem(self._host, reply, len(self._settings.logs))
        return (None, problem) if problem else (reply, None)

    def _session_key(self) -> tuple[str, str]:
        return (self._host, self._task._uuid)

    def _kept_read(self, request: dict, timeout: int) -> tuple[dict | None, str | None] | None:
        """The round through the reader kept on the node (started on first use); None to read one-shot instead."""
        key = self._session_key()
        session = _SESSIONS.get(key)
        try:
            if session is None or not session.alive or session.pid != os.getpid():
                remote = reader_command(node_interpreter(self._task_vars_cache, self._templar), 0, SERVE_BOOTSTRAP)
                argv = kept_session_argv(self._connection, remote)[0]
                if argv is None:
                    return None
                session = _SESSIONS[key] = ReaderSession(argv, serve_program(), END_OF_REPLY)
            text = session.exchange(request_literal(request).encode("ascii"), (timeout or 3600) + 5)
        except Exception as exc:  # the kept reader is an optimisation: never fail a round over it
            display.vvv(f"log_poll: kept reader failed ({exc!r}); reading one-shot", host=self._host)
            self._close_kept_reader()
            return None
        reply = parse_reply(text) if text is not None else None
        if reply is not None:
            return self._checked(reply)
        timed_out = session.timed_out
        self._close_kept_reader()
        if timed_out:  # a one-shot read would hang as long again
            return None, f"{self._host}: remote read killed after cmd_timeout ({timeout}s)"
        return None

    def _close_kept_reader(self) -> None:
        session = _SESSIONS.pop(self._session_key(), None)
        if session is not None:
            session.close()


__all__ = ["ARGUMENT_SPEC", "POLICIES", "ActionModule"]
