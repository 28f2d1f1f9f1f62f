# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters cvs.cluster.platform_judge, platform_verdicts and platform_cvs_config (docs: their .yml files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.cvs_config import (
    PlatformConfigError,
    platform_settings,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.judge import judge
from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.settings import (
    PlatformSettingsError,
    check_settings,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._run.extra_vars import given_as


def platform_cvs_config(config: Any, base: Any = None) -> dict:
    """The role's settings with upstream's host block applied (``{settings, honoured}``); a null block leaves them."""
    if config is None:
        return {"settings": dict(base or {}), "honoured": {}}
    try:
        out = platform_settings(config, base)
        check_settings(out["settings"])
    except (PlatformConfigError, PlatformSettingsError) as exc:
        raise AnsibleFilterError(
            f"upstream CVS host configuration ({given_as('-e @host_config.json')}): {exc}"
        ) from exc
    return out


def platform_judge(probes: Any, settings: Any = None) -> dict:
    if not isinstance(probes, Mapping):
        raise AnsibleFilterError(
            f"platform_judge: expected a mapping of node to its platform_probe result, got {type(probes).__name__}"
        )
    try:
        return judge(probes, settings)
    except PlatformSettingsError as exc:
        raise AnsibleFilterError(f"platform: {exc}") from exc


def platform_verdicts(hosts: Any, settings: Any, started: Any = None, upstream: Any = None) -> dict:
    """Per node (``inventory_hostname``), its check record from every host's ``_platform_probe``, with ``started``
    and ``upstream`` (the upstream keys honoured); hosts without a probe are left out."""
    if isinstance(hosts, (str, Mapping)) or not isinstance(hosts, Sequence):
        raise AnsibleFilterError("platform_verdicts: expected the variables of the play's hosts (a list of hostvars)")
    probes = {
        str(hv.get("inventory_hostname")): hv.get("_platform_probe")
        for hv in hosts
        if hv.get("_platform_probe") is not None
    }
    verdicts = platform_judge(probes, settings)
    return {
        node: {**verdict, "started": started, "upstream": dict(upstream or {})} for node, verdict in verdicts.items()
    }


class FilterModule:
    """Platform configuration filters."""

    def filters(self) -> dict:
        return {
            "platform_judge": platform_judge,
            "platform_verdicts": platform_verdicts,
            "platform_cvs_config": platform_cvs_config,
        }
