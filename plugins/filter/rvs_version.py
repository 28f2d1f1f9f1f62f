# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters cvs.cluster.rvs_version_supports_levels and cvs.cluster.gpu_config_folder.

Docs: rvs_version_supports_levels.yml, gpu_config_folder.yml.
"""

from __future__ import annotations

from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.detect import gpu_config_folder as _gpu_config_folder
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.detect import (
    rvs_version_supports_levels as _rvs_version_supports_levels,
)


def rvs_version_supports_levels(version_text: Any) -> bool:
    """True when ``rvs --version`` output names a version >= 1.3.0."""
    return _rvs_version_supports_levels(version_text)


def gpu_config_folder(amd_smi_static_json: Any) -> Optional[str]:
    """RVS config sub-folder (e.g. ``MI300X``) from ``amd-smi static --json`` output, or None."""
    return _gpu_config_folder(amd_smi_static_json)


class FilterModule:
    """RVS version and GPU-model filters."""

    def filters(self) -> dict:
        return {
            "rvs_version_supports_levels": rvs_version_supports_levels,
            "gpu_config_folder": gpu_config_folder,
        }
