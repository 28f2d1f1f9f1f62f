"""The run_plan filters (plugins/filter/run_plan.py): the plugin over plugin_utils/_run/plan.py and verdict.py."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.run_plan import FilterModule

FILTERS = FilterModule().filters()


def test_every_filter_is_exposed() -> None:
    assert set(FILTERS) == {
        "head_node", "run_plan", "run_plan_in_order", "become_refusal", "lease_refusals", "stopped_lines",
        "run_verdict", "dispose_failures", "unwritten_verdicts",
    }  # fmt: skip


def test_head_node_raises_a_filter_error_without_nodes() -> None:
    assert FILTERS["head_node"]({"cvs_nodes": ["a", "b"], "cvs_head": ["b"]}) == "b"
    with pytest.raises(AnsibleFilterError, match="head_node: no head node"):
        FILTERS["head_node"]({"cvs_nodes": []})


def test_results_are_matched_to_hosts_in_order() -> None:
    probes = [{"stdout": "0"}, {"failed": True, "msg": "Incorrect sudo password"}]
    assert FILTERS["become_refusal"](probes, ["a", "b"], None).endswith(
        "It does not work on: b (Incorrect sudo password)"
    )
    assert FILTERS["lease_refusals"]([{}, {"msg": "b is in use"}], ["a", "b"]) == {
        "a": "a: nothing was started: another run holds b",
        "b": "b is in use",
    }
    assert FILTERS["stopped_lines"]([{"processes": [{"args": "x"}]}, None], ["a", "b"], "r") == [
        'a: stopped 1 process(es) of run r: ["x"]'
    ]


def test_run_plan_in_order_raises_a_filter_error_for_an_unknown_node() -> None:
    plan = FILTERS["run_plan"]({"cvs_nodes": ["a", "b"]}, ["a", "b"], "slurm", "/s", "r")
    assert FILTERS["run_plan_in_order"](plan, ["b", "a"], "slurm", "/s")["head"] == "b"
    with pytest.raises(AnsibleFilterError, match="run_plan_in_order"):
        FILTERS["run_plan_in_order"](plan, ["c"], "slurm", "/s")


def test_run_verdict_takes_an_unwritten_report_as_a_failed_run() -> None:
    assert FILTERS["run_verdict"](None, "localhost", "", [], []) == "the run report was not written"
    assert FILTERS["run_verdict"]({}, "n1", "n1", ["n1"], []) == ""


def test_dispose_failures_and_unwritten_verdicts_reach_the_verdict_module() -> None:
    steps = {"release the lease": {"failed": True, "msg": "held by r2"}, "stop": {"skipped": True}}
    assert FILTERS["dispose_failures"](steps) == "release the lease: held by r2"
    with pytest.raises(AnsibleFilterError, match="dispose_failures expects a mapping"):
        FILTERS["dispose_failures"](["x"])
    facts = {"cvs_unwritten_records": {"rvs": {"path": "/p", "error": "e", "record": {"node": "n1", "status": "PASS"}}}}
    got = FILTERS["unwritten_verdicts"](["n1-ctr", "n2-ctr"], {"n1-ctr": {"ansible_facts": facts}})
    assert got == [
        {"node": "n1", "check": "rvs", "path": "/p", "error": "e", "record": {"node": "n1", "status": "PASS"}}
    ]
