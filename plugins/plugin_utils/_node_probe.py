# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a ``cvs.cluster.node_probe`` result on the controller (the module itself: module_utils/_node_probe.py).

Pure logic, no Ansible imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

__all__ = ["probe_failure"]


def probe_failure(result: Any, expected: str = "commands") -> Optional[str]:
    """Why a registered node_probe result says nothing of the node (failed, unreachable, skipped, not a probe's
    result: ``expected``, one of its keys, is missing), or None when it is a probe's answer."""
    if not isinstance(result, Mapping):
        return str(result) if result else "the node could not be probed"
    if result.get("failed") or result.get("unreachable") or expected not in result:
        return str(result.get("msg") or "the node could not be probed")
    return None
