"""cvs.cluster.prepare / dispose on the simulated cluster: backends, lifetimes, rollback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"
CONTAINER = "cvs-node"


def containers(node_exec, node: str) -> dict[str, str]:
    """name -> 'id status' of every container on the node's engine."""
    out = node_exec(node, "docker ps -a --no-trunc --format '{{.Names}} {{.ID}} {{.State}}'").stdout
    return {line.split()[0]: " ".join(line.split()[1:]) for line in out.splitlines() if line.strip()}


def remove_everywhere(cluster, node_exec) -> None:
    for name in cluster.names:
        node_exec(name, f"docker rm -f {CONTAINER} >/dev/null 2>&1 || true")


def container_settings(cluster, **changes) -> dict:
    inventory = yaml.safe_load(cluster.inventory("container").read_text())
    settings = dict(inventory["all"]["vars"]["cvs_container"])
    settings.update(changes)
    return settings


def read_outputs(out_dir: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(out_dir.glob("*.json"))}


@pytest.fixture
def clean_engines(cluster, node_exec):
    """Remove our container everywhere; yields what else each engine holds (other runs' leftovers)."""
    remove_everywhere(cluster, node_exec)
    yield {name: containers(node_exec, name) for name in cluster.names}
    remove_everywhere(cluster, node_exec)


@pytest.mark.parametrize("backend", ["baremetal", "container"])
def test_backend_blind_workload(backend, cluster, run_playbook, node_exec, tmp_path, clean_engines):
    run_playbook(PLAYBOOKS / "backend_blind.yml", backend, {"out_dir": str(tmp_path)})
    seen = read_outputs(tmp_path)
    suffix = "-ctr" if backend == "container" else ""
    assert sorted(seen) == [f"{n}{suffix}" for n in cluster.names]
    assert len({v["run_id"] for v in seen.values()}) == 1
    for index, name in enumerate(cluster.names):
        facts = dict(line.split("=", 1) for line in seen[f"{name}{suffix}"]["stdout"])
        assert seen[f"{name}{suffix}"]["node"] == name
        assert seen[f"{name}{suffix}"]["index"] == index  # head (node1) is 0
        assert facts["hostname"] == name
        assert facts["file"] == f"{name} {index}"
        assert seen[f"{name}{suffix}"]["scratch"].endswith(f"/{seen[f'{name}{suffix}']['run_id']}/{name}")
        if backend == "container":
            assert facts["image_marker"] == "cvs-sim-node image"  # only the image has this file
            assert facts["engine_id"] == "none"  # no Docker engine inside the container
        else:
            assert facts["image_marker"] == "none"
            assert facts["engine_id"] != "none"
    if backend == "baremetal":
        engine_ids = {dict(x.split("=", 1) for x in v["stdout"])["engine_id"] for v in seen.values()}
        assert len(engine_ids) == 3
    # dispose removed the per_run containers; a second dispose is a no-op that still succeeds
    for name in cluster.names:
        assert CONTAINER not in containers(node_exec, name)
    run_playbook(PLAYBOOKS / "dispose_only.yml", backend)


def test_rollback_when_one_engine_is_down(cluster, run_playbook, node_exec, tmp_path, clean_engines, engine_stop):
    engine_stop("node2")
    proc = run_playbook(PLAYBOOKS / "prepare_only.yml", "container", {"out_dir": str(tmp_path)}, check=False)
    assert proc.returncode != 0
    assert "cvs.cluster.prepare failed" in proc.stdout and "node2" in proc.stdout
    for name in ("node1", "node3"):
        assert CONTAINER not in containers(node_exec, name), f"rollback left a container on {name}"


def test_rollback_removes_only_what_this_run_started(cluster, run_playbook, node_exec, tmp_path, clean_engines):
    """A container launched by node-side failure (bad image on node3 only) is rolled back on 1 and 2."""
    node_exec("node3", f"docker create --name {CONTAINER} --label owner=someone-else cvs-sim-node:latest sleep 1")
    proc = run_playbook(PLAYBOOKS / "prepare_only.yml", "container", {"out_dir": str(tmp_path)}, check=False)
    assert proc.returncode != 0
    assert "already exists on node3" in proc.stdout
    assert CONTAINER in containers(node_exec, "node3"), "a pre-existing container was touched"
    for name in ("node1", "node2"):
        assert CONTAINER not in containers(node_exec, name)


def test_persistent_keeps_containers_and_one_sshd(cluster, run_playbook, node_exec, tmp_path, clean_engines):
    settings = {"cvs_container": container_settings(cluster, lifetime="persistent")}
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    run_playbook(PLAYBOOKS / "prepare_only.yml", "container", {**settings, "out_dir": str(first)})
    run_playbook(PLAYBOOKS / "prepare_only.yml", "container", {**settings, "out_dir": str(second)})
    ids_first = {k: v["container_id"] for k, v in read_outputs(first).items()}
    ids_second = {k: v["container_id"] for k, v in read_outputs(second).items()}
    assert len(ids_first) == 3 and all(ids_first.values())
    assert ids_first == ids_second
    for name in cluster.names:
        listeners = node_exec(name, f"docker exec {CONTAINER} pgrep -c -f 'sshd.*listener'").stdout.strip()
        assert listeners == "1", f"{name}: {listeners} sshd listeners"
    # dispose leaves persistent containers running
    run_playbook(PLAYBOOKS / "dispose_only.yml", "container", settings)
    for name in cluster.names:
        assert containers(node_exec, name)[CONTAINER].endswith("running")
    # no_launch attaches to them and changes nothing
    no_launch = {"cvs_container": container_settings(cluster, lifetime="no_launch"), "out_dir": str(tmp_path)}
    run_playbook(PLAYBOOKS / "prepare_only.yml", "container", no_launch)
    assert {k: v["container_id"] for k, v in read_outputs(tmp_path).items()} == ids_first
    # mixed state: the container is gone on node3 only
    node_exec("node3", f"docker rm -f {CONTAINER}")
    proc = run_playbook(
        PLAYBOOKS / "prepare_only.yml", "container", {**settings, "out_dir": str(tmp_path)}, check=False
    )
    assert proc.returncode != 0
    assert "refusing a mixed state" in proc.stdout and "not on node3" in proc.stdout
    assert CONTAINER not in containers(node_exec, "node3"), "mixed state must not launch anything"


def test_no_launch_never_starts_anything(cluster, run_playbook, node_exec, tmp_path, clean_engines):
    settings = {"cvs_container": container_settings(cluster, lifetime="no_launch"), "out_dir": str(tmp_path)}
    proc = run_playbook(PLAYBOOKS / "prepare_only.yml", "container", settings, check=False)
    assert proc.returncode != 0
    assert "is not running on node1, node2, node3" in proc.stdout
    for name in cluster.names:
        assert containers(node_exec, name) == clean_engines[name]


def test_dispose_with_a_node_down_cleans_the_others(
    cluster, run_playbook, node_exec, tmp_path, clean_engines, sshd_stop
):
    run_playbook(PLAYBOOKS / "prepare_only.yml", "container", {"out_dir": str(tmp_path)})
    sshd_stop("node2")
    proc = run_playbook(PLAYBOOKS / "dispose_only.yml", "container", check=False)
    assert "could not reach or clean node2" in proc.stdout
    for name in ("node1", "node3"):
        assert CONTAINER not in containers(node_exec, name)
    assert CONTAINER in containers(node_exec, "node2")


def test_bad_container_settings_name_the_field(cluster, run_playbook, node_exec, tmp_path, clean_engines):
    bad = container_settings(cluster)
    bad["runtime"] = {"name": "docker", "args": {"cap_add": "not-a-list", "shm_size": True}}
    proc = run_playbook(
        PLAYBOOKS / "prepare_only.yml", "container", {"cvs_container": bad, "out_dir": str(tmp_path)}, check=False
    )
    assert proc.returncode != 0
    assert "cvs_container.runtime.args.shm_size: must be a size" in proc.stdout
    missing = container_settings(cluster, image="cvs-sim-node:does-not-exist")
    proc = run_playbook(
        PLAYBOOKS / "prepare_only.yml", "container", {"cvs_container": missing, "out_dir": str(tmp_path)}, check=False
    )
    assert proc.returncode != 0
    assert "cvs.cluster.prepare failed on node1, node2, node3" in proc.stdout
    for name in cluster.names:
        assert containers(node_exec, name) == clean_engines[name]


def test_unreachable_node_is_named_and_nothing_launched(
    cluster, run_playbook, node_exec, tmp_path, clean_engines, sshd_stop
):
    sshd_stop("node3")
    proc = run_playbook(PLAYBOOKS / "prepare_only.yml", "container", {"out_dir": str(tmp_path)}, check=False)
    assert proc.returncode != 0
    assert "node3: unreachable" in proc.stdout
    for name in cluster.names:
        assert containers(node_exec, name) == clean_engines[name]
