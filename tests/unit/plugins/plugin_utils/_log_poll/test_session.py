"""ReaderSession against a real local reader process (the same bootstrap and serve() the nodes run)."""

from __future__ import annotations

import base64
import os
import sys
import time
from pathlib import Path

from ansible_collections.cvs.cluster.plugins.module_utils._log_reader import END_OF_REPLY
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.protocol import (
    parse_reply,
    reader_source,
    request_literal,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.session import (
    SERVE_BOOTSTRAP,
    ReaderSession,
    collect_replies,
)

PROGRAM = (reader_source() + "\nserve()\n").encode("ascii")


def local_session(bootstrap: str = SERVE_BOOTSTRAP, program: bytes = PROGRAM) -> ReaderSession:
    return ReaderSession([sys.executable, "-S", "-c", bootstrap], program, END_OF_REPLY)


def exchange(session: ReaderSession, request: bytes, timeout: float) -> str | None:
    """One request and its reply, as the transport sends them (a fleet sends many before it collects)."""
    if not session.send(request):
        return None
    return collect_replies({"host": session}, timeout)["host"]


def request(path: Path) -> bytes:
    return request_with(path, {"offset": None})


def request_with(path: Path, cursor: dict, max_bytes: int = 65536) -> bytes:
    return request_literal({"logs": [{**cursor, "path": str(path)}], "max_bytes": max_bytes,
                            "start": "beginning", "cmd_timeout": 10}).encode("ascii")  # fmt: skip


def test_rounds_over_one_session_deliver_each_line_once(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"one\ntwo\nhalf")
    session = local_session()
    try:
        first = parse_reply(exchange(session, request(log), 10) or "")
        assert first is not None
        (state,) = first["logs"]
        assert b"".join(base64.b64decode(c) for c in state["chunks"]) == b"one\ntwo\n"
        pid = session._proc.pid if session._proc else None
        with log.open("ab") as fh:
            fh.write(b"-line\nthree\n")
        cursor = {k: v for k, v in state.items() if k in ("offset", "dev", "ino", "head_len", "head_hash")}
        second = parse_reply(exchange(session, request_with(log, cursor), 10) or "")
        assert second is not None
        assert b"".join(base64.b64decode(c) for c in second["logs"][0]["chunks"]) == b"half-line\nthree\n"
        assert session._proc is not None and session._proc.pid == pid  # the same reader answered both
    finally:
        session.close()
    assert not session.alive


def test_a_reader_that_dies_closes_the_session(tmp_path: Path) -> None:
    session = local_session(program=b"import sys\nsys.exit(3)\n")
    try:
        assert exchange(session, request(tmp_path / "x.log"), 5) is None
        assert not session.alive and not session.timed_out
    finally:
        session.close()


def test_a_reply_that_never_ends_times_out(tmp_path: Path) -> None:
    session = local_session(program=b"import sys, time\nsys.stdout.write('partial\\n'); sys.stdout.flush()\n"
                                    b"time.sleep(60)\n")  # fmt: skip
    started = time.monotonic()
    try:
        assert exchange(session, request(tmp_path / "x.log"), 1) is None
        assert session.timed_out and not session.alive
        assert time.monotonic() - started < 10
    finally:
        session.close()


def test_session_remembers_the_process_that_opened_it() -> None:
    session = local_session()
    try:
        assert session.pid == os.getpid()
    finally:
        session.close()


def test_descriptors_above_1024_work(tmp_path: Path) -> None:
    """A worker of a run with many forks holds many descriptors: the session's pipe lands above 1024."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    log = tmp_path / "job.log"
    log.write_bytes(b"line\n")
    session = local_session()
    try:
        assert session._proc is not None and session._proc.stdout is not None
        assert session._proc.stdout.fileno() >= 1024
        reply = parse_reply(exchange(session, request(log), 10) or "")
        assert reply is not None and reply["logs"][0]["offset"] == 5
    finally:
        session.close()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_reply_of_megabytes_read_in_many_pieces_is_whole(tmp_path: Path) -> None:
    """The end line is looked for in what came since the last look, also across the boundary of two reads."""
    log = tmp_path / "job.log"
    body = b"".join(b"%07d %s\n" % (n, b"x" * 92) for n in range(30000))  # 3 MB, several pipe reads
    log.write_bytes(body)
    session = local_session()
    try:
        for _ in range(2):  # the second reply comes after the first in the same buffer's life
            reply = parse_reply(exchange(session, request_with(log, {"offset": None}, 4 * 1024 * 1024), 30) or "")
            assert reply is not None
            assert b"".join(base64.b64decode(c) for c in reply["logs"][0]["chunks"]) == body
    finally:
        session.close()


def test_an_end_line_split_between_two_reads_is_found(tmp_path: Path) -> None:
    split = len(END_OF_REPLY) // 2
    program = (
        "import sys, time\n"
        f"sys.stdout.write('reply\\n{END_OF_REPLY[:split]}'); sys.stdout.flush(); time.sleep(0.3)\n"
        f"sys.stdout.write('{END_OF_REPLY[split:]}\\n'); sys.stdout.flush(); time.sleep(30)\n"
    ).encode("ascii")
    session = local_session(program=program)
    try:
        assert exchange(session, request(tmp_path / "x.log"), 10) == "reply\n"
    finally:
        session.close()
