# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of cvs.cluster.log_poll: one call is one or more poll rounds for one host.

Polled with ``until: result.finished``. This plugin holds what needs Ansible: the arguments and task vars, the
transport to the node's reader (a reader kept on the node between rounds, else one ssh exec per read) and
save_dir. What a round decides is the round engine's (plugin_utils/_log_poll/engine.py); what crosses the wire is
the reader protocol's (plugin_utils/_log_poll/protocol.py); state between rounds lives in files on the controller
(plugin_utils/_log_poll/state.py) so the per-host worker processes can decide completion together.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import threading
import time
from dataclasses import dataclass
from typing import Any

from ansible import constants as C
from ansible import context
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.mod_args import ModuleArgsParser
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import connection_loader
from ansible.utils.display import Display

from ansible_collections.cvs.cluster.plugins.module_utils._log_poll_spec import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import path_component
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.engine import RoundEngine, arm, drain
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.fleet import FleetPoll
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.protocol import (
    END_OF_REPLY,
    parse_reply,
    reader_command,
    reader_program,
    reply_problem,
    request_literal,
    serve_program,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import POLICIES, LogPollError, LogSpec
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.session import (
    SERVE_BOOTSTRAP,
    ReaderSession,
    collect_replies,
    kept_session_argv,
    node_interpreter,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.settings import (
    PollSettings,
    RunFacts,
    poll_settings,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.spool import (
    SPOOL_LINES_ENV,
    SpoolWriter,
    spool_dir,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.state import (
    MemoryStore,
    StateStore,
    digest,
    playbook_run_key,
    playbook_run_started,
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


def checked_reply(host: str, reply: dict, logs: int) -> tuple[dict | None, str | None]:
    problem = reply_problem(host, reply, logs)
    return (None, problem) if problem else (reply, None)


def host_connection(action: ActionBase, variables: dict, templar: Any) -> Any:
    """A connection to another host of the play, set up from its variables as Ansible's task executor does."""
    task = action._task
    play_context = action._play_context.set_task_and_variable_override(task=task, variables=variables, templar=templar)
    conn_type = templar.template(variables["ansible_connection"]) if "ansible_connection" in variables else None
    conn_type = conn_type or play_context.connection or task.connection or "ssh"
    connection = connection_loader.get(
        conn_type, play_context, new_stdin=None, task_uuid=task._uuid, ansible_playbook_pid=str(os.getppid())
    )
    if connection is None:
        raise AnsibleActionFail(f"the connection plugin {conn_type!r} was not found")
    connection.set_become_plugin(None)
    task_keys = task.dump_attrs()
    task_keys["timeout"] = play_context.timeout
    task_keys.pop("retries", None)
    connection.set_options(task_keys=task_keys, var_options=connection._resolve_option_variables(variables, templar))
    shell = connection._shell
    shell_vars = C.config.get_plugin_vars("shell", shell._load_name)
    shell.set_options(
        task_keys=task_keys, var_options={k: templar.template(variables[k]) for k in shell_vars if k in variables}
    )
    return connection


class NodeReaders:
    """A fleet's way to its hosts' readers: one kept on each host (started on first use), else one-shot reads."""

    def __init__(self, action: ActionModule, task_vars: dict, settings: dict[str, PollSettings]) -> None:
        self._action = action
        self._hostvars = task_vars["hostvars"]
        self._settings = settings
        self._links: dict[str, tuple[Any, str]] = {}
        self._one_shot_only: set[str] = set()
        self._task = "fleet:" + str(action._task._uuid)
        _allow_descriptors(4 * len(settings) + 256)

    def _link(self, host: str) -> tuple[Any, str]:
        link = self._links.get(host)
        if link is None:
            variables = self._hostvars.raw_get(host)
            templar = self._action._templar.copy_with_new_env(available_variables=variables)
            link = self._links[host] = (host_connection(self._action, variables, templar),
                                        node_interpreter(variables, templar))  # fmt: skip
        return link

    def _session(self, host: str) -> ReaderSession | None:
        key = (host, self._task)
        session = _SESSIONS.get(key)
        if session is not None and session.alive and session.pid == os.getpid():
            return session
        if not self._settings[host].keep_reader or host in self._one_shot_only:
            return None
        connection, interpreter = self._link(host)
        argv, why = kept_session_argv(connection, reader_command(interpreter, 0, SERVE_BOOTSTRAP))
        if argv is None:
            display.vvv(f"log_poll: no reader kept on the node ({why}); reading one-shot", host=host)
            self._one_shot_only.add(host)
            return None
        session = _SESSIONS[key] = ReaderSession(argv, serve_program(), END_OF_REPLY)
        return session

    def read_all(self, requests: dict[str, dict]) -> dict[str, tuple[dict | None, str | None]]:
        sent: dict[str, ReaderSession] = {}
        requests = {h: dict(r, cmd_timeout=self._settings[h].cmd_timeout) for h, r in requests.items()}
        for host, request in requests.items():
            try:
                session = self._session(host)
            except Exception as exc:  # the kept reader is an optimisation: never fail a round over it
                display.vvv(f"log_poll: kept reader failed ({exc!r}); reading one-shot", host=host)
                session = None
            if session is not None and session.send(request_literal(request).encode("ascii")):
                sent[host] = session
        timeout = max((self._settings[h].cmd_timeout or 3600 for h in sent), default=0) + 5
        texts = collect_replies(sent, timeout) if sent else {}
        replies: dict[str, tuple[dict | None, str | None]] = {}
        for host, request in requests.items():
            text = texts.get(host)
            reply = parse_reply(text) if text is not None else None
            if reply is not None:
                replies[host] = checked_reply(host, reply, len(self._settings[host].logs))
                continue
            if host in sent:
                _SESSIONS.pop((host, self._task), None)
                if sent[host].timed_out:  # a one-shot read would hang as long again
                    timeout_s = self._settings[host].cmd_timeout
                    replies[host] = (None, f"{host}: remote read killed after cmd_timeout ({timeout_s}s)")
                    continue
            replies[host] = self._one_shot(host, request)
        return replies

    def read(self, host: str, request: dict) -> tuple[dict | None, str | None]:
        return self.read_all({host: request})[host]

    def _one_shot(self, host: str, request: dict) -> tuple[dict | None, str | None]:
        try:
            connection, interpreter = self._link(host)
        except Exception as exc:
            return None, f"{host}: connection failed: {exc}"
        return self._action.one_shot_read(host, connection, interpreter, request, len(self._settings[host].logs))

    def close(self) -> None:
        for host in self._settings:
            session = _SESSIONS.pop((host, self._task), None)
            if session is not None:
                session.close()


class HostArgs:
    """The task's arguments as each host of a fleet would have them: templated with that host's variables.

    A fleet task runs once, so Ansible templates its arguments for the host it runs on only; a log path built
    from a host's variables (``{{ run_dir }}/train.log``) must be the path on each host, as in the per-host form.
    The variables are those the play's strategy gives each host's task (VariableManager.get_vars), and the loop
    variables of this run.
    """

    def __init__(self, action: ActionModule, task_vars: dict) -> None:
        self._action = action
        self._task_vars = task_vars
        task = action._task
        self._raw = ModuleArgsParser(task.get_ds(), collection_list=task.collections).parse()[1]
        hostvars = task_vars["hostvars"]
        self._variables = hostvars._variable_manager
        self._inventory = hostvars._inventory
        block = task._parent
        while block is not None and getattr(block, "_play", None) is None:
            block = getattr(block, "_parent", None)
        self._play = getattr(block, "_play", None)
        loop_var = task_vars.get("ansible_loop_var", "item")
        names = (loop_var, "ansible_loop_var", "ansible_loop", "ansible_index_var", task_vars.get("ansible_index_var"))
        self._loop = {k: task_vars[k] for k in names if k and k in task_vars}

    def of(self, host: str, own: dict) -> dict:
        if host == self._task_vars.get("inventory_hostname"):
            return own
        try:
            variables = self._variables.get_vars(
                play=self._play,
                host=self._inventory.get_host(host),
                task=self._action._task,
                _hosts=list(self._task_vars.get("ansible_play_batch") or []),
                _hosts_all=list(self._task_vars.get("ansible_play_hosts_all") or []),
            )
            variables.update(self._loop)
            templar = self._action._templar.copy_with_new_env(available_variables=variables)
            args = templar.template(self._raw)
        except Exception as exc:  # an undefined variable, a filter error: name the host
            raise LogPollError(f"the task's arguments could not be templated for {host}: {exc}") from None
        validated = ArgumentSpecValidator(ARGUMENT_SPEC).validate(args)
        if validated.error_messages:
            raise LogPollError(f"{host}: {'; '.join(validated.error_messages)}")
        return validated.validated_parameters


def _allow_descriptors(needed: int) -> None:
    """Raise this worker's open-file limit towards ``needed`` (each kept reader holds two pipes), up to the hard
    limit; a reader that cannot be started then is read one-shot instead."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


@dataclass
class _Fleet:
    poll: FleetPoll
    readers: NodeReaders
    pid: int


# Fleets between the `until` retries of their task (they run in the worker that ran the first try).
_FLEETS: dict[tuple[str, str], _Fleet] = {}


def _close_fleet(key: tuple[str, str]) -> None:
    fleet = _FLEETS.pop(key, None)
    if fleet is not None:
        fleet.readers.close()


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
            self._settings = settings = poll_settings(args, self._run_facts(task_vars, args["fleet"]))
        except (LogPollError, AnsibleActionFail) as exc:
            # finished=True so that `until: x.finished` ends at once on bad input
            result.update(failed=True, finished=True, msg=f"log_poll: {exc}")
            return result
        try:
            if args.get("fleet"):
                result = self._fleet(result, args, task_vars)
            elif settings.start == "arm":
                result.update(arm(settings, self._read))
            elif settings.start == "drain":
                result.update(drain(settings, self._read, SaveDir(args.get("save_dir"), self._host, settings.logs)))
            else:
                result = self._poll(result, args, task_vars, settings)
        finally:
            if args.get("fleet"):
                if result.get("finished") or result.get("failed"):
                    _close_fleet(self._fleet_key(task_vars))
            elif settings.start in ("arm", "drain") or result.get("finished") or result.get("failed"):
                self._close_kept_reader()
        return result

    def _run_facts(self, task_vars: dict, fleet: bool, host: str | None = None) -> RunFacts:
        batch = list(task_vars.get("ansible_play_batch") or [self._host])
        return RunFacts(
            host=host or self._host,
            batch=batch,
            play_hosts=list(task_vars.get("ansible_play_hosts_all") or batch),
            delay=float(getattr(self._task, "delay", 0) or 0),
            forks=None if fleet else (context.CLIARGS or {}).get("forks"),
            throttle=0 if fleet else getattr(self._task, "throttle", 0) or 0,
            env=dict(os.environ),
            fleet=fleet,
            run_once=bool(getattr(self._task, "run_once", False)),
            become=bool(getattr(self._play_context, "become", False)),
        )

    # ---- fleet: one task polls every host of the batch ----------------------------------------

    def _fleet_key(self, task_vars: dict) -> tuple[str, str]:
        loop_var = task_vars.get("ansible_loop_var", "item")
        looping = self._task.loop is not None or bool(getattr(self._task, "loop_with", None))
        item = task_vars.get(loop_var) if looping else None
        return (str(self._task._uuid), digest(item, playbook_run_key()))

    def _fleet(self, result: dict, args: dict, task_vars: dict) -> dict:
        key = self._fleet_key(task_vars)
        fleet = _FLEETS.get(key)
        if fleet is None or fleet.poll.finished or fleet.pid != os.getpid():
            try:
                fleet = _FLEETS[key] = self._new_fleet(args, task_vars)
            except LogPollError as exc:
                result.update(failed=True, finished=True, msg=f"log_poll: {exc}")
                return result
        result.update(fleet.poll.call(result))
        return result

    def _new_fleet(self, args: dict, task_vars: dict) -> _Fleet:
        hosts = list(self._settings.participants)
        host_args = HostArgs(self, task_vars)
        settings = {h: poll_settings(host_args.of(h, args), self._run_facts(task_vars, True, h)) for h in hosts}
        store = MemoryStore()
        readers = NodeReaders(self, task_vars, settings)
        wants_lines = os.environ.get(SPOOL_LINES_ENV) == "1"
        directory = spool_dir(os.environ, os.getppid())
        engines = {
            h: RoundEngine(
                settings[h],
                store,
                functools.partial(readers.read, h),
                sink=SaveDir(args.get("save_dir"), h, settings[h].logs),
                run_started=playbook_run_started,
            )
            for h in hosts
        }
        spools = {h: SpoolWriter(directory, h, str(self._task._uuid), wants_lines) for h in hosts}
        poll = FleetPoll(
            engines,
            readers,
            spools,
            budget=self._settings.budget,
            delay=self._settings.delay,
            call_seconds=self._settings.call_seconds,
        )
        return _Fleet(poll, readers, os.getpid())

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
        interpreter = node_interpreter(self._task_vars_cache, self._templar)
        return self.one_shot_read(self._host, self._connection, interpreter, request, len(self._settings.logs))

    def one_shot_read(
        self, host: str, connection: Any, interpreter: str, request: dict, logs: int
    ) -> tuple[dict | None, str | None]:
        """One ssh exec of a one-shot reader on ``host`` through ``connection`` (which reports transport errors)."""
        timeout = request.get("cmd_timeout") or 0
        cmd = reader_command(interpreter, timeout)
        # The play's shell, named explicitly: for the default one Ansible appends `; sleep 0`, a work-around for a
        # Linux kernel race fixed in 2016 (ansible/ansible#13876; ansible-core drops it in #86420) that costs
        # every round a fork and an exec of sleep on the node.
        executable = self._play_context.executable
        own, self._connection = self._connection, connection
        try:
            res = self._low_level_execute_command(
                cmd, in_data=reader_program(request), sudoable=True, executable=executable
            )
        except AnsibleConnectionFailure as exc:
            return None, f"{host}: connection failed: {exc}"
        finally:
            self._connection = own
        stdout = res.get("stdout", "")
        if res.get("rc") == 137 and timeout:
            return None, f"{host}: remote read killed after cmd_timeout ({timeout}s)"
        reply = parse_reply(stdout)
        if reply is None:
            detail = (res.get("stderr") or stdout or "").strip()[-500:]
            return None, f"{host}: reader returned rc={res.get('rc')} and no reply: {detail}"
        return checked_reply(host, reply, logs)

    def _checked(self, reply: dict) -> tuple[dict | None, str | None]:
        return checked_reply(self._host, reply, len(self._settings.logs))

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
