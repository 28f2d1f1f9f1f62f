# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of cvs.cluster.log_poll: one call is one poll round for one host.

Polled with ``until: result.finished``. State between rounds lives in files on
the controller (see plugin_utils/_log_poll_state.py) so the per-host worker
processes can decide completion together. The remote read ships
module_utils/_log_reader.py to the node and runs it with ``python3 -S`` (see reader_command).
"""

from __future__ import annotations

import ast
import base64
import json
import math
import os
import shlex
import threading
import time
from typing import Any, Mapping

from ansible import context
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.cvs.cluster.plugins.module_utils import _log_reader
from ansible_collections.cvs.cluster.plugins.module_utils._log_poll_spec import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._console import capture_reason
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll import (
    POLICIES,
    PROBES,
    HostRound,
    LogPollError,
    LogSpec,
    can_complete,
    compile_patterns,
    config_problem,
    context_before,
    decode_line,
    effective_group,
    format_elapsed,
    never_appeared,
    no_space_left,
    normalize_logs,
    normalize_policy,
    policy_decided,
    probe_outcome,
    scan_lines,
    split_lines,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll_budget import (
    CallLines,
    budget_problem,
    default_call_seconds,
    fit,
    merge_round,
    minimum_budget,
    progress_of,
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
from ansible_collections.cvs.cluster.plugins.plugin_utils._reader_session import (
    SERVE_BOOTSTRAP,
    ReaderSession,
    kept_session_argv,
    node_interpreter,
)

_READER_SOURCE: str | None = None
display = Display()
# what the node's interpreter runs: the program piped to its stdin (reader_program)
_BOOTSTRAP = "import sys; exec(sys.stdin.buffer.read())"

# Readers kept between rounds, per (host, task) of this worker process: `until` retries of a task run in the
# worker that ran its first try, so the next round finds the session here.
_SESSIONS: dict[tuple[str, str], ReaderSession] = {}

# A host of the play batch that has not polled this long after the first one did (skipped by `when`,
# for instance) no longer holds the completion group back.
JOIN_GRACE = 30.0
# After the group decided: at most this many extra reads per host to reach the end of its logs.
FINAL_DRAIN_READS = 16
_CURSOR_KEYS = ("offset", "dev", "ino", "head_len", "head_hash", "size", "mtime", "away")
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


def reader_source() -> str:
    global _READER_SOURCE
    if _READER_SOURCE is None:
        with open(_log_reader.__file__, encoding="utf-8") as fh:
            _READER_SOURCE = fh.read()
    return _READER_SOURCE


def reader_command(interpreter: str, cmd_timeout: int, bootstrap: str = _BOOTSTRAP) -> str:
    """The node's command line for one read: the interpreter runs the program it is sent on stdin.

    ``-S``: the reader needs the standard library only, so `site` (site-packages and their .pth files) and its
    start-up time are skipped. The program is read with ``sys.stdin.buffer.read()`` rather than ``python3 -``,
    whose parser reads stdin one byte per read(2) call when PYTHONUNBUFFERED is set (as many container images
    do). ``timeout -s KILL`` bounds the whole process, interpreter start-up included; the reader itself stops
    at cmd_timeout and says where. A kept reader passes its own bootstrap and no bound (the controller ends it).
    """
    # an interpreter may carry arguments (`/usr/bin/env python3`)
    interp = " ".join(shlex.quote(part) for part in shlex.split(interpreter))
    bound = f"timeout -s KILL {cmd_timeout + 5} " if cmd_timeout else ""
    return f"{bound}{interp} -S -c {shlex.quote(bootstrap)}"


def reader_program(request: Mapping[str, Any]) -> bytes:
    """The program piped into the node's interpreter: the reader's source plus a main() call with the request.

    The request goes in as a Python literal, so the node's compiler parses it and the reader needs no json
    import. A JSON round trip first reduces it to plain dicts, lists, strings, numbers, booleans and None (no
    tagged or other subclasses whose repr could differ); ascii() then keeps the program pure ASCII whatever the
    paths hold (lone surrogates included).
    """
    return (reader_source() + f"\nmain({request_literal(request)})\n").encode("ascii")


def request_literal(request: Mapping[str, Any]) -> str:
    """The request as the ASCII Python literal the reader evaluates (see reader_program)."""
    return ascii(json.loads(json.dumps(request)))


def parse_reply(stdout: str) -> dict | None:
    """The reader's reply (see _log_reader.main), chunks restored; None when stdout holds anything else.

    ast.literal_eval only builds literals (nothing is called or looked up), so garbage, a banner or a reply cut
    short can only fail to parse, and every line before the reply must belong to one of its logs.
    """
    *lines, last = stdout.strip().split("\n")
    try:
        reply = ast.literal_eval(last)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(reply, dict):
        return None
    logs = reply.get("logs", [])
    if not isinstance(logs, list) or not all(isinstance(log, dict) for log in logs):
        return None
    start = 0
    for log in logs:
        count = log.get("chunks", 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return None
        log["chunks"] = lines[start : start + count]
        start += count
    return reply if start == len(lines) else None


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
            self._configure(args, task_vars)
        except (LogPollError, AnsibleActionFail) as exc:
            # finished=True so that `until: x.finished` ends at once on bad input
            result.update(failed=True, finished=True, msg=f"log_poll: {exc}")
            return result
        try:
            result = self._arm(result) if self._start == "arm" else self._poll(result)
        finally:
            if self._start == "arm" or result.get("finished") or result.get("failed"):
                self._close_kept_reader()
        return result

    # ---- configuration -------------------------------------------------------------------

    def _configure(self, args: dict, task_vars: dict) -> None:
        self._args = args
        self._logs = normalize_logs(args["logs"])
        self._errors = compile_patterns(args["error_patterns"], "error_patterns")
        self._ignores = compile_patterns(args["ignore_error_patterns"], "ignore_error_patterns")
        complete = {k: v for k, v in (args["complete"] or {}).items() if v not in (None, [], {})}
        self._policy = normalize_policy(complete.get("policy", "all"))
        self._complete = complete
        marker = compile_patterns({"complete": complete["pattern"]}, "complete") if complete.get("pattern") else []
        self._marker = marker[0] if marker else None
        self._start = args["start"]
        for name in ("timeout", "stall_timeout", "cmd_timeout", "max_bytes", "transport_retries"):
            if args[name] is not None and args[name] < 0:
                raise LogPollError(f"{name} must not be negative, got {args[name]}")
        if args["max_bytes"] < 1024:
            raise LogPollError(f"max_bytes must be at least 1024, got {args['max_bytes']}")
        if args["state_retention"] < 0:
            raise LogPollError(f"state_retention must not be negative, got {args['state_retention']:g}")
        http_timeout = (complete.get("http") or {}).get("timeout")
        if http_timeout is not None and not math.isfinite(http_timeout):
            # the request reaches the node as a Python literal, which has no spelling for inf or nan
            raise LogPollError(f"complete.http.timeout must be a finite number of seconds, got {http_timeout}")
        if args["cursors"] is not None and not all(isinstance(c, Mapping) for c in args["cursors"].values()):
            raise LogPollError("cursors must map each log path to a cursor returned by start=arm")
        if self._start == "arm":
            return
        self._participants = list(task_vars.get("ansible_play_batch") or [self._host])
        play_hosts = list(task_vars.get("ansible_play_hosts_all") or self._participants)
        group = list(complete.get("hosts") or self._participants)
        unknown = [h for h in group if h not in play_hosts]
        if unknown:
            raise LogPollError(f"complete.hosts names hosts that are not in the play: {', '.join(unknown)}")
        idle = [h for h in group if h not in self._participants]
        if idle:
            raise LogPollError(
                f"complete.hosts names hosts that do not poll in this batch (failed earlier or in another serial "
                f"batch): {', '.join(idle)}"
            )
        self._group = group
        self._budget = args["event_budget"]
        minimum = minimum_budget([(s.path, s.label) for s in self._logs], group, self._host)
        problem = budget_problem(self._budget, minimum)
        if problem:
            raise LogPollError(problem)
        call_seconds = args["call_seconds"]
        if call_seconds is None:
            try:
                call_seconds = default_call_seconds(bool(capture_reason(os.environ)), os.environ)
            except ValueError as exc:
                raise LogPollError(str(exc)) from None
        if call_seconds < 0 or not math.isfinite(call_seconds):
            raise LogPollError(f"call_seconds must be a finite number of seconds, not negative, got {call_seconds}")
        self._call_seconds = call_seconds
        polling_together = len(self._participants)
        forks = (context.CLIARGS or {}).get("forks")
        if forks and polling_together > 1 and forks < polling_together:
            raise LogPollError(
                f"forks ({forks}) is smaller than the {polling_together} hosts that must poll together; "
                f"raise forks (-f {polling_together}) or use serial batches no larger than forks"
            )
        throttle = getattr(self._task, "throttle", 0) or 0
        if throttle and polling_together > 1 and throttle < polling_together:
            raise LogPollError(
                f"throttle ({throttle}) is smaller than the {polling_together} hosts that must poll together"
            )
        self._can_complete = can_complete(bool(self._logs), complete)
        self._watches = bool(self._logs) or any(complete.get(p) for p in PROBES)
        loop_var = task_vars.get("ansible_loop_var", "item")
        looping = self._task.loop is not None or bool(getattr(self._task, "loop_with", None))
        item = task_vars.get(loop_var) if looping else None
        task_key = args.get("state_key") or digest(self._task._uuid, item)
        self._store = StateStore(args["state_dir"], playbook_run_key(), task_key)

    # ---- remote read ---------------------------------------------------------------------

    def _interpreter(self, task_vars: dict) -> str:
        return node_interpreter(task_vars, self._templar)

    def _remote_read(self, request: dict) -> tuple[dict | None, str | None]:
        """Run the reader on the node: (reply, None) or (None, transport error).

        Through the reader this poll keeps on the node when it can (keep_reader), else, or when that session
        fails, through one ssh exec of a one-shot reader, which also reports the transport error.
        """
        timeout = int(self._args["cmd_timeout"])
        request = dict(request, cmd_timeout=timeout)
        if self._args["keep_reader"]:
            kept = self._kept_read(request, timeout)
            if kept is not None:
                return kept
        cmd = reader_command(self._interpreter(self._task_vars_cache), timeout)
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
        if "timeout" in reply:
            return None, f"{self._host}: {reply['timeout']}"
        if len(reply.get("logs", [])) != len(self._logs):
            return None, f"{self._host}: reader answered for {len(reply.get('logs', []))} of {len(self._logs)} logs"
        return reply, None

    def _session_key(self) -> tuple[str, str]:
        return (self._host, self._task._uuid)

    def _kept_read(self, request: dict, timeout: int) -> tuple[dict | None, str | None] | None:
        """The round through the reader kept on the node (started on first use); None to read one-shot instead."""
        key = self._session_key()
        session = _SESSIONS.get(key)
        try:
            if session is None or not session.alive or session.pid != os.getpid():
                argv = self._session_argv()
                if argv is None:
                    return None
                program = (reader_source() + "\nserve()\n").encode("ascii")
                session = _SESSIONS[key] = ReaderSession(argv, program, _log_reader.END_OF_REPLY)
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

    def _session_argv(self) -> list[bytes] | None:
        """ssh command line of a kept reader: same options and master as the connection's own commands."""
        remote = reader_command(self._interpreter(self._task_vars_cache), 0, SERVE_BOOTSTRAP)
        return kept_session_argv(self._connection, remote)[0]

    def _close_kept_reader(self) -> None:
        session = _SESSIONS.pop(self._session_key(), None)
        if session is not None:
            session.close()

    def _request(self, cursors: dict, probes: bool = True) -> dict:
        # start=end applies to what exists at the first read; a log that appears later is new from byte 0
        start = "beginning" if self._state.read_once else self._start
        logs = []
        for spec in self._logs:
            cursor = dict(cursors.get(spec.path) or {})
            cursor["path"] = spec.path
            cursor.setdefault("offset", None)
            logs.append(cursor)
        request: dict[str, Any] = {"logs": logs, "max_bytes": self._args["max_bytes"], "start": start}
        if start == "auto":
            started = playbook_run_started()
            # unknown (no /proc): every log is read from its first byte, as with start=beginning
            if started is not None:
                request["run_age"] = max(0.0, time.time() - started)
        if self._args["keep_reader"]:
            # a kept reader that hears nothing for this long ends (its controller is gone); a later round
            # would just start a new one
            delay = float(getattr(self._task, "delay", 0) or 0)
            request["idle_timeout"] = int(3 * delay + self._args["cmd_timeout"] + 60)
        if probes:
            for probe in PROBES:
                if self._complete.get(probe):
                    request[probe] = self._complete[probe]
        return request

    # ---- arm -----------------------------------------------------------------------------

    def _arm(self, result: dict) -> dict:
        request = {"logs": [{"path": s.path, "offset": None} for s in self._logs], "max_bytes": 1024, "start": "arm"}
        reply, error = self._remote_read(request)
        if error:
            result.update(failed=True, finished=True, msg=f"log_poll could not arm: {error}")
            return result
        # a log missing at arm time has no cursor: the poll reads it from its first byte once it appears
        cursors = {spec.path: _cursor_of(log) for spec, log in zip(self._logs, reply["logs"]) if log["state"] == "ok"}
        states = [{"path": s.path, "label": s.label, "state": r["state"]} for s, r in zip(self._logs, reply["logs"])]
        result.update(
            finished=True,
            failed=False,
            changed=False,
            armed=True,
            cursors=cursors,
            log_states=states,
            msg=f"armed {len(cursors)} of {len(self._logs)} log(s)",
        )
        return result

    # ---- one call: one round, or rounds for call_seconds ----------------------------------

    def _poll(self, base: dict) -> dict:
        """Poll rounds until finished or the call's time is used; a result under the event budget.

        Every round's lines (and progress between results) go to the cvs console's spool when it has one.
        """
        lines = CallLines(self._budget)
        wants_lines = os.environ.get(SPOOL_LINES_ENV) == "1"
        spool = SpoolWriter(spool_dir(os.environ, os.getppid()), self._host, str(self._task._uuid), wants_lines)
        delay = float(getattr(self._task, "delay", 0) or 0)
        deadline = time.monotonic() + self._call_seconds
        total = None
        while True:
            result = self._round(dict(base))
            labeled = []
            for index, spec in enumerate(self._logs):
                delivered = self._delivered.get(spec.path, [])
                lines.add(index, delivered)
                labeled.extend((spec.label, line) for line in delivered)
            total = merge_round(total, result)
            done = bool(result.get("finished") or result.get("failed")) or time.monotonic() + delay >= deadline
            spool.write(labeled, progress_of(result), last=done)
            if done:
                break
            time.sleep(delay)
        if spool.lines:
            total["lines_spooled"] = True
        return fit(total, lines, self._budget)

    # ---- one round -----------------------------------------------------------------------

    def _round(self, result: dict) -> dict:
        store = self._store
        now = time.time()
        saved = store.load_host(self._host)
        if saved is None or saved.get("finished"):
            generation = int(saved.get("generation", 1)) + 1 if saved else 1
            state = HostRound(started=now, last_progress=now, generation=generation)
            state.cursors = {path: dict(c) for path, c in (self._args.get("cursors") or {}).items()}
            store.set_generation(generation)
            info = {"host": self._host, "can_complete": self._can_complete, "watches": self._watches}
            store.register(self._host, info, now)
            store.prune_old_runs(self._args["state_retention"], now)
            self._open_save_files(truncate=True)
        else:
            state = HostRound.from_dict(saved)
            store.set_generation(state.generation)
        state.rounds += 1
        self._state = state
        self._delivered: dict[str, list[str]] = {}
        self._warnings: list[str] = []
        result.update(
            changed=False,
            finished=False,
            failed=False,
            completed=False,
            new_lines=[],
            log_states=[],
            error=None,
            timed_out=False,
            stalled=False,
            transport_error=None,
            round=state.rounds,
        )

        verdict = store.decision()
        if verdict is None and not state.config_ok:
            problem = self._config_problem(now)
            if problem:
                verdict = store.decide({"state": "failed", "host": self._host, "reason": problem, "config": True})
        if verdict and verdict["state"] == "failed" and (verdict["host"] != self._host or verdict.get("config")):
            return self._abort(result, verdict)

        reply = None
        if self._watches:
            reply, transport_error = self._remote_read(self._request(state.cursors))
            if transport_error:
                state.transport_failures += 1
                result.update(transport_error=transport_error, transport_failures=state.transport_failures)
                if state.transport_failures > self._args["transport_retries"]:
                    reason = (
                        f"{state.transport_failures} consecutive transport failures on {self._host}; "
                        f"last: {transport_error}"
                    )
                    store.decide({"state": "failed", "host": self._host, "reason": reason})
                    return self._finish(result, failed=True, msg=reason)
                return self._progress(
                    result,
                    msg=f"transport failure {state.transport_failures}/"
                    f"{self._args['transport_retries']}: {transport_error}",
                )
            state.transport_failures = 0

        failure = None
        if reply is not None:
            failure = self._consume(reply, result)
            state.read_once = True
            if failure is None:
                caught_up = not any(log.get("more") for log in reply["logs"])
                completed, failure = probe_outcome(reply, self._complete, state.marker_seen, caught_up)
                if completed:
                    store.mark_complete(self._host)
                elif failure is None and self._host not in store.completed():
                    failure = no_space_left(self._host, reply, self._complete.get("exit_code_file"))
        if failure is None:
            failure = self._deadlines(now, result)
        if failure:
            store.decide({"state": "failed", "host": self._host, "reason": failure})
            return self._finish(result, failed=True, msg=failure)

        verdict = store.decision()
        if verdict is None and policy_decided(self._policy, self._effective_group(now), store.completed()):
            reason = f"completion group done under policy {self._policy}"
            verdict = store.decide({"state": "complete", "host": self._host, "reason": reason})
        if verdict and verdict["state"] == "failed" and verdict["host"] != self._host:
            return self._abort(result, verdict)
        if verdict and verdict["state"] == "complete":
            return self._final_drain(result)
        return self._progress(result)

    def _grace_over(self, now: float) -> bool:
        joined = self._store.first_joined()
        return joined is not None and now - joined > JOIN_GRACE

    def _config_problem(self, now: float) -> str | None:
        members = self._store.members()
        grace_over = self._grace_over(now)
        problem = config_problem(self._participants, self._group, members, grace_over)
        if problem is None and (grace_over or all(h in members for h in self._participants)):
            self._state.config_ok = True
        return problem

    def _effective_group(self, now: float | None = None) -> list[str]:
        return effective_group(self._group, self._store.members(), self._grace_over(now or time.time()))

    def _consume(self, reply: dict, result: dict) -> str | None:
        """Add a reply's lines and log states to result and state; return a failure reason for an error match."""
        state = self._state
        labeled: list[tuple[str, str]] = []
        entries = {e["path"]: e for e in result["log_states"]}
        sizes: dict[str, int] = {}
        per_log: list[tuple[LogSpec, list[str]]] = []
        delivered = False
        for spec, log in zip(self._logs, reply.get("logs", [])):
            raw = b"".join(base64.b64decode(c) for c in log.get("chunks", []))
            lines = [decode_line(b) for b in split_lines(raw)]
            events = [e for e in log.get("events", []) if not e.startswith("drained:")]
            previous_state = state.states.get(spec.path)
            log_state = log.get("state")
            if log.get("lost"):
                lost = log["lost"]
                events.append("lost")
                warning = (
                    f"{self._host}: {spec.path}: at least {lost['bytes']} bytes were never read and are lost "
                    f"({lost['why']})"
                )
                self._warnings.append(warning)
                state.warnings.append(warning)
            if log_state == "ok":
                state.cursors[spec.path] = _cursor_of(log)
                sizes[spec.path] = log["size"]
                if spec.path not in state.appeared:
                    state.appeared.append(spec.path)
                if log.get("long_line"):
                    events.append("long_line_split")
                if previous_state not in (None, "ok"):
                    events.append("appeared" if previous_state == "missing" else "readable")
            elif previous_state == "ok" and log_state == "missing":
                events.append("disappeared")
            state.states[spec.path] = log_state
            for event in events:
                state.note_event(spec.label, event)
            entry = entries.get(spec.path)
            if entry is None:
                entry = {"path": spec.path, "label": spec.label, "new_lines": 0, "events": []}
                result["log_states"].append(entry)
            entry.update(state=log_state, new_lines=entry["new_lines"] + len(lines), events=entry["events"] + events)
            entry.pop("error", None)
            if log.get("error"):
                entry["error"] = log["error"]
            if log.get("lost"):
                entry["lost_bytes"] = entry.get("lost_bytes", 0) + int(log["lost"]["bytes"])
            if log_state == "ok":
                entry.update(offset=log["offset"], size=log["size"], more=bool(log.get("more")))
            if raw:
                self._save(spec.label, raw)
                delivered = True
            labeled.extend((spec.label, line) for line in lines)
            per_log.append((spec, lines))
        if state.note_sizes(sizes) or delivered:
            state.last_progress = time.time()
        round_lines = [line for _label, line in labeled]
        # a round may consume several reads (final drain): keep new_lines grouped by log, in the order of logs
        for spec, lines in per_log:
            self._delivered.setdefault(spec.path, []).extend(lines)
        result["new_lines"] = [line for spec in self._logs for line in self._delivered.get(spec.path, [])]
        scan = scan_lines(labeled, self._errors, self._ignores, self._marker)
        previous = list(state.context)
        state.remember(round_lines)
        state.lines_total += len(round_lines)
        if scan.marker_line is not None:
            state.marker_seen = True
        if scan.error:
            err = scan.error
            path = next(s.path for s in self._logs if s.label == err["label"])
            result["error"] = {
                "name": err["name"],
                "pattern": err["pattern"],
                "line": err["line"],
                "path": path,
                "label": err["label"],
                "host": self._host,
                "context": context_before(previous, round_lines, err["index"]),
            }
            return f"error pattern {err['name']!r} matched on {self._host} in {path}: {err['line']}"
        return None

    def _deadlines(self, now: float, result: dict) -> str | None:
        state = self._state
        timeout, stall = self._args["timeout"], self._args["stall_timeout"]
        if self._host in self._store.completed():
            return None
        if timeout and now - state.started > timeout:
            result["timed_out"] = True
            missing = never_appeared([s.path for s in self._logs], state.appeared)
            return (
                f"timed out after {format_elapsed(now - state.started)} (timeout {timeout:g}s) on {self._host}{missing}"
            )
        if stall and now - state.last_progress > stall and self._logs:
            result["stalled"] = True
            last = repr(state.last_line) if state.last_line is not None else "(no line yet)"
            return (
                f"stalled: no new log output on {self._host} for {format_elapsed(now - state.last_progress)} "
                f"(stall_timeout {stall:g}s); last line: {last}"
                f"{never_appeared([s.path for s in self._logs], state.appeared)}"
            )
        return None

    def _drain(self, result: dict) -> str | None:
        """Read to the end of every log (at most FINAL_DRAIN_READS reads); a failure reason for an error found."""
        for _read in range(FINAL_DRAIN_READS if self._logs else 0):
            reply, transport_error = self._remote_read(self._request(self._state.cursors, probes=False))
            if transport_error is not None:
                result["transport_error"] = transport_error
                return None
            failure = self._consume(reply, result)
            if failure:
                self._store.decide({"state": "failed", "host": self._host, "reason": failure})
                return failure
            if not any(log.get("more") for log in reply["logs"]):
                return None
        return None

    def _final_drain(self, result: dict) -> dict:
        """After the group decided: read to the end of every log so errors written just before the end count."""
        failure = self._drain(result)
        if failure:
            return self._finish(result, failed=True, msg=failure)
        if self._host in self._store.completed():
            msg = "complete"
        else:
            msg = f"done: completion group finished under policy {self._policy}"
        return self._finish(result, failed=False, msg=msg)

    # ---- results -------------------------------------------------------------------------

    def _group_summary(self, failed_host: str | None = None) -> dict:
        completed = self._store.completed()
        group = self._effective_group()
        verdict = self._store.decision() or {}
        return {
            "policy": self._policy,
            "hosts": group,
            "complete": sum(1 for h in group if h in completed),
            "total": len(group),
            "failed": 1 if verdict.get("state") == "failed" or failed_host else 0,
            "decided": bool(verdict),
        }

    def _common(self, result: dict) -> None:
        state = self._state
        if self._host in self._store.completed():
            result["completed"] = True
        result.update(
            elapsed=round(time.time() - state.started, 3),
            cursors=state.cursors,
            events=state.events,
            lines_total=state.lines_total,
        )

    def _progress(self, result: dict, msg: str | None = None) -> dict:
        state = self._state
        self._common(result)
        result.update(finished=False, group=self._group_summary(), msg=msg or f"polling round {state.rounds}")
        self._store.save_host(self._host, state.to_dict())
        return self._with_warnings(result)

    def _with_warnings(self, result: dict) -> dict:
        """The round's result with this round's warnings (lost bytes) added; a final result carries those of
        every round (Ansible shows the warnings of a task's last result only)."""
        warnings = self._state.warnings if result.get("finished") else self._warnings
        if warnings:
            result["warnings"] = list(result.get("warnings") or []) + list(warnings)
        return result

    def _abort(self, result: dict, verdict: dict) -> dict:
        if verdict.get("config"):
            return self._finish(result, failed=True, msg=f"log_poll: {verdict['reason']}")
        # another host failed: first read to the end of this host's logs, so that its saved copy holds every byte
        # there is and an error this host shows gets its own verdict, the same on every host that shows it
        failure = self._drain(result) if self._watches else None
        if failure:
            return self._finish(result, failed=True, msg=failure)
        return self._finish(
            result,
            failed=True,
            msg=f"stopped because {verdict['host']} failed: {verdict['reason']}",
            aborted_by=verdict["host"],
        )

    def _finish(self, result: dict, failed: bool, msg: str, aborted_by: str | None = None) -> dict:
        state = self._state
        state.finished = True
        self._common(result)
        result.update(
            finished=True,
            failed=failed,
            msg=msg,
            group=self._group_summary(self._host if failed and not aborted_by else None),
            last_line=state.last_line,
        )
        if aborted_by:
            result["aborted_by"] = aborted_by
        self._store.save_host(self._host, state.to_dict())
        return self._with_warnings(result)

    # ---- save_dir ------------------------------------------------------------------------

    def _save_path(self, label: str) -> str | None:
        save_dir = self._args.get("save_dir")
        if not save_dir:
            return None
        # one directory per host, whatever its name holds ('/', '..', 253-character FQDNs with a suffix)
        return os.path.join(save_dir, path_component(self._host), path_component(label + ".log"))

    def _open_save_files(self, truncate: bool) -> None:
        for spec in self._logs:
            path = self._save_path(spec.label)
            if path:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                if truncate:
                    with open(path, "wb"):
                        pass

    def _save(self, label: str, raw: bytes) -> None:
        path = self._save_path(label)
        if path:
            with open(path, "ab") as fh:
                fh.write(raw)


def _cursor_of(log: dict) -> dict:
    return {k: log[k] for k in _CURSOR_KEYS if k in log}


__all__ = ["ARGUMENT_SPEC", "POLICIES", "ActionModule"]
