# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A log reader kept running on a node between the rounds of one poll (see _log_reader.serve).

One round then costs a request and a reply over a session the poll already holds, instead of an ssh exec and a
Python start-up on the node. Anything unexpected (the process ended, a reply cut short or late) closes the
session; the caller then reads the round the one-shot way, which reports transport errors as before.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Any

_READ_SIZE = 1 << 20
# What the node's interpreter runs for a program kept there (a log reader, a run guard): a length line, then the
# program, read from the unbuffered stdin so that nothing sent right behind the program sits in a buffer the
# program does not look at.
SERVE_BOOTSTRAP = (
    "import sys; b = sys.stdin.buffer.raw; n = int(b.readline()); p = b''\n"
    "while len(p) < n: p += b.read(n - len(p)) or sys.exit(1)\n"
    "exec(p)"
)


class ReaderSession:
    """One remote reader process reached through ``argv`` (an ssh command line that runs the bootstrap)."""

    def __init__(self, argv: Sequence[bytes | str], program: bytes, end_of_reply: str) -> None:
        self._end = b"\n" + end_of_reply.encode("ascii") + b"\n"
        self._buffer = bytearray()
        self._searched = 0  # how much of the buffer holds no end line (a reply of megabytes comes in many reads)
        # its own session: a Ctrl-C at the terminal reaches ansible-playbook, which then ends this process itself
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pid = os.getpid()
        self.timed_out = False
        if not self._send(program):
            self.close()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _send(self, payload: bytes) -> bool:
        if self._proc is None or self._proc.stdin is None:
            return False
        try:
            self._proc.stdin.write(str(len(payload)).encode("ascii") + b"\n" + payload)
            self._proc.stdin.flush()
        except OSError:
            return False
        return True

    def send(self, request: bytes) -> bool:
        """Send one request; :func:`collect_replies` waits for its reply. False: the session broke (and is closed)."""
        if not self.alive or not self._send(request):
            self.close()
            return False
        return True

    def fileno(self) -> int | None:
        proc = self._proc
        return proc.stdout.fileno() if proc is not None and proc.stdout is not None else None

    def take_reply(self) -> str | None:
        """A whole reply already read into the buffer (its text without the end line), or None."""
        # a reply is never empty and always ends in a newline, so the end line follows one
        found = self._buffer.find(self._end, max(0, self._searched - len(self._end)))
        if found < 0:
            self._searched = len(self._buffer)
            return None
        reply = bytes(self._buffer[: found + 1])
        del self._buffer[: found + len(self._end)]
        self._searched = 0
        return reply.decode("utf-8", "replace")

    def read_available(self) -> bool:
        """Read what the reader sent (the descriptor is readable); False when the session ended (and is closed)."""
        fd = self.fileno()
        chunk = os.read(fd, _READ_SIZE) if fd is not None else b""
        if not chunk:
            self.close()
            return False
        self._buffer += chunk
        return True

    def kill(self) -> None:
        """End the session at once (the worker is going away): the node's reader sees its stdin close."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def collect_replies(sessions: Mapping[Any, ReaderSession], timeout: float) -> dict[Any, str | None]:
    """The reply of every session that was sent a request, waited for together for at most ``timeout`` seconds.

    A session whose reply did not come in time is closed with ``timed_out`` set; one that ended is closed; both
    get None.
    """
    replies: dict[Any, str | None] = {}
    waiting: dict[int, tuple[Any, ReaderSession]] = {}
    for key, session in sessions.items():
        reply = session.take_reply()
        fd = session.fileno() if reply is None else None
        if reply is not None or fd is None:
            replies[key] = reply
        else:
            waiting[fd] = (key, session)
    deadline = time.monotonic() + timeout
    # not select.select(): a worker of a run with many forks inherits enough descriptors that ours is >= 1024
    with selectors.DefaultSelector() as selector:
        for fd in waiting:
            selector.register(fd, selectors.EVENT_READ)
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for event, _mask in selector.select(remaining):
                key, session = waiting[event.fd]
                reply = session.take_reply() if session.read_available() else None
                if reply is None and session.alive:
                    continue
                replies[key] = reply
                selector.unregister(event.fd)
                del waiting[event.fd]
    for key, session in waiting.values():
        session.timed_out = True
        session.close()
        replies[key] = None
    return replies


def node_interpreter(task_vars: Mapping[str, Any], templar: Any) -> str:
    """The Python a program kept on the node runs under: the host's interpreter setting, else the discovered one."""
    interp = task_vars.get("ansible_python_interpreter")
    if interp:
        interp = str(templar.template(interp))
    if not interp or interp.startswith("auto"):
        interp = task_vars.get("ansible_facts", {}).get("discovered_interpreter_python") or "python3"
    return interp


def kept_session_argv(connection: Any, remote: str, become: bool = False) -> tuple[list[bytes] | None, str]:
    """ssh command line that runs ``remote`` on the connection's host, with its options and master; or why not.

    Only for the ssh connection without a password. With ``become`` the task's become wrapper is applied when it
    needs no password (a prompt cannot be answered on a kept session); without it, a become task gets none.
    """
    if getattr(connection, "transport", "") != "ssh" or not hasattr(connection, "_build_command"):
        return None, f"the {getattr(connection, 'transport', '?')} connection is not ssh"
    if connection.become and not become:
        return None, "the task uses become"
    try:
        if connection.get_option("password"):
            return None, "ssh logs in with a password"
        if connection.become:
            remote = connection.become.build_become_command(remote, connection._shell)
            if connection.become.expect_prompt():
                return None, f"become ({connection.become.name}) asks for a password"
        host = connection.get_option("host") or connection._play_context.remote_addr
        return connection._build_command(connection.get_option("ssh_executable"), "ssh", host, remote), ""
    except Exception as exc:  # any option or API this ansible-core lacks
        return None, f"the ssh command line could not be built ({exc!r})"
