# Copyright: cvs.cluster contributors
# Apache License 2.0 (see galaxy.yml)
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

_PRUNE_AFTER = 3 * 24 * 3600


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


class StateStore:
    def __init__(self, base_dir: str, run_key: str, task_key: str) -> None:
        self.base_dir = os.path.expanduser(base_dir)
        self.run_dir = os.path.join(self.base_dir, _safe(run_key))
        self.path = os.path.join(self.run_dir, _safe(task_key))
        for sub in ("hosts", "complete", "members"):
            os.makedirs(os.path.join(self.path, sub), exist_ok=True)

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
        return _read_json(os.path.join(self.path, "hosts", _safe(host) + ".json"))

    def save_host(self, host: str, data: dict) -> None:
        _write_json(os.path.join(self.path, "hosts", _safe(host) + ".json"), data)

    def register(self, host: str, info: dict) -> None:
        _write_json(os.path.join(self.path, "members", _safe(host) + ".json"), info)

    def members(self) -> dict[str, dict]:
        out = {}
        directory = os.path.join(self.path, "members")
        for name in os.listdir(directory):
            if name.endswith(".json"):
                data = _read_json(os.path.join(directory, name))
                if data is not None:
                    out[data.get("host", name[:-5])] = data
        return out

    def mark_complete(self, host: str) -> None:
        with open(os.path.join(self.path, "complete", _safe(host)), "w"):
            pass

    def completed(self) -> set[str]:
        return {n for n in os.listdir(os.path.join(self.path, "complete")) if not n.startswith(".")}

    def decision(self) -> dict | None:
        return _read_json(os.path.join(self.path, "decision.json"))

    def decide(self, verdict: dict) -> dict:
        """Record the group verdict unless one exists; return the verdict in force."""
        target = os.path.join(self.path, "decision.json")
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".tmp-")
        with os.fdopen(fd, "w") as fh:
            json.dump(verdict, fh)
        try:
            os.link(tmp, target)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        return self.decision() or verdict
