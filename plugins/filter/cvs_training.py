# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters cvs.cluster.threshold_form and cvs.cluster.upstream_training_metrics (docs: the .yml files beside)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.cvs_thresholds import (
    CvsThresholdError,
    is_threshold_file,
    threshold_cell,
    upstream_metrics,
)


def threshold_form(value: Any, cell: Optional[str] = None) -> Any:
    """An upstream CVS threshold file mapped to one cell in this collection's form; any other value unchanged."""
    if not is_threshold_file(value):
        return value
    try:
        return threshold_cell(value, cell)
    except CvsThresholdError as exc:
        raise AnsibleFilterError(f"cvs.cluster.threshold_form: {exc}") from exc


def upstream_training_metrics(
    metrics: Any, nodes: Any, gpus_per_node: Any, baseline: Optional[Mapping[str, Any]] = None
) -> dict:
    """The metrics with upstream CVS's training metric names added (a name both use keeps this collection's value)."""
    if not isinstance(metrics, Mapping):
        raise AnsibleFilterError("cvs.cluster.upstream_training_metrics: expected the output of maxtext_metrics")
    if baseline is not None and not isinstance(baseline, Mapping):
        raise AnsibleFilterError(
            "cvs.cluster.upstream_training_metrics: baseline must be {tokens_per_sec_total, num_nodes}"
        )
    return {**upstream_metrics(metrics, int(nodes), int(gpus_per_node), baseline), **metrics}


class FilterModule:
    def filters(self) -> dict:
        return {"threshold_form": threshold_form, "upstream_training_metrics": upstream_training_metrics}
