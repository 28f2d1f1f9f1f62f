"""The container model on the simulated cluster: the shipped example's settings, typos, registry login, image_tar.

The example's container settings (inventories/examples/container.yml) are used as they are except for
what the simulated cluster cannot do (DESIGN.md §4): the node addresses (the generated inventory's),
the image (cvs-sim-node:latest), ``privileged`` (the VM withholds capabilities --privileged needs) and
the memlock ulimit (the hard memlock limit here is 8 MiB and cannot be raised, so ``memlock=-1``
becomes ``memlock=8388608``). Everything else -- name, env, ssh_port, registry, devices, cap_add,
security_opt, group_add, network/ipc, shm_size, the stack ulimit and the volumes -- is the example's.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PLAYBOOKS = HERE / "playbooks"
EXAMPLE = REPO / "inventories" / "examples" / "container.yml"
VM_MEMLOCK = "memlock=8388608"  # the VM's hard memlock limit (bytes); see DESIGN.md §4


def example_container() -> dict:
    data = yaml.safe_load(EXAMPLE.read_text())
    return copy.deepcopy(data["all"]["children"]["cvs_nodes"]["vars"]["cvs_container"])


def adapted_example(image: str = "cvs-sim-node:latest") -> dict:
    cfg = example_container()
    cfg["image"] = image
    args = cfg["runtime"]["args"]
    assert args["privileged"] is True and "memlock=-1" in args["ulimits"], "the example changed: revisit this test"
    args["privileged"] = False  # --privileged fails on this VM
    args["ulimits"] = [VM_MEMLOCK if u == "memlock=-1" else u for u in args["ulimits"]]  # memlock cannot be raised
    return cfg


def containers(node_exec, node: str) -> dict[str, str]:
    out = node_exec(node, "docker ps -a --no-trunc --format '{{.Names}} {{.ID}} {{.State}}'").stdout
    return {line.split()[0]: " ".join(line.split()[1:]) for line in out.splitlines() if line.strip()}


def remove(cluster, node_exec, *names: str) -> None:
    for node in cluster.names:
        for name in names:
            node_exec(node, f"docker rm -f {name} >/dev/null 2>&1 || true")


def inspect(node_exec, node: str, name: str) -> dict:
    return json.loads(node_exec(node, f"docker inspect {name}").stdout)[0]


HOST_DIRS = (Path("/shared/datasets"), Path("/shared"), Path("/scratch"))  # the example's bind-mount sources


@pytest.fixture
def engines(cluster, node_exec):
    """Our container names removed before and after; yields what each engine holds besides.

    Docker creates the example's missing bind-mount sources on the host (the nodes share its file
    system outside /tmp); the ones that did not exist before are removed after the containers.
    """
    names = ("cvs_validation", "cvs-node")
    existed = {path: path.exists() for path in HOST_DIRS}
    remove(cluster, node_exec, *names)
    yield {node: containers(node_exec, node) for node in cluster.names}
    remove(cluster, node_exec, *names)
    for path in HOST_DIRS:
        if not existed[path] and path.is_dir():
            with contextlib.suppress(OSError):
                path.rmdir()


def test_the_shipped_example_prepares_and_disposes(cluster, run_playbook, node_exec, tmp_path, engines):
    cfg = adapted_example()
    run_playbook(PLAYBOOKS / "prepare_only.yml", "container", {"cvs_container": cfg, "out_dir": str(tmp_path)})
    for node in cluster.names:
        info = inspect(node_exec, node, "cvs_validation")
        assert info["State"]["Running"] is True
        env = dict(item.split("=", 1) for item in info["Config"]["Env"])
        assert env["GPUS"] == "8" and env["NCCL_DEBUG"] == "WARN"
        assert env["HIP_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
        limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in info["HostConfig"]["Ulimits"]}
        assert limits["memlock"] == (8388608, 8388608)
        assert limits["stack"] == (67108864, 67108864)
        assert sorted(info["HostConfig"]["Binds"]) == ["/scratch:/scratch:rw", "/shared/datasets:/datasets:ro"]
        assert {"SYS_PTRACE", "IPC_LOCK", "SYS_ADMIN"} <= {c.removeprefix("CAP_") for c in info["HostConfig"]["CapAdd"]}
        assert info["HostConfig"]["NetworkMode"] == "host" and info["HostConfig"]["IpcMode"] == "host"
        assert info["HostConfig"]["GroupAdd"] == ["video"]
        assert info["Config"]["Labels"]["cvs.lifetime"] == "per_run"
    ids = {p.stem: json.loads(p.read_text())["container_id"] for p in tmp_path.glob("*.json")}
    assert sorted(ids) == [f"{n}-ctr" for n in cluster.names] and all(ids.values())
    run_playbook(PLAYBOOKS / "dispose_only.yml", "container", {"cvs_container": cfg})
    for node in cluster.names:
        assert containers(node_exec, node) == engines[node]
    assert all(path.is_dir() for path in HOST_DIRS[:1] + HOST_DIRS[2:]), "the example's binds were not made"


def test_dispose_reuses_the_normalised_fact(cluster, run_playbook, node_exec, tmp_path, engines):
    """prepare normalises once; a later play that sees a broken cvs_container still disposes from the fact."""
    playbook = tmp_path / "prepare_then_dispose.yml"
    playbook.write_text(
        "- hosts: cvs_nodes\n  gather_facts: false\n  roles: [cvs.cluster.prepare]\n"
        "- hosts: cvs_nodes\n  gather_facts: false\n"
        "  vars:\n    cvs_container: {image: x, lifetme: no_launch}\n"
        "  tasks:\n"
        "    - name: The fact prepare left\n"
        "      ansible.builtin.assert:\n"
        "        that: [cvs_container_normalized.name == 'cvs-node', cvs_container_normalized.lifetime == 'per_run']\n"
        "    - name: Dispose\n"
        "      ansible.builtin.include_role:\n        name: cvs.cluster.dispose\n"
    )
    run_playbook(playbook, "container")
    for node in cluster.names:
        assert containers(node_exec, node) == engines[node]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda c: c.update(lifetme="no_launch"),
            "cvs_container.lifetme: is not a known key; did you mean 'lifetime'?",
        ),
        (
            lambda c: c["runtime"]["args"].update(ulimits=["memlock"]),
            "cvs_container.runtime.args.ulimits[0]: 'memlock' is not a ulimit; accepted: 'name=soft[:hard]'",
        ),
        (
            lambda c: c["runtime"]["args"].update(devices=["/dev/kfd:/dev/kfd:rwx"]),
            "cvs_container.runtime.args.devices[0]: '/dev/kfd:/dev/kfd:rwx': permissions 'rwx' are not made of r, w, m",
        ),
        (
            lambda c: c["runtime"]["args"].update(volumes=["data/sets:/datasets"]),
            "cvs_container.runtime.args.volumes[0]: 'data/sets:/datasets': source 'data/sets' is neither",
        ),
    ],
    ids=["typo-key", "ulimit", "device", "volume"],
)
def test_bad_settings_fail_before_any_container_starts(
    change, expected, cluster, run_playbook, node_exec, tmp_path, engines
):
    cfg = adapted_example()
    change(cfg)
    proc = run_playbook(
        PLAYBOOKS / "prepare_only.yml", "container", {"cvs_container": cfg, "out_dir": str(tmp_path)}, check=False
    )
    assert proc.returncode != 0
    for node in cluster.names:
        assert f"{node}: {expected}" in proc.stdout, proc.stdout[-3000:]
        assert containers(node_exec, node) == engines[node], f"{node}: a container was started"
    assert not list(tmp_path.glob("*.json")), "no workload host may have been registered"


TOKEN = "tok3n-never-logged"


def test_registry_login_to_a_closed_port_fails_naming_the_registry(cluster, run_playbook, node_exec, tmp_path, engines):
    """cvs_container.registry is read (password on each node); the login fails at 127.0.0.1:1, naming it."""
    for node in cluster.names:  # each node's /tmp is private: the file exists only on that node
        node_exec(node, f"printf '%s\\n' {TOKEN} > /tmp/cvs-registry-token && chmod 600 /tmp/cvs-registry-token")
    cfg = adapted_example(image="127.0.0.1:1/cvs-missing:1")
    cfg["registry"] = {"server": "127.0.0.1:1", "username": "robot", "password_file": "/tmp/cvs-registry-token"}
    try:
        proc = run_playbook(
            PLAYBOOKS / "prepare_only.yml",
            "container",
            {"cvs_container": cfg, "out_dir": str(tmp_path)},
            env={"ANSIBLE_VERBOSITY": "2"},
            check=False,
        )
    finally:
        for node in cluster.names:
            node_exec(node, "rm -f /tmp/cvs-registry-token")
    assert proc.returncode != 0
    assert "registry login to 127.0.0.1:1 as robot failed" in proc.stdout, proc.stdout[-3000:]
    assert "cvs.cluster.prepare failed on node1, node2, node3" in proc.stdout
    assert TOKEN not in proc.stdout + proc.stderr
    for node in cluster.names:
        assert containers(node_exec, node) == engines[node]


def test_deprecated_registry_login_reads_the_controller_file(cluster, run_playbook, node_exec, tmp_path, engines):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    cfg = adapted_example(image="127.0.0.1:1/cvs-missing:1")
    cfg.pop("registry")
    login = {"registry": "127.0.0.1:1", "username": "robot", "password_file": str(token)}
    proc = run_playbook(
        PLAYBOOKS / "prepare_only.yml",
        "container",
        {"cvs_container": cfg, "cvs_registry_login": login, "out_dir": str(tmp_path)},
        env={"ANSIBLE_VERBOSITY": "2"},
        check=False,
    )
    assert proc.returncode != 0
    assert "cvs_registry_login is deprecated" in proc.stdout + proc.stderr
    assert "registry login to 127.0.0.1:1 as robot failed" in proc.stdout, proc.stdout[-3000:]
    assert TOKEN not in proc.stdout + proc.stderr
    # both keys at once: refused before anything runs
    cfg["registry"] = {"server": "127.0.0.1:1", "username": "robot", "password_file": "/tmp/x"}
    proc = run_playbook(
        PLAYBOOKS / "prepare_only.yml",
        "container",
        {"cvs_container": cfg, "cvs_registry_login": login, "out_dir": str(tmp_path)},
        check=False,
    )
    assert proc.returncode != 0
    assert "keep only cvs_container.registry" in proc.stdout
    for node in cluster.names:
        assert containers(node_exec, node) == engines[node]


@pytest.fixture
def tar_tag(cluster, node_exec):
    """Image tags made for the image_tar tests are removed from every node engine afterwards (layers stay)."""
    tags: list[str] = []
    yield tags
    for node in cluster.names:
        for tag in tags:
            node_exec(node, f"docker rmi {tag} >/dev/null 2>&1 || true")


def test_image_tar_is_loaded_from_the_node(cluster, run_playbook, node_exec, tmp_path, engines, tar_tag):
    tag = "cvs-tar-node:1"
    tar_tag.append(tag)
    for node in cluster.names:  # the archive lives in the node's private /tmp: the controller cannot see it
        node_exec(
            node,
            f"docker tag cvs-sim-node:latest {tag} && docker save -o /tmp/cvs-node-image.tar {tag} && docker rmi {tag}",
        )
        assert (
            node_exec(node, f"docker image inspect {tag} >/dev/null 2>&1 && echo yes || echo no").stdout.strip() == "no"
        )
    assert not Path("/tmp/cvs-node-image.tar").exists()
    cfg = {**adapted_example(image=tag), "name": "cvs-node", "image_tar": "/tmp/cvs-node-image.tar"}
    cfg.pop("registry")  # no login may be needed for a tar
    try:
        run_playbook(PLAYBOOKS / "prepare_only.yml", "container", {"cvs_container": cfg, "out_dir": str(tmp_path)})
        for node in cluster.names:
            info = inspect(node_exec, node, "cvs-node")
            assert info["Config"]["Image"] == tag and info["State"]["Running"] is True
            # image_tar is the node's own file: used in place, not removed
            assert node_exec(node, "test -f /tmp/cvs-node-image.tar && echo kept").stdout.strip() == "kept"
        run_playbook(PLAYBOOKS / "dispose_only.yml", "container", {"cvs_container": cfg})
    finally:
        for node in cluster.names:
            node_exec(node, "rm -f /tmp/cvs-node-image.tar")
    # a path that is not on the node fails naming the node and the path
    missing = {**cfg, "image": "cvs-tar-absent:1", "image_tar": "/tmp/cvs-node-image.tar"}
    proc = run_playbook(
        PLAYBOOKS / "prepare_only.yml", "container", {"cvs_container": missing, "out_dir": str(tmp_path)}, check=False
    )
    assert proc.returncode != 0
    assert "cvs_container.image_tar /tmp/cvs-node-image.tar is not a file on node1" in proc.stdout, proc.stdout[-3000:]
    for node in cluster.names:
        assert containers(node_exec, node) == engines[node]


def test_image_tar_src_is_copied_from_the_controller(cluster, run_playbook, node_exec, tmp_path, engines, tar_tag):
    tag = "cvs-tar-ctl:1"
    tar_tag.append(tag)
    archive = tmp_path / "cvs-image.tar"
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}  # the machine's engine, not a node's
    subprocess.run(["docker", "tag", "cvs-sim-node:latest", tag], check=True, env=env)
    try:
        subprocess.run(["docker", "save", "-o", str(archive), tag], check=True, env=env)
    finally:
        subprocess.run(["docker", "rmi", tag], check=False, env=env, capture_output=True)
    cfg = {**adapted_example(image=tag), "name": "cvs-node", "image_tar_src": str(archive)}
    cfg.pop("registry")
    out = tmp_path / "out"
    out.mkdir()
    run_playbook(PLAYBOOKS / "prepare_only.yml", "container", {"cvs_container": cfg, "out_dir": str(out)})
    for node in cluster.names:
        info = inspect(node_exec, node, "cvs-node")
        assert info["Config"]["Image"] == tag and info["State"]["Running"] is True
        # the copy on the node was removed after loading
        left = node_exec(node, "ls /var/tmp | grep -c '^cvs-image-' || true").stdout.strip()
        assert left == "0", f"{node}: copied archive left behind"
    run_playbook(PLAYBOOKS / "dispose_only.yml", "container", {"cvs_container": cfg})
    for node in cluster.names:
        assert containers(node_exec, node) == engines[node]
