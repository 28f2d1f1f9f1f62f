# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter cvs.cluster.compare (documentation: the sibling compare.yml).

Logic: plugin_utils/_history/compare.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Dict, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._history import compare as _compare
from ansible_collections.cvs.cluster.plugins.plugin_utils._history import index as _index
from ansible_collections.cvs.cluster.plugins.plugin_utils._history import trend as _trend


def compare(
    run_a: Any, run_b: Any, tolerance: Any = None, metric_options: Optional[Mapping[str, Any]] = None
) -> Dict[str, Any]:
    """Compare two run records (results.json) node by node (see compare.yml)."""
    options: dict[str, Any] = {}
    if tolerance is not None:
        options["tolerance"] = tolerance
    if metric_options:
        options["metrics"] = dict(metric_options)
    try:
        return _compare.compare(run_a, run_b, options)
    except (_index.HistoryError, _trend.HistoryOptionsError) as exc:
        raise AnsibleFilterError(f"cvs.cluster.compare: {exc}") from exc


class FilterModule:
    """Run comparison."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        return {"compare": compare}
