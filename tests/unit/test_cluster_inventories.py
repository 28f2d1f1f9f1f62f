"""tests/cluster/gen_inventories.py: the simulated cluster's cluster.json, inventories and ssh_config.

The generator runs as up.sh runs it (a child process with arguments); no cluster is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "tests" / "cluster"
GENERATOR = CLUSTER / "gen_inventories.py"
KEY = "/srv/cvs/tests/cluster/generated/id_ed25519"
IMAGE = "cvs-sim-node:latest"
COMMON_ARGS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"


def generate(out: Path, nodes: int = 3, *extra: str, subnet: str = "10.77.0", port: int = 22) -> Path:
    argv = [sys.executable, str(GENERATOR), "--out", str(out), "--nodes", str(nodes), "--subnet", subnet]
    argv += ["--ssh-port", str(port), "--bridge", "br-cvs", "--key", KEY, "--image", IMAGE]
    argv += ["--image-id", "sha256:0123abcd", "--maxtext-image", "cvs-sim-maxtext:latest"]
    argv += ["--ctl", "/srv/cvs/tests/cluster/ctl.sh"]
    argv += ["--state-dir", "/run/cvs-sim", "--var-dir", "/var/lib/cvs-sim", *extra]
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)
    return out


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


DEMO_TIMINGS = ("tflops_per_device", "tokens_per_device", "step_time_mean", "step_time_p50", "step_time_p95")
LIMITS = ("--hard-nofile", "20000", "--hard-memlock", "8388608", "--hard-nproc", "96367")


def test_three_nodes_every_file(tmp_path: Path) -> None:
    out = generate(tmp_path, 3, "--podman", *LIMITS)
    names = ["cluster.json", "inventory-baremetal.yml", "inventory-container.yml", "inventory-podman.yml"]
    names += ["inventory-demo.yml", "dri"]
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, "ssh_config"])  # no NAME.tmp left

    for orch in ("baremetal", "container", "podman", "demo"):
        inv = load(out / f"inventory-{orch}.yml")
        assert set(inv) == {"all"}
        assert set(inv["all"]["children"]) == {"cvs_nodes", "cvs_head"}
        group = inv["all"]["children"]["cvs_nodes"]
        assert group["vars"] == {"ansible_python_interpreter": "/usr/bin/python3"}
        assert group["hosts"] == {f"node{k}": {"ansible_host": f"10.77.0.{10 + k}"} for k in (1, 2, 3)}
        assert inv["all"]["children"]["cvs_head"] == {"hosts": {"node1": None}}
        avars = inv["all"]["vars"]
        assert avars["ansible_user"] == "root"
        assert avars["ansible_ssh_private_key_file"] == KEY
        assert avars["ansible_ssh_common_args"] == COMMON_ARGS
        assert avars["cvs_orchestrator"] == ("baremetal" if orch == "baremetal" else "container")
        if orch == "baremetal":
            assert "cvs_container" not in avars
            continue
        container = avars["cvs_container"]
        assert {k: container[k] for k in ("lifetime", "image", "name", "ssh_port")} == {
            "lifetime": "per_run",
            "image": "cvs-sim-maxtext:latest" if orch == "demo" else IMAGE,  # make demo trains real MaxText
            "name": "cvs-node",
            "ssh_port": 2224,
        }
        runtime = container["runtime"]
        assert runtime["name"] == ("podman" if orch == "podman" else "docker")
        args = runtime["args"]
        assert args["privileged"] is False
        assert args["cap_add"] == ["SYS_PTRACE", "IPC_LOCK"]
        assert args["shm_size"] == "256m"
        nproc = ["nproc:32768:32768"] if orch == "podman" else []
        assert args["ulimits"] == ["nofile:20000:20000", *nproc, "memlock:8388608:8388608"]
        # as many render nodes in the workload namespace as the stand-in amd-smi lists GPUs
        assert args["volumes"] == [f"{out}/dri:/dev/dri:ro"]
        # only the demo, real MaxText on CPUs the nodes share, leaves its timings out of the fleet comparison
        fleet = avars.get("cvs_fleet", {}).get("metrics")
        assert fleet == (dict.fromkeys(DEMO_TIMINGS, "ignore") if orch == "demo" else None), fleet

    assert sorted(p.name for p in (out / "dri").iterdir()) == [f"renderD{128 + i}" for i in range(8)]
    # the stand-in's own list (exec, not runpy.run_path: under ansible-test a path hook claims any path as a package)
    stand_in = CLUSTER / "image" / "stand-ins" / "opt" / "rocm" / "bin" / "amd-smi"
    amd_smi: dict = {"__name__": "amd_smi_stand_in"}
    exec(compile(stand_in.read_text(), str(stand_in), "exec"), amd_smi)
    assert len(amd_smi["GPUS"]) == 8  # the stand-in amd-smi's GPUs
    data = json.loads((out / "cluster.json").read_text())
    assert data["subnet"] == "10.77.0.0/24" and data["gateway"] == "10.77.0.1" and data["ssh_port"] == 22
    assert data["inventories"] == {
        orch: str(out / f"inventory-{orch}.yml") for orch in ("baremetal", "container", "podman", "demo")
    }
    assert data["ssh_config"] == str(out / "ssh_config")
    assert [n["ip"] for n in data["nodes"]] == ["10.77.0.11", "10.77.0.12", "10.77.0.13"]

    ssh_config = (out / "ssh_config").read_text()
    assert ssh_config.count("\nHost ") == 3
    assert "Host node2 10.77.0.12\n  HostName 10.77.0.12\n  Port 22\n  User root\n" in ssh_config
    assert f"  IdentityFile {KEY}\n" in ssh_config


def test_five_nodes_five_hosts(tmp_path: Path) -> None:
    out = generate(tmp_path, 5)
    for orch in ("baremetal", "container"):
        hosts = load(out / f"inventory-{orch}.yml")["all"]["children"]["cvs_nodes"]["hosts"]
        assert list(hosts) == ["node1", "node2", "node3", "node4", "node5"]
        assert hosts["node5"] == {"ansible_host": "10.77.0.15"}
    data = json.loads((out / "cluster.json").read_text())
    assert [n["index"] for n in data["nodes"]] == [0, 1, 2, 3, 4]
    assert (out / "ssh_config").read_text().count("\nHost ") == 5


def test_port_subnet_and_no_podman(tmp_path: Path) -> None:
    out = generate(tmp_path, 2, subnet="10.88.3", port=2222)
    assert not (out / "inventory-podman.yml").exists()
    assert "podman" not in json.loads((out / "cluster.json").read_text())["inventories"]
    hosts = load(out / "inventory-container.yml")["all"]["children"]["cvs_nodes"]["hosts"]
    assert hosts == {f"node{k}": {"ansible_host": f"10.88.3.{10 + k}", "ansible_port": 2222} for k in (1, 2)}
    assert "  Port 2222\n" in (out / "ssh_config").read_text()


@pytest.mark.parametrize(
    ("limits", "ulimits"),
    [
        (("-1", "-1", "-1"), ["nofile:65536:65536", "nproc:32768:32768", "memlock:-1:-1"]),
        (("100000", "65536", "40000"), ["nofile:65536:65536", "nproc:32768:32768", "memlock:65536:65536"]),
        (("1024", "8192", "200"), ["nofile:1024:1024", "nproc:200:200", "memlock:8192:8192"]),
    ],
)
def test_container_limits(tmp_path: Path, limits: tuple[str, str, str], ulimits: list[str]) -> None:
    nofile, memlock, nproc = limits
    out = generate(tmp_path, 1, "--podman", "--hard-nofile", nofile, "--hard-memlock", memlock, "--hard-nproc", nproc)
    args = load(out / "inventory-podman.yml")["all"]["vars"]["cvs_container"]["runtime"]["args"]
    assert args["ulimits"] == ulimits
    args = load(out / "inventory-container.yml")["all"]["vars"]["cvs_container"]["runtime"]["args"]
    assert args["ulimits"] == [u for u in ulimits if not u.startswith("nproc")]


def test_node_naming_matches_lib_sh(tmp_path: Path) -> None:
    """cluster.json names every node as lib.sh's node_* functions (which ctl.sh and down.sh use) do."""
    out = generate(tmp_path, 3)
    script = 'source "$1"; SUBNET=10.77.0; for k in 1 2 3; do n=$(node_name $k); '
    script += 'printf "%s %s %s %s %s %s %s\\n" "$n" "$(node_ns $k)" "$(node_ip $k)" "$(node_veth $k)" '
    script += '"$(node_dir $n)" "$(node_var $n)" "$(node_sock $n)"; done'
    lib = subprocess.run(["bash", "-c", script, "bash", str(CLUSTER / "lib.sh")], capture_output=True, text=True)
    assert lib.returncode == 0, lib.stderr
    ours = [
        " ".join(
            (
                n["name"],
                n["ns"],
                n["ip"],
                n["veth"],
                n["sshd_config"].rsplit("/", 1)[0],
                n["docker_data_root"].rsplit("/", 1)[0],
                n["docker_socket"],
            )
        )
        for n in json.loads((out / "cluster.json").read_text())["nodes"]
    ]
    assert lib.stdout.splitlines() == ours


def test_ansible_reads_the_inventory(tmp_path: Path) -> None:
    out = generate(tmp_path, 3, "--podman", *LIMITS, port=2200)
    res = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(out / "inventory-podman.yml"), "--list"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, ANSIBLE_INVENTORY_UNPARSED_FAILED="1"),
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["cvs_nodes"]["hosts"] == ["node1", "node2", "node3"]
    assert data["cvs_head"]["hosts"] == ["node1"]
    node2 = data["_meta"]["hostvars"]["node2"]
    assert node2["ansible_host"] == "10.77.0.12" and node2["ansible_port"] == 2200
    assert node2["cvs_container"]["runtime"]["name"] == "podman"
