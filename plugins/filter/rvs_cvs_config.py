# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter cvs.cluster.rvs_cvs_config (docs: rvs_cvs_config.yml)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._run.extra_vars import given_as
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.cvs_config import RvsConfigError, rvs_settings


def rvs_cvs_config(block: Any, where: str = "rvs") -> dict:
    try:
        return rvs_settings(block, where)
    except RvsConfigError as exc:
        raise AnsibleFilterError(f"upstream CVS rvs block ({given_as('-e rvs=...')}): {exc}") from exc


class FilterModule:
    def filters(self) -> dict:
        return {"rvs_cvs_config": rvs_cvs_config}
