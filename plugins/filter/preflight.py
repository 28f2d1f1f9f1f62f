# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters cvs.cluster.preflight_judge and preflight_verdicts (docs: their .yml files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def preflight_verdicts(hosts: Any, expect: Any, sent: Any, returned: Any, started: Any = None) -> dict:
    """Per node (``cvs_node``), its check record: every host's ``_preflight_probe`` judged with the controller's
    clock before (``sent``) and after (``returned``) the probe; hosts without a probe are left out."""
    if isinstance(hosts, (str, Mapping)) or not isinstance(hosts, Sequence):
        raise AnsibleFilterError("preflight_verdicts: expected the variables of the play's hosts (a list of hostvars)")
    probes = {
        str(hv.get("cvs_node") or hv.get("inventory_hostname")): {
            "probe": hv.get("_preflight_probe"),
            "sent": sent,
            "returned": returned,
        }
        for hv in hosts
        if hv.get("_preflight_probe") is not None
    }
    verdicts = preflight_judge(probes, expect)
    return {node: {**verdict, "started": started} for node, verdict in verdicts.items()}


class FilterModule:
    """Preflight filters."""

    def filters(self) -> dict:
        return {"preflight_judge": preflight_judge, "preflight_verdicts": preflight_verdicts}
