# Copyright: cvs.cluster contributors
# Apache License 2.0 (see galaxy.yml)
"""Remote side of cvs.cluster.log_poll: one bounded read round on one node.

This file is self-contained (standard library only) because the log_poll
action plugin ships its source to the node and runs it with ``python3 -``
on every round; the log_poll module imports it too. Keep it small and fast:
it is on the hot path of every poll round of every host.

A cursor is ``{offset, dev, ino, head_len, head_hash}``. Only complete lines
(ending in ``\\n``) are returned, so ``offset`` always sits just past a
newline. A file whose device/inode changed was rotated (the old file is
looked up by inode in the same directory and drained first); a file that
shrank below the offset or whose first bytes changed was truncated (a sibling
copy holding our head is drained first). Both restart the cursor at 0.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import stat
import sys

HEAD_BYTES = 1024
_SIBLING_SCAN_LIMIT = 256


class ReadTimeout(Exception):
    pass


def _head_hash(fd: int, length: int) -> str:
    return hashlib.sha1(os.pread(fd, length, 0)).hexdigest() if length else ""


def _read_complete(fd: int, start: int, end: int, max_bytes: int) -> tuple[bytes, bool]:
    """Bytes from start up to the last newline before min(end, start+max_bytes).

    Returns (data, long_line): when a full max_bytes window holds no newline
    at all, the window is returned whole and long_line is True so a line
    longer than max_bytes cannot stall the cursor or grow memory.
    """
    want = min(end - start, max_bytes)
    if want <= 0:
        return b"", False
    data = os.pread(fd, want, start)
    cut = data.rfind(b"\n")
    if cut >= 0:
        return data[: cut + 1], False
    if len(data) >= max_bytes:
        return data, True
    return b"", False


def _drain(path: str, offset: int, max_bytes: int) -> bytes:
    """Remaining complete lines of a rotated-away file, from offset."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return b""
    try:
        size = os.fstat(fd).st_size
        data, _long = _read_complete(fd, offset, size, max_bytes)
        return data
    finally:
        os.close(fd)


def _find_sibling(path: str, match) -> str | None:
    directory = os.path.dirname(path) or "."
    try:
        entries = os.scandir(directory)
    except OSError:
        return None
    with entries:
        for count, entry in enumerate(entries):
            if count >= _SIBLING_SCAN_LIMIT:
                break
            full = os.path.join(directory, entry.name)
            if full == path:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and match(full, st):
                return full
    return None


def _find_rotated(path: str, dev: int, ino: int) -> str | None:
    return _find_sibling(path, lambda _full, st: st.st_dev == dev and st.st_ino == ino)


def _find_copy(path: str, cursor: dict) -> str | None:
    head_len, head_hash, offset = cursor.get("head_len", 0), cursor.get("head_hash", ""), cursor["offset"]
    base = os.path.basename(path)
    if not head_len:
        return None

    def same_head(full: str, st: os.stat_result) -> bool:
        if not os.path.basename(full).startswith(base) or st.st_size < offset:
            return False
        try:
            with open(full, "rb") as fh:
                return hashlib.sha1(fh.read(head_len)).hexdigest() == head_hash
        except OSError:
            return False

    return _find_sibling(path, same_head)


def read_log(spec: dict, max_bytes: int, start: str) -> dict:
    """One read of one log. ``spec`` is the cursor sent by the controller (offset None = first sight)."""
    path = spec["path"]
    out: dict = {"path": path, "events": [], "chunks": [], "long_line": False}
    try:
        st = os.stat(path)
    except FileNotFoundError:
        out.update(state="missing", error="no such file")
        return out
    except OSError as exc:
        out.update(state="unreadable", error=str(exc))
        return out
    if stat.S_ISDIR(st.st_mode):
        out.update(state="directory", error="path is a directory")
        return out
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        out.update(state="unreadable", error=exc.strerror or str(exc))
        return out
    try:
        st = os.fstat(fd)
        size = st.st_size
        offset = spec.get("offset")
        chunks = out["chunks"]
        if offset is None:
            offset = size if start in ("end", "arm") else 0
            if offset:
                # never begin mid-line: skip to just past the last newline before size
                tail = os.pread(fd, min(offset, 65536), offset - min(offset, 65536))
                cut = tail.rfind(b"\n")
                offset = offset - len(tail) + cut + 1 if cut >= 0 else offset
        elif (spec.get("dev"), spec.get("ino")) != (st.st_dev, st.st_ino):
            out["events"].append("rotated")
            old = _find_rotated(path, spec.get("dev"), spec.get("ino"))
            if old:
                chunks.append(_drain(old, offset, max_bytes))
                out["events"].append("drained:" + old)
            offset = 0
        else:
            head_len = spec.get("head_len", 0)
            if size < offset or (head_len and size >= head_len and _head_hash(fd, head_len) != spec.get("head_hash")):
                out["events"].append("truncated")
                copy = _find_copy(path, spec)
                if copy:
                    chunks.append(_drain(copy, offset, max_bytes))
                    out["events"].append("drained:" + copy)
                offset = 0
        data, long_line = _read_complete(fd, offset, size, max_bytes)
        if data:
            chunks.append(data)
        head_len = min(size, HEAD_BYTES)
        out.update(
            state="ok",
            dev=st.st_dev,
            ino=st.st_ino,
            size=size,
            offset=offset + len(data),
            head_len=head_len,
            head_hash=_head_hash(fd, head_len),
            long_line=long_line,
        )
        out["chunks"] = [base64.b64encode(c).decode("ascii") for c in chunks if c]
        return out
    finally:
        os.close(fd)


def probe_exit_code(path: str) -> dict:
    try:
        with open(path, "rb") as fh:
            text = fh.read(64).decode("ascii", "replace").strip()
    except FileNotFoundError:
        return {"present": False}
    except OSError as exc:
        return {"present": False, "error": str(exc)}
    if not text:
        return {"present": False}
    try:
        return {"present": True, "code": int(text.split()[0])}
    except ValueError:
        return {"present": True, "code": None, "error": f"not an exit code: {text[:40]!r}"}


def probe_http(url: str, timeout: float) -> dict:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return {"status": resp.status}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code}
    except Exception as exc:  # connection refused, timeouts, bad URL: not ready yet
        return {"status": None, "error": str(exc)}


def probe_artifact(path: str) -> dict:
    try:
        st = os.stat(path)
    except OSError:
        return {"exists": False, "size": 0}
    return {"exists": stat.S_ISREG(st.st_mode), "size": st.st_size}


def _on_alarm(_signum, _frame):
    raise ReadTimeout()


def run_round(request: dict) -> dict:
    """Serve one poll round: read every log, then run the completion probes."""
    timeout = int(request.get("cmd_timeout") or 0)
    current = {"what": "start"}
    if timeout > 0 and hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(timeout)
    reply: dict = {"logs": []}
    try:
        start = request.get("start", "beginning")
        max_bytes = int(request.get("max_bytes", 2 * 1024 * 1024))
        for spec in request.get("logs", []):
            current["what"] = "reading " + spec["path"]
            reply["logs"].append(read_log(spec, max_bytes, start))
        if request.get("exit_code_file"):
            current["what"] = "reading exit code file " + request["exit_code_file"]
            reply["exit_code"] = probe_exit_code(request["exit_code_file"])
        if request.get("http"):
            current["what"] = "probing " + request["http"]["url"]
            reply["http"] = probe_http(request["http"]["url"], float(request["http"].get("timeout", 5)))
        if request.get("artifact"):
            current["what"] = "checking artifact " + request["artifact"]["path"]
            reply["artifact"] = probe_artifact(request["artifact"]["path"])
    except ReadTimeout:
        return {"timeout": f"cmd_timeout ({timeout}s) expired while {current['what']}"}
    finally:
        if timeout > 0 and hasattr(signal, "SIGALRM"):
            signal.alarm(0)
    return reply


def main(request_json: str) -> None:
    sys.stdout.write(json.dumps(run_round(json.loads(request_json)), separators=(",", ":")))
    sys.stdout.flush()
