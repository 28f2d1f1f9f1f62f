# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Event budgets of cvs.cluster.log_poll: what one result may weigh, and how many results a poll makes.

ansible-runner's display callback replaces an event's ``res`` with ``{}`` when the result is longer than
``MAX_EVENT_RES`` (700,000 by default, AWX's too), and AWX's UI handles about 4,000 events per job. A result is
kept under ``event_budget`` by dropping the newest of its ``new_lines`` (they are in save_dir already, and the
cvs console reads them from the spool, see _log_poll/spool.py) and cutting status strings longer than
STATUS_STRING_CAP; ``call_seconds`` lets one call poll several rounds so the ``until`` loop makes fewer events.

Pure logic: no Ansible imports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import CONTEXT_LINES, MAX_EVENTS

DEFAULT_EVENT_BUDGET = 600_000
# ansible-runner's and AWX's MAX_EVENT_RES
RUNNER_MAX_EVENT_RES = 700_000
# a status string longer than this (an error line, the last line, a message quoting a line) is cut when the
# result is over budget; the whole line is in save_dir
STATUS_STRING_CAP = 2000
# the most warnings a result over budget keeps (the last ones)
MAX_STATUS_WARNINGS = 3
# a fleet result's strings are cut shorter still when its hosts' status alone outweighs the budget
FLEET_STATUS_CAP = 240
# call_seconds when unset: under ansible-runner/AWX a call polls for this long, elsewhere one round per call
RUNNER_CALL_SECONDS = 120.0
# the controller environment variable that sets call_seconds for every task that leaves it unset
CALL_SECONDS_ENV = "CVS_LOG_POLL_CALL_SECONDS"
# room kept for what Ansible adds to a result (attempts, retries, _ansible_* keys, invocation)
ANSIBLE_OVERHEAD = 2048


def measure(result: Any) -> int:
    """What a result weighs for ansible-runner: the larger of its JSON and its str() (runner measures str)."""
    return max(len(json.dumps(result, default=str)), len(str(result)))


def line_weight(line: str) -> int:
    """What one more element of ``new_lines`` adds to ``measure``: its longer spelling plus the separator."""
    return max(len(json.dumps(line)), len(repr(line))) + 2


def cap_string(text: str, cap: int = STATUS_STRING_CAP) -> str:
    if len(text) <= cap:
        return text
    return text[:cap] + f"... ({len(text) - cap} more characters, see save_dir)"


@dataclass
class CallLines:
    """Lines delivered by one call (one or several rounds), in arrival order, at most ``budget`` of them kept.

    Lines past the budget are only counted: the result drops them anyway, and a call of many rounds must not hold
    every byte it read in memory.
    """

    budget: int
    kept: list[tuple[int, str]] = field(default_factory=list)  # (index of the log, line)
    kept_weight: int = 0
    dropped: int = 0
    dropped_bytes: int = 0

    def add(self, log_index: int, lines: Sequence[str]) -> None:
        for line in lines:
            weight = line_weight(line)
            if self.dropped or (self.budget and self.kept_weight + weight > self.budget):
                self.dropped += 1
                self.dropped_bytes += len(line.encode("utf-8", "surrogateescape")) + 1
                continue
            self.kept.append((log_index, line))
            self.kept_weight += weight

    def grouped(self, keep: int | None = None) -> tuple[list[str], list[int]]:
        """The first ``keep`` kept lines grouped by log (the order of ``new_lines``) and each log's count."""
        chosen = self.kept if keep is None else self.kept[:keep]
        logs = max((index for index, _line in self.kept), default=-1) + 1
        per_log: list[list[str]] = [[] for _log in range(logs)]
        for index, line in chosen:
            per_log[index].append(line)
        return [line for lines in per_log for line in lines], [len(lines) for lines in per_log]


def _cap_status(result: dict, cap: int = STATUS_STRING_CAP) -> None:
    for key in ("msg", "last_line", "transport_error"):
        if isinstance(result.get(key), str):
            result[key] = cap_string(result[key], cap)
    error = result.get("error")
    if isinstance(error, dict):
        error["line"] = cap_string(str(error.get("line", "")), cap)
        error["context"] = [cap_string(str(c), cap) for c in error.get("context") or []]
    warnings = result.get("warnings")
    if isinstance(warnings, list):
        kept = [cap_string(str(w), cap) for w in warnings[-MAX_STATUS_WARNINGS:]]
        if len(warnings) > MAX_STATUS_WARNINGS:
            kept.insert(0, f"{len(warnings) - MAX_STATUS_WARNINGS} earlier warnings left out (event_budget)")
        result["warnings"] = kept


def _place(result: dict, lines: CallLines, keep: int, totals: Sequence[int]) -> None:
    """``new_lines`` := the first ``keep`` kept lines; ``totals``: each log's line count of the call."""
    new_lines, counts = lines.grouped(keep)
    result["new_lines"] = new_lines
    truncated = len(lines.kept) - keep + lines.dropped
    left_out = lines.kept[keep:]
    truncated_bytes = lines.dropped_bytes + sum(len(x.encode("utf-8", "surrogateescape")) + 1 for _index, x in left_out)
    for index, (entry, total) in enumerate(zip(result.get("log_states") or [], totals)):
        count = counts[index] if index < len(counts) else 0
        entry["new_lines"] = count
        entry.pop("new_lines_truncated", None)
        if total > count:
            entry["new_lines_truncated"] = total - count
    result.pop("new_lines_truncated", None)
    result.pop("new_lines_truncated_bytes", None)
    if truncated:
        result["new_lines_truncated"] = truncated
        result["new_lines_truncated_bytes"] = truncated_bytes


def fit(result: dict, lines: CallLines, budget: int) -> dict:
    """Put the call's lines in ``result`` under ``budget`` (0: all of them): status fields stay, the newest lines go.

    ``result["log_states"][i]["new_lines"]`` must hold log i's line count of the call (kept and dropped); it is set to
    the kept count, and ``new_lines_truncated`` (result and log) counts the lines left out of the event.
    """
    totals = [int(entry.get("new_lines", 0)) for entry in result.get("log_states") or []]
    keep = len(lines.kept)
    _place(result, lines, keep, totals)
    # Ansible adds attempts, retries and its _ansible_* keys to the result after the action returns
    budget = budget - ANSIBLE_OVERHEAD if budget else 0
    if not budget or measure(result) <= budget:
        return result
    _place(result, lines, 0, totals)
    base = measure(result)
    if base > budget:
        _cap_status(result)
        base = measure(result)
    room = budget - base
    weights = [line_weight(line) for _index, line in lines.kept]
    keep = 0
    while keep < len(weights) and room - weights[keep] >= 0:
        room -= weights[keep]
        keep += 1
    # the counts in log_states grow by a digit or two as lines come back: step back until it fits
    _place(result, lines, keep, totals)
    while keep and measure(result) > budget:
        keep = max(0, keep - max(1, keep // 100))
        _place(result, lines, keep, totals)
    return result


def fit_fleet(result: dict, lines: Mapping[str, CallLines], budget: int) -> dict:
    """Put each host's lines in ``result["hosts"][host]`` so that the whole fleet result stays under ``budget``.

    The status of every host comes first (capped like a single host's when it alone is too big); the room left is
    shared by the hosts with lines, the lightest first, so that a quiet host does not hold room a busy one could
    use. Lines left out are counted per host (``new_lines_truncated``) and are in save_dir like any others.
    """
    entries: dict = result["hosts"]
    totals = {h: [int(e.get("new_lines", 0)) for e in entry.get("log_states") or []] for h, entry in entries.items()}
    empty = CallLines(0)
    for host, entry in entries.items():
        _place(entry, lines.get(host, empty), len(lines.get(host, empty).kept), totals[host])
    budget = budget - ANSIBLE_OVERHEAD if budget else 0
    if not budget or measure(result) <= budget:
        return result
    for host, entry in entries.items():
        _place(entry, lines.get(host, empty), 0, totals[host])
    for cap in (STATUS_STRING_CAP, FLEET_STATUS_CAP):
        if measure(result) > budget:
            for entry in entries.values():
                _cap_status(entry, cap)
            _cap_status(result, cap)
    if measure(result) > budget:
        _leave_out_hosts(result, budget)
    room = budget - measure(result)
    weights = {h: [line_weight(line) for _index, line in lines[h].kept] for h in entries if h in lines}
    order = sorted(weights, key=lambda h: sum(weights[h]))
    keep: dict[str, int] = {}
    for position, host in enumerate(order):
        share = max(0, room) // (len(order) - position)
        used = count = 0
        while count < len(weights[host]) and used + weights[host][count] <= share:
            used += weights[host][count]
            count += 1
        keep[host] = count
        room -= used
        _place(entries[host], lines[host], count, totals[host])
    # the counts in log_states grow by a digit or two as lines come back: step back from the busiest host
    while measure(result) > budget and any(keep.values()):
        host = max(keep, key=lambda h: keep[h])
        keep[host] = max(0, keep[host] - max(1, keep[host] // 100))
        _place(entries[host], lines[host], keep[host], totals[host])
    return result


def _leave_out_hosts(result: dict, budget: int) -> None:
    """Drop host entries until the fleet result fits: the hosts that failed on their own errors go last.

    ``failed_hosts`` and ``error_hosts`` still name every host; ``hosts_left_out`` counts the entries dropped.
    """
    entries: dict = result["hosts"]
    own_errors = set(result.get("error_hosts") or [])
    excess = measure(result) - budget + 32  # and room for the count
    left_out = 0
    for host in sorted(entries, key=lambda h: h in own_errors):
        if excess <= 0:
            break
        excess -= measure({host: entries.pop(host)}) - 2
        left_out += 1
    result["hosts_left_out"] = left_out


def minimum_budget(logs: Sequence[tuple[str, str]], hosts: Sequence[str], host: str) -> int:
    """The smallest event_budget that holds every status field a result of this task can carry.

    ``logs`` are (path, label) of this host's logs, ``hosts`` the completion group. Built from the largest
    values each field can take once capped: the last 100 events, an error with its context, the last line.
    """
    long = "x" * (STATUS_STRING_CAP + 60)
    label = max((lb for _p, lb in logs), key=len, default="log")
    cursor = {
        "offset": 10**15,
        "dev": 10**12,
        "ino": 10**12,
        "head_len": 4096,
        "head_hash": "0" * 64,
        "size": 10**15,
        "mtime": 1e10,
        "away": None,
    }
    states = [
        {
            "path": p,
            "label": lb,
            "state": "unreadable",
            "new_lines": 10**9,
            "new_lines_truncated": 10**9,
            "events": ["long_line_split", "rotated", "lost"],
            "error": long,
            "lost_bytes": 10**15,
            "offset": 10**15,
            "size": 10**15,
            "more": False,
        }
        for p, lb in logs
    ]
    skeleton = {
        "changed": False,
        "finished": True,
        "failed": True,
        "completed": False,
        "new_lines": [],
        "new_lines_truncated": 10**9,
        "new_lines_truncated_bytes": 10**15,
        "log_states": states,
        "error": {
            "name": long[:200],
            "pattern": long[:500],
            "line": long,
            "path": max((p for p, _l in logs), key=len, default=""),
            "label": label,
            "host": host,
            "context": [long] * CONTEXT_LINES,
        },
        "timed_out": False,
        "stalled": False,
        "transport_error": long,
        "transport_failures": 10**6,
        "round": 10**9,
        "rounds_in_call": 10**6,
        "elapsed": 1e10,
        "cursors": {p: cursor for p, _l in logs},
        "events": [{"round": 10**9, "label": label, "event": "long_line_split"}] * MAX_EVENTS,
        "lines_total": 10**15,
        "group": {
            "policy": "first",
            "hosts": list(hosts),
            "complete": 10**6,
            "total": 10**6,
            "failed": 1,
            "decided": True,
        },
        "msg": long,
        "last_line": long,
        "aborted_by": max(hosts, key=len, default=host),
        "warnings": [long] * (MAX_STATUS_WARNINGS + 1),
    }
    return measure(skeleton) + ANSIBLE_OVERHEAD


def budget_problem(budget: int, minimum: int) -> str | None:
    if budget < 0:
        return f"event_budget must not be negative, got {budget}"
    if budget and budget < minimum:
        return (
            f"event_budget {budget} is too small for the status fields of this task's results, which need at "
            f"least {minimum} bytes (its logs, cursors, completion group, events and a capped error); "
            f"raise event_budget to {minimum} or more (0 = no limit)"
        )
    return None


def default_call_seconds(captured: bool, env: Mapping[str, str] | None = None) -> float:
    """call_seconds when the task does not set it.

    ``CVS_LOG_POLL_CALL_SECONDS`` in the controller's environment when set (a job template's extra environment, or
    a Python caller that wants one runner event per round), else several rounds per call under ansible-runner/AWX.
    """
    raw = (env or {}).get(CALL_SECONDS_ENV, "").strip()
    if raw:
        try:
            return float(raw)
        except ValueError:
            raise ValueError(f"{CALL_SECONDS_ENV}={raw!r} is not a number of seconds") from None
    return RUNNER_CALL_SECONDS if captured else 0.0


def progress_of(result: Mapping[str, Any]) -> dict:
    """The fields of a round the console's progress needs (for the spool between events)."""
    keys = ("completed", "finished", "failed", "stalled", "transport_error", "round", "group", "elapsed")
    return {k: result[k] for k in keys if k in result}


def merge_round(total: dict | None, latest: dict) -> dict:
    """A call's result after one more of its rounds: the latest round's status, log_states summed over rounds."""
    if total is None:
        latest["rounds_in_call"] = 1
        return latest
    previous = {e.get("path"): e for e in total.get("log_states") or []}
    for entry in latest.get("log_states") or []:
        before = previous.get(entry.get("path"))
        if before is not None:
            entry["new_lines"] = int(before.get("new_lines", 0)) + int(entry.get("new_lines", 0))
            entry["events"] = list(before.get("events") or []) + list(entry.get("events") or [])
            if before.get("lost_bytes"):
                entry["lost_bytes"] = int(before["lost_bytes"]) + int(entry.get("lost_bytes", 0))
    warnings = list(total.get("warnings") or [])
    if not latest.get("finished") and warnings:
        latest["warnings"] = warnings + [w for w in latest.get("warnings") or [] if w not in warnings]
    latest["rounds_in_call"] = int(total["rounds_in_call"]) + 1
    return latest
