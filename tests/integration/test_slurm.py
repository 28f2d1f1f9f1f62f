"""Slurm on the simulated cluster (tests/cluster/slurm.sh) and the cvs.cluster.slurm inventory plugin.

A real Slurm 22.05: munged on the host, slurmctld in node1, one slurmd in every node on the node's own address.
Every Slurm command here gets SLURM_CONF: without one, Slurm looks its controller up in DNS.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
SLURM_SH = REPO / "tests/cluster/slurm.sh"
SLURM_CONF = "/run/cvs-sim/slurm/slurm.conf"
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd")


def _slurm_sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SLURM_SH), *args], capture_output=True, text=True, timeout=180, check=check)


def _host(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A Slurm client command on the controller (the host, a submit host of the simulated Slurm)."""
    env = {**os.environ, "SLURM_CONF": SLURM_CONF}
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env, check=check)


def _daemons() -> list[str]:
    """`pid comm` of every Slurm or munge process on the machine (the nodes' PID namespaces are children of the
    host's, so this sees them all)."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,comm="], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines()]
    return [f"{pid} {comm}" for pid, stat, comm in rows if comm in DAEMONS and not stat.startswith("Z")]


@pytest.fixture(name="slurm", scope="module")
def slurm_fixture(cluster: Any) -> Iterator[Any]:
    assert _daemons() == [], "Slurm daemons run before the test started them"
    started = _slurm_sh("start", check=False)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield cluster
    finally:
        stopped = _slurm_sh("stop", check=False)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert _daemons() == [], "slurm.sh stop left processes behind"
    assert not Path(SLURM_CONF).parent.exists()


def _inventory(tmp_path: Path, **options: Any) -> Path:
    source = tmp_path / "slurm.yml"
    lines = ["plugin: cvs.cluster.slurm", f"slurm_conf: {SLURM_CONF}"]
    lines += [f"{key}: {json.dumps(value)}" for key, value in {"partition": "cvs", **options}.items()]
    source.write_text("\n".join(lines) + "\n")
    return source


def _ansible_inventory(source: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    argv = [str(REPO / ".venv/bin/ansible-inventory"), "-i", str(source), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)


def test_every_node_runs_a_slurmd_on_its_own_address_and_a_step_spans_them(slurm: Any, node_exec: Callable) -> None:
    shown = _host("scontrol", "--oneliner", "show", "node").stdout
    for node in slurm.nodes:
        assert f"NodeName={node.name} " in shown and f"NodeAddr={node.ip} " in shown, shown
    # a step launched from the head node: one task per node, each in its own node (hostname = node name)
    out = node_exec("node1", "srun -N3 --ntasks-per-node=1 -l hostname").stdout
    assert sorted(line.split(": ", 1)[1] for line in out.splitlines()) == [n.name for n in slurm.nodes], out


def test_the_inventory_lists_the_partition_with_addresses_and_names_a_drained_node(slurm: Any, tmp_path: Path) -> None:
    source = _inventory(tmp_path)
    listed = _ansible_inventory(source, "--list")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    names = [n.name for n in slurm.nodes]
    assert data["cvs_nodes"]["hosts"] == names and data["cvs_head"]["hosts"] == ["node1"]
    for node in slurm.nodes:
        host = data["_meta"]["hostvars"][node.name]
        assert host["ansible_host"] == node.ip and host["slurm_state"] == "IDLE" and host["slurm_available"] is True
    _host("scontrol", "update", "nodename=node1", "state=drain", "reason=fan {{ lookup('pipe', 'id') }}")
    try:
        drained = json.loads(_ansible_inventory(source, "--list").stdout)
    finally:
        _host("scontrol", "update", "nodename=node1", "state=resume")
    node1 = drained["_meta"]["hostvars"]["node1"]
    assert node1["slurm_state"] == "IDLE+DRAIN" and node1["slurm_available"] is False
    # a reason holding template syntax stays untrusted: never rendered (--list shows the marker)
    assert node1["slurm_reason"]["__ansible_unsafe"].startswith("fan {{ lookup('pipe', 'id') }} [root@"), node1
    assert drained["slurm_unavailable"]["hosts"] == ["node1"]
    assert drained["cvs_head"]["hosts"] == ["node2"], "a drained node is not the head"


def test_an_unknown_partition_and_a_controller_down_fail_with_slurms_message(
    slurm: Any, tmp_path: Path, node_exec: Callable
) -> None:
    unknown = _ansible_inventory(_inventory(tmp_path, partition="nope"), "--list")
    assert "Slurm: partition 'nope': Partition nope not found" in unknown.stderr, unknown.stderr
    node_exec("node1", "pkill -x slurmctld; for i in $(seq 50); do pgrep -x slurmctld || exit 0; sleep 0.1; done")
    try:
        down = _ansible_inventory(_inventory(tmp_path, timeout=30), "--list")
    finally:
        restarted = _slurm_sh("start", check=False)
    assert "Unable to contact slurm controller" in down.stderr, down.stderr
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
