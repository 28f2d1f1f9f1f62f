# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters head_node, run_plan, run_plan_in_order, become_refusal, lease_refusals, stopped_lines, run_verdict,
dispose_failures and unwritten_verdicts.

Documentation: the .yml files beside this file. Logic: plugins/plugin_utils/_run/plan.py and _run/verdict.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._run import plan as _plan
from ansible_collections.cvs.cluster.plugins.plugin_utils._run import verdict as _verdict


def _by_host(hosts: Iterable[str], results: Iterable[Any]) -> dict[str, Mapping[str, Any]]:
    return {str(h): (r if isinstance(r, Mapping) else {}) for h, r in zip(hosts, results)}


def head_node(groups: Mapping[str, Any]) -> str:
    try:
        return _plan.head_node(groups)
    except _plan.RunPlanError as exc:
        raise AnsibleFilterError(f"head_node: {exc}") from None


def run_plan(
    groups: Mapping[str, Any],
    hosts: Iterable[str],
    orchestrator: Any,
    scratch_root: str,
    run_id: Optional[str] = None,
) -> dict[str, Any]:
    try:
        return _plan.run_plan(groups, list(hosts), orchestrator, scratch_root, run_id)
    except _plan.RunPlanError as exc:
        raise AnsibleFilterError(f"run_plan: {exc}") from None


def run_plan_in_order(plan: Mapping[str, Any], order: Sequence[str], orchestrator: Any, scratch_root: str) -> dict:
    try:
        return _plan.plan_in_order(plan, list(order), orchestrator, scratch_root)
    except _plan.RunPlanError as exc:
        raise AnsibleFilterError(f"run_plan_in_order: {exc}") from None


def become_refusal(probes: Iterable[Any], hosts: Iterable[str], method: Optional[str] = None) -> str:
    return _plan.become_refusal(_by_host(hosts, probes), method or "sudo")


def lease_refusals(leases: Iterable[Any], hosts: Iterable[str]) -> dict[str, str]:
    return _plan.lease_refusals(_by_host(hosts, leases))


def stopped_lines(results: Iterable[Any], hosts: Iterable[str], run_id: str) -> list[str]:
    return _plan.stopped_lines(_by_host(hosts, results), str(run_id))


def run_verdict(report: Any, host: str, node: str, nodes: Iterable[str], node_vars: Iterable[Any]) -> str:
    report = report if isinstance(report, Mapping) else {}
    return _verdict.verdict(report, str(host), str(node or ""), list(nodes), list(node_vars))


def dispose_failures(steps: Any) -> str:
    if not isinstance(steps, Mapping):
        raise AnsibleFilterError("cvs.cluster.dispose_failures expects a mapping of dispose step names to results")
    return _verdict.dispose_failures(steps)


def unwritten_verdicts(hosts: Iterable[str], hostvars: Any) -> list[dict[str, Any]]:
    hosts = [str(h) for h in hosts]
    return _verdict.unwritten_verdicts(hosts, [hostvars.get(h, {}) for h in hosts])


class FilterModule:
    def filters(self) -> dict:
        return {
            "head_node": head_node,
            "run_plan": run_plan,
            "run_plan_in_order": run_plan_in_order,
            "become_refusal": become_refusal,
            "lease_refusals": lease_refusals,
            "stopped_lines": stopped_lines,
            "run_verdict": run_verdict,
            "dispose_failures": dispose_failures,
            "unwritten_verdicts": unwritten_verdicts,
        }
