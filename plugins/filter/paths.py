# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters path_component and component_problems (documentation: the sibling .yml files).

Logic: plugin_utils/_common/paths.py, the one rule for names from data in paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import component_problems, path_component


def _path_component(name: Any) -> str:
    return path_component(str(name))


def _component_problems(values: Any) -> list[str]:
    if not isinstance(values, Mapping):
        raise AnsibleFilterError(f"component_problems: expects a mapping of variable names to values, got {values!r}")
    return component_problems({str(k): v for k, v in values.items()})


class FilterModule:
    def filters(self) -> dict:
        return {"path_component": _path_component, "component_problems": _component_problems}
