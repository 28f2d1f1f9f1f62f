# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter cvs.cluster.maxtext_cvs_config (docs: maxtext_cvs_config.yml)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.cvs_config import MaxtextConfigError, map_config
from ansible_collections.cvs.cluster.plugins.plugin_utils._run.extra_vars import given_as


def maxtext_cvs_config(variables: Any, user: str = "", sweep: str = "", container: Any = None) -> dict:
    if not isinstance(variables, dict):
        raise AnsibleFilterError(f"upstream CVS MaxText config: expected a mapping, got {type(variables).__name__}")
    try:
        return map_config(variables, user=user or "", sweep=sweep or "", container=container or {})
    except MaxtextConfigError as exc:
        raise AnsibleFilterError(f"upstream CVS MaxText config ({given_as()}): {exc}") from exc


class FilterModule:
    def filters(self) -> dict:
        return {"maxtext_cvs_config": maxtext_cvs_config}
