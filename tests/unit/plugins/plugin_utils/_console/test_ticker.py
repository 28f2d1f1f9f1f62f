"""The console's ticker thread, display guard and hang-up handling (plugins/plugin_utils/_console/ticker.py).

The ticker's wait is injected (only one test runs a real thread, at a 10 ms interval), the display is a fake that
records what reaches it, and the terminals are fake streams that fail the way a hung-up one does.
"""

from __future__ import annotations

import errno
import io
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.utils import display as display_module

from ansible_collections.cvs.cluster.plugins.plugin_utils._console import ticker as console
from ansible_collections.cvs.cluster.plugins.plugin_utils._console.tty import LiveLine


class FakeTerminal(io.StringIO):
    def __init__(self, tty: bool = True, error: int | None = None) -> None:
        super().__init__()
        self.tty = tty
        self.error = error  # errno every write fails with

    def isatty(self) -> bool:
        return self.tty

    def write(self, data: str) -> int:
        if self.error is not None:
            raise OSError(self.error, "write failed")
        return super().write(data)


class RecordingLock:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def __enter__(self) -> None:
        self.events.append("lock")

    def __exit__(self, *exc: object) -> None:
        self.events.append("unlock")


class FakeDisplay:
    def __init__(self, events: list[str], screen_error: Exception | None = None) -> None:
        self.events = events
        self.screen_error = screen_error

    def display(self, msg: str, **kwargs: Any) -> None:
        where = "log" if kwargs.get("log_only") else "screen"
        if where == "screen" and self.screen_error is not None:
            raise self.screen_error
        self.events.append(f"{where}: {msg}")


# ---- the ticker -----------------------------------------------------------------------------------------------


def test_the_ticker_ticks_once_per_wait_until_the_wait_says_stop() -> None:
    waits: list[float] = []
    ticks: list[int] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return len(waits) > 3

    console.Ticker(lambda: ticks.append(len(ticks)), interval=0.5, wait=wait).run()
    assert waits == [0.5] * 4 and ticks == [0, 1, 2]


def test_a_failing_tick_never_ends_the_ticker() -> None:
    calls: list[str] = []

    def tick() -> None:
        calls.append("tick")
        raise OSError(errno.EIO, "display went away")

    waits = iter([False, False, True])
    console.Ticker(tick, wait=lambda _seconds: next(waits)).run()
    assert calls == ["tick", "tick"]


def test_the_ticker_thread_starts_once_and_ends_when_stopped() -> None:
    ticked = threading.Event()
    ticker = console.Ticker(ticked.set, interval=0.01)
    ticker.start()
    thread = ticker.thread
    ticker.start()
    assert ticker.thread is thread and thread is not None and thread.daemon and thread.name == "cvs-console"
    assert ticked.wait(5)
    ticker.stop()
    thread.join(5)
    assert not thread.is_alive()


# ---- the display guard ----------------------------------------------------------------------------------------


def test_the_guard_runs_its_hook_under_the_lock_before_each_screen_display() -> None:
    events: list[str] = []
    display = FakeDisplay(events)
    guard = console.DisplayGuard(
        display, RecordingLock(events), lambda: events.append("clear"), pid=1, getpid=lambda: 1
    )
    assert guard.install() and guard.installed
    assert not guard.install()  # once
    display.display("ok: [n1]")
    display.display("to the file", log_only=True)
    assert events == ["lock", "clear", "screen: ok: [n1]", "unlock", "log: to the file"]


def test_the_guard_lets_a_forked_workers_displays_through() -> None:
    events: list[str] = []
    display = FakeDisplay(events)
    pids = iter([1, 2])  # installed in the console's process, displayed from a worker's
    console.DisplayGuard(
        display, RecordingLock(events), lambda: events.append("clear"), getpid=lambda: next(pids)
    ).install()
    display.display("from a worker")
    assert events == ["screen: from a worker"]


def test_removing_the_guard_restores_the_display_unless_it_was_wrapped_again() -> None:
    events: list[str] = []
    display = FakeDisplay(events)
    guard = console.DisplayGuard(
        display, RecordingLock(events), lambda: events.append("clear"), pid=1, getpid=lambda: 1
    )
    guard.install()
    guard.remove()
    assert "display" not in display.__dict__ and not guard.installed
    display.display("plain")
    assert events == ["screen: plain"]

    guard.install()
    ours = display.display

    def theirs(msg: str, **kwargs: Any) -> None:
        ours(msg, **kwargs)

    display.display = theirs  # type: ignore[method-assign]
    guard.remove()
    assert display.display is theirs


def test_display_lock_is_the_displays_own_when_it_has_one() -> None:
    own = threading.RLock()
    assert console.display_lock(SimpleNamespace(_lock=own)) is own
    assert console.display_lock(SimpleNamespace()) is not console.display_lock(SimpleNamespace())


def test_a_display_method_defined_outside_ansible_core_is_a_wrapper() -> None:
    assert console.display_is_wrapped(FakeDisplay, core_file="/elsewhere/display.py")
    assert not console.display_is_wrapped(FakeDisplay, core_file=__file__)
    assert not console.display_is_wrapped(display_module.Display)


# ---- hang-up --------------------------------------------------------------------------------------------------


def test_a_hang_up_sends_the_terminal_streams_to_the_sink_once() -> None:
    streams = SimpleNamespace(stdout=FakeTerminal(), stderr=FakeTerminal(tty=False))
    sinks: list[io.StringIO] = []

    def sink() -> io.StringIO:
        sinks.append(io.StringIO())
        return sinks[-1]

    hang_up = console.HangUp(streams, sink=sink)
    hang_up.watch_terminals(env={"TERM": "xterm"})
    assert hang_up.terminal_names == ["stdout"]
    terminal = streams.stdout
    live = LiveLine(terminal, columns=lambda: 80)
    assert live.draw("| Wait | 0/3 hosts complete")
    assert not hang_up.check(live) and not hang_up.check(None)

    terminal.error = errno.EIO
    assert not live.draw("| Wait | 1/3 hosts complete") and live.hung_up
    assert hang_up.check(live) and hang_up.detached
    assert streams.stdout is sinks[0] and isinstance(streams.stderr, FakeTerminal)
    assert not hang_up.check(live) and len(sinks) == 1


def test_a_full_terminal_is_not_a_hang_up() -> None:
    streams = SimpleNamespace(stdout=FakeTerminal(error=errno.EAGAIN), stderr=FakeTerminal())
    hang_up = console.HangUp(streams, sink=io.StringIO)
    hang_up.watch_terminals(env={"TERM": "xterm"})
    live = LiveLine(streams.stdout)
    assert not live.draw("x") and live.broken
    assert not hang_up.check(live) and not hang_up.detached


def test_dumb_terminals_are_never_watched() -> None:
    hang_up = console.HangUp(SimpleNamespace(stdout=FakeTerminal(), stderr=FakeTerminal()))
    hang_up.watch_terminals(env={"TERM": "dumb"})
    assert hang_up.terminal_names == []


# ---- heartbeats -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("screen_error", [None, OSError(errno.EIO, "gone"), ValueError("closed")])
def test_a_heartbeat_reaches_the_log_file_whatever_happens_on_the_screen(
    monkeypatch: pytest.MonkeyPatch, screen_error: Exception | None
) -> None:
    events: list[str] = []
    monkeypatch.setattr(display_module, "logger", object())
    stdout = FakeTerminal()
    console.display_heartbeat(FakeDisplay(events, screen_error), "[cvs] still running: x", stdout=lambda: stdout)
    screen = [] if screen_error else ["screen: [cvs] still running: x"]
    assert events == [*screen, "log: [cvs] still running: x"]


def test_without_a_log_file_a_heartbeat_goes_to_the_screen_only(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(display_module, "logger", None)
    console.display_heartbeat(FakeDisplay(events), "beat", stdout=FakeTerminal)
    assert events == ["screen: beat"]
