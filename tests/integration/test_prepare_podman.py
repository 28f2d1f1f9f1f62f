"""cvs.cluster.prepare / dispose with the podman runtime on the simulated cluster."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"
INVENTORY = Path(__file__).resolve().parents[1] / "cluster" / "generated" / "inventory-podman.yml"
CONTAINER = "cvs-node"


def podman(node_exec, node: str, *args: str, check: bool = True):
    """podman inside the node with the node's own storage and config (ctl.sh exec sets only DOCKER_HOST)."""
    conf = f"/run/cvs-sim/{node}"
    env = [f"CONTAINERS_STORAGE_CONF={conf}/storage.conf", f"CONTAINERS_CONF={conf}/containers.conf"]
    return node_exec(node, ["env", *env, "podman", *args], check=check)


def containers(node_exec, node: str) -> dict[str, str]:
    """name -> state of every podman container on the node."""
    out = podman(node_exec, node, "ps", "-a", "--format", "{{.Names}} {{.State}}").stdout
    return {line.split()[0]: " ".join(line.split()[1:]) for line in out.splitlines() if line.strip()}


@pytest.fixture
def clean_podman(cluster, node_exec):
    assert INVENTORY.is_file(), f"{INVENTORY} is missing: re-run tests/cluster/up.sh (needs podman)"
    for name in cluster.names:
        podman(node_exec, name, "rm", "-f", "-t", "0", CONTAINER, check=False)
    yield
    for name in cluster.names:
        podman(node_exec, name, "rm", "-f", "-t", "0", CONTAINER, check=False)


def test_backend_blind_workload_podman(cluster, run_playbook, node_exec, tmp_path, clean_podman):
    # Own ControlPath dir: SSH masters opened before up.sh added the podman SetEnv would lack it.
    env = {"ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp_path / "cp")}
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    t0 = time.monotonic()
    run_playbook(PLAYBOOKS / "backend_blind.yml", INVENTORY, {"out_dir": str(out_dir)}, env=env)
    elapsed = time.monotonic() - t0
    seen = {p.stem: json.loads(p.read_text()) for p in sorted(out_dir.glob("*.json"))}
    assert sorted(seen) == [f"{n}-ctr" for n in cluster.names]
    assert len({v["run_id"] for v in seen.values()}) == 1
    for index, name in enumerate(cluster.names):
        got = seen[f"{name}-ctr"]
        facts = dict(line.split("=", 1) for line in got["stdout"])
        assert got["node"] == name
        assert got["index"] == index  # head (node1) is 0
        assert facts["hostname"] == name  # host network + UTS of the node: distinct nodes
        assert facts["file"] == f"{name} {index}"
        assert facts["image_marker"] == "cvs-sim-node image"  # only the image has /etc/cvs-sim-image
        assert facts["engine_id"] == "none"  # no Docker engine inside the container
    # dispose removed the per_run containers (podman ps -a in every node's own storage)
    for name in cluster.names:
        assert CONTAINER not in containers(node_exec, name), f"dispose left {CONTAINER} on {name}"
    # a second dispose succeeds and leaves a same-named container it did not start (no cvs.managed label)
    podman(node_exec, "node3", "create", "--name", CONTAINER, "--label", "owner=someone-else", cluster.image, "true")
    run_playbook(PLAYBOOKS / "dispose_only.yml", INVENTORY, env=env)
    assert CONTAINER in containers(node_exec, "node3"), "dispose removed a container cvs.cluster did not start"
    assert elapsed < 150, f"prepare + workload + dispose took {elapsed:.0f} s"
