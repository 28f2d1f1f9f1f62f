# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side state of log_poll, shared by the per-host worker processes.

One directory per (playbook run, task, loop item). Every file is written
atomically (temp file + rename); the group decision is written once (link),
so the first host to decide wins and every other host reads the same verdict.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from typing import Any
from urllib.parse import quote, unquote

# state_retention's default: a run's state untouched this long is removed by the next poll on this controller
DEFAULT_RETENTION = 24 * 3600
# longest file or directory name the store writes (NAME_MAX is 255 on Linux): longer names are hashed
_NAME_MAX = 180
# Member files are written once per host and generation (atomically), so a worker reads each only once;
# every round otherwise re-read every member's file, O(hosts^2) per cluster round.
_MEMBER_CACHE: dict[str, dict] = {}


def _start_ticks(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def playbook_run_key() -> str:
    """Identify the running ansible-playbook: the worker's parent PID plus its start time."""
    ppid = os.getppid()
    return f"{ppid}-{_start_ticks(ppid)}"


def playbook_run_started() -> float | None:
    """When the running ansible-playbook (the worker's parent) started, as a Unix time; None if unknown.

    From its start in clock ticks since boot and /proc/uptime (10 ms), not /proc/stat's btime (whole seconds).
    """
    ticks = _start_ticks(os.getppid())
    try:
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        return time.time() - uptime + int(ticks) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _write_json(path: str, data: Any) -> None:
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, separators=(",", ":"))
    os.replace(tmp, path)


def _read_json(path: str) -> Any:
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def _bounded(name: str) -> str:
    """name, or when it is too long for a file name, its start plus a hash of all of it."""
    if len(name) <= _NAME_MAX:
        return name
    return name[:100] + "~" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _safe(name: str) -> str:
    return _bounded("".join(c if c.isalnum() or c in "-_.@" else "_" for c in name))


def _host_file(host: str) -> str:
    """A file name for a host, collision-free for any inventory name; reversible (``h-``) unless too long for a
    file name (a 253-character FQDN quotes to more than NAME_MAX), then hashed (``x-``, the name inside)."""
    quoted = quote(host, safe="")
    if len(quoted) + 2 <= _NAME_MAX:
        return "h-" + quoted
    return "x-" + hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()


def _file_host(name: str, directory: str | None = None) -> str | None:
    if name.startswith("h-"):
        return unquote(name[2:])
    if directory is None:
        return None
    try:
        with open(os.path.join(directory, name), encoding="utf-8", errors="surrogateescape") as fh:
            data = fh.read()
    except OSError:
        return None
    if name.endswith(".json"):
        try:
            data = json.loads(data).get("host")
        except (ValueError, AttributeError):
            return None
    return data if isinstance(data, str) and data else None


def _run_last_used(path: str) -> float:
    """When a run's state last changed: its own directory, or any task's host states (written every round)."""
    newest = os.stat(path).st_mtime
    with os.scandir(path) as tasks:
        for task in tasks:
            try:
                newest = max(newest, os.stat(os.path.join(task.path, "hosts")).st_mtime)
            except OSError:
                continue
    return newest


def prune_state(base_dir: str, keep: str, retention: float, now: float | None = None) -> list[str]:
    """Remove the state of every run under base_dir (but ``keep``) unused for ``retention`` seconds.

    A run's state is of no use once its ansible-playbook has ended; a run still polling rewrites a host state
    every round, so it is never removed under it. Returns the removed paths; retention 0 keeps everything.
    """
    removed: list[str] = []
    if not retention:
        return removed
    now = now or time.time()
    try:
        entries = os.scandir(base_dir)
    except OSError:
        return removed
    with entries:
        for entry in entries:
            try:
                if entry.path == keep or not entry.is_dir(follow_symlinks=False):
                    continue
                if now - entry.stat(follow_symlinks=False).st_mtime <= retention:
                    continue
                if now - _run_last_used(entry.path) > retention:
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed.append(entry.path)
            except OSError:
                continue
    return removed


class StateStore:
    """State of one (playbook run, task, loop item) key.

    ``hosts/`` holds each host's round state. The group's shared state
    (members, completed hosts, the verdict) lives in a generation directory:
    when the same key is polled again in the same run (a loop repeating an
    item, a reused ``state_key``), every host starts the next generation and
    never sees the previous verdict.
    """

    def __init__(self, base_dir: str, run_key: str, task_key: str) -> None:
        self.base_dir = os.path.expanduser(base_dir)
        self.run_dir = os.path.join(self.base_dir, _safe(run_key))
        self.path = os.path.join(self.run_dir, _safe(task_key))
        os.makedirs(os.path.join(self.path, "hosts"), exist_ok=True)
        self.set_generation(1)

    def set_generation(self, generation: int) -> None:
        self.generation = generation
        self.gen_path = os.path.join(self.path, f"g{generation}")
        for sub in ("complete", "members"):
            os.makedirs(os.path.join(self.gen_path, sub), exist_ok=True)

    def prune_old_runs(self, retention: float = DEFAULT_RETENTION, now: float | None = None) -> list[str]:
        """Remove other runs' state unused for ``retention`` seconds (see prune_state)."""
        return prune_state(self.base_dir, self.run_dir, retention, now)

    def load_host(self, host: str) -> dict | None:
        return _read_json(os.path.join(self.path, "hosts", _host_file(host) + ".json"))

    def save_host(self, host: str, data: dict) -> None:
        _write_json(os.path.join(self.path, "hosts", _host_file(host) + ".json"), data)

    def register(self, host: str, info: dict, now: float | None = None) -> None:
        _write_json(os.path.join(self.gen_path, "members", _host_file(host) + ".json"), dict(info, host=host))
        try:
            with open(os.path.join(self.gen_path, "joined"), "x") as fh:
                fh.write(repr(now or time.time()))
        except FileExistsError:
            pass

    def first_joined(self) -> float | None:
        """When the first host of this generation registered."""
        try:
            with open(os.path.join(self.gen_path, "joined")) as fh:
                return float(fh.read() or 0) or None
        except (OSError, ValueError):
            return None

    def members(self) -> dict[str, dict]:
        out = {}
        directory = os.path.join(self.gen_path, "members")
        for name in os.listdir(directory):
            if name.startswith(("h-", "x-")) and name.endswith(".json"):
                path = os.path.join(directory, name)
                data = _MEMBER_CACHE.get(path)
                if data is None:
                    data = _read_json(path)
                    if data is not None:
                        _MEMBER_CACHE[path] = data
                if data is not None:
                    host = _file_host(name[:-5]) if name.startswith("h-") else data.get("host")
                    if host is not None:
                        out[host] = data
        return out

    def mark_complete(self, host: str) -> None:
        name = _host_file(host)
        directory = os.path.join(self.gen_path, "complete")
        if name.startswith("h-"):
            with open(os.path.join(directory, name), "w"):
                pass
        else:  # the host's name is in the file (written whole before it appears under its name)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
                fh.write(host)
            os.replace(tmp, os.path.join(directory, name))

    def completed(self) -> set[str]:
        directory = os.path.join(self.gen_path, "complete")
        names = (n for n in os.listdir(directory) if n.startswith(("h-", "x-")))
        return {h for h in (_file_host(n, directory) for n in names) if h is not None}

    def claim(self, name: str) -> bool:
        """True for the first host of this generation that claims ``name`` (a warning given once per task)."""
        try:
            with open(os.path.join(self.gen_path, f"claimed-{name}"), "x"):
                return True
        except FileExistsError:
            return False

    def decision(self) -> dict | None:
        return _read_json(os.path.join(self.gen_path, "decision.json"))

    def decide(self, verdict: dict) -> dict:
        """Record the group verdict unless one exists; return the verdict in force."""
        target = os.path.join(self.gen_path, "decision.json")
        fd, tmp = tempfile.mkstemp(dir=self.gen_path, prefix=".tmp-")
        with os.fdopen(fd, "w") as fh:
            json.dump(verdict, fh)
        try:
            os.link(tmp, target)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        return self.decision() or verdict


class MemoryStore:
    """The state of a fleet poll: every host of the group is polled by one process, so it lives in memory.

    The same interface as :class:`StateStore` (what the round engine uses of it); one instance per fleet, shared by
    the fleet's hosts, and no other process ever needs to see it.
    """

    def __init__(self) -> None:
        self.generation = 1
        self._hosts: dict[str, dict] = {}
        self._members: dict[str, dict] = {}
        self._complete: set[str] = set()
        self._claimed: set[str] = set()
        self._decision: dict | None = None
        self._joined: float | None = None

    def set_generation(self, generation: int) -> None:
        if generation != self.generation:
            self.generation = generation
            self._members, self._complete, self._claimed = {}, set(), set()
            self._decision = self._joined = None

    def prune_old_runs(self, retention: float = DEFAULT_RETENTION, now: float | None = None) -> list[str]:
        return []

    def load_host(self, host: str) -> dict | None:
        return self._hosts.get(host)

    def save_host(self, host: str, data: dict) -> None:
        self._hosts[host] = data

    def register(self, host: str, info: dict, now: float | None = None) -> None:
        self._members[host] = dict(info, host=host)
        if self._joined is None:
            self._joined = now or time.time()

    def first_joined(self) -> float | None:
        return self._joined

    def members(self) -> dict[str, dict]:
        return self._members

    def mark_complete(self, host: str) -> None:
        self._complete.add(host)

    def completed(self) -> set[str]:
        return self._complete

    def claim(self, name: str) -> bool:
        if name in self._claimed:
            return False
        self._claimed.add(name)
        return True

    def decision(self) -> dict | None:
        return self._decision

    def decide(self, verdict: dict) -> dict:
        if self._decision is None:
            self._decision = dict(verdict)
        return self._decision
