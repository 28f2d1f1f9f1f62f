# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter path_component (documentation: the sibling path_component.yml). Logic: plugin_utils/_common/paths.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import path_component


def _path_component(name: Any) -> str:
    return path_component(str(name))


class FilterModule:
    def filters(self) -> dict:
        return {"path_component": _path_component}
