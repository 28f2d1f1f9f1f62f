"""The in-place status line of the ``cvs.cluster.cvs`` callback, on an injected terminal stream."""

from __future__ import annotations

import errno
import os
import shutil
from typing import Callable, Optional, TextIO

from ansible_collections.cvs.cluster.plugins.plugin_utils._console.model import CLEAR_LINE, live_line


def terminal_columns() -> int:
    return shutil.get_terminal_size((80, 24)).columns


def is_interactive(stream: TextIO, env: Optional[dict[str, str]] = None) -> bool:
    """``stream`` is a terminal that understands cursor control (not ``TERM=dumb``)."""
    env = dict(os.environ) if env is None else env
    if env.get("TERM", "") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


class LiveLine:
    """One line that is redrawn in place; it breaks for good on the first failed write.

    Any failed write (hang-up: ``EIO``; closed stream: ``ValueError``; a non-blocking terminal that is
    full: ``EAGAIN``) makes ``broken`` true and every later call a no-op, so the caller can fall back to
    plain heartbeat lines.
    """

    def __init__(self, stream: TextIO, columns: Callable[[], int] = terminal_columns) -> None:
        self.stream = stream
        self.columns = columns
        self.drawn = False
        self.broken = False
        self.error: Optional[str] = None
        self.errno: Optional[int] = None

    def draw(self, text: str) -> bool:
        if self.broken:
            return False
        if self._write(live_line(text, self.columns())):
            self.drawn = True
        return self.drawn

    @property
    def hung_up(self) -> bool:
        """The terminal itself is gone (``EIO``: its other end closed), not just this write."""
        return self.broken and self.errno == errno.EIO

    def clear(self) -> bool:
        """Erase the line if it is drawn (the cursor stays at the start of the empty line)."""
        if not self.drawn or self.broken:
            return False
        self.drawn = False
        return self._write(CLEAR_LINE)

    def _write(self, data: str) -> bool:
        try:
            self.stream.write(data)
            self.stream.flush()
        except (OSError, ValueError) as exc:
            self.broken = True
            self.drawn = False
            self.error = str(exc) or exc.__class__.__name__
            self.errno = getattr(exc, "errno", None)
            return False
        return True
