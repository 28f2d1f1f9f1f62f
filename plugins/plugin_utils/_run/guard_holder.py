# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's end of a node guard (cvs.cluster.run_guard), run as a script of its own.

The action starts it in a session of its own, so that neither a Ctrl-C at the terminal nor a SIGKILL of the
playbook's process group (ansible-runner's and AWX's cancel) reaches it. It opens the session to the node (the
ssh command line the action built), sends the guard program, tells the action ``armed <pid>`` (or
``failed: <why>``) on one line, and then holds the session's stdin open for as long as the ansible-playbook
process lives. When that process is gone it closes stdin: the guard on the node reads its end and cleans up the
run. When the guard ends first (dispose disarmed it), so does the holder.

stdin: one JSON line ``{argv, program, armed, watch_pid, watch_start, ready_timeout, cleanup_timeout}``; ``armed``
begins the guard's ready line (module_utils/_run_guard.GUARD_ARMED).
Standard library only: it runs under whatever Python runs ansible-playbook.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import selectors
import signal
import subprocess
import sys
import time
from typing import Any, Optional


def start_time(pid: int) -> Optional[str]:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks): with the pid, names one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


class Watched:
    """The ansible-playbook process: a pidfd when the kernel has them, else its pid and start time."""

    def __init__(self, pid: int, start: Optional[str]) -> None:
        self.pid, self.start = pid, start
        self.fd: Optional[int] = None
        with contextlib.suppress(AttributeError, OSError):
            self.fd = os.pidfd_open(pid)  # type: ignore[attr-defined]
        if start is not None and start_time(pid) != start:
            self.fd = None  # already gone (the pid names another process now)
            self.start = ""

    def gone(self) -> bool:
        if self.fd is not None:
            return bool(select.select([self.fd], [], [], 0)[0])
        return self.start is None or start_time(self.pid) != self.start


def _armed_pid(out: bytearray, armed: str) -> Optional[int]:
    # a become wrapper prints its own line (BECOME-SUCCESS-...) before the guard's
    for line in bytes(out).decode("utf-8", "replace").splitlines():
        if line.startswith(armed + " "):
            with contextlib.suppress(ValueError):
                return int(line[len(armed) + 1 :].strip())
    return None


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    config: dict[str, Any] = json.loads(sys.stdin.readline())
    watched = Watched(int(config["watch_pid"]), config.get("watch_start"))
    proc = subprocess.Popen(
        config["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True
    )
    if proc.stdin is None or proc.stdout is None:  # for the type checker: both are pipes
        raise RuntimeError("the session's pipes are missing")
    program = config["program"].encode("utf-8")
    out, err = bytearray(), bytearray()
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    selector.register(proc.stderr, selectors.EVENT_READ)
    try:
        proc.stdin.write(str(len(program)).encode("ascii") + b"\n" + program)
        proc.stdin.flush()
    except OSError:
        pass
    deadline = time.monotonic() + float(config.get("ready_timeout", 60))
    pid = None
    while pid is None and time.monotonic() < deadline:
        # stderr and stdout are told apart only to name the error
        if not _drain_split(proc, selector, 0.2, out, err):
            break
        pid = _armed_pid(out, config["armed"])
    if pid is None:
        with contextlib.suppress(OSError):
            proc.kill()
        why = bytes(err).decode("utf-8", "replace").strip().splitlines()[-3:] or ["no answer from the node"]
        print("failed: " + " / ".join(why), flush=True)
        return 1
    print(f"armed {pid}", flush=True)
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    if watched.fd is not None:
        selector.register(watched.fd, selectors.EVENT_READ)
    while True:
        if not _drain_split(proc, selector, 0.5, out, err):
            return proc.wait()
        if watched.gone():
            break
    # the playbook is gone: the guard cleans up when its stdin ends; give it the time its cleanup needs
    if watched.fd is not None:
        selector.unregister(watched.fd)  # readable from now on: it would wake every select at once
    with contextlib.suppress(OSError):
        proc.stdin.close()
    end = time.monotonic() + float(config.get("cleanup_timeout", 120))
    while time.monotonic() < end and _drain_split(proc, selector, 0.5, out, err):
        pass
    with contextlib.suppress(OSError):
        proc.kill()
    return proc.wait()


def _drain_split(
    proc: subprocess.Popen[bytes], selector: selectors.BaseSelector, timeout: float, out: bytearray, err: bytearray
) -> bool:
    """Read stdout into ``out`` and stderr into ``err`` for up to ``timeout`` seconds; False once stdout ended.

    When stdout ends, what the session wrote to stderr is read to its end too (within a second): it says why,
    and the end of stdout may be seen before the stderr bytes written just before it."""
    stdout_ended = _read_ready(proc, selector, timeout, out, err)
    if stdout_ended:
        deadline = time.monotonic() + 1.0
        while proc.stderr in _registered(selector) and time.monotonic() < deadline:
            _read_ready(proc, selector, max(0.0, deadline - time.monotonic()), out, err)
    return not stdout_ended


def _registered(selector: selectors.BaseSelector) -> list[Any]:
    return [key.fileobj for key in selector.get_map().values()]


def _read_ready(
    proc: subprocess.Popen[bytes], selector: selectors.BaseSelector, timeout: float, out: bytearray, err: bytearray
) -> bool:
    """One select over the session's pipes; True when stdout ended."""
    stdout_ended = False
    for key, _events in selector.select(timeout):
        if isinstance(key.fileobj, int):
            continue  # the watched process: looked at by the caller
        chunk = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
        target = out if key.fileobj is proc.stdout else err
        if not chunk:
            selector.unregister(key.fileobj)
            stdout_ended = stdout_ended or key.fileobj is proc.stdout
            continue
        target.extend(chunk)
        del target[:-65536]
    return stdout_ended


if __name__ == "__main__":
    sys.exit(main())
