"""The workload hosts' facts and the node table (plugin_utils/_run/node_facts.py)."""

from __future__ import annotations

from ansible_collections.cvs.cluster.plugins.plugin_utils._run.node_facts import node_facts, node_table

PROBE = {
    "hostname": "node2.cluster.example",
    "kernel": "6.1.0-28-amd64",
    "cpus": 128,
    "memory_mb": 1572864,
    "address": "10.77.0.12",
    "gpu_render_nodes": 8,
}


def test_a_probed_host_reports_its_facts_and_the_run_facts_beside_them() -> None:
    values = {"cvs_node_facts": PROBE, "cvs_backend": "container", "cvs_gpu_model": "MI300X", "cvs_rocm_version": None}
    assert node_facts(values) == {
        "hostname": "node2",
        "address": "10.77.0.12",
        "kernel": "6.1.0-28-amd64",
        "cpus": 128,
        "memory_gib": 1536,
        "gpus": 8,
        "gpu_model": "MI300X",
        "backend": "container",
    }


def test_a_host_whose_probe_failed_or_never_ran_reports_only_what_the_run_knows() -> None:
    assert node_facts({"cvs_node_facts": {"failed": True, "msg": "x", **PROBE}, "cvs_backend": "slurm"}) == {
        "backend": "slurm"
    }
    assert node_facts({"ansible_hostname": "gathered", "ansible_kernel": "5.0"}) == {}


def test_the_table_is_aligned_in_node_index_order_with_unknowns_as_question_marks() -> None:
    hosts = [
        {"cvs_node": "node10", "cvs_node_index": 10, "cvs_node_facts": {**PROBE, "hostname": "n10"}},
        {"cvs_node": "node2", "cvs_node_index": 2, "cvs_node_facts": PROBE, "cvs_backend": "baremetal"},
        {"inventory_hostname": "lost"},
    ]
    lines = node_table(hosts)
    assert [line.split()[0] for line in lines] == ["node", "node2", "node10", "lost"]
    assert lines[1].split() == [
        "node2",
        "2",
        "node2",
        "10.77.0.12",
        "6.1.0-28-amd64",
        "128",
        "1536",
        "GiB",
        "8",
        "baremetal",
    ]
    assert lines[3].split() == ["lost", "-", "?", "?", "?", "?", "?", "?", "?"]
    assert len({line.index(line.split()[1], len(line.split()[0])) for line in lines}) == 1
