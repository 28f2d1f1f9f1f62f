"""A CVS cluster file whose head_node_dict.mgmt_ip is not one of its nodes: a jump host, as upstream's generator
writes it. node1 of the simulated cluster serves as the jump host of a cluster of node2 and node3; the nodes' sshd
sees every connection come from node1's address, and validate.yml runs RVS end to end through it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
ANSIBLE_CFG = REPO / "ansible.cfg"
NODES = ["node2", "node3"]


@pytest.fixture
def jump_source(cluster: Any, tmp_path: Path) -> Path:
    raw = json.loads((Path(cluster.ssh_config).parent / "cluster.json").read_text())
    data = {
        "username": raw["user"],
        "priv_key_file": raw["key"],
        "head_node_dict": {"mgmt_ip": cluster.node("node1").ip},
        "node_dict": {cluster.node(n).ip: {"hostname": n, "bmc_ip": "NA", "vpc_ip": "NA"} for n in NODES},
    }
    (tmp_path / "cluster.json").write_text(json.dumps(data, indent=2))
    source = tmp_path / "jump.cvs.yml"
    # the hop does not inherit Ansible's host_key_checking; the simulated nodes' keys are new on every cluster-up
    source.write_text(
        "plugin: cvs.cluster.cluster_json\npath: cluster.json\n"
        "jump_ssh_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR\n"
    )
    return source


def _where_from(inventory: Path) -> subprocess.CompletedProcess[str]:
    """Ad-hoc ``ansible`` on the nodes: each prints the address its ssh connection came from."""
    return subprocess.run(
        [str(VENV_BIN / "ansible"), "-i", str(inventory), ",".join(NODES), "-m", "ansible.builtin.shell",
         "-a", 'echo "from=${SSH_CONNECTION%% *}"', "-o"],
        env={"PATH": f"{VENV_BIN}:/usr/bin:/bin", "ANSIBLE_CONFIG": str(ANSIBLE_CFG), "ANSIBLE_NOCOLOR": "1",
             "HOME": str(Path.home())},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_every_node_is_reached_through_the_jump_host(cluster: Any, jump_source: Path) -> None:
    # a direct connection first: its ControlMaster (same address, port and user) must not carry the jumped ones
    direct = _where_from(cluster.inventory("baremetal"))
    assert direct.returncode == 0 and direct.stdout.count("from=10.77.0.1\n") == len(NODES), direct.stdout
    proc = _where_from(jump_source)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = {line.split(" ", 1)[0]: line for line in proc.stdout.splitlines() if "from=" in line}
    assert sorted(lines) == NODES, proc.stdout
    for node in NODES:
        assert f"from={cluster.node('node1').ip}" in lines[node], lines[node]


def test_rvs_runs_end_to_end_through_the_jump_host(
    run_playbook: Callable[..., Any], jump_source: Path, tmp_path: Path
) -> None:
    proc = run_playbook(
        "playbooks/validate.yml",
        jump_source,
        {
            "cvs_results_dir": str(tmp_path / "results"),
            "cvs_validate_checks": ["rvs"],
            "rvs": {"rvs_test_level": "0", "tests": ["gst_single"]},
        },
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    run = next(p for p in (tmp_path / "results").iterdir() if p.is_dir())  # not the run index
    results = json.loads((run / "results.json").read_text())
    assert sorted(results["nodes"]) == NODES, results["nodes"]
    assert results["summary"]["status"] == "PASS", results["summary"]
