"""Run-level decisions of prepare and dispose (plugins/plugin_utils/_run/plan.py), with the messages users see."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._run import plan

GROUPS = {"cvs_nodes": ["n1", "n2", "n3"], "cvs_head": ["n2"]}


def test_head_node_is_the_cvs_head_host_else_the_first_node() -> None:
    assert plan.head_node(GROUPS) == "n2"
    assert plan.head_node({"cvs_nodes": ["n1", "n2"]}) == "n1"
    assert plan.head_node({"cvs_nodes": ["n1"], "cvs_head": []}) == "n1"
    with pytest.raises(plan.RunPlanError, match="no head node"):
        plan.head_node({"cvs_nodes": []})


def test_new_run_id_is_the_utc_time_and_six_lowercase_letters_or_digits() -> None:
    now = datetime(2026, 12, 5, 7, 15, 0, tzinfo=timezone.utc)
    assert plan.new_run_id(now, lambda: "ab12cd") == "20261205-071500-ab12cd"
    assert re.fullmatch(r"\d{8}-\d{6}-[a-z0-9]{6}", plan.new_run_id())
    assert plan.new_run_id() != plan.new_run_id()


def test_run_plan_numbers_the_head_first_and_names_scratch_and_workload_hosts() -> None:
    got = plan.run_plan(GROUPS, ["n1", "n2", "n3"], "container", "/var/tmp/cvs/", "r1")
    assert got["run_id"] == "r1" and got["head"] == "n2" and got["refused"] == {}
    assert got["nodes"] == {
        "n2": {"index": 0, "scratch": "/var/tmp/cvs/r1/n2", "exec_name": "n2-ctr"},
        "n1": {"index": 1, "scratch": "/var/tmp/cvs/r1/n1", "exec_name": "n1-ctr"},
        "n3": {"index": 2, "scratch": "/var/tmp/cvs/r1/n3", "exec_name": "n3-ctr"},
    }
    bare = plan.run_plan({"cvs_nodes": ["a", "b"]}, ["a", "b"], "baremetal", "/s")
    assert [bare["nodes"][h]["index"] for h in ("a", "b")] == [0, 1]
    assert bare["nodes"]["b"]["exec_name"] == "b"
    assert re.fullmatch(r"\d{8}-\d{6}-[a-z0-9]{6}", bare["run_id"])
    assert bare["nodes"]["a"]["scratch"] == f"/s/{bare['run_id']}/a"


NEEDS = (
    "cvs.cluster.prepare needs cvs_orchestrator baremetal|container|slurm (got {}), a non-empty cvs_nodes group "
    "containing this host and at most one cvs_head host"
)


@pytest.mark.parametrize(
    ("groups", "hosts", "orchestrator", "refused"),
    [
        (GROUPS, ["n1", "n2"], "kubernetes", {"n1", "n2"}),
        (GROUPS, ["n1", "other"], "baremetal", {"other"}),
        ({"cvs_nodes": ["n1", "n2"], "cvs_head": ["n1", "n2"]}, ["n1", "n2"], "slurm", {"n1", "n2"}),
        ({"cvs_nodes": []}, ["n1"], "baremetal", {"n1"}),
    ],
    ids=["orchestrator", "host-outside-cvs_nodes", "two-heads", "no-nodes"],
)
def test_run_plan_refuses_each_host_the_inventory_model_does_not_allow(groups, hosts, orchestrator, refused) -> None:
    got = plan.run_plan(groups, hosts, orchestrator, "/var/tmp/cvs", "r1")
    assert set(got["refused"]) == refused
    for host in refused:
        assert got["refused"][host] == f"{host}: " + NEEDS.format(orchestrator)


def test_plan_in_order_renumbers_and_keeps_only_the_ordered_nodes() -> None:
    first = plan.run_plan(GROUPS, ["n1", "n2", "n3"], "slurm", "/s", "r1")
    got = plan.plan_in_order(first, ["n3", "n1"], "slurm", "/s")
    assert got["head"] == "n3" and got["run_id"] == "r1"
    assert got["nodes"] == {
        "n3": {"index": 0, "scratch": "/s/r1/n3", "exec_name": "n3"},
        "n1": {"index": 1, "scratch": "/s/r1/n1", "exec_name": "n1"},
    }
    with pytest.raises(plan.RunPlanError, match=r"not nodes of the plan: \['n9'\]"):
        plan.plan_in_order(first, ["n1", "n9"], "slurm", "/s")


BECOME = (
    "the baremetal backend needs root on every node: connect as root, or give a working become (become_method {}; a "
    "password with --ask-become-pass, ansible_become_password or a vault). It does not work on: "
)


def test_become_refusal_names_every_node_without_root_and_why() -> None:
    probes = {
        "n1": {"stdout": "0", "rc": 0},
        "n2": {"failed": True, "msg": " Missing sudo password\n"},
        "n3": {"stdout": "1001\n", "rc": 0},
        "n4": {"failed": True},
    }
    assert plan.become_refusal(probes, "su") == BECOME.format("su") + (
        "n2 (Missing sudo password); n3 (become gave uid 1001, not root (become_user?)); "
        "n4 (privilege escalation failed)"
    )
    assert plan.become_refusal({"n1": {"stdout": "0\n"}, "n2": {"stdout": "0"}}) == ""


def test_lease_refusals_give_the_holders_message_and_name_the_held_nodes_to_the_others() -> None:
    held = "n2 is in use by run r0 (lease until 2026-12-07T18:43:21Z, taken by root@vm pid 1); wait for it to end"
    leases = {"n1": {"lease": {}, "stale_run": ""}, "n2": {"msg": held, "holder": {}}, "n3": {"changed": True}}
    assert plan.lease_refusals(leases) == {
        "n1": "n1: nothing was started: another run holds n2",
        "n2": held,
        "n3": "n3: nothing was started: another run holds n2",
    }
    assert plan.lease_refusals({"n1": {"lease": {}}, "n2": {}}) == {}


def test_two_inventory_names_for_one_machine_stop_every_node_naming_both() -> None:
    one = {"machine_id": "3d12", "boot_id": "4628", "hostname": "node1", "key": "k1"}
    # whichever name took the lease first, the other was refused by the module: both are named the same way
    leases = {
        "node1": {"lease": {}, "machine": one},
        "node2": {"lease": {}, "machine": {**one, "hostname": "node2", "key": "k2"}},
        "node1-again": {"msg": "node1-again and node1 are one machine (...)", "holder": {}, "machine": one},
    }
    refusals = plan.lease_refusals(leases)
    assert (
        refusals["node1"]
        == refusals["node1-again"]
        == (
            "node1, node1-again: one machine (host name node1, machine-id 3d12, boot id 4628) under 2 inventory names: "
            "nothing was started; give each machine one inventory name"
        )
    )
    assert (
        refusals["node2"] == "node2: nothing was started: the inventory names one machine twice (node1 and node1-again)"
    )
    assert plan.same_machines(leases) == [["node1", "node1-again"]]
    # answers without a machine (a node that failed before) are not one machine
    assert plan.same_machines({"a": {}, "b": {"machine": {}}, "c": None}) == []


def test_a_run_id_that_cannot_name_a_directory_stops_the_plan_and_host_names_are_escaped() -> None:
    with pytest.raises(plan.RunPlanError, match=re.escape("cvs_run_id: '../x' cannot be used: it holds '/'")):
        plan.run_plan({"cvs_nodes": ["n1"]}, ["n1"], "baremetal", "/s", "../x")
    made = plan.run_plan({"cvs_nodes": ["../../../x/d", ".."]}, ["..", "../../../x/d"], "container", "/s", "r1")
    assert made["nodes"]["../../../x/d"]["scratch"] == "/s/r1/..%2F..%2F..%2Fx%2Fd"
    assert made["nodes"][".."] == {"index": 1, "scratch": "/s/r1/%2E%2E", "exec_name": "..-ctr"}


def test_stale_notice_names_the_dead_run_and_what_was_stopped() -> None:
    lease = {"stale_run": "r0", "stale_stopped": [{"pid": 4, "args": "python3 train.py"}, {"pid": 5, "args": "sh"}]}
    assert plan.stale_notice("n3", lease) == (
        "n3: run r0 died holding this node (its controller is gone or its lease expired); stopped 2 of its "
        'processes ["python3 train.py", "sh"]'
    )
    assert plan.stale_notice("n3", {"stale_run": "", "stale_stopped": []}) == ""


def test_stopped_lines_name_each_node_with_processes_of_the_run() -> None:
    stopped = {
        "n1": {"processes": [{"pid": 7, "args": "./launch.sh"}]},
        "n2": {"processes": []},
        "n3": {"skipped": True},
    }
    assert plan.stopped_lines(stopped, "r1") == ["n1: stopped 1 process(es) of run r1: " + json.dumps(["./launch.sh"])]
