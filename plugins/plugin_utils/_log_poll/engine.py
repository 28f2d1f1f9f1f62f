# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The round engine of cvs.cluster.log_poll: one host's rounds, and the calls that group them.

Everything a round decides lives here: consuming a reply (lines, cursors, log events, lost bytes, error
patterns), the completion probes, the deadlines (timeout, stall), the completion group's verdict under its
policy, and the final drain. What it needs from outside is injected: ``read`` (a request to the node's reader,
see _log_poll/protocol.py, answered with ``(reply, None)`` or ``(None, transport error)``), the ``clock``, the
:class:`~._log_poll_state.StateStore` the hosts of a group share, and ``save`` (the bytes read, for save_dir).
Unit tests drive it with a fake reader and a fake clock; they never sleep.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Protocol

from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.budget import (
    CallLines,
    fit,
    merge_round,
    progress_of,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.protocol import (
    arm_request,
    cursor_of,
    read_request,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import (
    LAG_ROUNDS,
    HostRound,
    config_problem,
    context_before,
    decode_line,
    effective_group,
    format_elapsed,
    lag_warning,
    never_appeared,
    no_space_left,
    policy_decided,
    probe_outcome,
    round_lag,
    scan_lines,
    split_lines,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.settings import PollSettings
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.state import MemoryStore, StateStore

# A host of the play batch that has not polled this long after the first one did (skipped by `when`,
# for instance) no longer holds the completion group back.
JOIN_GRACE = 30.0
# After the group decided: at most this many extra reads per host to reach the end of its logs.
FINAL_DRAIN_READS = 16
# Between two rounds of one call, how often a host looks for the group's decision.
DECISION_CHECK_SECONDS = 0.25

Read = Callable[[dict], "tuple[dict | None, str | None]"]


class Sink(Protocol):
    """Where the bytes of a poll go besides the result (save_dir)."""

    def reset(self) -> None: ...

    def append(self, label: str, raw: bytes) -> None: ...


class NoSink:
    def reset(self) -> None:
        pass

    def append(self, label: str, raw: bytes) -> None:
        pass


class Spool(Protocol):
    """The console's spool of a call's lines and progress (see spool.SpoolWriter)."""

    lines: int

    def write(self, labeled: list[tuple[str, str]], progress: dict, last: bool = False) -> None: ...


def delivered_bytes(log: dict) -> tuple[bytes, list[str]]:
    """The bytes a reply's log entry delivered, and the lines they hold."""
    raw = b"".join(base64.b64decode(c) for c in log.get("chunks", []))
    return raw, [decode_line(b) for b in split_lines(raw)]


def note_log_state(entry: dict, log: dict, new_lines: int, events: list[str]) -> None:
    """Add a reply's log entry to the result's ``log_states`` entry of that log (a call may read a log twice)."""
    entry.update(state=log.get("state"), new_lines=entry["new_lines"] + new_lines, events=entry["events"] + events)
    entry.pop("error", None)
    if log.get("error"):
        entry["error"] = log["error"]
    if log.get("lost"):
        entry["lost_bytes"] = entry.get("lost_bytes", 0) + int(log["lost"]["bytes"])
    if log.get("state") == "ok":
        entry.update(offset=log["offset"], size=log["size"], more=bool(log.get("more")))


class RoundEngine:
    """One host's rounds of one log_poll task."""

    def __init__(
        self,
        settings: PollSettings,
        store: StateStore | MemoryStore,
        read: Read,
        *,
        clock: Callable[[], float] = time.time,
        sink: Sink | None = None,
        run_started: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.s = settings
        self.store = store
        self.read = read
        self.clock = clock
        self.sink = sink or NoSink()
        self.run_started = run_started
        self.host = settings.host
        self.state = HostRound(started=0.0, last_progress=0.0)
        self.delivered: dict[str, list[str]] = {}
        self.warnings: list[str] = []
        self._round_now = 0.0

    # ---- one call: rounds for call_seconds ------------------------------------------------

    def call(
        self,
        base: dict,
        spool: Spool,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> dict:
        """Rounds until finished or the call's time is used; one result under the event budget.

        Every round's lines (and progress between results) go to ``spool``.
        """
        lines = CallLines(self.s.budget)
        deadline = monotonic() + self.s.call_seconds
        total = None
        while True:
            result = self.round(dict(base))
            labeled = []
            for index, spec in enumerate(self.s.logs):
                delivered = self.delivered.get(spec.path, [])
                lines.add(index, delivered)
                labeled.extend((spec.label, line) for line in delivered)
            total = merge_round(total, result)
            done = bool(result.get("finished") or result.get("failed")) or monotonic() + self.s.delay >= deadline
            spool.write(labeled, progress_of(result), last=done)
            if done:
                break
            self._wait_for_next_round(sleep, monotonic)
        if spool.lines:
            total["lines_spooled"] = True
        return fit(total, lines, self.s.budget)

    def _wait_for_next_round(self, sleep: Callable[[float], None], monotonic: Callable[[], float]) -> None:
        """The task's delay between two rounds of a call, cut short when the group decides (another host's error
        or the group's completion), so that this host stops or drains at once instead of a delay later."""
        end = monotonic() + self.s.delay
        while (left := end - monotonic()) > 0:
            sleep(min(left, DECISION_CHECK_SECONDS))
            if self.store.decision() is not None:
                return

    # ---- one round -----------------------------------------------------------------------

    def _begin(self, now: float) -> HostRound:
        saved = self.store.load_host(self.host)
        if saved is not None and not saved.get("finished"):
            state = HostRound.from_dict(saved)
            self.store.set_generation(state.generation)
            return state
        generation = int(saved.get("generation", 1)) + 1 if saved else 1
        state = HostRound(started=now, last_progress=now, generation=generation)
        state.cursors = {path: dict(c) for path, c in self.s.initial_cursors.items()}
        self.store.set_generation(generation)
        info = {"host": self.host, "can_complete": self.s.can_complete, "watches": self.s.watches}
        self.store.register(self.host, info, now)
        self.store.prune_old_runs(self.s.state_retention, now)
        self.sink.reset()
        return state

    def round(self, result: dict) -> dict:
        ended = self.open_round(result)
        if ended is not None:
            return ended
        if not self.s.watches:
            return self.close_round(result, None, None)
        reply, transport_error = self.read(self.request())
        return self.close_round(result, reply, transport_error)

    def open_round(self, result: dict) -> dict | None:
        """The part of a round before the read: the round's result when it ends without one (the group decided
        against this host, or its settings are wrong), else None and :meth:`request` is this round's read.

        A fleet (_log_poll/fleet.py) sends every host's request before it waits for any reply.
        """
        store = self.store
        now = self._round_now = self.clock()
        self.state = state = self._begin(now)
        state.rounds += 1
        self.delivered = {}
        self.warnings = []
        self._note_interval(now)
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
                verdict = store.decide({"state": "failed", "host": self.host, "reason": problem, "config": True})
        if verdict and verdict["state"] == "failed" and (verdict["host"] != self.host or verdict.get("config")):
            return self._abort(result, verdict)
        return None

    def close_round(self, result: dict, reply: dict | None, transport_error: str | None) -> dict:
        """The rest of a round opened by :meth:`open_round`, with the reply to its request (None: nothing watched)."""
        store = self.store
        state = self.state
        now = self._round_now
        if transport_error:
            return self._transport_failure(result, transport_error)
        if reply is not None:
            state.transport_failures = 0

        failure = None
        if reply is not None:
            failure = self.consume(reply, result)
            state.read_once = True
            if failure is None:
                caught_up = not any(log.get("more") for log in reply["logs"])
                completed, failure = probe_outcome(reply, self.s.complete, state.marker_seen, caught_up)
                if completed:
                    store.mark_complete(self.host)
                elif failure is None and self.host not in store.completed():
                    failure = no_space_left(self.host, reply, self.s.complete.get("exit_code_file"))
        if failure is None:
            failure = self._deadlines(now, result)
        if failure:
            store.decide({"state": "failed", "host": self.host, "reason": failure})
            return self._finish(result, failed=True, msg=failure)

        verdict = store.decision()
        if verdict is None and policy_decided(self.s.policy, self._effective_group(now), store.completed()):
            reason = f"completion group done under policy {self.s.policy}"
            verdict = store.decide({"state": "complete", "host": self.host, "reason": reason})
        if verdict and verdict["state"] == "failed" and verdict["host"] != self.host:
            return self._abort(result, verdict)
        if verdict and verdict["state"] == "complete":
            return self._final_drain(result)
        return self._progress(result)

    def _note_interval(self, now: float) -> None:
        """Warn once per task when this host's rounds come much later than the task's delay."""
        state = self.state
        if state.transport_failures:  # a node that does not answer is late for its own reason (and named for it)
            state.intervals = []
        elif state.last_round_at is not None:
            state.intervals = [*state.intervals, round(now - state.last_round_at, 3)][-LAG_ROUNDS:]
        state.last_round_at = now
        interval = round_lag(state.intervals, self.s.delay)
        if interval is not None and self.store.claim("lag-warning"):
            warning = lag_warning(self.host, interval, self.s.delay, len(self.s.participants) or 1)
            self.warnings.append(warning)
            state.warnings.append(warning)

    def request(self, probes: bool = True) -> dict:
        # start=end applies to what exists at the first read; a log that appears later is new from byte 0
        start = "beginning" if self.state.read_once else self.s.start
        run_age = None
        if start == "auto":
            started = self.run_started()
            # unknown (no /proc): every log is read from its first byte, as with start=beginning
            if started is not None:
                run_age = max(0.0, self.clock() - started)
        # a kept reader that hears nothing for this long ends (its controller is gone); a later round would just
        # start a new one
        idle = int(3 * self.s.delay + self.s.cmd_timeout + 60) if self.s.keep_reader else None
        return read_request(
            self.s.paths,
            self.state.cursors,
            start=start,
            max_bytes=self.s.max_bytes,
            run_age=run_age,
            idle_timeout=idle,
            probes=self.s.complete if probes else None,
        )

    def _transport_failure(self, result: dict, error: str) -> dict:
        state = self.state
        state.transport_failures += 1
        result.update(transport_error=error, transport_failures=state.transport_failures)
        if state.transport_failures > self.s.transport_retries:
            reason = f"{state.transport_failures} consecutive transport failures on {self.host}; last: {error}"
            self.store.decide({"state": "failed", "host": self.host, "reason": reason})
            return self._finish(result, failed=True, msg=reason)
        retries = self.s.transport_retries
        return self._progress(result, msg=f"transport failure {state.transport_failures}/{retries}: {error}")

    def _grace_over(self, now: float) -> bool:
        joined = self.store.first_joined()
        return joined is not None and now - joined > JOIN_GRACE

    def _config_problem(self, now: float) -> str | None:
        members = self.store.members()
        grace_over = self._grace_over(now)
        problem = config_problem(self.s.participants, self.s.group, members, grace_over)
        if problem is None and (grace_over or all(h in members for h in self.s.participants)):
            self.state.config_ok = True
        return problem

    def _effective_group(self, now: float | None = None) -> list[str]:
        now = self.clock() if now is None else now
        return effective_group(self.s.group, self.store.members(), self._grace_over(now))

    # ---- a reply -------------------------------------------------------------------------

    def _log_events(self, spec_path: str, label: str, log: dict) -> list[str]:
        """The events a reply's log entry brings (lost bytes are also warned about); the state follows it."""
        state = self.state
        events = [e for e in log.get("events", []) if not e.startswith("drained:")]
        previous_state = state.states.get(spec_path)
        log_state = log.get("state")
        if log.get("lost"):
            lost = log["lost"]
            events.append("lost")
            warning = (
                f"{self.host}: {spec_path}: at least {lost['bytes']} bytes were never read and are lost ({lost['why']})"
            )
            self.warnings.append(warning)
            state.warnings.append(warning)
        if log_state == "ok":
            state.cursors[spec_path] = cursor_of(log)
            if spec_path not in state.appeared:
                state.appeared.append(spec_path)
            if log.get("long_line"):
                events.append("long_line_split")
            if previous_state not in (None, "ok"):
                events.append("appeared" if previous_state == "missing" else "readable")
        elif previous_state == "ok" and log_state == "missing":
            events.append("disappeared")
        state.states[spec_path] = log_state
        for event in events:
            state.note_event(label, event)
        return events

    @staticmethod
    def _entry(result: dict, path: str, label: str) -> dict:
        for entry in result["log_states"]:
            if entry["path"] == path:
                return entry
        entry = {"path": path, "label": label, "new_lines": 0, "events": []}
        result["log_states"].append(entry)
        return entry

    def consume(self, reply: dict, result: dict) -> str | None:
        """Add a reply's lines and log states to result and state; return a failure reason for an error match."""
        state = self.state
        labeled: list[tuple[str, str]] = []
        sizes: dict[str, int] = {}
        delivered = False
        for spec, log in zip(self.s.logs, reply.get("logs", [])):
            raw, lines = delivered_bytes(log)
            events = self._log_events(spec.path, spec.label, log)
            entry = self._entry(result, spec.path, spec.label)
            note_log_state(entry, log, len(lines), events)
            if log.get("state") == "ok":
                sizes[spec.path] = log["size"]
            if raw:
                self.sink.append(spec.label, raw)
                delivered = True
            labeled.extend((spec.label, line) for line in lines)
            # a round may consume several reads (final drain): keep new_lines grouped by log, in the order of logs
            self.delivered.setdefault(spec.path, []).extend(lines)
        if state.note_sizes(sizes) or delivered:
            state.last_progress = self.clock()
        result["new_lines"] = [line for spec in self.s.logs for line in self.delivered.get(spec.path, [])]
        return self._scan(labeled, result)

    def _scan(self, labeled: list[tuple[str, str]], result: dict) -> str | None:
        state = self.state
        round_lines = [line for _label, line in labeled]
        scan = scan_lines(labeled, self.s.errors, self.s.ignores, self.s.marker)
        previous = list(state.context)
        state.remember(round_lines)
        state.lines_total += len(round_lines)
        if scan.marker_line is not None:
            state.marker_seen = True
        if not scan.error:
            return None
        err = scan.error
        path = next(s.path for s in self.s.logs if s.label == err["label"])
        result["error"] = {
            "name": err["name"],
            "pattern": err["pattern"],
            "line": err["line"],
            "path": path,
            "label": err["label"],
            "host": self.host,
            "context": context_before(previous, round_lines, err["index"]),
        }
        return f"error pattern {err['name']!r} matched on {self.host} in {path}: {err['line']}"

    def _deadlines(self, now: float, result: dict) -> str | None:
        state = self.state
        timeout, stall = self.s.timeout, self.s.stall_timeout
        if self.host in self.store.completed():
            return None
        missing = never_appeared(self.s.paths, state.appeared)
        if timeout and now - state.started > timeout:
            result["timed_out"] = True
            elapsed = format_elapsed(now - state.started)
            return f"timed out after {elapsed} (timeout {timeout:g}s) on {self.host}{missing}"
        if stall and now - state.last_progress > stall and self.s.logs:
            result["stalled"] = True
            last = repr(state.last_line) if state.last_line is not None else "(no line yet)"
            return (
                f"stalled: no new log output on {self.host} for {format_elapsed(now - state.last_progress)} "
                f"(stall_timeout {stall:g}s); last line: {last}{missing}"
            )
        return None

    # ---- the end -------------------------------------------------------------------------

    def _drain(self, result: dict) -> str | None:
        """Read to the end of every log (at most FINAL_DRAIN_READS reads); a failure reason for an error found."""
        for _read in range(FINAL_DRAIN_READS if self.s.logs else 0):
            reply, transport_error = self.read(self.request(probes=False))
            if transport_error is not None:
                result["transport_error"] = transport_error
                return None
            failure = self.consume(reply, result)
            if failure:
                self.store.decide({"state": "failed", "host": self.host, "reason": failure})
                return failure
            if not any(log.get("more") for log in reply["logs"]):
                return None
        return None

    def _final_drain(self, result: dict) -> dict:
        """After the group decided: read to the end of every log so errors written just before the end count."""
        failure = self._drain(result)
        if failure:
            return self._finish(result, failed=True, msg=failure)
        if self.host in self.store.completed():
            msg = "complete"
        else:
            msg = f"done: completion group finished under policy {self.s.policy}"
        return self._finish(result, failed=False, msg=msg)

    def _abort(self, result: dict, verdict: dict) -> dict:
        if verdict.get("config"):
            return self._finish(result, failed=True, msg=f"log_poll: {verdict['reason']}")
        # another host failed: first read to the end of this host's logs, so that its saved copy holds every byte
        # there is and an error this host shows gets its own verdict, the same on every host that shows it
        failure = self._drain(result) if self.s.watches else None
        if failure:
            return self._finish(result, failed=True, msg=failure)
        return self._finish(
            result,
            failed=True,
            msg=f"stopped because {verdict['host']} failed: {verdict['reason']}",
            aborted_by=verdict["host"],
        )

    # ---- results -------------------------------------------------------------------------

    def group_summary(self, failed_host: str | None = None) -> dict:
        completed = self.store.completed()
        group = self._effective_group()
        verdict = self.store.decision() or {}
        return {
            "policy": self.s.policy,
            "hosts": group,
            "complete": sum(1 for h in group if h in completed),
            "total": len(group),
            "failed": 1 if verdict.get("state") == "failed" or failed_host else 0,
            "decided": bool(verdict),
        }

    def _common(self, result: dict) -> None:
        state = self.state
        if self.host in self.store.completed():
            result["completed"] = True
        result.update(
            elapsed=round(self.clock() - state.started, 3),
            cursors=state.cursors,
            events=state.events,
            lines_total=state.lines_total,
        )

    def _progress(self, result: dict, msg: str | None = None) -> dict:
        self._common(result)
        result.update(finished=False, group=self.group_summary(), msg=msg or f"polling round {self.state.rounds}")
        self.store.save_host(self.host, self.state.to_dict())
        return self._with_warnings(result)

    def _with_warnings(self, result: dict) -> dict:
        """The round's result with this round's warnings (lost bytes) added; a final result carries those of
        every round (Ansible shows the warnings of a task's last result only)."""
        warnings = self.state.warnings if result.get("finished") else self.warnings
        if warnings:
            result["warnings"] = list(result.get("warnings") or []) + list(warnings)
        return result

    def _finish(self, result: dict, failed: bool, msg: str, aborted_by: str | None = None) -> dict:
        state = self.state
        state.finished = True
        self._common(result)
        result.update(
            finished=True,
            failed=failed,
            msg=msg,
            group=self.group_summary(self.host if failed and not aborted_by else None),
            last_line=state.last_line,
        )
        if aborted_by:
            result["aborted_by"] = aborted_by
        self.store.save_host(self.host, state.to_dict())
        return self._with_warnings(result)


def arm(settings: PollSettings, read: Read) -> dict:
    """start=arm: each log's cursor where it ends now, for a later poll's ``cursors``."""
    reply, error = read(arm_request(settings.paths))
    if error:
        return {"failed": True, "finished": True, "msg": f"log_poll could not arm: {error}"}
    logs = list(zip(settings.logs, reply["logs"]))
    # a log missing at arm time has no cursor: the poll reads it from its first byte once it appears
    cursors = {spec.path: cursor_of(log) for spec, log in logs if log["state"] == "ok"}
    return {
        "finished": True,
        "failed": False,
        "changed": False,
        "armed": True,
        "cursors": cursors,
        "log_states": [{"path": s.path, "label": s.label, "state": r["state"]} for s, r in logs],
        "msg": f"armed {len(cursors)} of {len(settings.logs)} log(s)",
    }


def drain(settings: PollSettings, read: Read, sink: Sink) -> dict:
    """start=drain: each log from its cursor in ``cursors`` (byte 0 without one) to its end now, appended to ``sink``.

    For what a job wrote after its watch ended (after a stop): the last line counts even without its newline, and
    nothing decides (no pattern, probe or group). A missing log is reported in ``log_states``, not failed.
    """
    cursors = {path: dict(c) for path, c in settings.initial_cursors.items()}
    states = [{"path": s.path, "label": s.label, "new_lines": 0, "events": []} for s in settings.logs]
    per_log: list[list[str]] = [[] for _spec in settings.logs]
    for _read in range(FINAL_DRAIN_READS if settings.logs else 0):
        reply, error = read(read_request(settings.paths, cursors, start="beginning", max_bytes=settings.max_bytes,
                                         to_end=True))  # fmt: skip
        if error:
            return {"failed": True, "finished": True, "changed": False, "msg": f"log_poll could not drain: {error}"}
        for index, (spec, log) in enumerate(zip(settings.logs, reply["logs"])):
            raw, lines = delivered_bytes(log)
            if raw:
                sink.append(spec.label, raw)
            per_log[index].extend(lines)
            events = [e for e in log.get("events", []) if not e.startswith("drained:")]
            note_log_state(states[index], log, len(lines), events)
            if log.get("state") == "ok":
                cursors[spec.path] = cursor_of(log)
        if not any(log.get("more") for log in reply["logs"]):
            break
    lines = CallLines(settings.budget)
    for index, log_lines in enumerate(per_log):
        lines.add(index, log_lines)
    msg = f"drained {sum(len(x) for x in per_log)} line(s) from {len(settings.logs)} log(s)"
    behind = [entry["path"] for entry in states if entry.get("more")]
    if behind:
        msg += f"; not at the end after {FINAL_DRAIN_READS} reads: {', '.join(behind)} (drain again from these cursors)"
    result = {
        "finished": True,
        "failed": False,
        "changed": False,
        "drained": True,
        "cursors": cursors,
        "log_states": states,
        "msg": msg,
    }
    return fit(result, lines, settings.budget)
