# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller-side spool from log_poll's workers to the cvs console.

The console reads lines from here instead of from results, so lines an event budget leaves out of a result, and
the rounds a multi-round call polls between two results, still reach the terminal, each line once. The cvs
callback creates the directory and names it in SPOOL_ENV (``<pid of ansible-playbook>:<dir>``) before any worker
forks; a worker spools only when its parent is that process, so a nested or unrelated run never writes here.
Each call writes one file, one JSON record per round (``last`` on its final one), and the console deletes the
file once it has read that record.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any, Mapping, Sequence

SPOOL_ENV = "CVS_LOG_POLL_SPOOL"
# "1" while the task that runs shows its log lines (verbose console): records then carry them
SPOOL_LINES_ENV = "CVS_LOG_POLL_SPOOL_LINES"


def spool_dir(env: Mapping[str, str], parent_pid: int) -> str | None:
    """The spool directory of the cvs console that started this worker, if there is one."""
    owner, _sep, directory = env.get(SPOOL_ENV, "").partition(":")
    if not directory or owner != str(parent_pid) or not os.path.isdir(directory):
        return None
    return directory


class SpoolWriter:
    """One call's records. ``lines`` tells whether records carry lines (the result then says so)."""

    def __init__(self, directory: str | None, host: str, task: str, lines: bool) -> None:
        self.directory = directory
        self.host = host
        self.task = task
        self.lines = bool(directory) and lines
        self._fd: int | None = None

    def write(self, lines: Sequence[tuple[str, str]], progress: Mapping[str, Any], last: bool) -> None:
        if not self.directory:
            return
        record = {"host": self.host, "task": self.task, "progress": dict(progress), "last": last}
        if self.lines:
            record["lines"] = [list(pair) for pair in lines]
        data = (json.dumps(record, default=str) + "\n").encode("utf-8", "surrogateescape")
        try:
            if self._fd is None:
                name = f"{time.time_ns():020d}-{os.getpid()}.jsonl"
                self._fd = os.open(os.path.join(self.directory, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:  # the console went away (its directory removed): results carry the status and lines
            self.directory = None
            self.lines = False
        if last:
            self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class SpoolReader:
    """The console's side: every complete record written since the last read, file by file in creation order."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._offsets: dict[str, int] = {}

    def read(self) -> list[dict]:
        records: list[dict] = []
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return records
        for name in names:
            path = os.path.join(self.directory, name)
            offset = self._offsets.get(name, 0)
            try:
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1
            done = False
            for raw in data[:end].splitlines():
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                records.append(record)
                done = done or bool(record.get("last"))
            self._offsets[name] = offset + end
            if done:
                self._offsets.pop(name, None)
                with contextlib.suppress(OSError):
                    os.unlink(path)
        return records
