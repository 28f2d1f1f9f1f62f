# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter cvs.cluster.unreachable_reason. Docs: unreachable_reason.yml."""

from __future__ import annotations

from typing import Any

from ansible_collections.cvs.cluster.plugins.plugin_utils._report.record import (
    unreachable_reason as _unreachable_reason,
)


def unreachable_reason(msg: Any, node: Any) -> str:
    """``<node>: unreachable: <ssh's error>`` from the message Ansible gave for an unreachable host."""
    return _unreachable_reason(str(node), msg)


class FilterModule:
    """Report text filters."""

    def filters(self) -> dict:
        return {"unreachable_reason": unreachable_reason}
