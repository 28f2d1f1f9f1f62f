"""Cross-node container decisions of prepare (plugins/plugin_utils/_container/lifetime.py)."""

from __future__ import annotations

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._container import lifetime


def test_probe_records_read_the_facts_prepare_keeps_on_each_node() -> None:
    facts = [
        {"_cvs_state": "running", "_cvs_prepare_error": "", "_cvs_started": False},
        {"_cvs_prepare_error": "docker does not answer"},  # inspection failed: no state
        {"_cvs_state": "absent", "_cvs_prepare_error": "", "_cvs_started": "True"},  # a fact kept as text
    ]
    assert lifetime.probe_records(facts, ["n1", "n2", "n3"]) == [
        {"host": "n1", "state": "running", "error": "", "started": False},
        {"host": "n2", "state": "", "error": "docker does not answer", "started": False},
        {"host": "n3", "state": "absent", "error": "", "started": True},
    ]


def test_per_run_refuses_an_existing_container_naming_the_nodes() -> None:
    probes = lifetime.probe_records([{"_cvs_state": "absent"}, {"_cvs_state": "stopped"}], ["n1", "n2"])
    got = lifetime.decide_lifetime(probes, "per_run", "cvs-node")
    assert not got["ok"]
    assert got["message"] == (
        "lifetime per_run needs a fresh container, but container 'cvs-node' already exists on n2; remove it "
        "(cvs.cluster.dispose) or use lifetime persistent"
    )


def test_a_node_that_could_not_be_inspected_or_left_refuses_before_launching() -> None:
    probes = lifetime.probe_records([{"_cvs_state": "absent"}, {"_cvs_prepare_error": "engine down"}], ["n1", "n2"])
    got = lifetime.decide_lifetime(probes, "per_run", "cvs-node", ["n3"])
    assert got["message"] == (
        "cvs.cluster.prepare failed before launching anything on n2: engine down; n3: unreachable or failed earlier "
        "in the play"
    )


def test_persistent_attaches_launches_or_refuses_a_mixed_state() -> None:
    running = lifetime.probe_records([{"_cvs_state": "running"}] * 2, ["n1", "n2"])
    assert lifetime.decide_lifetime(running, "persistent", "c") == {
        "ok": True, "message": "", "launch": [], "attach": ["n1", "n2"]
    }  # fmt: skip
    mixed = lifetime.probe_records([{"_cvs_state": "running"}, {"_cvs_state": "absent"}], ["n1", "n2"])
    assert "refusing a mixed state" in lifetime.decide_lifetime(mixed, "persistent", "c")["message"]
    with pytest.raises(lifetime.LifetimeError):
        lifetime.decide_lifetime(running, "forever", "c")


def test_rollback_removes_only_what_this_run_started_when_a_node_failed() -> None:
    probes = lifetime.probe_records(
        [{"_cvs_started": True}, {"_cvs_prepare_error": "sshd failed", "_cvs_started": True}, {"_cvs_started": False}],
        ["n1", "n2", "n3"],
    )
    got = lifetime.decide_rollback(probes)
    assert got["remove"] == ["n1", "n2"] and got["failed"] == ["n2"]
    assert got["message"] == (
        "cvs.cluster.prepare failed on n2: n2: sshd failed. Containers started by this run on other nodes were removed."
    )
    assert lifetime.decide_rollback(lifetime.probe_records([{}], ["n1"]))["ok"]


def test_the_container_probes_filter_reads_the_nodes_variables() -> None:
    from ansible_collections.cvs.cluster.plugins.filter.container_probes import FilterModule

    probes = FilterModule().filters()["container_probes"]
    assert probes([{"_cvs_state": "running"}], ["n1"]) == [
        {"host": "n1", "state": "running", "error": "", "started": False}
    ]
    assert probes(None, None) == []
