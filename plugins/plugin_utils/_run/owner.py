# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who runs a validation run on the controller, and whether that process still lives.

A node's run lease (module_utils/_run_guard.py) records the controller process
that took it. A later run on the same machine can tell for certain that the
holder is gone (its pid no longer lives with the same start time since the
same boot), so it need not wait for the lease to expire: what that run left
on the nodes is stopped and the nodes are taken over. A holder on another
machine is judged by its lease's expiry alone.
"""

from __future__ import annotations

import getpass
import socket
from typing import Any, Mapping, Optional

from ansible_collections.cvs.cluster.plugins.module_utils._run_guard import stat_fields


def _boot_id(proc: str) -> str:
    try:
        with open(f"{proc}/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _start_time(pid: int, proc: str) -> Optional[int]:
    """Start time of ``pid`` in clock ticks since boot, None when it does not live."""
    fields = stat_fields(pid, proc)
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "?"


def controller_identity(pid: int, proc: str = "/proc") -> dict[str, Any]:
    """The identity of controller process ``pid`` (the ansible-playbook process) as stored in a lease."""
    return {
        "user": _user(),
        "host": socket.gethostname(),
        "pid": pid,
        "start": _start_time(pid, proc),
        "boot_id": _boot_id(proc),
    }


def controller_gone(identity: Any, proc: str = "/proc") -> bool:
    """True only when ``identity`` is a process of this machine's current boot that no longer lives."""
    if not isinstance(identity, Mapping) or not identity.get("boot_id") or not isinstance(identity.get("pid"), int):
        return False
    if identity["boot_id"] != _boot_id(proc) or identity.get("host") != socket.gethostname():
        return False
    return _start_time(identity["pid"], proc) != identity.get("start")
