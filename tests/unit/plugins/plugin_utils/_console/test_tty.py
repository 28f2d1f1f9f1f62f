"""The in-place line (plugins/plugin_utils/_console/tty.py) against fake terminals."""

from __future__ import annotations

import errno
import io

from ansible_collections.cvs.cluster.plugins.plugin_utils._console.tty import LiveLine, is_interactive


class FakeTerminal(io.StringIO):
    def __init__(self, tty: bool = True, fail_after: int | None = None, exc: BaseException | None = None) -> None:
        super().__init__()
        self.tty = tty
        self.fail_after = fail_after
        self.exc = exc or OSError(errno.EIO, "Input/output error")
        self.writes = 0

    def isatty(self) -> bool:
        return self.tty

    def write(self, data: str) -> int:
        if self.fail_after is not None and self.writes >= self.fail_after:
            raise self.exc
        self.writes += 1
        return super().write(data)


def test_draw_and_clear() -> None:
    term = FakeTerminal()
    line = LiveLine(term, columns=lambda: 40)
    assert line.draw("| Wait | 0/3 hosts complete")
    assert line.drawn
    assert line.clear()
    assert not line.drawn
    assert not line.clear()  # nothing drawn: nothing written
    assert term.getvalue() == "\r| Wait | 0/3 hosts complete\x1b[K\r\x1b[K"


def test_draw_truncates_to_terminal_width() -> None:
    term = FakeTerminal()
    LiveLine(term, columns=lambda: 10).draw("0123456789abcdef")
    assert term.getvalue() == "\r01234567~\x1b[K"


def test_terminal_gone_breaks_the_line_for_good() -> None:
    term = FakeTerminal(fail_after=1)
    line = LiveLine(term, columns=lambda: 80)
    assert line.draw("first")
    assert not line.draw("second")  # EIO: the terminal hung up
    assert line.broken and not line.drawn
    assert line.error == "[Errno 5] Input/output error"
    assert not line.draw("third") and not line.clear()
    assert term.writes == 1


def test_closed_stream_breaks_the_line() -> None:
    term = FakeTerminal(fail_after=0, exc=ValueError("I/O operation on closed file."))
    line = LiveLine(term)
    assert not line.draw("x")
    assert line.broken and line.error == "I/O operation on closed file."


def test_is_interactive() -> None:
    assert is_interactive(FakeTerminal(tty=True), env={"TERM": "xterm"})
    assert not is_interactive(FakeTerminal(tty=True), env={"TERM": "dumb"})
    assert not is_interactive(FakeTerminal(tty=False), env={})
    assert not is_interactive(object(), env={})  # type: ignore[arg-type]
