# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The log_poll reader without Ansible: the collection's wire protocol over plain ssh on the same
ControlMaster, carrying the cursor like the action does.
"""

from __future__ import annotations

import sys

from _cluster import Host, remote_python, ssh
from _env import EXPERIMENT, REPO

# the wire protocol, from the collection the benches measure (the experiment's copy when one is given)
sys.path.insert(0, EXPERIMENT or str(REPO / ".cache" / "collections"))
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll import protocol

reader_program = protocol.reader_program
parse_reply = protocol.parse_reply


def reader_command(interpreter: str = "python3", cmd_timeout: int = 30, flags: str = "-S") -> str:
    """The command log_poll runs on the node (``flags`` as it passes them by default). Ansible's ssh connection
    then wraps it in ``/bin/sh -c '...; sleep 0'``."""
    return protocol.reader_command(interpreter, cmd_timeout, flags=flags)


class RawReader:
    """Runs the log_poll reader over plain ssh (the same ControlMaster), carrying its cursor like the action does."""

    def __init__(self, host: Host, path: str, interpreter: str | None = None) -> None:
        self.host, self.path = host, path
        # the interpreter log_poll would use: ansible_python_interpreter if set, else python3 on PATH
        self.interpreter = interpreter or remote_python(host)
        reply = self._call({"logs": [{"path": path, "offset": None}], "max_bytes": 1024, "start": "arm"})
        self.cursor = protocol.cursor_of(reply["logs"][0])

    def _call(self, request: dict) -> dict:
        request = dict(request, cmd_timeout=30)
        out = ssh(self.host, reader_command(self.interpreter), stdin=reader_program(request), timeout=120)
        reply = parse_reply(out)
        if reply is None:
            raise ValueError(f"not a reader reply: {out[-200:]!r}")
        return reply

    def round(self) -> int:
        log = dict(self.cursor, path=self.path)
        reply = self._call({"logs": [log], "max_bytes": 2 * 1024 * 1024, "start": "end"})
        entry = reply["logs"][0]
        before = self.cursor["offset"]
        self.cursor = protocol.cursor_of(entry)
        return self.cursor["offset"] - before
