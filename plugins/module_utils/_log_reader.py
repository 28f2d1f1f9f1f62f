# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Remote side of cvs.cluster.log_poll: one bounded read round on one node.

This file is self-contained (standard library only) because the log_poll
action plugin ships its source to the node on every round and runs it with
``python3 -S`` (see plugin_utils/_log_poll/protocol.py); the log_poll module imports it
too. Keep it small and fast: it is on the hot path of every poll round of
every host, and the interpreter's start-up is most of a round's cost on the
node. So it imports only modules that load in microseconds (``os`` and
``stat`` are frozen into the interpreter; ``binascii``, ``_sha1`` and
``_signal`` are built-in or tiny extension modules): no ``base64`` and no
``json`` (both import ``re``), no ``signal`` (it imports ``enum``), no
``hashlib`` (it loads OpenSSL) unless the interpreter lacks ``_sha1``. The
request arrives as a Python literal in the shipped program, and the reply
leaves as base64 lines and one literal (see main()), which the controller
reads back with ``ast.literal_eval``.

A cursor is ``{offset, dev, ino, head_len, head_hash}`` (plus ``away`` while
it follows a rotated-away file). Only complete lines (ending in ``\\n``) are
returned, so ``offset`` always sits just past a newline, except after a
window of max_bytes without any newline (``long_line``). A file whose
device/inode changed was rotated: the old file is looked up by inode (and
head) in the same directory and drained first, over several rounds if needed,
and followed while the new file is still empty. A file that shrank below the
offset or its head, or whose first bytes changed, was truncated: a sibling
copy holding our head (copytruncate) is drained the same way. Both restart
the cursor at 0 of the new file.
"""

# No ``from __future__ import annotations``: importing __future__ (read from disk) costs more than binascii,
# _sha1 and _signal together. The annotations that Python 3.8 cannot evaluate are strings instead.
import os
import stat
import sys
import time
from binascii import b2a_base64

try:
    from _sha1 import sha1
except ImportError:  # an interpreter built without its own SHA-1
    from hashlib import sha1
try:
    import _signal as signal
except ImportError:  # not CPython
    import signal

HEAD_BYTES = 1024
_SIBLING_SCAN_LIMIT = 2048
# rotated files that were compressed are not logs any more: never read them as lines
_COMPRESSED = (".gz", ".xz", ".bz2", ".zst", ".lz4", ".z", ".zip")


class ReadTimeout(Exception):
    pass


def _head_hash(fd: int, length: int) -> str:
    return sha1(os.pread(fd, length, 0)).hexdigest() if length else ""


def _b64(data: bytes) -> str:
    return b2a_base64(data, newline=False).decode("ascii")


def _read_complete(fd: int, start: int, end: int, max_bytes: int, to_end: bool = False) -> "tuple[bytes, bool, bool]":
    """Bytes from start up to the last newline before min(end, start+max_bytes).

    Returns (data, long_line, more). When a full max_bytes window holds no
    newline at all, the window is returned whole and long_line is True so a
    line longer than max_bytes cannot stall the cursor or grow memory. more is
    True when the window was cut by max_bytes (more bytes are waiting).
    With to_end (start=drain, a last read), a window that reaches end is
    returned whole: the last line counts even without its newline.
    """
    want = min(end - start, max_bytes)
    if want <= 0:
        return b"", False, False
    data = os.pread(fd, want, start)
    more = end - start > max_bytes
    if to_end and not more:
        return data, False, False
    cut = data.rfind(b"\n")
    if cut >= 0:
        return data[: cut + 1], False, more
    if len(data) >= max_bytes:
        return data, True, more
    return b"", False, False


def _same_head(full: str, head_len: int, head_hash: str) -> bool:
    if not head_len:
        return True
    try:
        with open(full, "rb") as fh:
            return sha1(fh.read(head_len)).hexdigest() == head_hash
    except OSError:
        return False


def _find_sibling(path: str, match) -> "str | None":
    """The newest regular file next to path (not path itself) that match(full, st) accepts."""
    directory = os.path.dirname(path) or "."
    try:
        entries = os.scandir(directory)
    except OSError:
        return None
    best, best_mtime = None, -1.0
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
            if stat.S_ISREG(st.st_mode) and st.st_mtime > best_mtime and match(full, st):
                best, best_mtime = full, st.st_mtime
    return best


def _find_rotated(path: str, spec: dict) -> "str | None":
    """The file our cursor was on, renamed away in the same directory (same inode and head)."""
    dev, ino = spec.get("dev"), spec.get("ino")
    return _find_sibling(
        path,
        lambda full, st: (
            (st.st_dev, st.st_ino) == (dev, ino)
            and _same_head(full, spec.get("head_len", 0), spec.get("head_hash", ""))
        ),
    )


def _find_copy(path: str, spec: dict) -> "str | None":
    """A copy of the truncated file (copytruncate): a sibling named like it, holding our head and offset."""
    head_len, offset, base = spec.get("head_len", 0), spec["offset"], os.path.basename(path)
    if not head_len:
        return None
    return _find_sibling(
        path,
        lambda full, st: (
            os.path.basename(full).startswith(base)
            and st.st_size >= offset
            and _same_head(full, head_len, spec.get("head_hash", ""))
        ),
    )


def _rank(path: str, name: str) -> int:
    """How recent a rotated name is, for files last written within one clock tick: logrotate's ``log.N`` is
    older the larger N is; other names (dateext) rank alike."""
    suffix = name[len(os.path.basename(path)) + 1 :]
    return -int(suffix) if suffix.isdigit() else 0


def _find_next(path: str, after: "tuple[int, int]", seen: set, dev: int) -> "str | None":
    """The oldest file rotated after the one just drained (two rotations within one delay): a sibling named like
    path, on the same device, not seen yet, not empty and not compressed, last written after it (``after`` is
    its (mtime_ns, rank); a file's mtime only moves once per clock tick, so within one tick the rank decides)."""
    base = os.path.basename(path)
    found: list = []

    def match(full, st):
        name = os.path.basename(full)
        if (
            name.startswith(base)
            and not name.lower().endswith(_COMPRESSED)
            and st.st_dev == dev
            and (st.st_dev, st.st_ino) not in seen
            and st.st_size > 0
        ):
            key = (st.st_mtime_ns, _rank(path, name))
            if key > after:
                found.append((key, full))
        return False  # collect every candidate, take the oldest below

    _find_sibling(path, match)
    return min(found)[1] if found else None


def _away_cursor(fd: int, st, offset: int, long_line: bool, more: bool, out: dict) -> None:
    head_len = min(st.st_size, HEAD_BYTES)
    out.update(
        state="ok",
        dev=st.st_dev,
        ino=st.st_ino,
        size=st.st_size,
        mtime=st.st_mtime_ns,
        offset=offset,
        head_len=head_len,
        head_hash=_head_hash(fd, head_len),
        long_line=long_line,
        more=more,
        away=True,
    )


def _follow_old(path: str, old: "str | None", spec: dict, max_bytes: int, new_st, out: dict, rotated: bool) -> bool:
    """Drain a rotated-away file (or the copy of a truncated one) from the cursor's offset, then, after a
    rotation, every file rotated after it that is still there (oldest first, from byte 0).

    ``old`` is None when the file the cursor was on is gone (its unread bytes are reported lost); the files
    rotated after it are still read. Returns True when the cursor stays away for now: a file's complete lines
    did not fit in max_bytes, a file rotated later is still to be read, or the new file is still empty (a writer
    that has not reopened its log keeps writing to the old one). The new file's first byte is only read once
    every older file is drained.
    """
    seen = {(new_st.st_dev, new_st.st_ino)}
    offset = spec["offset"]
    after = (spec["mtime"], -(1 << 62)) if spec.get("mtime") is not None else None
    used = 0
    while True:
        if old is not None:
            try:
                fd = os.open(old, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            except OSError:
                return False
            try:
                st = os.fstat(fd)
                offset = min(offset, st.st_size)
                data, long_line, more = _read_complete(fd, offset, st.st_size, max_bytes)
                if data:
                    out["chunks"].append(data)
                    used += len(data)
                out["events"].append("drained:" + old)
                seen.add((st.st_dev, st.st_ino))
                after = (st.st_mtime_ns, _rank(path, os.path.basename(old)))
                if more or long_line:
                    _away_cursor(fd, st, offset + len(data), long_line, more, out)
                    return True
                nxt = _find_next(path, after, seen, st.st_dev) if rotated else None
                if nxt is None:
                    if new_st.st_size == 0:
                        _away_cursor(fd, st, offset + len(data), False, False, out)
                        return True
                    return False
            finally:
                os.close(fd)
        else:
            if not rotated or after is None:
                return False
            nxt = _find_next(path, after, seen, new_st.st_dev)
            if nxt is None:
                return False
        if used >= max_bytes:
            # the next file waits for the next read: point the cursor at its first byte
            try:
                fd = os.open(nxt, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            except OSError:
                return False
            try:
                _away_cursor(fd, os.fstat(fd), 0, False, True, out)
            finally:
                os.close(fd)
            return True
        old, offset = nxt, 0


def _lost(spec: dict, why: str, out: dict) -> None:
    """Bytes the cursor had seen but not read when their file went away: at least this many are lost."""
    unread = int(spec.get("size") or 0) - int(spec.get("offset") or 0)
    if unread > 0:
        out["lost"] = {"bytes": unread, "why": why}


def read_log(spec: dict, max_bytes: int, start: str, fresh_after: "float | None" = None, to_end: bool = False) -> dict:
    """One read of one log. ``spec`` is the cursor sent by the controller (offset None = first sight).

    With ``start="auto"`` a log seen for the first time is read from byte 0, unless it was last written before
    ``fresh_after`` (the node's time when this playbook run started): then it holds nothing of this run and is
    read from its end (event ``stale``), so an earlier run's marker or error never counts.
    """
    path = spec["path"]
    out: dict = {"path": path, "events": [], "chunks": [], "long_line": False, "more": False}
    try:
        st = os.stat(path)
    except FileNotFoundError:
        out.update(state="missing", error="no such file")
        return out
    except OSError as exc:
        out.update(state="unreadable", error=exc.strerror or str(exc))
        return out
    if stat.S_ISDIR(st.st_mode):
        out.update(state="directory", error="path is a directory")
        return out
    try:
        fd = os.open(path, os.O_RDONLY)  # blocks on a FIFO without a writer: cmd_timeout cuts it off
    except OSError as exc:
        out.update(state="unreadable", error=exc.strerror or str(exc))
        return out
    try:
        st = os.fstat(fd)
        size = st.st_size
        offset = spec.get("offset")
        old = None
        follow = rotated = False
        if offset is None:
            stale = start == "auto" and fresh_after is not None and size > 0 and st.st_mtime < fresh_after
            offset = size if start in ("end", "arm") or stale else 0
            if offset:
                # never begin mid-line: skip to just past the last newline before size
                tail = os.pread(fd, min(offset, 65536), offset - min(offset, 65536))
                cut = tail.rfind(b"\n")
                offset = offset - len(tail) + cut + 1 if cut >= 0 else offset
            if stale:
                out["events"].append("stale")
                out["stale_bytes"] = offset
        elif (spec.get("dev"), spec.get("ino")) != (st.st_dev, st.st_ino):
            if not spec.get("away"):
                out["events"].append("rotated")
            old = _find_rotated(path, spec)
            if old is None:
                _lost(spec, "the rotated file is gone", out)
            follow = rotated = True
            offset = 0
        else:
            head_len = spec.get("head_len", 0)
            if size < offset or size < head_len or (head_len and _head_hash(fd, head_len) != spec.get("head_hash")):
                out["events"].append("truncated")
                old = _find_copy(path, spec)
                if old is None:
                    _lost(spec, "truncated and no copy of it was found", out)
                follow = old is not None
                offset = 0
        if follow and _follow_old(path, old, spec, max_bytes, st, out, rotated):
            out["chunks"] = [_b64(c) for c in out["chunks"]]
            return out
        data, long_line, more = _read_complete(fd, offset, size, max_bytes, to_end)
        if data:
            out["chunks"].append(data)
        head_len = min(size, HEAD_BYTES)
        out.update(
            state="ok",
            dev=st.st_dev,
            ino=st.st_ino,
            size=size,
            mtime=st.st_mtime_ns,
            offset=offset + len(data),
            head_len=head_len,
            head_hash=_head_hash(fd, head_len),
            long_line=long_line,
            more=more,
        )
        out["chunks"] = [_b64(c) for c in out["chunks"]]
        return out
    finally:
        os.close(fd)


def fs_full(path: str) -> "dict | None":
    """The file system holding path (its directory) when it has no space or no inode left for an unprivileged
    writer: ``{"free", "size", "free_inodes"}`` (bytes, bytes, count); None when it has room or cannot be read."""
    try:
        st = os.statvfs(os.path.dirname(path) or ".")
    except OSError:
        return None
    # f_files == 0: a file system that counts no inodes (btrfs) never runs out of them
    if st.f_bavail > 0 and (st.f_favail > 0 or st.f_files == 0):
        return None
    return {"free": st.f_bavail * st.f_frsize, "size": st.f_blocks * st.f_frsize, "free_inodes": st.f_favail}


def probe_exit_code(path: str) -> dict:
    try:
        with open(path, "rb") as fh:
            text = fh.read(64).decode("ascii", "replace").strip()
    except FileNotFoundError:
        return {"present": False}
    except OSError as exc:
        return {"present": False, "error": str(exc)}
    if not text:
        return {"present": False, "empty": True}
    try:
        return {"present": True, "code": int(text.split()[0])}
    except ValueError:
        return {"present": True, "code": None, "error": f"not an exit code: {text[:40]!r}"}


def probe_http(url: str, timeout: float) -> dict:
    """GET url from the node, directly (proxy environment variables are ignored)."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as resp:
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
    """Serve one poll round: run the completion probes, then read every log.

    Probes come first so that everything a job wrote before its exit code,
    health answer or artifact appeared is in the bytes read this round.
    """
    timeout = int(request.get("cmd_timeout") or 0)
    current = {"what": "start"}
    if timeout > 0 and hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(timeout)
    reply: dict = {"logs": []}
    try:
        start = request.get("start", "beginning")
        # run_age: seconds since the playbook run started, by the controller's clock; this node's clock says when
        fresh_after = time.time() - float(request["run_age"]) if request.get("run_age") is not None else None
        max_bytes = int(request.get("max_bytes", 2 * 1024 * 1024))
        if request.get("exit_code_file"):
            current["what"] = "reading exit code file " + request["exit_code_file"]
            reply["exit_code"] = probe_exit_code(request["exit_code_file"])
            if not reply["exit_code"].get("present"):
                full = fs_full(request["exit_code_file"])
                if full:
                    reply["exit_code"]["full"] = full
        if request.get("http"):
            current["what"] = "probing " + request["http"]["url"]
            reply["http"] = probe_http(request["http"]["url"], float(request["http"].get("timeout", 5)))
        if request.get("artifact"):
            current["what"] = "checking artifact " + request["artifact"]["path"]
            reply["artifact"] = probe_artifact(request["artifact"]["path"])
        for spec in request.get("logs", []):
            current["what"] = "reading " + spec["path"]
            log = read_log(spec, max_bytes, start, fresh_after, bool(request.get("to_end")))
            full = fs_full(spec["path"])
            if full:
                log["full"] = full
            reply["logs"].append(log)
    except ReadTimeout:
        return {"timeout": f"cmd_timeout ({timeout}s) expired while {current['what']}"}
    finally:
        if timeout > 0 and hasattr(signal, "SIGALRM"):
            signal.alarm(0)
    return reply


def main(request: dict) -> None:
    """Write the reply to one round: every log's chunks, one base64 line each and in order, then the reply itself.

    The reply is the last line, a Python literal written with ascii() (pure ASCII, read back with
    ast.literal_eval), in which each log's ``chunks`` is the number of lines it owns. A Python parser is much
    slower than a json one on megabytes of string literal; base64 lines are only split and decoded. Output cut
    short always loses (part of) the last line, so it never parses as a reply.
    """
    reply = run_round(request)
    lines = []
    for log in reply.get("logs", []):
        lines.extend(log["chunks"])
        log["chunks"] = len(log["chunks"])
    lines.append(ascii(reply))
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


# Ends every reply of a reader that serves many rounds (serve()); a reply's own lines are base64 or an ascii()
# literal, so they never equal it.
END_OF_REPLY = "--cvs-log-reader-end-of-reply--"


def _next_request(buffer: bytearray, idle: float, parent: int) -> "bytes | None":
    """The next request from stdin, or None when stdin closed, nothing came for ``idle`` seconds (the
    controller is gone without closing the session, say a frozen machine) or this process lost its parent (the
    session's sshd or shell ended): a kept reader never outlives its poll by more than a few seconds."""
    from select import select

    waited = 0.0
    while True:
        cut = buffer.find(b"\n")
        if cut >= 0 and len(buffer) > cut:
            header = bytes(buffer[:cut]).strip()
            if not header:
                return None
            want = int(header)
            if len(buffer) >= cut + 1 + want:
                request = bytes(buffer[cut + 1 : cut + 1 + want])
                del buffer[: cut + 1 + want]
                return request
        ready = select([0], [], [], 1.0)[0]
        if not ready:
            waited += 1.0
            if os.getppid() != parent or (idle and waited >= idle):
                return None
            continue
        chunk = os.read(0, 1 << 20)
        if not chunk:
            return None
        buffer += chunk
        waited = 0.0


def serve() -> None:
    """Answer one round per request until stdin closes: the reader a poll keeps on its node between rounds.

    Each request is ``<length>\n`` then that many bytes of ASCII Python literal (what reader_program() puts in
    a one-shot program); each reply is what main() writes, then END_OF_REPLY on a line of its own. A request's
    ``idle_timeout`` bounds the wait for the next one (see _next_request).
    """
    from ast import literal_eval  # once per session, not per round

    parent = os.getppid()
    buffer = bytearray()
    idle = 0.0
    while True:
        raw = _next_request(buffer, idle, parent)
        if raw is None:
            return
        request = literal_eval(raw.decode("ascii"))
        idle = float(request.get("idle_timeout") or 0)
        main(request)
        sys.stdout.write(END_OF_REPLY + "\n")
        sys.stdout.flush()
