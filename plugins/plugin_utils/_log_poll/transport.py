# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The way from the controller to the log readers on the nodes, for both forms of log_poll.

A host's read goes to the reader kept on its node for the task (started on first use, reached through the ssh
connection's ControlMaster, see session.py) when the host's ``keep_reader`` allows it and its connection can hold
one (ssh, no password, no become). Otherwise, or when the kept reader does not answer, the round is read by one
exec of a one-shot reader through the host's connection, which also reports the transport error. A kept reader
that does not answer within the host's ``cmd_timeout`` (+5 s) is not followed by a one-shot read: that would hang
as long again. Every transport error a round reports is worded here.

The per-host form reads its one host per call; a fleet (``fleet: true``) sends every host's request before it
waits for any reply (see fleet.py). Kept readers live in this worker process between the `until` retries of their
task (a task's retries run in the worker that ran its first try), and end with it (:func:`watch_parent`).
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible import constants as C
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.plugins.loader import connection_loader
from ansible.utils.display import Display

from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.protocol import (
    END_OF_REPLY,
    parse_reply,
    reader_command,
    reader_program,
    reply_problem,
    request_literal,
    serve_program,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.session import (
    SERVE_BOOTSTRAP,
    ReaderSession,
    collect_replies,
    kept_session_argv,
    node_interpreter,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.settings import PollSettings

display = Display()

# (reply, None), or (None, the transport error)
Reply = tuple[dict | None, str | None]
# Runs a command on a host through one of its connections: (connection, command, stdin) -> Ansible's low-level
# result (rc, stdout, stderr); raises AnsibleConnectionFailure when the host cannot be reached.
Execute = Callable[[Any, str, bytes], Mapping[str, Any]]
# A host's connection and the Python its node runs the reader under.
Link = Callable[[str], tuple[Any, str]]

# Readers kept between rounds, per (host, task) of this worker process.
_SESSIONS: dict[tuple[str, str], ReaderSession] = {}
# (host, task) whose connection cannot hold a kept reader: read one-shot without asking again.
_ONE_SHOT_ONLY: set[tuple[str, str]] = set()
# how often a worker checks that its ansible-playbook is still there (see watch_parent)
PARENT_CHECK = 0.5
_WATCHDOG_PID: int | None = None
# what a kept reader's reply may take beyond cmd_timeout (none: an hour)
_REPLY_GRACE = 5


def watch_parent() -> None:
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


def killed_after(host: str, cmd_timeout: int) -> str:
    return f"{host}: remote read killed after cmd_timeout ({cmd_timeout}s)"


def connection_failed(host: str, exc: BaseException) -> str:
    return f"{host}: connection failed: {exc}"


def checked_reply(host: str, reply: dict, logs: int) -> Reply:
    problem = reply_problem(host, reply, logs)
    return (None, problem) if problem else (reply, None)


def one_shot_read(host: str, execute: Execute, connection: Any, interpreter: str, request: dict, logs: int) -> Reply:
    """One exec of a one-shot reader on ``host`` through ``connection``, bounded by the request's cmd_timeout."""
    timeout = request.get("cmd_timeout") or 0
    try:
        res = execute(connection, reader_command(interpreter, timeout), reader_program(request))
    except AnsibleConnectionFailure as exc:
        return None, connection_failed(host, exc)
    stdout = res.get("stdout", "")
    if res.get("rc") == 137 and timeout:
        return None, killed_after(host, timeout)
    reply = parse_reply(stdout)
    if reply is None:
        detail = (res.get("stderr") or stdout or "").strip()[-500:]
        return None, f"{host}: reader returned rc={res.get('rc')} and no reply: {detail}"
    return checked_reply(host, reply, logs)


class NodeReaders:
    """The readers of one task's hosts: each host's kept reader when it has one, else one-shot reads.

    ``task`` names the task (and form) the kept readers belong to; ``link`` gives a host's connection and
    interpreter (asked at most once per host); ``execute`` runs a one-shot reader through a connection.
    """

    def __init__(self, task: str, settings: Mapping[str, PollSettings], link: Link, execute: Execute) -> None:
        self._task = task
        self._settings = settings
        self._link_of = link
        self._execute = execute
        self._links: dict[str, tuple[Any, str]] = {}
        _allow_descriptors(4 * len(settings) + 256)

    def read(self, host: str, request: dict) -> Reply:
        return self.read_all({host: request})[host]

    def read_all(self, requests: Mapping[str, dict]) -> dict[str, Reply]:
        """Every host's request sent to its kept reader before any reply is awaited; the rest read one-shot."""
        requests = {h: dict(r, cmd_timeout=self._settings[h].cmd_timeout) for h, r in requests.items()}
        sent: dict[str, ReaderSession] = {}
        for host, request in requests.items():
            session = self._kept(host)
            if session is not None and session.send(request_literal(request).encode("ascii")):
                sent[host] = session
        texts = self._collect(sent)
        replies: dict[str, Reply] = {}
        for host, request in requests.items():
            text = texts.get(host)
            reply = parse_reply(text) if text is not None else None
            if reply is not None:
                replies[host] = checked_reply(host, reply, len(self._settings[host].logs))
                continue
            if host in sent:
                timed_out = sent[host].timed_out
                self._drop(host)
                if timed_out:  # a one-shot read would hang as long again
                    replies[host] = (None, killed_after(host, self._settings[host].cmd_timeout))
                    continue
            replies[host] = self._one_shot(host, request)
        return replies

    def close(self) -> None:
        for host in self._settings:
            self._drop(host)
            _ONE_SHOT_ONLY.discard((host, self._task))

    def _link(self, host: str) -> tuple[Any, str]:
        link = self._links.get(host)
        if link is None:
            link = self._links[host] = self._link_of(host)
        return link

    def _kept(self, host: str) -> ReaderSession | None:
        """The host's kept reader (started on first use), or None to read one-shot."""
        key = (host, self._task)
        session = _SESSIONS.get(key)
        if session is not None and session.alive and session.pid == os.getpid():
            return session
        if not self._settings[host].keep_reader or key in _ONE_SHOT_ONLY:
            return None
        try:
            connection, interpreter = self._link(host)
            argv, why = kept_session_argv(connection, reader_command(interpreter, 0, SERVE_BOOTSTRAP))
            if argv is None:
                display.vvv(f"log_poll: no reader kept on the node ({why}); reading one-shot", host=host)
                _ONE_SHOT_ONLY.add(key)
                return None
            session = _SESSIONS[key] = ReaderSession(argv, serve_program(), END_OF_REPLY)
        except Exception as exc:  # the kept reader is an optimisation: never fail a round over it
            _kept_reader_failed(host, exc)
            return None
        return session

    def _collect(self, sent: Mapping[str, ReaderSession]) -> dict[str, str | None]:
        if not sent:
            return {}
        timeout = max(self._settings[h].cmd_timeout or 3600 for h in sent) + _REPLY_GRACE
        try:
            return collect_replies(sent, timeout)
        except Exception as exc:  # as in _kept: the hosts are read one-shot instead
            for host in sent:
                _kept_reader_failed(host, exc)
            return {}

    def _one_shot(self, host: str, request: dict) -> Reply:
        try:
            connection, interpreter = self._link(host)
        except Exception as exc:
            return None, connection_failed(host, exc)
        return one_shot_read(host, self._execute, connection, interpreter, request, len(self._settings[host].logs))

    def _drop(self, host: str) -> None:
        session = _SESSIONS.pop((host, self._task), None)
        if session is not None:
            session.close()


def _kept_reader_failed(host: str, exc: Exception) -> None:
    display.vvv(f"log_poll: kept reader failed ({exc!r}); reading one-shot", host=host)


def play_host_link(task: Any, play_context: Any, templar: Any, hostvars: Any) -> Link:
    """A fleet's way to each host of the play: its connection and interpreter from its own variables."""

    def link(host: str) -> tuple[Any, str]:
        variables = hostvars.raw_get(host)
        host_templar = templar.copy_with_new_env(available_variables=variables)
        return host_connection(task, play_context, variables, host_templar), node_interpreter(variables, host_templar)

    return link


def host_connection(task: Any, play_context: Any, variables: dict, templar: Any) -> Any:
    """A connection to another host of the play, set up from its variables as Ansible's task executor does."""
    play_context = play_context.set_task_and_variable_override(task=task, variables=variables, templar=templar)
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


def _allow_descriptors(needed: int) -> None:
    """Raise this worker's open-file limit towards ``needed`` (each kept reader holds two pipes), up to the hard
    limit; a reader that cannot be started then is read one-shot instead."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
