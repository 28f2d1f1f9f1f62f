# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one log_poll task asks for, checked and normalised before any remote read (pure logic, no Ansible).

The action gathers the task's arguments and the few facts of its run (host, play batch, forks, throttle, delay,
environment); :func:`poll_settings` turns them into :class:`PollSettings` or raises :class:`LogPollError` naming
the argument at fault.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.cvs.cluster.plugins.plugin_utils._console.model import capture_reason
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.budget import (
    budget_problem,
    default_call_seconds,
    minimum_budget,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import (
    PROBES,
    LogPollError,
    LogSpec,
    Pattern,
    can_complete,
    compile_patterns,
    normalize_logs,
    normalize_policy,
)


@dataclass(frozen=True)
class RunFacts:
    """What the action knows of the task's run besides its arguments."""

    host: str
    batch: list[str]  # ansible_play_batch: the hosts polling together
    play_hosts: list[str]  # ansible_play_hosts_all
    delay: float = 0.0  # the task's `delay` between `until` retries
    forks: int | None = None
    throttle: int = 0
    env: Mapping[str, str] = field(default_factory=dict)
    fleet: bool = False  # fleet: true, one task polls every host of the batch
    run_once: bool = False
    become: bool = False


@dataclass(frozen=True)
class PollSettings:
    host: str
    logs: list[LogSpec]
    errors: list[Pattern]
    ignores: list[Pattern]
    marker: Pattern | None
    complete: dict
    policy: str
    start: str
    timeout: float
    stall_timeout: float
    cmd_timeout: int
    max_bytes: int
    transport_retries: int
    keep_reader: bool
    state_retention: float
    initial_cursors: dict
    delay: float = 0.0
    # the rest is set for a poll only (budget for start=drain too)
    participants: list[str] = field(default_factory=list)
    group: list[str] = field(default_factory=list)
    budget: int = 0
    call_seconds: float = 0.0
    can_complete: bool = False
    watches: bool = False

    @property
    def paths(self) -> list[str]:
        return [s.path for s in self.logs]


def _check_numbers(args: Mapping[str, Any], complete: Mapping[str, Any]) -> None:
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


def _completion_group(complete: Mapping[str, Any], run: RunFacts) -> list[str]:
    participants = run.batch or [run.host]
    play_hosts = run.play_hosts or participants
    group = list(complete.get("hosts") or participants)
    unknown = [h for h in group if h not in play_hosts]
    if unknown:
        raise LogPollError(f"complete.hosts names hosts that are not in the play: {', '.join(unknown)}")
    idle = [h for h in group if h not in participants]
    if idle:
        raise LogPollError(
            f"complete.hosts names hosts that do not poll in this batch (failed earlier or in another serial "
            f"batch): {', '.join(idle)}"
        )
    return group


def _call_seconds(args: Mapping[str, Any], env: Mapping[str, str]) -> float:
    call_seconds = args["call_seconds"]
    if call_seconds is None:
        try:
            call_seconds = default_call_seconds(bool(capture_reason(env)), env)
        except ValueError as exc:
            raise LogPollError(str(exc)) from None
    if call_seconds < 0 or not math.isfinite(call_seconds):
        raise LogPollError(f"call_seconds must be a finite number of seconds, not negative, got {call_seconds}")
    return float(call_seconds)


def _check_parallelism(run: RunFacts, together: int) -> None:
    if run.forks and together > 1 and run.forks < together:
        raise LogPollError(
            f"forks ({run.forks}) is smaller than the {together} hosts that must poll together; "
            f"raise forks (-f {together}) or use serial batches no larger than forks"
        )
    if run.throttle and together > 1 and run.throttle < together:
        raise LogPollError(f"throttle ({run.throttle}) is smaller than the {together} hosts that must poll together")


def _check_fleet(args: Mapping[str, Any], run: RunFacts) -> None:
    if not run.fleet:
        return
    if args["start"] in ("arm", "drain"):
        raise LogPollError(f"fleet: true polls every host in one task; start={args['start']} runs per host (no fleet)")
    if args.get("cursors"):
        raise LogPollError("fleet: true takes no cursors (they are per host): arm and drain without fleet")
    if not run.run_once:
        raise LogPollError("fleet: true needs run_once: true on the task (one task polls every host of the batch)")
    if run.become:
        raise LogPollError("fleet: true reads as the connecting user and takes no become; use the per-host form")


def poll_settings(args: Mapping[str, Any], run: RunFacts) -> PollSettings:
    """The task's settings, validated (arguments already passed the module's argument_spec)."""
    _check_fleet(args, run)
    logs = normalize_logs(args["logs"])
    errors = compile_patterns(args["error_patterns"], "error_patterns")
    ignores = compile_patterns(args["ignore_error_patterns"], "ignore_error_patterns")
    complete = {k: v for k, v in (args["complete"] or {}).items() if v not in (None, [], {})}
    policy = normalize_policy(complete.get("policy", "all"))
    marker = compile_patterns({"complete": complete["pattern"]}, "complete") if complete.get("pattern") else []
    _check_numbers(args, complete)
    common: dict[str, Any] = {
        "host": run.host,
        "logs": logs,
        "errors": errors,
        "ignores": ignores,
        "marker": marker[0] if marker else None,
        "complete": complete,
        "policy": policy,
        "start": args["start"],
        "timeout": args["timeout"],
        "stall_timeout": args["stall_timeout"],
        "cmd_timeout": int(args["cmd_timeout"]),
        "max_bytes": args["max_bytes"],
        "transport_retries": args["transport_retries"],
        "keep_reader": bool(args["keep_reader"]),
        "state_retention": args["state_retention"],
        "initial_cursors": {path: dict(c) for path, c in (args.get("cursors") or {}).items()},
        "delay": run.delay,
    }
    if args["start"] == "arm":
        return PollSettings(**common)
    if args["start"] == "drain":
        return PollSettings(**common, budget=args["event_budget"])
    participants = list(run.batch or [run.host])
    group = _completion_group(complete, run)
    budget = args["event_budget"]
    # a fleet holds the group once and every host's status in one result: fit_fleet shortens what does not fit
    minimum = 0 if run.fleet else minimum_budget([(s.path, s.label) for s in logs], group, run.host)
    problem = budget_problem(budget, minimum)
    if problem:
        raise LogPollError(problem)
    call_seconds = _call_seconds(args, run.env)
    _check_parallelism(run, len(participants))
    return PollSettings(
        **common,
        participants=participants,
        group=group,
        budget=budget,
        call_seconds=call_seconds,
        can_complete=can_complete(bool(logs), complete),
        watches=bool(logs) or any(complete.get(p) for p in PROBES),
    )
