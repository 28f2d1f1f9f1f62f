# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the cvs.cluster.maxtext role: maxtext_settings, maxtext_node_problems, maxtext_node_view,
maxtext_run_verdicts and maxtext_check_record (docs: the .yml files beside). The logic is
plugin_utils/_maxtext/settings.py, node_checks.py and verdict.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.messages import type_name
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.node_checks import node_problems
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.settings import check_settings
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.verdict import check_record, node_view, run_verdicts


def _mapping(name: str, value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AnsibleFilterError(f"cvs.cluster.{name} expects {what}, got {type_name(value)}")
    return value


def maxtext_settings(variables: Any) -> dict[str, Any]:
    return check_settings(_mapping("maxtext_settings", variables, "a mapping of the role's variable names to values"))


def maxtext_node_problems(preflight: Any, armed: Any, node: Any, python: Any) -> dict[str, Any]:
    _mapping("maxtext_node_problems", preflight, "the registered result of the node checks")
    _mapping("maxtext_node_problems", armed, "the registered result of arming the log watch as its first argument")
    return node_problems(str(node), str(python), preflight, armed)


def maxtext_node_view(facts: Any) -> dict[str, Any]:
    facts = _mapping("maxtext_node_view", facts, "a mapping of what the role gathered on the node")
    for key in ("node", "nodes"):
        if key not in facts:
            raise AnsibleFilterError(f"cvs.cluster.maxtext_node_view: '{key}' is missing")
    try:
        return node_view(facts)
    except ValueError as exc:
        raise AnsibleFilterError(f"cvs.cluster.maxtext_node_view: {exc}") from exc


def maxtext_run_verdicts(views: Any) -> dict[str, dict[str, str]]:
    if not isinstance(views, (list, tuple)) or not all(isinstance(v, Mapping) and "host" in v for v in views):
        raise AnsibleFilterError("cvs.cluster.maxtext_run_verdicts expects the list of the nodes' maxtext_node_view")
    return run_verdicts(views)


def maxtext_check_record(view: Any, verdict: Any = None) -> dict[str, Any]:
    view = _mapping("maxtext_check_record", view, "the node's maxtext_node_view")
    if verdict is not None:
        _mapping("maxtext_check_record", verdict, "the node's entry of maxtext_run_verdicts as its argument")
    return check_record(view, verdict)


class FilterModule:
    """The MaxText role's settings check and verdict."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "maxtext_settings": maxtext_settings,
            "maxtext_node_problems": maxtext_node_problems,
            "maxtext_node_view": maxtext_node_view,
            "maxtext_run_verdicts": maxtext_run_verdicts,
            "maxtext_check_record": maxtext_check_record,
        }
