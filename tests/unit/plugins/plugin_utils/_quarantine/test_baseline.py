"""Unit tests for plugin_utils/_quarantine/baseline.py: a passing run's baseline, refused from another cluster or
schema naming the file and the field."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.baseline import (
    SCHEMA,
    BaselineError,
    build,
    check,
    find_node,
)

FACTS = {
    "kernel": "6.1.0",
    "rocm_version": "6.4.1",
    "amd_smi_version": "24.7.1+0012a68",
    "driver_version": "6.10.5",
    "vbios_version": "113-M3000100-102",
    "rvs_version": "1.3.0",
    "gpu_model": "AMD Instinct MI300X",
    "gpus": 8,
}


def passing_results(run_id: str = "r1", **overrides: dict[str, Any]) -> dict[str, Any]:
    nodes = {}
    for index, node in enumerate(("node1", "node2", "node3")):
        facts = {**FACTS, "hostname": node, **overrides.get(node, {})}
        nodes[node] = {
            "checks": {
                "preflight": {"status": "PASS", "facts": facts},
                "rvs": {
                    "status": "PASS",
                    "metrics": [
                        {"metric": "test mem", "value": 10.0 + index, "unit": "s"},
                        {"metric": "ok", "value": True},
                    ],
                },
            }
        }
    return {"run_id": run_id, "complete": True, "summary": {"status": "PASS"}, "nodes": nodes}


def test_a_passing_run_gives_per_node_and_fleet_facts_and_metric_medians() -> None:
    data = build(passing_results(node3={"kernel": "6.2.0"}), "sim", {"node2": "gpu2"}, "2026-12-07T22:00:00Z")
    assert data["schema"] == SCHEMA == 1 and data["cluster"] == {"name": "sim", "nodes": ["node1", "node2", "node3"]}
    assert data["nodes"]["node2"]["slurm_node"] == "gpu2" and data["nodes"]["node1"]["slurm_node"] == "node1"
    assert data["nodes"]["node1"]["facts"] == FACTS, "hostname is not a baseline fact"
    assert data["fleet"]["facts"]["rvs_version"] == "1.3.0" and "kernel" not in data["fleet"]["facts"]
    assert data["fleet"]["mixed"] == ["kernel"]
    assert data["fleet"]["metrics"] == {"rvs": {"test mem": 11.0}}, "booleans are not metrics"
    assert data["nodes"]["node3"]["metrics"] == {"rvs": {"test mem": 12.0}}
    assert find_node(data, [None, "gpu2"]) == "node2" and find_node(data, ["node3"]) == "node3"
    assert find_node(data, ["elsewhere"]) is None


def test_no_baseline_from_a_run_that_did_not_pass_or_without_preflight() -> None:
    failed = passing_results()
    failed["summary"]["status"] = "FAIL"
    with pytest.raises(BaselineError, match="run r1: no baseline from a run that did not pass"):
        build(failed, None)
    bare = passing_results()
    del bare["nodes"]["node2"]["checks"]["preflight"]
    with pytest.raises(BaselineError, match=r"run r1: nodes.node2: no preflight facts"):
        build(bare, None)


@pytest.mark.parametrize(
    ("change", "name", "nodes", "message"),
    [
        ({"schema": 2}, "sim", [], "/b/baseline.json: schema: 2 is not a baseline schema this collection reads (1)"),
        ({"schema": True}, "sim", [], "/b/baseline.json: schema: True is not"),
        ({"kind": "x"}, "sim", [], "/b/baseline.json: kind: 'x' is not 'cvs.cluster/baseline'"),
        (
            {},
            "prod",
            [],
            "/b/baseline.json: cluster.name: the baseline is of cluster 'sim', this inventory's cluster is 'prod'",
        ),
        ({}, None, [], "cluster.name: the baseline is of cluster 'sim', this inventory's cluster is None"),
        (
            {},
            "sim",
            ["node9"],
            "/b/baseline.json: nodes.node9: missing: the baseline's cluster has node1, node2, node3",
        ),
        ({"cluster": None}, "sim", [], "/b/baseline.json: cluster: missing"),
    ],
)
def test_another_schema_or_cluster_is_refused_naming_the_file_and_the_field(
    change: dict[str, Any], name: Any, nodes: list[str], message: str
) -> None:
    data = {**build(passing_results(), "sim"), **change}
    with pytest.raises(BaselineError) as caught:
        check(data, "/b/baseline.json", name, nodes)
    assert message in str(caught.value)


def test_a_good_baseline_is_accepted() -> None:
    data = build(passing_results(), None)
    assert check(data, "/b/baseline.json", None, ["node1"])["run_id"] == "r1"
