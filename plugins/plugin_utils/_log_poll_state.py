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

_PRUNE_AFTER = 3 * 24 * 3600
# Member files are written once per host and generation (atomically), so a worker reads each only once;
# every round otherwise re-read every member's file, O(hosts^2) per cluster round.
_MEMBER_CACHE: dict[str, dict] = {}


def playbook_run_key() -> str:
    """Identify the running ansible-playbook: the worker's parent PID plus its start time."""
    ppid = os.getppid()
    start = ""
    try:
        with open(f"/proc/{ppid}/stat", "rb") as fh:
            start = fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        pass
    return f"{ppid}-{start}"


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


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)


def _host_file(host: str) -> str:
    """A file name for a host, reversible and collision-free (any inventory name)."""
    return "h-" + quote(host, safe="")


def _file_host(name: str) -> str:
    return unquote(name[2:])


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

    def prune_old_runs(self, now: float | None = None) -> None:
        now = now or time.time()
        try:
            entries = os.scandir(self.base_dir)
        except OSError:
            return
        with entries:
            for entry in entries:
                try:
                    if entry.path != self.run_dir and now - entry.stat().st_mtime > _PRUNE_AFTER:
                        shutil.rmtree(entry.path, ignore_errors=True)
                except OSError:
                    continue

    def load_host(self, host: str) -> dict | None:
        return _read_json(os.path.join(self.path, "hosts", _host_file(host) + ".json"))

    def save_host(self, host: str, data: dict) -> None:
        _write_json(os.path.join(self.path, "hosts", _host_file(host) + ".json"), data)

    def register(self, host: str, info: dict, now: float | None = None) -> None:
        _write_json(os.path.join(self.gen_path, "members", _host_file(host) + ".json"), info)
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
            if name.startswith("h-") and name.endswith(".json"):
                path = os.path.join(directory, name)
                data = _MEMBER_CACHE.get(path)
                if data is None:
                    data = _read_json(path)
                    if data is not None:
                        _MEMBER_CACHE[path] = data
                if data is not None:
                    out[_file_host(name[:-5])] = data
        return out

    def mark_complete(self, host: str) -> None:
        with open(os.path.join(self.gen_path, "complete", _host_file(host)), "w"):
            pass

    def completed(self) -> set[str]:
        return {_file_host(n) for n in os.listdir(os.path.join(self.gen_path, "complete")) if n.startswith("h-")}

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
