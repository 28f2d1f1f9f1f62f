"""Pure formatting and bookkeeping for the ``cvs.cluster.cvs`` stdout callback.

Nothing here talks to Ansible or to a terminal: the callback feeds events in and
writes the strings that come out.  Everything is deterministic given ``now``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import (
    format_elapsed,
    labelled_lines,
    log_label,
)

MODES: tuple[str, ...] = ("quiet", "normal", "verbose")
DEFAULT_MODE = "normal"
SPINNER_CHOICES: tuple[str, ...] = ("auto", "always", "never")
DEFAULT_SPINNER = "auto"
LOG_POLL_ACTIONS: frozenset[str] = frozenset({"cvs.cluster.log_poll", "log_poll"})

# ASCII frames: they render on every terminal and every encoding.
SPINNER_FRAMES: tuple[str, ...] = ("|", "/", "-", "\\")

# Terminal control for the in-place line.
CR = "\r"
CLEAR_TO_EOL = "\x1b[K"
CLEAR_LINE = CR + CLEAR_TO_EOL

# Environment variables that mean "ansible-runner / AWX is capturing stdout".
CAPTURE_ENV_VARS: tuple[str, ...] = (
    "AWX_ISOLATED_DATA_DIR",
    "ORIGINAL_STDOUT_CALLBACK",
    "RUNNER_OMIT_EVENTS",
    "RUNNER_ONLY_FAILED_EVENTS",
    "JOB_ID",
)

# CSI (ESC [ ... final), OSC (ESC ] ... BEL | ESC \), other two-byte ESC sequences, 8-bit CSI.
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
# C0 controls except TAB, plus DEL and C1 controls.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


# --------------------------------------------------------------------------- options


def normalize_choice(value: object, allowed: Sequence[str], default: str) -> tuple[str, Optional[str]]:
    """Return ``(choice, problem)``; ``problem`` is None when ``value`` was valid (or unset)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return default, None
    text = str(value).strip().lower()
    if text in allowed:
        return text, None
    return default, f"{value!r} is not one of {', '.join(allowed)}"


def resolve_mode(value: object, default: str = DEFAULT_MODE) -> tuple[str, Optional[str]]:
    """Console mode from an option or ``cvs_console`` value: ``(mode, warning text or None)``."""
    mode, problem = normalize_choice(value, MODES, default)
    if problem is None:
        return mode, None
    return mode, f"cvs console: {problem}; using {mode!r}"


def capture_reason(env: Mapping[str, str], class_names: Iterable[str] = (), display_wrapped: bool = False) -> str:
    """Why stdout is captured by ansible-runner/AWX (empty string: it is not).

    ``class_names`` are the qualified names of the callback's class hierarchy; runner subclasses
    the configured stdout callback in its ``awx_display`` module.
    """
    for name in CAPTURE_ENV_VARS:
        if env.get(name):
            return f"env {name}"
    for name in class_names:
        if "awx_display" in name:
            return f"callback wrapped by {name}"
    if display_wrapped:
        return "display is wrapped"
    return ""


# --------------------------------------------------------------------------- text


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (colors, cursor movement, OSC titles)."""
    return _ANSI_RE.sub("", text)


def sanitize(text: object) -> str:
    """One printable line: escapes stripped, a carriage-return overwrite resolved, controls dropped.

    ``progress 10%\\rprogress 20%`` shows as a terminal would end up showing it: ``progress 20%``.
    """
    line = strip_ansi(str(text)).rstrip("\r\n")
    if "\r" in line:
        parts = [part for part in line.split("\r") if part]
        line = parts[-1] if parts else ""
    return _CONTROL_RE.sub("", line)


def has_control(text: str) -> bool:
    """True when ``text`` holds an escape sequence or a control character other than TAB and newline."""
    return bool(_ANSI_RE.search(text) or _CONTROL_RE.search(text.replace("\n", "")))


def text_width(text: str) -> int:
    """Columns ``text`` takes on a terminal (East Asian wide characters count twice)."""
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


def fit_width(text: str, width: int) -> str:
    """Cut ``text`` to at most ``width`` columns, marking the cut with ``~``."""
    if width <= 0:
        return ""
    if text_width(text) <= width:
        return text
    out: list[str] = []
    used = 0
    for char in text:
        w = 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
        if used + w > width - 1:
            break
        out.append(char)
        used += w
    return "".join(out) + "~"


def live_line(text: str, width: int) -> str:
    """Escape sequence that redraws the in-place line with ``text`` (cursor stays on that line)."""
    return CR + fit_width(sanitize(text), max(1, width - 1)) + CLEAR_TO_EOL


def spinner_frame(tick: int) -> str:
    return SPINNER_FRAMES[tick % len(SPINNER_FRAMES)]


# --------------------------------------------------------------------------- log_poll results


def host_results(host: str, result: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The (host, result) pairs a log_poll result is about: its host's, or each host's of a fleet result."""
    hosts = result.get("hosts")
    if not result.get("fleet") or not isinstance(hosts, Mapping):
        return [(host, result)]
    group = result.get("group")
    return [(str(h), {**entry, "group": group}) for h, entry in hosts.items() if isinstance(entry, Mapping)]


def prefix(host: str, label: str = "") -> str:
    return f"[{host}:{label}]" if label else f"[{host}]"


def format_log_line(host: str, label: str, line: object) -> str:
    """``[host:label] line`` with the line made safe for a terminal."""
    return f"{prefix(host, label)} {sanitize(line)}"


def round_lines(host: str, result: Mapping[str, Any]) -> list[str]:
    """Verbose rendering of one round: each new line once, host- and label-prefixed."""
    return [format_log_line(host, item["label"], item["line"]) for item in labelled_lines(result)]


_EVENT_NOTES = {
    "stale": "log last written before this run started; reading only what is written from now on",
    "lost": "log lines were lost (their file went away before they were read); see the warning",
}


def log_event_notes(host: str, result: Mapping[str, Any]) -> list[str]:
    """Notes for file events of the round (``rotated``, ``truncated``...)."""
    notes = []
    for state in result.get("log_states") or []:
        if not isinstance(state, Mapping):
            continue
        for event in state.get("events") or []:
            where = prefix(host, log_label(state))
            if event == "lost" and isinstance(state.get("lost_bytes"), int):
                notes.append(f"[cvs] {where} {state['lost_bytes']} bytes of log lines were lost (their file went "
                             "away before they were read)")  # fmt: skip
                continue
            if event in _EVENT_NOTES:
                notes.append(f"[cvs] {where} {_EVENT_NOTES[event]}")
                continue
            notes.append(f"[cvs] {where} log {sanitize(event)}; reading it from the start")
    return notes


def failure_lines(host: str, task: str, result: Mapping[str, Any]) -> list[str]:
    """Everything an operator needs about a failed log_poll host, in plain lines."""
    error = result.get("error")
    lines: list[str] = []
    if isinstance(error, Mapping):
        label = log_label(error)
        where = f"{error.get('host') or host}:{label}" if label else str(error.get("host") or host)
        path = f" ({error['path']})" if error.get("path") else ""
        lines.append(f"fatal: [{host}]: FAILED! {task}: error pattern {error.get('name')!r} matched in {where}{path}")
        if error.get("pattern"):
            lines.append(f"  pattern: {sanitize(error['pattern'])}")
        context = [c for c in (error.get("context") or []) if c is not None]
        if context:
            lines.append(f"  last {len(context)} line{'s' if len(context) != 1 else ''} before it:")
            lines.extend(f"    {format_log_line(host, label, c)}" for c in context)
        lines.append("  offending line:")
        lines.append(f"  > {format_log_line(host, label, error.get('line', ''))}")
        return lines
    msg = sanitize(result.get("msg") or "log_poll failed")
    lines.append(f"fatal: [{host}]: FAILED! {task}: {msg}")
    if result.get("timed_out"):
        lines.append(f"  timed out after {format_elapsed(_num(result.get('elapsed')))}")
    if result.get("stalled"):
        lines.append("  stalled: the logs stopped growing")
    if result.get("transport_error"):
        lines.append(f"  transport error: {sanitize(result['transport_error'])}")
    if not result.get("finished") and result.get("attempts"):
        lines.append(f"  gave up after {result['attempts']} rounds: the task's retries ran out before it finished")
    return lines


def ok_line(host: str, result: Mapping[str, Any]) -> str:
    """The normal-mode line for a host whose log_poll finished cleanly."""
    if result.get("armed") or result.get("drained"):
        return f"ok: [{host}]: {sanitize(result.get('msg', ''))}"
    if result.get("completed"):
        return f"ok: [{host}]: complete (elapsed {format_elapsed(_num(result.get('elapsed')))})"
    group = result.get("group") if isinstance(result.get("group"), Mapping) else {}
    policy = f", policy {group.get('policy')}" if group.get("policy") else ""
    counts = f"{_int(group.get('complete'))}/{_int(group.get('total'))} complete"
    return f"ok: [{host}]: finished, the group decided ({counts}{policy})"


def _num(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


# --------------------------------------------------------------------------- progress


@dataclass
class HostPoll:
    """What the latest round said about one host."""

    completed: bool = False
    finished: bool = False
    failed: bool = False
    error: bool = False
    stalled: bool = False
    transport_error: bool = False


@dataclass
class TaskProgress:
    """Progress of one task across hosts, fed by callback events.

    For a log_poll task the counts come from the rounds (this host's ``completed`` and the
    group's ``complete``/``total``/``failed``, which never move backwards here even if rounds of
    different hosts arrive out of order); for any other task from started and finished hosts.
    """

    name: str
    started: float
    log_poll: bool = False
    hosts_started: set[str] = field(default_factory=set)
    hosts_done: set[str] = field(default_factory=set)
    hosts_failed: set[str] = field(default_factory=set)
    polls: dict[str, HostPoll] = field(default_factory=dict)
    policy: str = ""
    group_complete: int = 0
    group_total: int = 0
    group_failed: int = 0
    _shown: Optional[tuple[Any, ...]] = None

    def host_started(self, host: str) -> None:
        self.hosts_started.add(host)

    def host_done(self, host: str, failed: bool = False) -> None:
        self.hosts_started.add(host)
        self.hosts_done.add(host)
        if failed:
            self.hosts_failed.add(host)

    def poll_round(self, host: str, result: Mapping[str, Any], final: bool = False, failed: bool = False) -> None:
        """Record one log_poll round of ``host`` (``final``: the task's last result for it)."""
        self.hosts_started.add(host)
        poll = self.polls.setdefault(host, HostPoll())
        poll.completed = bool(result.get("completed"))
        poll.finished = bool(result.get("finished")) or final
        poll.failed = failed
        poll.error = isinstance(result.get("error"), Mapping)
        poll.stalled = bool(result.get("stalled"))
        poll.transport_error = bool(result.get("transport_error"))
        group = result.get("group")
        if isinstance(group, Mapping):
            self.policy = str(group.get("policy") or self.policy)
            self.group_complete = max(self.group_complete, _int(group.get("complete")))
            self.group_failed = max(self.group_failed, _int(group.get("failed")))
            self.group_total = _int(group.get("total")) or self.group_total
        if final:
            self.host_done(host, failed)

    @property
    def total(self) -> int:
        return self.group_total or max(len(self.hosts_started), len(self.polls))

    @property
    def complete(self) -> int:
        if not self.log_poll:
            return len(self.hosts_done)
        return max(self.group_complete, sum(p.completed for p in self.polls.values()))

    @property
    def failed(self) -> int:
        own = {h for h, p in self.polls.items() if p.failed or p.error} | self.hosts_failed
        return max(self.group_failed, len(own))

    @property
    def errors(self) -> int:
        return sum(p.error for p in self.polls.values())

    @property
    def running(self) -> bool:
        """Hosts still owe a result (or none has started yet)."""
        return not self.hosts_started or bool(self.hosts_started - self.hosts_done)

    def elapsed(self, now: float) -> str:
        return format_elapsed(now - self.started)

    def state(self) -> tuple[Any, ...]:
        stalled = tuple(sorted(h for h, p in self.polls.items() if p.stalled))
        transport = tuple(sorted(h for h, p in self.polls.items() if p.transport_error))
        return (self.complete, self.total, stalled, transport)

    def changed(self) -> bool:
        """True once per new state (the caller prints a progress line then).

        Failures are not part of the state: they are always final results, printed in full.
        """
        state = self.state()
        if state == self._shown:
            return False
        self._shown = state
        return True

    def counts(self) -> str:
        return f"{self.complete}/{self.total} hosts complete"

    def progress_line(self, now: float) -> str:
        """Compact line for normal mode, printed when the round state changes."""
        policy = f" (policy {self.policy})" if self.policy else ""
        parts = [f"{self.counts()}{policy}", f"{self.failed} failed"]
        stalled, transport = self.state()[2:]
        if stalled:
            parts.append(f"stalled: {', '.join(stalled)}")
        if transport:
            parts.append(f"transport errors: {', '.join(transport)}")
        parts.append(f"elapsed {self.elapsed(now)}")
        return f"[cvs] {self.name}: {', '.join(parts)}"

    def heartbeat_line(self, now: float) -> str:
        errors = f", {self.errors} error{'s' if self.errors != 1 else ''}" if self.errors else ""
        return f"[cvs] still running: {self.name} ({self.counts()}{errors}, elapsed {self.elapsed(now)})"

    def status_line(self, now: float, frame: str) -> str:
        """The quiet in-place line (without terminal control)."""
        errors = f"{self.errors} error{'s' if self.errors != 1 else ''}"
        return f"{frame} {self.name} | {self.counts()} | {errors} | {self.elapsed(now)}"


class HostLines:
    """Polled log lines kept per host until an event of that host shows them (under ansible-runner).

    Runner files whatever is displayed during a callback under that callback's event, and AWX shows an event under
    its host: a host's lines displayed while another host's result is handled, or from the ticker thread (an event
    of no host), would be shown under the wrong node or under none.
    """

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}

    def __bool__(self) -> bool:
        return bool(self._lines)

    def hold(self, host: str, lines: Iterable[str]) -> None:
        """Keep ``lines`` (in order) for ``host``."""
        lines = list(lines)
        if lines:
            self._lines.setdefault(host, []).extend(lines)

    def release(self, host: str) -> list[str]:
        """``host``'s lines held so far, in order; they are no longer held."""
        return self._lines.pop(host, [])

    def release_all(self) -> list[str]:
        """Every host's lines, host by host in the order the hosts first had lines."""
        lines = [line for held in self._lines.values() for line in held]
        self._lines.clear()
        return lines


class Heartbeat:
    """When the next heartbeat line is due: every ``interval`` seconds after a task starts."""

    def __init__(self, interval: float) -> None:
        self.interval = float(interval)
        self.next_due: Optional[float] = None

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def start(self, now: float) -> None:
        self.next_due = now + self.interval if self.enabled else None

    def stop(self) -> None:
        self.next_due = None

    def due(self, now: float) -> bool:
        """True (once) when a heartbeat is due; schedules the next one on the interval grid."""
        if self.next_due is None or now < self.next_due:
            return False
        while self.next_due <= now:
            self.next_due += self.interval
        return True
