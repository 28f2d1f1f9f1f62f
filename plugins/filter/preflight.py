# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter cvs.cluster.preflight_judge (docs: preflight_judge.yml)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._preflight import PreflightError, judge


def preflight_judge(probes: Any, expect: Any = None) -> dict:
    if not isinstance(probes, Mapping):
        raise AnsibleFilterError(
            f"preflight_judge: expected a mapping of node to {{probe, sent, returned}}, got {type(probes).__name__}"
        )
    try:
        return judge(probes, expect if expect is not None else {})
    except PreflightError as exc:
        raise AnsibleFilterError(f"preflight_judge: {exc}") from exc


class FilterModule:
    """Preflight filters."""

    def filters(self) -> dict:
        return {"preflight_judge": preflight_judge}
