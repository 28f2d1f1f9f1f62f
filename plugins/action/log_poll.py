# Copyright: cvs.cluster contributors
# Apache License 2.0 (see galaxy.yml)
"""Controller side of cvs.cluster.log_poll: one call is one poll round for one host.

Polled with ``until: result.finished``. State between rounds lives in files on
the controller (see plugin_utils/_log_poll_state.py) so the per-host worker
processes can decide completion together. The remote read ships
module_utils/_log_reader.py to the node and runs it with ``python3 -``.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import time
from typing import Any

from ansible import context
from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase

from ansible_collections.cvs.cluster.plugins.module_utils import _log_reader
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll import (
    POLICIES,
    START_MODES,
    HostRound,
    LogPollError,
    compile_patterns,
    context_before,
    decode_line,
    format_elapsed,
    has_completion_probe,
    normalize_logs,
    normalize_policy,
    policy_decided,
    probe_outcome,
    scan_lines,
    split_lines,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll_state import (
    StateStore,
    digest,
    playbook_run_key,
)

_READER_SOURCE: str | None = None

ARGUMENT_SPEC: dict[str, Any] = {
    "logs": {"type": "raw", "default": []},
    "error_patterns": {"type": "raw", "default": {}},
    "ignore_error_patterns": {"type": "raw", "default": {}},
    "complete": {
        "type": "dict",
        "default": {},
        "options": {
            "pattern": {"type": "str"},
            "policy": {"type": "str", "default": "all"},
            "hosts": {"type": "list", "elements": "str"},
            "exit_code_file": {"type": "str"},
            "http": {
                "type": "dict",
                "options": {
                    "url": {"type": "str", "required": True},
                    "status": {"type": "int", "default": 200},
                    "timeout": {"type": "float", "default": 5},
                },
            },
            "artifact": {
                "type": "dict",
                "options": {"path": {"type": "str", "required": True}, "min_bytes": {"type": "int", "default": 0}},
            },
        },
    },
    "start": {"type": "str", "default": "beginning", "choices": list(START_MODES)},
    "cursors": {"type": "dict"},
    "timeout": {"type": "float", "default": 3600},
    "stall_timeout": {"type": "float", "default": 0},
    "cmd_timeout": {"type": "int", "default": 30},
    "max_bytes": {"type": "int", "default": 2 * 1024 * 1024},
    "transport_retries": {"type": "int", "default": 5},
    "save_dir": {"type": "path"},
    "state_dir": {"type": "path", "default": "~/.ansible/cvs_log_poll"},
    "state_key": {"type": "str"},
}


def reader_source() -> str:
    global _READER_SOURCE
    if _READER_SOURCE is None:
        with open(_log_reader.__file__, encoding="utf-8") as fh:
            _READER_SOURCE = fh.read()
    return _READER_SOURCE


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        del validation
        self._host = task_vars.get("inventory_hostname", "?")
        self._task_vars_cache = task_vars
        try:
            self._configure(args, task_vars)
        except LogPollError as exc:
            result.update(failed=True, finished=True, msg=f"log_poll: {exc}")
            return result
        if self._start == "arm":
            return self._arm(result)
        return self._round(result)

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
        if self._start == "arm":
            return
        self._participants = list(task_vars.get("ansible_play_batch") or [self._host])
        play_hosts = set(task_vars.get("ansible_play_hosts_all") or self._participants)
        group = list(complete.get("hosts") or self._participants)
        unknown = [h for h in group if h not in play_hosts]
        if unknown:
            raise LogPollError(f"complete.hosts names hosts that are not in the play: {', '.join(unknown)}")
        self._group = group
        forks = (context.CLIARGS or {}).get("forks")
        polling_together = len(self._participants)
        if forks and polling_together > 1 and forks < polling_together:
            raise LogPollError(
                f"forks ({forks}) is smaller than the {polling_together} hosts that must poll together; "
                f"raise forks (-f {polling_together}) or use serial batches no larger than forks"
            )
        if not self._logs and not has_completion_probe(complete) and self._host in group:
            group.remove(self._host)
        loop_var = task_vars.get("ansible_loop_var", "item")
        item = task_vars.get(loop_var) if self._task.loop is not None else None
        task_key = args.get("state_key") or digest(self._task._uuid, item)
        self._store = StateStore(args["state_dir"], playbook_run_key(), task_key)

    # ---- remote read ---------------------------------------------------------------------

    def _interpreter(self, task_vars: dict) -> str:
        interp = task_vars.get("ansible_python_interpreter")
        if interp:
            interp = str(self._templar.template(interp))
        if not interp or interp.startswith("auto"):
            interp = task_vars.get("ansible_facts", {}).get("discovered_interpreter_python") or "python3"
        return interp

    def _remote_read(self, request: dict) -> tuple[dict | None, str | None]:
        """Run the reader on the node: (reply, None) or (None, transport error)."""
        timeout = int(self._args["cmd_timeout"])
        request = dict(request, cmd_timeout=timeout)
        program = reader_source() + f"\nmain({json.dumps(request)!r})\n"
        interp = self._interpreter(self._task_vars_cache)
        cmd = f"{'timeout -s KILL ' + str(timeout + 5) + ' ' if timeout else ''}{shlex.quote(interp)} -"
        try:
            res = self._low_level_execute_command(cmd, in_data=program.encode(), sudoable=True)
        except AnsibleConnectionFailure as exc:
            return None, f"{self._host}: connection failed: {exc}"
        stdout = res.get("stdout", "")
        if res.get("rc") == 137 and timeout:
            return None, f"{self._host}: remote read killed after cmd_timeout ({timeout}s)"
        try:
            reply = json.loads(stdout)
        except ValueError:
            detail = (res.get("stderr") or stdout or "").strip()[-500:]
            return None, f"{self._host}: reader returned rc={res.get('rc')} and no JSON: {detail}"
        if "timeout" in reply:
            return None, f"{self._host}: {reply['timeout']}"
        return reply, None

    def _request(self, cursors: dict, start: str) -> dict:
        logs = []
        for spec in self._logs:
            cursor = dict(cursors.get(spec.path) or {})
            cursor["path"] = spec.path
            cursor.setdefault("offset", None)
            logs.append(cursor)
        request: dict[str, Any] = {"logs": logs, "max_bytes": self._args["max_bytes"], "start": start}
        for probe in ("exit_code_file", "http", "artifact"):
            if self._complete.get(probe):
                request[probe] = self._complete[probe]
        return request

    # ---- arm -----------------------------------------------------------------------------

    def _arm(self, result: dict) -> dict:
        reply, error = self._remote_read({"logs": [{"path": s.path, "offset": None} for s in self._logs],
                                          "max_bytes": 1024, "start": "arm"})
        if error:
            result.update(failed=True, finished=True, msg=f"log_poll could not arm: {error}")
            return result
        # a log missing at arm time has no cursor: the poll reads it from its first byte once it appears
        cursors = {spec.path: _cursor_of(log) for spec, log in zip(self._logs, reply["logs"]) if log["state"] == "ok"}
        result.update(finished=True, failed=False, changed=False, armed=True, cursors=cursors,
                      msg=f"armed {len(cursors)} log(s)")
        return result

    # ---- one round -----------------------------------------------------------------------

    def _round(self, result: dict) -> dict:
        store = self._store
        now = time.time()
        saved = store.load_host(self._host)
        if saved is None or saved.get("finished"):
            state = HostRound(started=now, last_progress=now)
            state.cursors = dict(self._args.get("cursors") or {})
            store.register(self._host, {"host": self._host, "can_complete": self._host in self._group})
            store.prune_old_runs(now)
            self._open_save_files(truncate=True)
        else:
            state = HostRound.from_dict(saved)
        state.rounds += 1
        self._state = state
        result.update(changed=False, finished=False, failed=False, completed=False, new_lines=[], log_states=[],
                      error=None, timed_out=False, stalled=False, transport_error=None, round=state.rounds)

        verdict = store.decision()
        if verdict and verdict["state"] == "failed" and verdict["host"] != self._host:
            return self._finish(result, failed=True, msg=f"stopped because {verdict['host']} failed: "
                                f"{verdict['reason']}", aborted_by=verdict["host"])

        reply, transport_error = self._remote_read(self._request(state.cursors, self._start))
        if transport_error:
            state.transport_failures += 1
            result.update(transport_error=transport_error, transport_failures=state.transport_failures)
            if state.transport_failures > self._args["transport_retries"]:
                reason = (f"{state.transport_failures} consecutive transport failures on {self._host}; "
                          f"last: {transport_error}")
                store.decide({"state": "failed", "host": self._host, "reason": reason})
                return self._finish(result, failed=True, msg=reason)
            return self._progress(result, msg=f"transport failure {state.transport_failures}/"
                                  f"{self._args['transport_retries']}: {transport_error}")
        state.transport_failures = 0

        failure = self._consume(reply, result)
        if failure is None:
            completed, failure = probe_outcome(reply, self._complete, state.marker_seen)
            if completed and not result["completed"]:
                result["completed"] = True
                store.mark_complete(self._host)
        if failure is None:
            failure = self._deadlines(now, result)
        if failure:
            store.decide({"state": "failed", "host": self._host, "reason": failure})
            return self._finish(result, failed=True, msg=failure)

        verdict = store.decision()
        if verdict is None and policy_decided(self._policy, self._effective_group(), store.completed()):
            verdict = store.decide({"state": "complete", "host": self._host,
                                    "reason": f"completion group done under policy {self._policy}"})
        if verdict and verdict["state"] == "failed" and verdict["host"] != self._host:
            return self._finish(result, failed=True, msg=f"stopped because {verdict['host']} failed: "
                                f"{verdict['reason']}", aborted_by=verdict["host"])
        if verdict and verdict["state"] == "complete":
            return self._final_drain(result)
        return self._progress(result)

    def _effective_group(self) -> list[str]:
        members = self._store.members()
        return [h for h in self._group if members.get(h, {}).get("can_complete", True)]

    def _consume(self, reply: dict, result: dict) -> str | None:
        """Decode a reply into result lines and state; return a failure reason for an error match."""
        state = self._state
        labeled: list[tuple[str, str]] = []
        for spec, log in zip(self._logs, reply.get("logs", [])):
            raw = b"".join(base64.b64decode(c) for c in log.get("chunks", []))
            lines = [decode_line(b) for b in split_lines(raw)]
            entry = {"path": spec.path, "label": spec.label, "state": log.get("state"), "new_lines": len(lines),
                     "events": [e for e in log.get("events", []) if not e.startswith("drained:")]}
            if log.get("error"):
                entry["error"] = log["error"]
            if log.get("state") == "ok":
                state.cursors[spec.path] = _cursor_of(log)
                entry.update(offset=log["offset"], size=log["size"])
                if log.get("long_line"):
                    entry["events"].append("long_line_split")
            elif spec.path in state.cursors and log.get("state") == "missing":
                entry["events"].append("disappeared")
            result["log_states"].append(entry)
            if raw:
                self._save(spec.label, raw)
                state.last_progress = time.time()
            labeled.extend((spec.label, line) for line in lines)
        round_lines = [line for _label, line in labeled]
        result["new_lines"] = round_lines
        scan = scan_lines(labeled, self._errors, self._ignores, self._marker)
        previous = list(state.context)
        state.remember(round_lines)
        state.lines_total += len(round_lines)
        if scan.marker_line is not None:
            state.marker_seen = True
        if scan.error:
            err = scan.error
            path = next(s.path for s in self._logs if s.label == err["label"])
            result["error"] = {"name": err["name"], "pattern": err["pattern"], "line": err["line"], "path": path,
                               "label": err["label"], "host": self._host,
                               "context": context_before(previous, round_lines, err["index"])}
            return f"error pattern {err['name']!r} matched on {self._host} in {path}: {err['line']}"
        return None

    def _deadlines(self, now: float, result: dict) -> str | None:
        state = self._state
        timeout, stall = self._args["timeout"], self._args["stall_timeout"]
        if timeout and now - state.started > timeout and not result["completed"]:
            result["timed_out"] = True
            return f"timed out after {format_elapsed(now - state.started)} (timeout {timeout:g}s) on {self._host}"
        if stall and now - state.last_progress > stall and not result["completed"] and self._logs:
            result["stalled"] = True
            return (f"stalled: no new log output on {self._host} for {format_elapsed(now - state.last_progress)} "
                    f"(stall_timeout {stall:g}s); last line: {state.last_line!r}")
        return None

    def _final_drain(self, result: dict) -> dict:
        """After the group decided: one more read so errors written just before the end still count."""
        first_lines, first_states = result["new_lines"], result["log_states"]
        reply, transport_error = self._remote_read(self._request(self._state.cursors, self._start))
        if transport_error is None:
            result["log_states"] = []
            failure = self._consume(reply, result)
            result["new_lines"] = first_lines + result["new_lines"]
            for before, after in zip(first_states, result["log_states"]):
                after["new_lines"] += before["new_lines"]
                after["events"] = before["events"] + after["events"]
            if failure:
                self._store.decide({"state": "failed", "host": self._host, "reason": failure})
                return self._finish(result, failed=True, msg=failure)
        else:
            result["transport_error"] = transport_error
        return self._finish(result, failed=False, msg="complete" if result["completed"] else
                            f"done: completion group finished under policy {self._policy}")

    # ---- results -------------------------------------------------------------------------

    def _group_summary(self, failed_host: str | None = None) -> dict:
        completed = self._store.completed()
        group = self._effective_group()
        verdict = self._store.decision() or {}
        return {"policy": self._policy, "complete": sum(1 for h in group if h in completed), "total": len(group),
                "failed": 1 if verdict.get("state") == "failed" or failed_host else 0,
                "decided": bool(verdict)}

    def _progress(self, result: dict, msg: str | None = None) -> dict:
        state = self._state
        if self._host in self._store.completed():
            result["completed"] = True
        result.update(finished=False, elapsed=round(time.time() - state.started, 3), group=self._group_summary(),
                      cursors=state.cursors, msg=msg or f"polling round {state.rounds}")
        self._store.save_host(self._host, state.to_dict())
        return result

    def _finish(self, result: dict, failed: bool, msg: str, aborted_by: str | None = None) -> dict:
        state = self._state
        state.finished = True
        if self._host in self._store.completed():
            result["completed"] = True
        result.update(finished=True, failed=failed, msg=msg, elapsed=round(time.time() - state.started, 3),
                      group=self._group_summary(self._host if failed and not aborted_by else None),
                      cursors=state.cursors, last_line=state.last_line)
        if aborted_by:
            result["aborted_by"] = aborted_by
        self._store.save_host(self._host, state.to_dict())
        return result

    # ---- save_dir ------------------------------------------------------------------------

    def _save_path(self, label: str) -> str | None:
        save_dir = self._args.get("save_dir")
        if not save_dir:
            return None
        return os.path.join(save_dir, self._host, label + ".log")

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
    return {k: log[k] for k in ("offset", "dev", "ino", "head_len", "head_hash")}


__all__ = ["ARGUMENT_SPEC", "POLICIES", "ActionModule"]
