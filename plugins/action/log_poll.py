# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of cvs.cluster.log_poll: one call is one or more poll rounds for one host (or, with
``fleet: true``, for every host of the batch).

Polled with ``until: result.finished``. This plugin holds what needs Ansible: the arguments and task vars, the
connections, and the result. What a round decides is the round engine's (plugin_utils/_log_poll/engine.py); how a
read reaches a node's reader, kept between rounds or one-shot, is the transport's (plugin_utils/_log_poll/
transport.py); what crosses the wire is the reader protocol's (plugin_utils/_log_poll/protocol.py); state between
rounds lives in files on the controller (plugin_utils/_log_poll/state.py) so the per-host worker processes can
decide completion together.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible import context
from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.mod_args import ModuleArgsParser
from ansible.plugins.action import ActionBase

from ansible_collections.cvs.cluster.plugins.module_utils._log_poll_spec import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.engine import RoundEngine, arm, drain
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.fleet import FleetPoll
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.save_dir import SaveDir
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import POLICIES, LogPollError
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.session import node_interpreter
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
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.transport import (
    NodeReaders,
    Reply,
    play_host_link,
    watch_parent,
)


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
        self._task_vars = task_vars
        watch_parent()
        try:
            _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
            self._settings = settings = poll_settings(args, self._run_facts(task_vars, args["fleet"]))
        except (LogPollError, AnsibleActionFail) as exc:
            # finished=True so that `until: x.finished` ends at once on bad input
            result.update(failed=True, finished=True, msg=f"log_poll: {exc}")
            return result
        if args.get("fleet"):
            result = self._fleet(result, args, task_vars)
            if result.get("finished") or result.get("failed"):
                _close_fleet(self._fleet_key(task_vars))
            return result
        self._readers = NodeReaders(str(self._task._uuid), {self._host: settings}, self._own_link, self._exec)
        try:
            if settings.start == "arm":
                result.update(arm(settings, self._read))
            elif settings.start == "drain":
                result.update(drain(settings, self._read, SaveDir(args.get("save_dir"), self._host, settings.logs)))
            else:
                result = self._poll(result, args, task_vars, settings)
        finally:
            if settings.start in ("arm", "drain") or result.get("finished") or result.get("failed"):
                self._readers.close()
        return result

    def _read(self, request: dict) -> Reply:
        """This host's read of a round (see transport.NodeReaders)."""
        return self._readers.read(self._host, request)

    def _own_link(self, _host: str) -> tuple[Any, str]:
        return self._connection, node_interpreter(self._task_vars, self._templar)

    def _exec(self, connection: Any, cmd: str, in_data: bytes) -> Mapping[str, Any]:
        """Run ``cmd`` through ``connection`` (this host's, or another host's in a fleet) with Ansible's own exec."""
        # The play's shell, named explicitly: for the default one Ansible appends `; sleep 0`, a work-around for a
        # Linux kernel race fixed in 2016 (ansible/ansible#13876; ansible-core drops it in #86420) that costs
        # every round a fork and an exec of sleep on the node.
        own, self._connection = self._connection, connection
        try:
            return self._low_level_execute_command(
                cmd, in_data=in_data, sudoable=True, executable=self._play_context.executable
            )
        finally:
            self._connection = own

    def _loop_item(self, task_vars: dict) -> Any:
        looping = self._task.loop is not None or bool(getattr(self._task, "loop_with", None))
        return task_vars.get(task_vars.get("ansible_loop_var", "item")) if looping else None

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
        return (str(self._task._uuid), digest(self._loop_item(task_vars), playbook_run_key()))

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
        link = play_host_link(self._task, self._play_context, self._templar, task_vars["hostvars"])
        readers = NodeReaders("fleet:" + str(self._task._uuid), settings, link, self._exec)
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
        spools = {h: self._spool(h) for h in hosts}
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
        task_key = args.get("state_key") or digest(self._task._uuid, self._loop_item(task_vars))
        store = StateStore(args["state_dir"], playbook_run_key(), task_key)
        sink = SaveDir(args.get("save_dir"), self._host, settings.logs)
        engine = RoundEngine(settings, store, self._read, sink=sink, run_started=playbook_run_started)
        return engine.call(result, self._spool(self._host))

    def _spool(self, host: str) -> SpoolWriter:
        """The console spool of ``host``'s lines and progress (when a cvs console started this run)."""
        lines = os.environ.get(SPOOL_LINES_ENV) == "1"
        return SpoolWriter(spool_dir(os.environ, os.getppid()), host, str(self._task._uuid), lines)


__all__ = ["ARGUMENT_SPEC", "POLICIES", "ActionModule"]
