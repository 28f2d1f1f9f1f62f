# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The live side of the ``cvs.cluster.cvs`` console: the ticker thread, the display guard, hang-up handling.

What acts on threads, process ids, Ansible's display and the process's standard streams lives here, each with
what it acts on injected (the display, the lock, the streams, the wait between ticks), so tests need neither a
terminal nor sleeps. The callback wires these to Ansible's hooks and to the console model (_console/model.py) and its
in-place line (_console/tty.py).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Callable, Optional, TextIO

from ansible.utils import display as display_module

from ansible_collections.cvs.cluster.plugins.plugin_utils._console.tty import LiveLine, is_interactive

# how often the in-place line is redrawn and a heartbeat looked for
TICK_SECONDS = 0.2


def display_lock(display: Any) -> Any:
    """One lock for the console's state and the terminal: the display's own (ansible-runner holds it around
    events), else a lock of the console's."""
    return getattr(display, "_lock", None) or threading.RLock()


def display_is_wrapped(display_class: Optional[type] = None, core_file: Optional[str] = None) -> bool:
    """True when something outside ansible-core (ansible-runner) wrapped ``Display.display``."""
    display_class = display_class or display_module.Display
    code = getattr(display_class.display, "__code__", None)
    own = os.path.splitext(os.path.abspath(core_file or display_module.__file__))[0]
    return code is not None and os.path.splitext(os.path.abspath(code.co_filename))[0] != own


def has_log_file() -> bool:
    """Whether Ansible writes a ``log_path`` file (where ``log_only`` displays go)."""
    return display_module.logger is not None


def display_heartbeat(display: Any, line: str, stdout: Callable[[], TextIO] = lambda: sys.stdout) -> None:
    """Print a heartbeat line to the screen and to the ``log_path`` file, each on its own.

    A terminal that went away must not cost the file its line.
    """
    try:
        display.display(line, screen_only=True)
        stdout().flush()  # a pipe or file is block-buffered: let CI see the line now
    except (OSError, ValueError):
        pass
    if has_log_file():
        display.display(line, log_only=True)


class Ticker:
    """Calls ``tick`` every ``interval`` seconds on a daemon thread, from ``start`` until ``stop``.

    ``wait(seconds)`` returns True once the ticker is to end; by default it waits on ``stop``. A test injects its
    own and calls ``run``.
    """

    def __init__(
        self,
        tick: Callable[[], None],
        interval: float = TICK_SECONDS,
        wait: Optional[Callable[[float], bool]] = None,
        name: str = "cvs-console",
    ) -> None:
        self.interval = interval
        self.name = name
        self._tick = tick
        self._stopped = threading.Event()
        self._wait = wait or self._stopped.wait
        self.thread: Optional[threading.Thread] = None

    def start(self) -> None:
        """Start the thread (once; a stopped ticker ends at once)."""
        if self.thread is not None:
            return
        self.thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self._wait(self.interval):
            with contextlib.suppress(Exception):  # a display problem must never kill the run
                self._tick()

    def stop(self) -> None:
        """Ask the thread to end after its current tick; never waits for it (it may be waiting for the lock)."""
        self._stopped.set()


class DisplayGuard:
    """Runs ``before`` ahead of every screen display of this process, both under ``lock``.

    The console clears its in-place line there, so that nothing else displayed (warnings, results, other
    plugins' output) mixes with it. Displays of forked workers and ``log_only`` ones pass straight through.
    """

    def __init__(
        self,
        display: Any,
        lock: Any,
        before: Callable[[], None],
        pid: Optional[int] = None,
        getpid: Callable[[], int] = os.getpid,
    ) -> None:
        self.display = display
        self.lock = lock
        self.before = before
        self.pid = getpid() if pid is None else pid
        self._getpid = getpid
        self._guarded: Optional[Callable[..., Any]] = None

    @property
    def installed(self) -> bool:
        return self._guarded is not None

    def install(self) -> bool:
        """Wrap ``display.display``; False when this guard already did."""
        if self._guarded is not None:
            return False
        original = self.display.display

        def guarded(msg: str, *args: Any, **kwargs: Any) -> Any:
            if self._getpid() == self.pid and not kwargs.get("log_only"):
                with self.lock:
                    self.before()
                    return original(msg, *args, **kwargs)
            return original(msg, *args, **kwargs)

        self.display.display = guarded
        self._guarded = guarded
        return True

    def remove(self) -> None:
        """Unwrap ``display.display``, unless someone wrapped it again after us (that wrapper holds ours)."""
        if self._guarded is not None and self.display.__dict__.get("display") is self._guarded:
            del self.display.display
        self._guarded = None


class HangUp:
    """After a hang-up, terminal output goes nowhere instead of failing every later display call.

    Heartbeats and everything else still reach a ``log_path`` file. Without this the first failure or the recap
    printed after the hang-up would raise EIO, and so would the warning about it.
    """

    STREAM_NAMES = ("stdout", "stderr")

    def __init__(self, streams: Any = sys, sink: Optional[Callable[[], TextIO]] = None) -> None:
        self.streams = streams
        self.sink = sink or (lambda: open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
        self.terminal_names: list[str] = []
        self.detached = False
        self._dead: list[TextIO] = []

    def watch_terminals(self, env: Optional[dict[str, str]] = None) -> None:
        """Note which standard streams are a terminal now: after a hang-up ``isatty()`` is False
        (a hung-up terminal fails tcgetattr)."""
        self.terminal_names = [n for n in self.STREAM_NAMES if is_interactive(getattr(self.streams, n), env)]

    def check(self, live: Optional[LiveLine]) -> bool:
        """Detach the terminal streams once ``live`` found its terminal hung up; True when this call did."""
        if self.detached or live is None or not live.hung_up:
            return False
        self.detached = True
        for name in self.terminal_names:
            self._dead.append(getattr(self.streams, name))  # keep a reference: closing it would flush into the void
            setattr(self.streams, name, self.sink())
        return True
