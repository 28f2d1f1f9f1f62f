"""Filters rvs_settings, rvs_plan and rvs_verdict (plugins/filter/rvs_plan.py): their inputs are checked and the pure
functions of plugin_utils/_rvs/ do the work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.rvs_plan import FilterModule

FILTERS = FilterModule().filters()
DEFAULTS = yaml.safe_load((Path(__file__).resolve().parents[4] / "roles" / "rvs" / "defaults" / "main.yml").read_text())
GIVEN = {k: v for k, v in DEFAULTS.items() if k not in ("rvs_results_dir", "rvs_fail_on_error", "rvs_poll_interval")}
PROBE = {
    "rvs": {"path": "/opt/rocm/bin/rvs", "usable": True},
    "version": {"rc": 0, "stdout": "1.3.0\n"},
    "amd_smi": {"rc": 1, "stdout": ""},
    "configs": [],
}


def test_the_three_filters_are_there() -> None:
    assert sorted(FILTERS) == ["rvs_plan", "rvs_settings", "rvs_verdict"]


def test_settings_name_missing_role_variables() -> None:
    given = {k: v for k, v in GIVEN.items() if k != "rvs_kill_grace"}
    with pytest.raises(AnsibleFilterError, match=r"^rvs_settings: the role variables lack rvs_kill_grace$"):
        FILTERS["rvs_settings"](given, None, "node1")
    with pytest.raises(AnsibleFilterError, match=r"expected the rvs role variables \(a mapping\), got list"):
        FILTERS["rvs_settings"]([], None, "node1")


def test_an_upstream_block_error_says_how_the_block_was_given() -> None:
    problem = FILTERS["rvs_settings"](GIVEN, {"test": []}, "node1")["problem"]
    assert problem.startswith("upstream CVS rvs block (-e rvs=...): rvs.test: is not a key of upstream's rvs schema")


def test_settings_plan_and_verdict_chain() -> None:
    settings = FILTERS["rvs_settings"](GIVEN, None, "node1")
    plan = FILTERS["rvs_plan"](PROBE, settings, "node1", ["srun", "--jobid=7"])
    assert plan["mode"] == "level" and plan["commands"][0]["argv"][:3] == ["srun", "--jobid=7", "timeout"]
    verdict = FILTERS["rvs_verdict"]({"failed": True, "msg": "lost"}, plan, "node1", None)
    assert (
        verdict["status"] == "ERROR" and verdict["reason"] == "node1: rvs test level4 ERROR (rvs did not finish: lost)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("probe?", {}), r"rvs_plan: expected the registered result of cvs.cluster.rvs_probe \(a mapping\), got str"),
        ((PROBE, {"problem": "node1: bad level"}), r"rvs_plan: the settings have a problem: node1: bad level"),
        ((PROBE, {"problem": None}, "n", "srun"), r"rvs_plan: step_argv must be an argv list, got str"),
    ],
)
def test_plan_refuses_what_it_cannot_use(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS["rvs_plan"](*args)


def test_verdict_refuses_what_it_cannot_use() -> None:
    with pytest.raises(AnsibleFilterError, match=r"rvs_verdict: expected the result of cvs.cluster.rvs_plan"):
        FILTERS["rvs_verdict"]({}, None)
    with pytest.raises(AnsibleFilterError, match=r"rvs_verdict: expected the registered result of cvs.cluster.rvs_run"):
        FILTERS["rvs_verdict"]("out", {})
