"""Unit tests for plugin_utils/_slurm.py on output of a real Slurm 22.05 (tests/unit/fixtures/slurm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._slurm import inventory_hosts, parse_oneliner, unavailable

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "slurm"


def test_parse_oneliner_reads_every_node_with_values_that_hold_spaces_and_equals_signs() -> None:
    nodes = parse_oneliner((FIXTURES / "show-node-3-idle.txt").read_text())
    assert [n["NodeName"] for n in nodes] == ["n1", "n2", "n3"]
    first = nodes[0]
    assert first["NodeAddr"] == "127.0.0.1" and first["State"] == "IDLE" and first["Partitions"] == "debug"
    assert first["CfgTRES"] == "cpu=2,mem=2000M,billing=2"
    assert first["OS"].startswith("Linux ") and " #1 SMP" in first["OS"]
    assert first["AllocTRES"] == ""


def test_a_drained_node_keeps_its_reason_with_spaces() -> None:
    (node,) = parse_oneliner((FIXTURES / "show-node-drained.txt").read_text())
    assert node["State"] == "IDLE+DRAIN"
    assert node["Reason"].startswith("bad fan test [root@")
    assert unavailable(node["State"])


@pytest.mark.parametrize(
    ("state", "down"),
    [
        ("IDLE", False),
        ("ALLOCATED", False),
        ("MIXED", False),
        ("IDLE+DRAIN", True),
        ("ALLOCATED+DRAIN", True),
        ("DOWN*", True),
        ("IDLE*", True),
        ("DOWN+NOT_RESPONDING", True),
        ("IDLE+MAINTENANCE", True),
        ("IDLE+COMPLETING", False),
    ],
)
def test_unavailable_states(state: str, down: bool) -> None:
    assert unavailable(state) is down


def test_inventory_hosts_keep_slurms_order_and_only_the_partitions_nodes() -> None:
    nodes = parse_oneliner((FIXTURES / "show-node-3-idle.txt").read_text())
    nodes[1] = {**nodes[1], "State": "IDLE+DRAIN", "Reason": "bad fan [root@2026-12-07T02:03:30]"}
    nodes.append({"NodeName": "other", "NodeAddr": "10.0.0.9", "State": "IDLE", "Partitions": "gpu"})
    hosts = inventory_hosts(nodes, "debug")
    assert [h["name"] for h in hosts] == ["n1", "n2", "n3"]
    assert hosts[0]["vars"] == {
        "ansible_host": "127.0.0.1",
        "slurm_node": "n1",
        "slurm_state": "IDLE",
        "slurm_available": True,
        "slurm_partitions": ["debug"],
        "slurm_cpus": 2,
    }
    assert hosts[1]["vars"]["slurm_available"] is False
    assert hosts[1]["vars"]["slurm_reason"] == "bad fan [root@2026-12-07T02:03:30]"
    assert inventory_hosts(nodes, "gpu")[0]["vars"]["ansible_host"] == "10.0.0.9"
    assert inventory_hosts(nodes, "none") == []
