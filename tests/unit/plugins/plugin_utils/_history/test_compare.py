"""Unit tests: two runs compared node by node (plugin_utils/_history/compare.py, filter cvs.cluster.compare)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.compare import FilterModule
from ansible_collections.cvs.cluster.plugins.plugin_utils._history.compare import compare

BW = "pebb_single bandwidth_gbps"


def _run(run_id: str, values: dict[str, float], status: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "nodes": {n: {"checks": {"rvs": {"status": (status or {}).get(n, "PASS")}}} for n in values},
        "history": {
            "values": {n: {"rvs": {BW: v, "tst step_time": 2.0}} for n, v in values.items()},
            "units": {"rvs": {BW: "GB/s", "tst step_time": "s"}},
        },
    }


def test_compare_names_node_metric_and_both_values() -> None:
    a = _run("r1", {"node1": 57.7, "node2": 57.6, "node3": 57.7})
    b = _run("r3", {"node1": 57.7, "node2": 60.0, "node3": 51.93}, {"node2": "FAIL"})
    out = compare(a, b)
    assert out["status"] == "CHANGED" and out["worse_nodes"] == ["node3"]
    worst = out["rows"][0]
    assert (worst["node"], worst["metric"], worst["a"], worst["b"], worst["status"]) == (
        "node3",
        BW,
        57.7,
        51.93,
        "WORSE",
    )
    assert worst["change"] == pytest.approx(-0.1, abs=0.001)
    assert "node3 rvs pebb_single bandwidth_gbps: 57.7 GB/s -> 51.93 GB/s (-10.0%, worse)" in out["lines"]
    assert "node2 rvs: PASS in r1 -> FAIL in r3" in out["lines"]
    assert not any(line.startswith("node1") for line in out["lines"])
    assert compare(a, b, {"tolerance": "15%"})["worse_nodes"] == []


def test_nodes_and_metrics_in_one_run_only() -> None:
    a = _run("r1", {"node1": 57.7, "node2": 57.6})
    b = _run("r2", {"node1": 57.7, "node4": 57.6})
    out = compare(a, b)
    assert out["nodes_only_a"] == ["node2"] and out["nodes_only_b"] == ["node4"]
    assert "node2: only in r1" in out["lines"] and "node4: only in r2" in out["lines"]
    assert {r["status"] for r in out["rows"] if r["node"] != "node1"} == {"ONLY_A", "ONLY_B"}
    same = compare(a, a)
    assert same["status"] == "SAME" and same["lines"] == ["r1 and r1: no difference beyond the tolerance"]


def test_older_results_without_history_use_the_fleet_rows() -> None:
    def old(run_id: str, v: float) -> dict[str, Any]:
        return {
            "run_id": run_id,
            "nodes": {"n1": {"checks": {}}},
            "fleet": {"metrics": [{"check": "maxtext", "metric": "tflops_per_device", "nodes": {"n1": {"value": v}}}]},
        }

    out = compare(old("a", 150.0), old("b", 120.0))
    assert out["rows"][0]["status"] == "WORSE" and out["rows"][0]["metric"] == "tflops_per_device"


def test_the_filter_refuses_what_is_not_a_run_naming_which() -> None:
    f = FilterModule().filters()["compare"]
    assert f(_run("a", {"n": 1.0}), _run("b", {"n": 1.0}), "5%")["status"] == "SAME"
    with pytest.raises(AnsibleFilterError, match=r"cvs.cluster.compare: compare: the second run is not a run record"):
        f(_run("a", {"n": 1.0}), "results.json")
    with pytest.raises(AnsibleFilterError, match="tolerance: 'x' is not a number or a percentage"):
        f(_run("a", {"n": 1.0}), _run("b", {"n": 1.0}), "x")
