# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wire protocol between log_poll on the controller and its reader on the node (module_utils/_log_reader.py).

One place for what crosses the wire: the node's command line, the program sent to it (one-shot or kept), the
request, the reply and the cursor a reply carries. The action (plugins/action/log_poll.py), the round engine
(_log_poll/engine.py) and the benches (bench/_raw_reader.py) all use these; nothing else spells them.
"""

from __future__ import annotations

import ast
import json
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.cvs.cluster.plugins.module_utils import _log_reader
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import PROBES

# what the node's interpreter runs for one read: the program piped to its stdin (reader_program)
BOOTSTRAP = "import sys; exec(sys.stdin.buffer.read())"
END_OF_REPLY = _log_reader.END_OF_REPLY
# what a reply says of a log that a later request hands back to find the same bytes again
CURSOR_KEYS = ("offset", "dev", "ino", "head_len", "head_hash", "size", "mtime", "away")

_SOURCE: str | None = None


def reader_source() -> str:
    global _SOURCE
    if _SOURCE is None:
        with open(_log_reader.__file__, encoding="utf-8") as fh:
            _SOURCE = fh.read()
    return _SOURCE


def reader_command(interpreter: str, cmd_timeout: int, bootstrap: str = BOOTSTRAP, flags: str = "-S") -> str:
    """The node's command line for one read: the interpreter runs the program it is sent on stdin.

    ``-S``: the reader needs the standard library only, so `site` (site-packages and their .pth files) and its
    start-up time are skipped (``flags`` exists for the benches that measure that). The program is read with
    ``sys.stdin.buffer.read()`` rather than ``python3 -``, whose parser reads stdin one byte per read(2) call when
    PYTHONUNBUFFERED is set (as many container images do). ``timeout -s KILL`` bounds the whole process,
    interpreter start-up included; the reader itself stops at cmd_timeout and says where. A kept reader passes its
    own bootstrap and no bound (the controller ends it).
    """
    # an interpreter may carry arguments (`/usr/bin/env python3`)
    interp = " ".join(shlex.quote(part) for part in shlex.split(interpreter))
    bound = f"timeout -s KILL {cmd_timeout + 5} " if cmd_timeout else ""
    flags = f"{flags} " if flags else ""
    return f"{bound}{interp} {flags}-c {shlex.quote(bootstrap)}"


def reader_program(request: Mapping[str, Any]) -> bytes:
    """The program piped into the node's interpreter: the reader's source plus a main() call with the request.

    The request goes in as a Python literal, so the node's compiler parses it and the reader needs no json
    import (see request_literal).
    """
    return (reader_source() + f"\nmain({request_literal(request)})\n").encode("ascii")


def serve_program() -> bytes:
    """The program of a reader kept on the node: it answers one request per line (see _log_reader.serve)."""
    return (reader_source() + "\nserve()\n").encode("ascii")


def request_literal(request: Mapping[str, Any]) -> str:
    """The request as the ASCII Python literal the reader evaluates.

    A JSON round trip first reduces it to plain dicts, lists, strings, numbers, booleans and None (no tagged or
    other subclasses whose repr could differ); ascii() then keeps the program pure ASCII whatever the paths hold
    (lone surrogates included).
    """
    return ascii(json.loads(json.dumps(request)))


def parse_reply(stdout: str) -> dict | None:
    """The reader's reply (see _log_reader.main), chunks restored; None when stdout holds anything else.

    ast.literal_eval only builds literals (nothing is called or looked up), so garbage, a banner or a reply cut
    short can only fail to parse, and every line before the reply must belong to one of its logs.
    """
    *lines, last = stdout.strip().split("\n")
    try:
        reply = ast.literal_eval(last)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(reply, dict):
        return None
    logs = reply.get("logs", [])
    if not isinstance(logs, list) or not all(isinstance(log, dict) for log in logs):
        return None
    start = 0
    for log in logs:
        count = log.get("chunks", 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return None
        log["chunks"] = lines[start : start + count]
        start += count
    return reply if start == len(lines) else None


def reply_problem(host: str, reply: Mapping[str, Any], log_count: int) -> str | None:
    """Why a parsed reply cannot be used for a round over ``log_count`` logs (the reader's own timeout, a short
    answer); None when it can."""
    if "timeout" in reply:
        return f"{host}: {reply['timeout']}"
    answered = len(reply.get("logs", []))
    if answered != log_count:
        return f"{host}: reader answered for {answered} of {log_count} logs"
    return None


def cursor_of(log: Mapping[str, Any]) -> dict:
    """The cursor a reply's log entry carries, to hand back in the next request."""
    return {k: log[k] for k in CURSOR_KEYS if k in log}


def arm_request(paths: Iterable[str]) -> dict:
    """A request that only takes each log's cursor where it ends now (start=arm)."""
    return {"logs": [{"path": p, "offset": None} for p in paths], "max_bytes": 1024, "start": "arm"}


def read_request(
    paths: Iterable[str],
    cursors: Mapping[str, Mapping[str, Any]],
    *,
    start: str,
    max_bytes: int,
    run_age: float | None = None,
    idle_timeout: int | None = None,
    probes: Mapping[str, Any] | None = None,
    to_end: bool = False,
) -> dict:
    """A round's request: every log from its cursor (from ``start`` where it has none), then the probes asked.

    ``to_end`` (start=drain) also delivers a last line that has no newline yet.
    """
    logs = []
    for path in paths:
        cursor = dict(cursors.get(path) or {})
        cursor["path"] = path
        cursor.setdefault("offset", None)
        logs.append(cursor)
    request: dict[str, Any] = {"logs": logs, "max_bytes": max_bytes, "start": start}
    if run_age is not None:
        request["run_age"] = run_age
    if idle_timeout is not None:
        request["idle_timeout"] = idle_timeout
    if to_end:
        request["to_end"] = True
    for probe in PROBES:
        if probes and probes.get(probe):
            request[probe] = probes[probe]
    return request
