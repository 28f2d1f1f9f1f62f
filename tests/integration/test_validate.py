"""The main job (playbooks/validate.yml, run by `make demo`) end to end on the simulated cluster."""

from __future__ import annotations

import re

import pytest


@pytest.mark.parametrize("backend", ["baremetal", "container"])
def test_validate_prints_one_row_per_node_and_disposes(backend, cluster, run_playbook, node_exec):
    proc = run_playbook("playbooks/validate.yml", backend, args=["--tags", "facts"])
    rows = re.findall(r'"(node\d)\s+(\d)\s+(node\d)\s+(10\.77\.0\.\d+)\s+.*\s(baremetal|container)\s*"', proc.stdout)
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        (n.name, str(i), n.name, backend) for i, n in enumerate(cluster.nodes)
    ]
    assert [r[3] for r in rows] == [n.ip for n in cluster.nodes]
    for n in cluster.nodes:
        assert "cvs-node" not in node_exec(n.name, "docker ps -a --format '{{.Names}}'").stdout
