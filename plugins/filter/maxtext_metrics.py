# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters cvs.cluster.maxtext_metrics, check_thresholds, maxtext_first_failure and maxtext_first_error.

Documentation lives in the sibling maxtext_metrics.yml, check_thresholds.yml, maxtext_first_failure.yml and
maxtext_first_error.yml.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Callable, Dict, List

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.failure import first_error, first_failure
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import maxtext_metrics as _maxtext_metrics
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics.thresholds import evaluate_thresholds


def _type_name(value: Any) -> str:
    """Plain type name (Ansible wraps templated values in private subclasses)."""
    if value is None:
        return "None"
    for kind, name in ((bool, "bool"), (str, "str"), (bytes, "bytes"), (int, "int"), (float, "float")):
        if isinstance(value, kind):
            return name
    if isinstance(value, Mapping):
        return "dict"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


def _log_text(value: Any) -> Any:
    """Accept a string, bytes or a list of lines; reject anything else clearly."""
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, (list, tuple)):
        bad = [_type_name(item) for item in value if not isinstance(item, (str, bytes))]
        if bad:
            raise AnsibleFilterError(
                f"cvs.cluster.maxtext_metrics: a list input must hold log lines (strings), found {bad[0]}"
            )
        return value
    hint = ""
    if isinstance(value, Mapping):
        hint = " - pass the log text itself, e.g. result.stdout or (slurped.content | b64decode)"
    raise AnsibleFilterError(
        f"cvs.cluster.maxtext_metrics expects the MaxText log as a string or a list of lines, "
        f"got {_type_name(value)}{hint}"
    )


def maxtext_metrics(text: Any, warmup_steps: Any = 1, window: Any = 10) -> Dict[str, Any]:
    """Summarise a MaxText training log (see maxtext_metrics.yml)."""
    log = _log_text(text)
    try:
        return _maxtext_metrics(log, warmup_steps=warmup_steps, window=window)
    except ValueError as exc:
        raise AnsibleFilterError(f"cvs.cluster.maxtext_metrics: {exc}") from exc


def check_thresholds(metrics: Any, thresholds: Any = None) -> List[Dict[str, Any]]:
    """Evaluate metrics against thresholds (see check_thresholds.yml)."""
    if not isinstance(metrics, Mapping):
        raise AnsibleFilterError(
            f"cvs.cluster.check_thresholds expects a mapping of metric name to value as input, "
            f"got {_type_name(metrics)}"
        )
    if thresholds is not None and not isinstance(thresholds, Mapping):
        raise AnsibleFilterError(
            f"cvs.cluster.check_thresholds: thresholds must be a mapping of metric name to "
            f"{{min|max|target|record ...}}, got {_type_name(thresholds)}"
        )
    try:
        return evaluate_thresholds(metrics, thresholds)
    except ValueError as exc:
        raise AnsibleFilterError(f"cvs.cluster.check_thresholds: {exc}") from exc


def maxtext_first_failure(nodes: Any) -> Any:
    """The node a failed multi-node run is blamed on (see maxtext_first_failure.yml)."""
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(n, Mapping) and "node" in n for n in nodes):
        raise AnsibleFilterError("cvs.cluster.maxtext_first_failure expects a list of mappings with a 'node' key")
    return first_failure(nodes)


def maxtext_first_error(text: Any, patterns: Any, ignore_patterns: Any = None) -> Any:
    """The name of the first error pattern matching a line of a log (see maxtext_first_error.yml)."""
    if not isinstance(patterns, Mapping) or not isinstance(ignore_patterns or {}, Mapping):
        raise AnsibleFilterError("cvs.cluster.maxtext_first_error expects patterns as mappings of name to regex")
    try:
        return first_error(str(text or ""), patterns, ignore_patterns or {})
    except re.error as exc:
        raise AnsibleFilterError(f"cvs.cluster.maxtext_first_error: invalid regex: {exc}") from exc


class FilterModule:
    """MaxText metrics and threshold checks."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        return {
            "maxtext_metrics": maxtext_metrics,
            "check_thresholds": check_thresholds,
            "maxtext_first_failure": maxtext_first_failure,
            "maxtext_first_error": maxtext_first_error,
        }
