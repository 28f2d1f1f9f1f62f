# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Commands the collection's modules run on a node themselves, without a shell (runs on the node; stdlib only).

ansible-test's pylint asks modules for ``AnsibleModule.run_command`` instead of :mod:`subprocess`; these callers
need what it lacks, a deadline that kills the command (the probes, the RVS tests), so this is the one place that
starts processes directly.

A tool's output is read as bytes and kept within bounds whatever it holds (:class:`Capture`): the first and last
``limit // 2`` bytes of each stream, the count of bytes cut between them; :func:`safe_text` turns what was kept into
text: split on ``\\n`` before decoding (UTF-8, invalid bytes replaced), each line cut to its head and tail, control
characters (NUL, the line separators other than ``\\n`` and ``\\r``) replaced. A tool that prints 50 MB of NUL bytes
on one line thus returns a few kilobytes that say how much was cut, and a module's result stays small and valid.
"""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import time
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

TimeoutExpired = subprocess.TimeoutExpired

#: Bytes of one output stream kept: its first and its last half.
OUTPUT_LIMIT = 1024 * 1024
#: Bytes of one line kept: its first and its last half.
LINE_LIMIT = 8 * 1024
#: What stands for a character that is not text (an invalid byte, NUL, a control character).
REPLACEMENT = "\ufffd"
# control characters (tab, ESC and the line ends \n, \r kept) and the line separators str.splitlines() knows
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\x85\u2028\u2029]")
_READ = 65536


def cut_note(count: int) -> str:
    """The line that stands where ``count`` bytes were cut (no word a failure pattern looks for)."""
    return f"[cvs.cluster: {count} bytes cut here]"


class Capture:
    """One output stream kept within ``limit`` bytes: its head, its tail and the number of bytes cut between."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def cut(self) -> int:
        """Bytes of the stream not kept."""
        return self.total - len(self.head) - len(self.tail)

    def text(self, line_limit: int = LINE_LIMIT, strip: bool = True) -> Tuple[str, int]:
        """What was kept, as text (:func:`safe_text`), with a line naming the bytes cut where they were, and the
        number of bytes cut in all (from the stream and from its long lines)."""
        if not self.cut:
            return safe_text(bytes(self.head + self.tail), line_limit, strip)
        head, head_cut = safe_text(bytes(self.head), line_limit, False)
        tail, tail_cut = safe_text(bytes(self.tail), line_limit, strip)
        return f"{head.rstrip(chr(10))}\n{cut_note(self.cut)}\n{tail}", self.cut + head_cut + tail_cut


def safe_line(raw: bytes, limit: int = LINE_LIMIT) -> Tuple[str, int]:
    """One line (no ``\\n``) as text, cut to its first and last ``limit // 2`` bytes (a note says how many bytes
    were cut), invalid bytes and control characters replaced; and the number of bytes cut."""
    if len(raw) > limit:
        half = limit // 2
        head, tail = (_NOT_TEXT.sub(REPLACEMENT, part.decode("utf-8", "replace")) for part in (raw[:half], raw[-half:]))
        cut = len(raw) - 2 * half
        return f"{head} {cut_note(cut)} {tail}", cut
    return _NOT_TEXT.sub(REPLACEMENT, raw.decode("utf-8", "replace")), 0


def safe_text(data: bytes, line_limit: int = LINE_LIMIT, strip: bool = True) -> Tuple[str, int]:
    """Bytes as text: split on ``\\n`` first, each line bounded (:func:`safe_line`), with ``strip`` the trailing
    line ends dropped (as ansible.builtin.command does); and the number of bytes cut from long lines."""
    if strip:
        data = data.rstrip(b"\r\n")
    lines = [safe_line(line, line_limit) for line in data.split(b"\n")]
    return "\n".join(text for text, _cut in lines), sum(cut for _text, cut in lines)


def start(argv: Sequence[str], env: Optional[Mapping[str, str]] = None) -> subprocess.Popen:
    """``argv`` started with no input and both outputs piped (the caller waits, with its own deadline)."""
    return subprocess.Popen(  # pylint: disable=ansible-bad-function
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
    )


def drain(proc: subprocess.Popen, captures: Sequence[Capture], seconds: float) -> bool:
    """Read ``proc``'s stdout and stderr into ``captures`` (in that order) until both end and ``proc`` has exited,
    for at most ``seconds``; True when it ended in time. Memory stays within the captures' limits."""
    deadline = time.monotonic() + max(0.0, seconds)
    with selectors.DefaultSelector() as selector:
        for stream, capture in zip((proc.stdout, proc.stderr), captures):
            if stream is not None and not stream.closed:
                selector.register(stream, selectors.EVENT_READ, capture)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _events in selector.select(left):
                chunk = os.read(key.fd, _READ)
                if chunk:
                    key.data.feed(chunk)
                else:
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def run_command(argv: Sequence[str], timeout: float, env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Run one read-only command to its end or ``timeout``; a missing program or a timeout is reported in
    ``problem``, never raised. Output is read as bytes and bounded (:class:`Capture`), then decoded as UTF-8 with
    invalid bytes and control characters replaced; trailing newlines are kept."""
    try:
        proc = start(argv, env)
    except OSError as exc:
        return {"rc": None, "stdout": "", "stderr": "", "problem": f"{argv[0]}: {exc.strerror or exc}"}
    out, err = Capture(), Capture()
    if not drain(proc, (out, err), timeout):
        proc.kill()
        drain(proc, (out, err), 5)
        return {"rc": None, "stdout": "", "stderr": "", "problem": f"{argv[0]} did not answer within {timeout:g} s"}
    return {
        "rc": proc.returncode,
        "stdout": out.text(strip=False)[0],
        "stderr": err.text(strip=False)[0],
        "problem": None,
    }
