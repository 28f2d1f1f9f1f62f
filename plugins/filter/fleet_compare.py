# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter cvs.cluster.fleet_compare (documentation: the sibling fleet_compare.yml).

Logic: plugin_utils/_metrics/fleet.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Dict, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet


def fleet_compare(
    metrics: Any,
    tolerance: Any = None,
    metric_options: Optional[Mapping[str, Any]] = None,
    facts: Optional[Mapping[str, Any]] = None,
    check: str = "metrics",
) -> Dict[str, Any]:
    """Compare {node: {metric: value}} with the fleet median (see fleet_compare.yml)."""
    if not isinstance(metrics, Mapping) or not all(isinstance(v, Mapping) for v in metrics.values()):
        raise AnsibleFilterError(
            "cvs.cluster.fleet_compare expects a mapping of node name to a mapping of metric name to value, "
            f"got {type(metrics).__name__}"
        )
    if facts is not None and not isinstance(facts, Mapping):
        raise AnsibleFilterError("cvs.cluster.fleet_compare: facts must map node names to mappings of facts")
    values: dict[str, dict[str, Any]] = {}
    for node, per in metrics.items():
        for name, value in per.items():
            values.setdefault(str(name), {})[str(node)] = value
    options: dict[str, Any] = {}
    if tolerance is not None:
        options["tolerance"] = tolerance
    if metric_options:
        options["metrics"] = dict(metric_options)
    try:
        return _fleet.compare({check: values}, [str(n) for n in metrics], dict(facts or {}), options)
    except _fleet.FleetOptionsError as exc:
        raise AnsibleFilterError(f"cvs.cluster.fleet_compare: {exc}") from exc


class FilterModule:
    """Fleet comparison."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        return {"fleet_compare": fleet_compare}
