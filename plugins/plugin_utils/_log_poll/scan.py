# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic of cvs.cluster.log_poll (controller side), free of Ansible imports.

Patterns, log specs, line splitting and decoding, scanning a round's lines,
completion policies and the per-host round bookkeeping live here so they can
be unit-tested without running Ansible.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

POLICIES = ("all", "any", "first", "node0", "last")
# a host whose last LAG_ROUNDS rounds each came more than max(delay, LAG_MIN_SECONDS) late gets a warning
LAG_ROUNDS = 3
LAG_MIN_SECONDS = 2.0
START_MODES = ("auto", "beginning", "end", "arm", "drain")
CONTEXT_LINES = 10
MAX_EVENTS = 100
PROBES = ("exit_code_file", "http", "artifact")


class LogPollError(ValueError):
    """Bad log_poll input, detected before any remote read."""


@dataclass(frozen=True)
class Pattern:
    name: str
    source: str
    regex: re.Pattern

    def search(self, line: str) -> bool:
        return self.regex.search(line) is not None


def compile_patterns(patterns: Any, kind: str) -> list[Pattern]:
    """Compile an ordered name->regex mapping (or a list of regexes / {name, pattern} items).

    Matching is case-insensitive. An invalid regex raises LogPollError naming the
    pattern, the regex and the compiler's complaint.
    """
    if not patterns:
        return []
    if isinstance(patterns, Mapping):
        items = list(patterns.items())
    elif isinstance(patterns, (list, tuple)):
        items = []
        for entry in patterns:
            if isinstance(entry, Mapping):
                if "pattern" not in entry:
                    raise LogPollError(f"{kind}: entry {dict(entry)!r} has no 'pattern'")
                items.append((str(entry.get("name", entry["pattern"])), entry["pattern"]))
            else:
                items.append((str(entry), entry))
    else:
        raise LogPollError(f"{kind} must be a mapping of name to regex or a list, got {type(patterns).__name__}")
    compiled = []
    for name, source in items:
        if not isinstance(source, str) or not source:
            raise LogPollError(f"{kind} pattern {name!r}: the regex must be a non-empty string, got {source!r}")
        try:
            compiled.append(Pattern(str(name), source, re.compile(source, re.IGNORECASE)))
        except re.error as exc:
            raise LogPollError(f"{kind} pattern {name!r}: invalid regex {source!r}: {exc}") from exc
    return compiled


@dataclass(frozen=True)
class LogSpec:
    path: str
    label: str


def default_label(path: str) -> str:
    base = os.path.basename(path.rstrip("/")) or "log"
    return base[:-4] if base.endswith(".log") and len(base) > 4 else base


def log_label(state: Mapping[str, Any]) -> str:
    """A log's label in a result's ``log_states``: its ``label``, else the default for its ``path``."""
    label = state.get("label")
    if label:
        return str(label)
    path = state.get("path")
    return default_label(str(path)) if path else ""


def labelled_lines(result: Mapping[str, Any]) -> list[dict[str, str]]:
    """``{label, path, line}`` for each of a log_poll result's ``new_lines``.

    A result labels its lines without repeating them: ``new_lines`` holds each log's lines together, logs in the
    order of ``log_states``, and ``log_states[i].new_lines`` counts log i's share (per-line labels in the result
    doubled its weight under the event budget). When the counts do not add up (a result an older version wrote, or
    one a callback censored), every line keeps the label of the only log, or none when there are several.
    """
    lines = result.get("new_lines") or []
    if not isinstance(lines, list):
        return []
    states = [s for s in (result.get("log_states") or []) if isinstance(s, Mapping)]
    counts: list[int] = []
    for state in states:
        try:
            counts.append(max(0, int(state.get("new_lines") or 0)))
        except (TypeError, ValueError):
            counts = []
            break
    if states and counts and sum(counts) == len(lines):
        out: list[dict[str, str]] = []
        start = 0
        for state, count in zip(states, counts):
            label, path = log_label(state), str(state.get("path") or "")
            out.extend({"label": label, "path": path, "line": str(line)} for line in lines[start : start + count])
            start += count
        return out
    only = states[0] if len(states) == 1 else {}
    label, path = log_label(only), str(only.get("path") or "")
    return [{"label": label, "path": path, "line": str(line)} for line in lines]


def normalize_logs(logs: Any) -> list[LogSpec]:
    """Logs as given by the user (a str, or a list of str / {path, label}) -> specs with unique labels."""
    if logs is None or logs == "":
        return []
    if isinstance(logs, (str, Mapping)):
        logs = [logs]
    if not isinstance(logs, (list, tuple)):
        raise LogPollError(f"logs must be a list of paths or {{path, label}} items, got {type(logs).__name__}")
    specs: list[LogSpec] = []
    for entry in logs:
        if isinstance(entry, str):
            path, label = entry, None
        elif isinstance(entry, Mapping) and isinstance(entry.get("path"), str):
            path, label = entry["path"], entry.get("label")
        else:
            raise LogPollError(f"logs: each item must be a path or a mapping with 'path', got {entry!r}")
        if not path:
            raise LogPollError("logs: empty path")
        label = str(label) if label else default_label(path)
        if "/" in label or "\0" in label or label in (".", ".."):
            raise LogPollError(f"logs: label {label!r} of {path} cannot name a file (no '/', not '.' or '..')")
        specs.append(LogSpec(path, label))
    for kind, values in (("labels", [s.label for s in specs]), ("paths", [s.path for s in specs])):
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            hint = " (set 'label')" if kind == "labels" else ""
            raise LogPollError(f"logs: {kind} must be unique per host, repeated: {', '.join(dupes)}{hint}")
    return specs


def normalize_policy(policy: str) -> str:
    value = (policy or "all").lower()
    if value not in POLICIES:
        raise LogPollError(f"complete.policy {policy!r} is not one of {', '.join(POLICIES)}")
    return "first" if value == "node0" else value


def split_lines(data: bytes) -> list[bytes]:
    """Split delivered bytes on \\n; data ends with \\n except for a long-line fragment."""
    if not data:
        return []
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return parts


def decode_line(raw: bytes) -> str:
    """UTF-8 with invalid bytes replaced; a CRLF line loses its \\r."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw.decode("utf-8", "replace")


@dataclass
class ScanResult:
    error: dict | None = None
    marker_line: str | None = None


def scan_lines(
    lines: list[tuple[str, str]],
    errors: list[Pattern],
    ignores: list[Pattern],
    marker: Pattern | None,
) -> ScanResult:
    """Scan one round's lines, given as (label, line) in delivery order.

    Error patterns are ordered by priority: when several match in the same
    round, the first pattern in order wins (at its first matching line). A
    line that matches an ignore pattern is never an error, but other lines in
    the same round still are.
    """
    result = ScanResult()
    candidates: list[tuple[int, str, str]] = []
    for index, (label, line) in enumerate(lines):
        if marker is not None and result.marker_line is None and marker.search(line):
            result.marker_line = line
        if errors and not any(p.search(line) for p in ignores):
            candidates.append((index, label, line))
    for pattern in errors:
        for index, label, line in candidates:
            if pattern.search(line):
                result.error = {
                    "name": pattern.name,
                    "pattern": pattern.source,
                    "line": line,
                    "label": label,
                    "index": index,
                }
                return result
    return result


def policy_decided(policy: str, group: list[str], completed: Iterable[str]) -> bool:
    """Whether the completion group is done under policy (group in inventory order)."""
    done = set(completed)
    if not group:
        return False
    if policy == "all":
        return all(h in done for h in group)
    if policy == "any":
        return any(h in done for h in group)
    if policy == "first":
        return group[0] in done
    if policy == "last":
        return group[-1] in done
    raise LogPollError(f"unknown policy {policy!r}")


@dataclass
class HostRound:
    """Per-host state carried between rounds (serialised to JSON on the controller)."""

    started: float
    last_progress: float
    cursors: dict = field(default_factory=dict)
    marker_seen: bool = False
    context: list = field(default_factory=list)
    last_line: str | None = None
    rounds: int = 0
    transport_failures: int = 0
    lines_total: int = 0
    finished: bool = False
    generation: int = 1
    read_once: bool = False
    sizes: dict = field(default_factory=dict)
    states: dict = field(default_factory=dict)
    events: list = field(default_factory=list)
    config_ok: bool = False
    appeared: list = field(default_factory=list)
    # warnings of every round (lost bytes), repeated in the final result so that Ansible shows them
    warnings: list = field(default_factory=list)
    # when the last round began, and the intervals between the last rounds (see round_lag)
    last_round_at: float | None = None
    intervals: list = field(default_factory=list)

    def remember(self, lines: list[str]) -> None:
        if lines:
            self.context = (self.context + lines[-CONTEXT_LINES:])[-CONTEXT_LINES:]
            self.last_line = lines[-1]

    def note_event(self, label: str, event: str) -> None:
        """Keep rotation/truncation/... events of the whole poll (bounded) for the final result."""
        self.events.append({"round": self.rounds, "label": label, "event": event})
        del self.events[:-MAX_EVENTS]

    def note_sizes(self, sizes: Mapping[str, int]) -> bool:
        """Record file sizes; True when one changed (a log growing counts as progress, even mid-line)."""
        changed = any(self.sizes.get(path) != size for path, size in sizes.items())
        self.sizes.update(sizes)
        return changed

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: Mapping) -> HostRound:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def round_lag(intervals: Iterable[float], delay: float) -> float | None:
    """The median interval between a host's last LAG_ROUNDS rounds when each one came later than ``delay`` by more
    than max(delay, LAG_MIN_SECONDS): polling does not keep up with the delay. None otherwise (and with no delay)."""
    recent = sorted(list(intervals)[-LAG_ROUNDS:])
    if delay <= 0 or len(recent) < LAG_ROUNDS or recent[0] - delay <= max(delay, LAG_MIN_SECONDS):
        return None
    return recent[len(recent) // 2]


def lag_warning(host: str, interval: float, delay: float, hosts: int) -> str:
    suggested = max(int(interval) + 1, int(delay) + 1)
    return (
        f"log_poll does not keep up: rounds on {host} came every {interval:.1f}s instead of every {delay:g}s (the "
        f"task's delay) with {hosts} host(s) polling, so a line is seen up to {interval:.0f}s after it is written "
        f"(controller CPU, forks or slow reads on the node). Set delay to {suggested}s or more, or poll fewer hosts "
        "from one controller (AWX job slicing, serial batches)"
    )


def context_before(previous: list[str], round_lines: list[str], index: int) -> list[str]:
    """The last CONTEXT_LINES lines before round_lines[index] (earlier rounds included)."""
    before = previous + round_lines[:index]
    return before[-CONTEXT_LINES:]


def probe_outcome(
    reply: Mapping, complete: Mapping, marker_seen: bool, caught_up: bool = True
) -> tuple[bool, str | None]:
    """(completed, failure reason) for this host from the probes in a reader reply.

    Every configured probe must be satisfied to complete; a non-zero exit code
    is a failure; an exit code of 0 without the completion marker is a failure
    too, but only once the logs are caught up (the reader probes before it
    reads, so a marker written before the exit is in the bytes of this round
    unless max_bytes cut the read short).
    """
    failure = None
    satisfied = True
    has_probe = False
    if complete.get("pattern"):
        has_probe = True
        satisfied = satisfied and marker_seen
    if complete.get("exit_code_file"):
        has_probe = True
        exit_info = reply.get("exit_code") or {}
        if not exit_info.get("present"):
            satisfied = False
        elif exit_info.get("code") is None:
            failure = f"exit code file {complete['exit_code_file']}: {exit_info.get('error', 'unreadable')}"
        elif exit_info["code"] != 0:
            failure = f"job exited with code {exit_info['code']} (exit code file {complete['exit_code_file']})"
        elif complete.get("pattern") and not marker_seen and caught_up:
            failure = f"job exited with code 0 before the completion marker {complete['pattern']!r} appeared"
    if complete.get("http"):
        has_probe = True
        http = reply.get("http") or {}
        satisfied = satisfied and http.get("status") == int(complete["http"].get("status", 200))
    if complete.get("artifact"):
        has_probe = True
        art = reply.get("artifact") or {}
        satisfied = (
            satisfied
            and bool(art.get("exists"))
            and art.get("size", 0) >= int(complete["artifact"].get("min_bytes", 0) or 0)
        )
    return (has_probe and satisfied and failure is None), failure


def no_space_left(host: str, reply: Mapping, exit_code_file: str | None = None) -> str | None:
    """Why a host fails because a file system its job writes to is full, or None.

    A log whose file system has no space (or no inode) left and that gave no new byte this round cannot grow
    any more: the job writing it gets ENOSPC, and waiting for stall_timeout would only report "stalled". The
    exit code file's file system counts too when the file is missing or empty (a job that died on a full disk
    leaves an empty one).
    """
    for log in reply.get("logs") or []:
        full = log.get("full")
        if isinstance(full, Mapping) and not log.get("chunks") and not log.get("more"):
            return f"no space left on device on {host}: {_df(full)} holds {log.get('path')}; the log cannot grow"
    exit_info = reply.get("exit_code") or {}
    full = exit_info.get("full")
    if exit_code_file and isinstance(full, Mapping) and not exit_info.get("present"):
        state = "empty" if exit_info.get("empty") else "missing"
        return (
            f"no space left on device on {host}: {_df(full)} holds the exit code file {exit_code_file} ({state}); "
            "the job cannot record its exit status"
        )
    return None


def _df(full: Mapping) -> str:
    size, free, inodes = int(full.get("size") or 0), int(full.get("free") or 0), full.get("free_inodes")
    return f"the file system ({free} bytes free of {size}, {inodes} inodes free)"


def has_completion_probe(complete: Mapping) -> bool:
    return any(complete.get(k) for k in ("pattern", *PROBES))


def can_complete(has_logs: bool, complete: Mapping) -> bool:
    """Whether a host can ever complete: a marker needs a log to appear in, other probes need nothing."""
    return any(complete.get(k) for k in PROBES) or (has_logs and bool(complete.get("pattern")))


def effective_group(group: list[str], members: Mapping[str, Mapping], absent_dropped: bool) -> list[str]:
    """The completion group without hosts that registered as unable to complete.

    A host that has not registered yet counts as able to, unless absent_dropped
    (the join grace is over: a host skipped by ``when`` never polls).
    """
    out = []
    for host in group:
        info = members.get(host)
        if info is None:
            if not absent_dropped:
                out.append(host)
        elif info.get("can_complete", True):
            out.append(host)
    return out


def config_problem(
    participants: list[str], group: list[str], members: Mapping[str, Mapping], absent_dropped: bool
) -> str | None:
    """A group-wide configuration error that only shows once every host registered its own arguments."""
    present = [h for h in participants if h in members]
    if len(present) < len(participants) and not absent_dropped:
        return None
    if present and not any(members[h].get("watches") for h in present):
        return (
            f"logs is empty on every host ({', '.join(present)}) and no exit_code_file, http or artifact probe "
            "is set: nothing to poll"
        )
    group_present = [h for h in group if h in members]
    if group_present and not effective_group(group_present, members, True):
        return (
            f"no host of the completion group ({', '.join(group_present)}) can complete: each needs a log for "
            "complete.pattern, or an exit_code_file, http or artifact probe"
        )
    return None


def never_appeared(paths: Iterable[str], appeared: Iterable[str]) -> str:
    """'; <path> never appeared' for each log never found on the node (for timeout and stall messages)."""
    seen = set(appeared)
    return "".join(f"; {path} never appeared" for path in paths if path not in seen)


def format_elapsed(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
