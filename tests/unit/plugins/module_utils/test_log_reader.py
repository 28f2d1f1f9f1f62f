"""The remote reader of log_poll (module_utils/_log_reader.py) on local temp files."""

from __future__ import annotations

import base64
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.module_utils import _log_reader as reader
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll import protocol
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.session import SERVE_BOOTSTRAP

MIB = 1024 * 1024


class Tail:
    """Drives read_log round after round like the controller does (cursor in, cursor out)."""

    KEYS = protocol.CURSOR_KEYS

    def __init__(self, path: Path, max_bytes: int = 64 * 1024, start: str = "beginning") -> None:
        self.path = str(path)
        self.max_bytes = max_bytes
        self.start = start
        self.cursor: dict = {"offset": None}
        self.data = b""
        self.replies: list[dict] = []

    def read(self) -> dict:
        reply = reader.read_log(dict(self.cursor, path=self.path), self.max_bytes, self.start)
        self.replies.append(reply)
        self.start = "beginning"
        chunk = b"".join(base64.b64decode(c) for c in reply["chunks"])
        self.data += chunk
        reply["data"] = chunk
        if reply["state"] == "ok":
            self.cursor = {k: reply[k] for k in self.KEYS if k in reply}
        return reply

    def read_until_quiet(self, limit: int = 100) -> None:
        for _ in range(limit):
            reply = self.read()
            if not reply["data"] and not reply.get("more"):
                return
        raise AssertionError("reader never caught up")

    def events(self) -> list[str]:
        return [e for r in self.replies for e in r["events"] if not e.startswith("drained:")]


def numbered(first: int, last: int, width: int = 0) -> bytes:
    return b"".join(b"line %06d %s\n" % (i, b"x" * width) for i in range(first, last + 1))


def test_first_read_from_beginning_only_complete_lines(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"one\ntwo\nthr")
    tail = Tail(log)
    reply = tail.read()
    assert reply["state"] == "ok"
    assert reply["data"] == b"one\ntwo\n"
    assert reply["offset"] == 8 and reply["size"] == 11
    assert not reply["more"] and not reply["long_line"]
    with log.open("ab") as fh:
        fh.write(b"ee\n")
    assert tail.read()["data"] == b"three\n"  # the partial line, once complete
    assert tail.data == b"one\ntwo\nthree\n"
    assert tail.read()["data"] == b""


@pytest.mark.parametrize("mode", ["end", "arm"])
def test_start_at_end_skips_existing_lines_but_not_a_partial_one(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"old 1\nold 2\npart")
    tail = Tail(log, start=mode)
    reply = tail.read()
    assert reply["data"] == b""
    assert reply["offset"] == len(b"old 1\nold 2\n")
    with log.open("ab") as fh:
        fh.write(b"ial\nnew\n")
    tail.read()
    assert tail.data == b"partial\nnew\n"


def test_crlf_nul_and_invalid_utf8_are_delivered_byte_exact(tmp_path: Path) -> None:
    content = b"crlf line\r\nnul \x00 byte\nbad \xff\xfe utf8\n\xe2\x82\n"
    log = tmp_path / "job.log"
    log.write_bytes(content)
    tail = Tail(log)
    tail.read_until_quiet()
    assert tail.data == content


def test_more_flag_when_max_bytes_cuts_the_read(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    content = numbered(1, 1000, width=50)  # ~62 KB
    log.write_bytes(content)
    tail = Tail(log, max_bytes=4096)
    first = tail.read()
    assert first["more"] is True
    assert len(first["data"]) <= 4096 and first["data"].endswith(b"\n")
    tail.read_until_quiet()
    assert tail.data == content
    assert tail.replies[-1]["more"] is False


def test_to_end_delivers_the_last_line_without_its_newline_only_in_the_last_window(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(numbered(1, 100) + b"Killed: rank 2 (no newl")
    first = reader.read_log({"path": str(log), "offset": None}, 1024, "beginning", to_end=True)
    data = base64.b64decode(first["chunks"][0])
    assert first["more"] and data.endswith(b"\n")  # a window cut by max_bytes still ends at a newline
    cursor = dict(protocol.cursor_of(first), path=str(log))
    rest = reader.read_log(cursor, 64 * 1024, "beginning", to_end=True)
    assert not rest["more"]
    assert data + base64.b64decode(rest["chunks"][0]) == log.read_bytes()
    assert rest["offset"] == log.stat().st_size
    normal = reader.read_log(cursor, 64 * 1024, "beginning")
    assert base64.b64decode(normal["chunks"][0]).endswith(b"line 000100 \n")


def test_long_line_without_newline_is_split_with_bounded_memory(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    big = os.urandom(5 * MIB + 100).replace(b"\n", b"x")
    log.write_bytes(b"before\n" + big)
    tail = Tail(log, max_bytes=MIB)
    sizes = []
    for _ in range(10):
        reply = tail.read()
        sizes.append(len(reply["data"]))
    assert max(sizes) <= MIB
    assert any(r["long_line"] for r in tail.replies)
    # 5 MiB + 100 bytes of one line in 1 MiB windows: the last 100 bytes wait for their newline
    assert tail.data == b"before\n" + big[: 5 * MIB]
    with log.open("ab") as fh:
        fh.write(b"\nafter\n")
    tail.read_until_quiet()
    assert tail.data == b"before\n" + big + b"\nafter\n"


def test_missing_file_that_appears_later_is_read_from_its_first_byte(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    tail = Tail(log, start="end")
    reply = tail.read()
    assert reply["state"] == "missing" and reply["error"] == "no such file"
    log.write_bytes(b"first\nsecond\n")
    tail.read()  # the controller sends start=beginning after the first read
    assert tail.data == b"first\nsecond\n"


def test_directory_and_unreadable_paths_report_a_state(tmp_path: Path) -> None:
    reply = reader.read_log({"path": str(tmp_path), "offset": None}, 4096, "beginning")
    assert reply["state"] == "directory" and reply["error"] == "path is a directory"
    notdir = tmp_path / "file"
    notdir.write_text("x")
    reply = reader.read_log({"path": str(notdir / "sub.log"), "offset": None}, 4096, "beginning")
    assert reply["state"] == "unreadable" and reply["error"]


def test_rename_and_recreate_drains_the_old_file_first(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(numbered(1, 10))
    tail = Tail(log)
    tail.read()
    with log.open("ab") as fh:
        fh.write(numbered(11, 20))  # written before rotation, not yet read
    log.rename(tmp_path / "train.log.1")
    log.write_bytes(numbered(21, 30))
    reply = tail.read()
    assert "rotated" in reply["events"]
    assert any(e.startswith("drained:") for e in reply["events"])
    tail.read_until_quiet()
    assert tail.data == numbered(1, 30)
    assert tail.events().count("rotated") == 1


def test_rotated_file_larger_than_max_bytes_is_drained_over_several_rounds(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(numbered(1, 10))
    tail = Tail(log, max_bytes=2048)
    tail.read()
    with log.open("ab") as fh:
        fh.write(numbered(11, 600, width=20))
    log.rename(tmp_path / "train.log.1")
    log.write_bytes(numbered(601, 610))
    first = tail.read()
    assert first["away"] is True and first["more"] is True
    tail.read_until_quiet()
    assert tail.data == numbered(1, 10) + numbered(11, 600, width=20) + numbered(601, 610)
    assert tail.events().count("rotated") == 1
    assert "away" not in tail.cursor


def test_old_file_is_followed_while_the_new_file_is_empty(tmp_path: Path) -> None:
    """logrotate `create` before the writer reopens: the writer keeps appending to the renamed file."""
    log = tmp_path / "train.log"
    old = tmp_path / "train.log.1"
    with log.open("ab", buffering=0) as writer:
        writer.write(numbered(1, 5))
        tail = Tail(log)
        tail.read()
        log.rename(old)
        log.write_bytes(b"")
        writer.write(numbered(6, 8))
        tail.read()
        writer.write(numbered(9, 10))
        tail.read()
        assert tail.cursor.get("away") is True
    log.write_bytes(numbered(11, 12))  # the writer reopened
    tail.read_until_quiet()
    assert tail.data == numbered(1, 12)


def test_rotated_away_file_that_is_gone_restarts_at_zero(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(numbered(1, 3))
    tail = Tail(log)
    tail.read()
    fresh = tmp_path / "fresh"
    fresh.write_bytes(numbered(4, 5))
    fresh.rename(log)  # replaces (and deletes) the old file: nothing left to drain
    reply = tail.read()
    assert reply["events"] == ["rotated"]
    assert tail.data == numbered(1, 5)


def test_deleted_and_recreated_on_the_same_inode_counts_as_truncated(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(numbered(1, 3))
    tail = Tail(log)
    tail.read()
    log.unlink()
    log.write_bytes(b"new run\n")  # the file system may hand out the same inode number again
    reply = tail.read()
    assert reply["events"] in (["rotated"], ["truncated"])
    assert tail.data == numbered(1, 3) + b"new run\n"


def test_copytruncate_drains_the_sibling_copy(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    with log.open("ab", buffering=0) as writer:  # the writer keeps its O_APPEND descriptor
        writer.write(numbered(1, 10))
        tail = Tail(log)
        tail.read()
        writer.write(numbered(11, 20))
        (tmp_path / "train.log.1").write_bytes(log.read_bytes())  # copy ...
        os.truncate(log, 0)  # ... then truncate
        writer.write(numbered(21, 25))
        reply = tail.read()
        assert "truncated" in reply["events"]
        writer.write(numbered(26, 30))
        tail.read_until_quiet()
    assert tail.data == numbered(1, 30)


def test_copytruncate_prefers_the_newest_copy(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    header = b"banner without timestamp\n" * 50  # every run starts with the same 1 KiB
    older = tmp_path / "train.log.2"
    older.write_bytes(header + b"older run\n" * 200)
    os.utime(older, (time.time() - 3600, time.time() - 3600))
    log.write_bytes(header + numbered(1, 5))
    tail = Tail(log)
    tail.read()
    with log.open("ab") as fh:
        fh.write(numbered(6, 9))
    (tmp_path / "train.log.1").write_bytes(log.read_bytes())
    os.truncate(log, 0)
    log.write_bytes(numbered(10, 11))
    tail.read_until_quiet()
    assert tail.data == header + numbered(1, 11)


def test_truncation_without_copy_restarts_at_zero(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(numbered(1, 50))
    tail = Tail(log)
    tail.read()
    log.write_bytes(b"job restarted\n")
    reply = tail.read()
    assert reply["events"] == ["truncated"]
    assert reply["data"] == b"job restarted\n"


def test_truncation_is_seen_when_the_file_shrinks_below_its_head_only(tmp_path: Path) -> None:
    """Cursor 400 with 500 bytes seen (partial last line): rewritten to 450 bytes must count as truncated."""
    log = tmp_path / "train.log"
    log.write_bytes(b"a" * 399 + b"\n" + b"b" * 100)
    tail = Tail(log)
    tail.read()
    assert tail.cursor["offset"] == 400 and tail.cursor["head_len"] == 500
    log.write_bytes(b"c" * 449 + b"\n")
    reply = tail.read()
    assert "truncated" in reply["events"]
    assert reply["data"] == b"c" * 449 + b"\n"


def test_rotated_lookup_requires_the_same_head(tmp_path: Path) -> None:
    """A reused inode number holding other content is not mistaken for the rotated file."""
    log = tmp_path / "train.log"
    other = tmp_path / "other.log"
    other.write_bytes(b"unrelated content\n")
    st = other.stat()
    spec = {"dev": st.st_dev, "ino": st.st_ino, "head_len": 5, "head_hash": "0" * 40, "offset": 0}
    assert reader._find_rotated(str(log), spec) is None
    import hashlib

    spec["head_hash"] = hashlib.sha1(b"unrel").hexdigest()
    assert reader._find_rotated(str(log), spec) == str(other)


def test_run_round_probes_before_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A marker written just before the exit code file is in the same round's bytes."""
    log = tmp_path / "job.log"
    log.write_bytes(b"working\n")
    code = tmp_path / "exit_code"

    def job_finishes_during_probe(path: str) -> dict:
        with log.open("ab") as fh:
            fh.write(b"DONE\n")
        code.write_text("0\n")
        return {"present": True, "code": 0}

    monkeypatch.setattr(reader, "probe_exit_code", job_finishes_during_probe)
    reply = reader.run_round({"logs": [{"path": str(log), "offset": None}], "exit_code_file": str(code)})
    data = b"".join(base64.b64decode(c) for c in reply["logs"][0]["chunks"])
    assert data.endswith(b"DONE\n")


def test_exit_code_probe(tmp_path: Path) -> None:
    path = tmp_path / "rc"
    assert reader.probe_exit_code(str(path)) == {"present": False}
    path.write_text("")
    assert reader.probe_exit_code(str(path)) == {"present": False, "empty": True}  # a job that died writing it
    path.write_text("3\n")
    assert reader.probe_exit_code(str(path)) == {"present": True, "code": 3}
    path.write_text("oops")
    assert reader.probe_exit_code(str(path))["code"] is None


def test_artifact_probe(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    assert reader.probe_artifact(str(path)) == {"exists": False, "size": 0}
    path.write_text("{}")
    assert reader.probe_artifact(str(path)) == {"exists": True, "size": 2}
    assert reader.probe_artifact(str(tmp_path))["exists"] is False


@pytest.fixture
def http_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_probe_statuses_and_no_proxy(http_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # a dead proxy must not be used
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    assert reader.probe_http(http_server + "/health", 5) == {"status": 200}
    assert reader.probe_http(http_server + "/nope", 5) == {"status": 404}
    refused = reader.probe_http("http://127.0.0.1:9/", 2)
    assert refused["status"] is None and refused["error"]


def test_fifo_read_is_cut_off_by_cmd_timeout(tmp_path: Path) -> None:
    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)
    started = time.monotonic()
    reply = reader.run_round({"logs": [{"path": str(fifo), "offset": None}], "cmd_timeout": 1})
    assert time.monotonic() - started < 5
    assert "cmd_timeout (1s) expired while reading " + str(fifo) in reply["timeout"]


def test_shipped_program_runs_with_python_stdin(tmp_path: Path) -> None:
    """The action plugin ships the source plus a main() call to `python3 -S`: that program prints one literal."""
    # a name that is not ASCII, not even UTF-8: the program stays ASCII and the path survives the round trip
    log = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), "jöb-\xff.log".encode("latin-1"))))
    log.write_bytes(b"hello \xe9\n")
    request = {"logs": [{"path": str(log), "offset": None}], "max_bytes": 4096, "start": "beginning"}
    program = protocol.reader_program(request)
    program.decode("ascii")
    command = protocol.reader_command(sys.executable, 5)
    proc = subprocess.run(["/bin/sh", "-c", command], input=program, capture_output=True, check=True)
    assert proc.stderr == b""
    proc.stdout.decode("ascii")
    reply = protocol.parse_reply(proc.stdout.decode())
    assert reply is not None
    assert reply["logs"][0]["path"] == str(log)
    assert base64.b64decode(reply["logs"][0]["chunks"][0]) == b"hello \xe9\n"
    assert reply == json.loads(json.dumps(reader.run_round(request)))


def test_shipped_program_imports_nothing_slow(tmp_path: Path) -> None:
    """Start-up is most of a round on the node: base64 and json (re), signal (enum), hashlib (OpenSSL) stay out."""
    log = tmp_path / "job.log"
    log.write_bytes(b"x" * 2000 + b"\n")
    request = {"logs": [{"path": str(log), "offset": None}], "cmd_timeout": 5, "exit_code_file": str(tmp_path / "rc")}
    command = protocol.reader_command(f"{sys.executable} -X importtime", 5)
    program = protocol.reader_program(request)
    proc = subprocess.run(["/bin/sh", "-c", command], input=program, capture_output=True, check=True)
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines()}
    assert "binascii" in imported
    assert not imported & {"re", "json", "base64", "hashlib", "_hashlib", "signal", "enum", "site", "__future__"}
    assert protocol.parse_reply(proc.stdout.decode())["logs"][0]["head_len"] == 1024


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "Welcome banner",
        "{'logs': [{'path': '/x', 'chunks': 0",  # cut short
        "aGVsbG8K\n",  # cut short after a chunk line: the reply itself is missing
        "aGVsbG8K\n{'logs': [{'path': '/x', 'chunks': 2}]}",  # a chunk missing
        "Welcome banner\n{'logs': [{'path': '/x', 'chunks': 0}]}",  # a line that belongs to no log
        "aGVsbG8K\n{'logs': [{'path': '/x', 'chunks': True}]}",
        "{'logs': [{'path': '/x', 'chunks': -1}]}",
        "[" * 100_000 + "]" * 100_000,
        "{'logs': [1]}",
        "{'logs': 'x'}",
        "42",
        "{'a': __import__('os').system('false')}",
        "{'a': 1}\x00",
        "{'a': '\udcff'}",
    ],
)
def test_garbage_on_stdout_is_no_reply(stdout: str) -> None:
    assert protocol.parse_reply(stdout) is None


def test_reply_parses_back_to_what_the_reader_returned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = bytes(b for b in range(256) if b != 10) * 4 + b"\n"  # every other byte value, 1021 bytes
    (tmp_path / "a.log").write_bytes(line + b"more\n")
    (tmp_path / "b.log").write_bytes(b"")
    logs = [{"path": str(tmp_path / n), "offset": None} for n in ("a.log", "none", "b.log", "a.log")]
    request = {"logs": logs, "max_bytes": 1024}
    reader.main(request)
    reply = protocol.parse_reply(capsys.readouterr().out)
    assert reply == reader.run_round(request)
    assert [len(log["chunks"]) for log in reply["logs"]] == [1, 0, 0, 1]
    assert base64.b64decode(reply["logs"][0]["chunks"][0]) == line


# ---- two rotations within one delay, losses, the default start (issue 15) ------------------------------------


def test_two_rotations_between_reads_read_the_middle_file_by_identity(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(numbered(1, 100))
    tail = Tail(log)
    tail.read()
    with open(log, "ab") as fh:
        fh.write(numbered(101, 200))
    os.rename(log, f"{log}.1")  # rotation 1
    log.write_bytes(numbered(201, 300))
    os.rename(f"{log}.1", f"{log}.2")  # rotation 2, logrotate style (all within one clock tick, likely)
    os.rename(log, f"{log}.1")
    log.write_bytes(numbered(301, 400))
    (tmp_path / "app.log.3.gz").write_bytes(b"\x1f\x8b not a log")  # compressed: never read
    tail.read_until_quiet()
    assert tail.data == numbered(1, 400)
    assert tail.events() == ["rotated"]
    assert not any(r.get("lost") for r in tail.replies)


def test_the_middle_file_larger_than_max_bytes_is_read_over_several_reads(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(numbered(1, 10))
    tail = Tail(log, max_bytes=4096)
    tail.read()
    os.rename(log, f"{log}.1")
    log.write_bytes(numbered(11, 500, width=20))
    os.rename(f"{log}.1", f"{log}.2")
    os.rename(log, f"{log}.1")
    log.write_bytes(numbered(501, 510))
    tail.read_until_quiet()
    assert tail.data == numbered(1, 10) + numbered(11, 500, width=20) + numbered(501, 510)
    assert tail.events() == ["rotated"]


def test_a_rotated_file_gone_before_it_was_read_is_a_loss_with_a_byte_count(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(numbered(1, 1000))
    tail = Tail(log, max_bytes=4096)
    tail.read()
    read = len(tail.data)
    os.rename(log, f"{log}.1")
    log.write_bytes(numbered(2001, 2010))  # before the unlink: a new inode
    os.unlink(f"{log}.1")
    reply = tail.read()
    assert reply["lost"] == {"bytes": len(numbered(1, 1000)) - read, "why": "the rotated file is gone"}
    tail.read_until_quiet()
    assert tail.data.endswith(numbered(2001, 2010))


def test_truncation_without_a_copy_is_a_loss(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(numbered(1, 1000))
    tail = Tail(log, max_bytes=4096)
    tail.read()
    read = len(tail.data)
    log.write_bytes(b"")
    with open(log, "ab") as fh:
        fh.write(b"fresh\n")
    reply = tail.read()
    assert reply["lost"]["bytes"] == len(numbered(1, 1000)) - read
    assert "truncated" in reply["events"]


def test_auto_start_reads_a_fresh_log_from_byte_0_and_a_stale_one_from_its_end(tmp_path: Path) -> None:
    stale, fresh = tmp_path / "stale.log", tmp_path / "fresh.log"
    stale.write_bytes(b"old run\nJOB DONE\npartial")
    fresh.write_bytes(b"new run\n")
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))
    run_started = time.time() - 60
    out = reader.read_log({"path": str(stale), "offset": None}, 4096, "auto", run_started)
    assert (out["offset"], out["chunks"], out["events"], out["stale_bytes"]) == (17, [], ["stale"], 17)
    out = reader.read_log({"path": str(fresh), "offset": None}, 4096, "auto", run_started)
    assert out["offset"] == 8 and out["events"] == []
    out = reader.read_log({"path": str(stale), "offset": None}, 4096, "auto", None)  # run start unknown
    assert out["offset"] == 17 and out["events"] == [] and out["chunks"]


def test_run_round_takes_the_run_age_by_the_controllers_clock(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"JOB DONE\n")
    old = time.time() - 600
    os.utime(log, (old, old))
    spec = {"path": str(log), "offset": None}
    reply = reader.run_round({"logs": [spec], "max_bytes": 4096, "start": "auto", "run_age": 60})
    assert reply["logs"][0]["events"] == ["stale"]
    reply = reader.run_round({"logs": [spec], "max_bytes": 4096, "start": "auto", "run_age": 6000})
    assert reply["logs"][0]["events"] == [] and reply["logs"][0]["offset"] == 9


def test_a_kept_reader_ends_when_nothing_comes_for_its_idle_timeout(tmp_path: Path) -> None:
    program = protocol.serve_program()
    cmd = protocol.reader_command(sys.executable, 0, SERVE_BOOTSTRAP)
    proc = subprocess.Popen(["/bin/sh", "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    request = {"logs": [], "max_bytes": 4096, "start": "auto", "idle_timeout": 1}
    literal = protocol.request_literal(request).encode("ascii")
    # the program and the first request in one write: nothing may sit unseen in a buffer
    proc.stdin.write(b"%d\n%s%d\n%s" % (len(program), program, len(literal), literal))
    proc.stdin.flush()
    assert reader.END_OF_REPLY in proc.stdout.readline().decode() + proc.stdout.readline().decode()
    assert proc.wait(timeout=30) == 0  # stdin still open: it ended on its own


def test_fs_full_reports_a_file_system_without_space_or_inodes(monkeypatch, tmp_path) -> None:
    assert reader.fs_full(str(tmp_path / "job.log")) is None  # the test's own file system has room
    assert reader.fs_full("/nonexistent-dir/job.log") is None

    def fake(free_blocks: int, free_inodes: int, files: int = 100):
        return lambda _p: os.statvfs_result((4096, 4096, 16, 0, free_blocks, files, 0, free_inodes, 0, 255))

    monkeypatch.setattr(reader.os, "statvfs", fake(0, 10))
    assert reader.fs_full("/d/job.log") == {"free": 0, "size": 65536, "free_inodes": 10}
    monkeypatch.setattr(reader.os, "statvfs", fake(3, 0))
    assert reader.fs_full("/d/job.log") == {"free": 12288, "size": 65536, "free_inodes": 0}
    monkeypatch.setattr(reader.os, "statvfs", fake(3, 0, files=0))  # no inode accounting (btrfs)
    assert reader.fs_full("/d/job.log") is None
    monkeypatch.setattr(reader.os, "statvfs", fake(3, 5))
    assert reader.fs_full("/d/job.log") is None
