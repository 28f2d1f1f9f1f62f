"""Unit tests for plugin_utils/_quarantine/plan.py: verdicts + ``scontrol --oneliner show node`` (a real Slurm
22.05's lines, tests/unit/fixtures/slurm) to drain and resume actions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.plan import (
    QuarantineError,
    inventory_plan,
    node_outcomes,
    settings,
    show_argv,
    slurm_plan,
    summary_lines,
    update_argv,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "slurm"
RUN = "20261207-220000-abcdef"


def _show(**nodes: tuple[str, str]) -> str:
    """Real ``show node`` lines of n1..n3 with each named node's State and Reason replaced."""
    lines = []
    for line in (FIXTURES / "show-node-3-idle.txt").read_text().splitlines():
        name = line.split()[0].split("=", 1)[1]
        line = re.sub(r"State=\S+ ", "State=IDLE ", line.split(" Reason=", 1)[0])  # the fixture drains n2
        if name in nodes:
            state, reason = nodes[name]
            line = line.replace("State=IDLE ", f"State={state} ")
            if reason:
                line += f" Reason={reason} [root@2026-12-07T02:03:30]"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _check(status: str, reason: str = "", **extra: Any) -> dict[str, Any]:
    return {"status": status, "reason": reason, **extra}


def _results(**nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "run_id": RUN,
        "checks": ["preflight", "rvs", "maxtext"],
        "nodes": {n: {"checks": checks} for n, checks in nodes.items()},
    }


PASSED = {"preflight": _check("PASS"), "rvs": _check("PASS")}


def test_a_node_that_failed_rvs_is_drained_with_the_cvs_reason() -> None:
    outcomes = node_outcomes(
        _results(
            n1=PASSED,
            n2={"preflight": _check("PASS"), "rvs": _check("FAIL", "n2: rvs test gst_single FAIL")},
            n3=PASSED,
        )
    )
    assert outcomes["n2"] == {"status": "FAIL", "check": "rvs", "why": "test gst_single FAIL"}
    plan = slurm_plan(outcomes, _show(), RUN)
    assert plan["drain"] == ["n2"] and plan["resume"] == [] and plan["held"] == ""
    (row,) = [r for r in plan["actions"] if r["node"] == "n2"]
    assert row["new_reason"] == f"cvs: rvs: test gst_single FAIL (run {RUN})" and row["state"] == "IDLE"
    assert update_argv(row, "/etc/slurm/slurm.conf") == [
        "env",
        "SLURM_CONF=/etc/slurm/slurm.conf",
        "scontrol",
        "update",
        "NodeName=n2",
        "State=DRAIN",
        f"Reason=cvs: rvs: test gst_single FAIL (run {RUN})",
    ]


def test_a_passing_node_is_resumed_only_from_a_drain_of_ours() -> None:
    outcomes = node_outcomes(_results(n1=PASSED, n2=PASSED, n3=PASSED))
    shown = _show(n1=("IDLE+DRAIN", "cvs: rvs: test mem FAIL (run r0)"), n3=("IDLE+DRAIN", "bad fan"))
    plan = slurm_plan(outcomes, shown, RUN)
    assert plan["resume"] == ["n1"] and plan["drain"] == []
    by_node = {r["node"]: r for r in plan["actions"]}
    assert by_node["n3"]["action"] == "keep" and "by an admin (bad fan)" in by_node["n3"]["why"]
    assert by_node["n2"]["action"] == "none"
    assert update_argv(by_node["n1"]) == ["scontrol", "update", "NodeName=n1", "State=RESUME"]


def test_a_failing_node_already_drained_keeps_its_state_and_reason_whoever_set_it() -> None:
    failed = {"rvs": _check("FAIL", "n1: rvs test mem FAIL")}
    outcomes = node_outcomes(_results(n1=failed, n2=failed, n3=PASSED))
    shown = _show(n1=("IDLE+DRAIN", "bad fan"), n2=("DOWN+DRAIN", "cvs: rvs: earlier (run r0)"))
    plan = slurm_plan(outcomes, shown, RUN, max_fraction=1)
    rows = {r["node"]: r for r in plan["actions"]}
    assert rows["n1"]["action"] == rows["n2"]["action"] == "keep" and plan["drain"] == []
    assert "drained by an admin: bad fan" in rows["n1"]["why"]
    assert "drained by this collection: cvs: rvs: earlier (run r0)" in rows["n2"]["why"]


def test_a_check_that_did_not_run_on_a_node_or_blames_another_says_nothing_of_it() -> None:
    outcomes = node_outcomes(
        _results(
            n1={"preflight": _check("PASS"), "rvs": _check("ERROR", "n1: rvs not run: preflight did not pass on n3")},
            n2={"maxtext": _check("FAIL", "n2: rank 1 died", failed_node="n3")},
            n3={
                "preflight": _check("FAIL", "n3: rvs_version is 1.1.0, not 1.3.0 as on n1, n2"),
                "maxtext": _check("FAIL", "n3: rank 1 died", failed_node="n3"),
            },
        )
    )
    assert outcomes["n1"]["status"] == outcomes["n2"]["status"] == "UNJUDGED"
    assert outcomes["n3"] == {
        "status": "FAIL",
        "check": "preflight",
        "why": "rvs_version is 1.1.0, not 1.3.0 as on n1, n2",
    }
    plan = slurm_plan(outcomes, _show(n1=("IDLE+DRAIN", "cvs: x (run r0)")), RUN)
    assert plan["drain"] == ["n3"] and plan["resume"] == [], "an unjudged node is neither drained nor resumed"


def test_unreachable_is_a_failure_missing_is_not() -> None:
    outcomes = node_outcomes(
        _results(
            n1={"rvs": _check("UNREACHABLE", "n1: unreachable: ssh: connect to host 10.0.0.1 port 22")},
            n2={"rvs": _check("MISSING", "no rvs result for n2")},
            n3={},
        )
    )
    assert outcomes["n1"]["status"] == "FAIL" and outcomes["n1"]["why"].startswith("unreachable: ssh")
    assert outcomes["n2"]["status"] == "UNJUDGED" and outcomes["n3"] == {
        "status": "UNJUDGED",
        "check": None,
        "why": "no check ran",
    }


def test_more_failing_nodes_than_the_fraction_drains_none_and_says_why() -> None:
    failed = {"rvs": _check("FAIL", "rvs test mem FAIL")}
    plan = slurm_plan(node_outcomes(_results(n1=failed, n2=failed, n3=PASSED)), _show(), RUN, max_fraction=0.5)
    assert plan["drain"] == [] and [r["action"] for r in plan["actions"]] == ["held", "held", "none"]
    assert plan["held"].startswith("2 of 3 nodes failed (n1, n2): more than cvs_quarantine_max_fraction 0.5")


def test_a_node_slurm_does_not_know_and_slurm_names() -> None:
    outcomes = node_outcomes(_results(gpu7={"rvs": _check("FAIL", "x")}, n1=PASSED))
    plan = slurm_plan(outcomes, _show(), RUN, {"n1": "n1"}, max_fraction=1)
    rows = {r["node"]: r for r in plan["actions"]}
    assert rows["gpu7"]["action"] == "unknown" and rows["gpu7"]["why"].startswith("Slurm knows no node gpu7")
    plan = slurm_plan(outcomes, _show(), RUN, {"gpu7": "n3"}, max_fraction=1)
    assert plan["drain"] == ["n3"]
    assert show_argv(["n1", "n3"]) == ["scontrol", "--oneliner", "show", "node", "n1,n3"]


def test_without_slurm_the_nodes_to_take_out_and_the_group() -> None:
    outcomes = node_outcomes(_results(n1=PASSED, n2={"rvs": _check("FAIL", "n2: rvs test mem FAIL")}, n3=PASSED))
    plan = inventory_plan(outcomes, "cvs_quarantined", ["n3"])
    assert plan["take_out"] == [{"node": "n2", "check": "rvs", "why": "test mem FAIL"}] and plan["bring_back"] == ["n3"]
    lines = summary_lines(plan, "report", False)
    assert lines == [
        "n2: take out of the run's inventory, into group cvs_quarantined (rvs: test mem FAIL)",
        "n3: passed; may leave group cvs_quarantined",
    ]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"mode": "on"}, "cvs_quarantine: 'on' is not one of off, report, drain"),
        ({"max_fraction": 0}, "cvs_quarantine_max_fraction: 0.0 must be above 0"),
        ({"reason_max": "many"}, "not a number"),
        ({"reason_max": 30}, "the reason limit 30 cannot hold"),
    ],
)
def test_bad_settings_are_refused_naming_them(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(QuarantineError if "limit" not in message else ValueError, match=message):
        settings(raw)


def test_results_without_nodes_are_refused() -> None:
    with pytest.raises(QuarantineError, match=re.escape("results.json has no 'nodes' mapping")):
        node_outcomes({"run_id": RUN})
