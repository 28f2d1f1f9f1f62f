# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters cvs.cluster.rvs_settings, cvs.cluster.rvs_plan and cvs.cluster.rvs_verdict (docs: their .yml files)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._run.extra_vars import given_as
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.plan import check_settings, plan_run
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.verdict import judge_run

_SETTINGS = (
    "rvs_path",
    "rvs_rocm_runtime_lib_path",
    "rvs_config_path_default",
    "rvs_amd_smi_path",
    "rvs_test_level",
    "rvs_tests",
    "rvs_known_tests",
    "rvs_default_timeout",
    "rvs_kill_grace",
    "rvs_fail_regex_patterns",
)


def _mapping(value: Any, what: str, filter_name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AnsibleFilterError(f"{filter_name}: expected {what} (a mapping), got {type(value).__name__}")
    return value


def rvs_settings(given: Any, upstream: Any = None, node: Any = "") -> dict[str, Any]:
    """The role variables (and an upstream CVS rvs block) -> the checked settings, with the first problem."""
    given = _mapping(given, "the rvs role variables", "rvs_settings")
    missing = [key for key in _SETTINGS if key not in given]
    if missing:
        raise AnsibleFilterError(f"rvs_settings: the role variables lack {', '.join(missing)}")
    return check_settings(given, upstream, str(node), given_as("-e rvs=..."))


def rvs_plan(probe: Any, settings: Any, node: Any = "", step_argv: Any = None) -> dict[str, Any]:
    """A node's probe (module rvs_probe) and checked settings -> what to run there, or the problem."""
    probe = _mapping(probe, "the registered result of cvs.cluster.rvs_probe", "rvs_plan")
    settings = _mapping(settings, "the result of cvs.cluster.rvs_settings", "rvs_plan")
    if settings.get("problem"):
        raise AnsibleFilterError(f"rvs_plan: the settings have a problem: {settings['problem']}")
    if step_argv is not None and not isinstance(step_argv, (list, tuple)):
        raise AnsibleFilterError(f"rvs_plan: step_argv must be an argv list, got {type(step_argv).__name__}")
    return plan_run(settings, probe, str(node), list(step_argv or []))


def rvs_verdict(run: Any, plan: Any, node: Any = "", slurm_node: Optional[Any] = None) -> dict[str, Any]:
    """A node's run (module rvs_run) and plan -> each test's entry, the node's status and reason, its Slurm steps."""
    run = _mapping(run, "the registered result of cvs.cluster.rvs_run", "rvs_verdict")
    plan = _mapping(plan, "the result of cvs.cluster.rvs_plan", "rvs_verdict")
    try:
        return judge_run(run, plan, str(node), None if slurm_node is None else str(slurm_node))
    except ValueError as exc:
        raise AnsibleFilterError(f"rvs_verdict: {exc}") from exc


class FilterModule:
    """The rvs role's settings check, plan and verdict."""

    def filters(self) -> dict:
        return {"rvs_settings": rvs_settings, "rvs_plan": rvs_plan, "rvs_verdict": rvs_verdict}
