#!/usr/bin/env python3
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write the simulated cluster's generated files: cluster.json, the inventories and ssh_config.

Run by up.sh (with /usr/bin/python3, stdlib only) once every node is up:

    gen_inventories.py --out tests/cluster/generated --nodes 3 --subnet 10.77.0 --ssh-port 22 \\
        --bridge br-cvs --key .../id_ed25519 --image cvs-sim-node:latest --image-id sha256:... \\
        --maxtext-image cvs-sim-maxtext:latest \\
        --ctl .../ctl.sh --state-dir /run/cvs-sim --var-dir /var/lib/cvs-sim [--podman]

Writes OUT/cluster.json, OUT/inventory-baremetal.yml, OUT/inventory-container.yml,
OUT/inventory-podman.yml (with --podman only), OUT/inventory-demo.yml and OUT/ssh_config, each to
NAME.tmp first and then renamed over NAME, and OUT/dri/. Paths inside the files name OUT as given.

inventory-demo.yml is what `make demo` runs: the container backend with --maxtext-image (the node
image plus real MaxText), for `-e @tests/cluster/maxtext/cpu.yml`; its fleet comparison leaves out
MaxText's timings (the nodes share the machine's CPU cores).

GPU facts that agree: the stand-ins (amd-smi, rvs) report 8 GPUs, which a real node shows as the
render nodes /dev/dri/renderD128..renderD135; the simulated nodes have no /dev/dri, so OUT/dri holds
one empty file per stand-in GPU, named as the kernel names its render node, and the container
inventories mount it read-only on /dev/dri: the workload namespace shows as many GPUs as amd-smi
lists (the report warns when a node names a GPU model but has no render node). Baremetal nodes have
no such mount (their /dev is the host's).

Node k (1..NODES) is named as in lib.sh: node<k>, netns cvsn<k>, veth vcvs<k>, address
<subnet>.(10+k), state in <state-dir>/node<k>, data in <var-dir>/node<k>.

Containers cannot raise a limit above the engine's hard limit here (no CAP_SYS_RESOURCE), so
the container inventories ask for nofile min(65536, hard), memlock = the hard limit in bytes
(the product default -1, unlimited, fails too) and, for podman, nproc min(32768, hard). The
hard limits are this process's own (those of up.sh) unless --hard-* give them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
from pathlib import Path

COMMON_SSH_ARGS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
# the GPUs of the stand-ins (tests/cluster/image/stand-ins/opt/rocm/bin/amd-smi lists 8 MI300X) and the
# minor number of the first render node (the kernel's DRM render minors start at 128)
STAND_IN_GPUS = 8
RENDER_MINOR = 128


def node_name(k: int) -> str:
    return f"node{k}"


def node_ip(subnet: str, k: int) -> str:
    return f"{subnet}.{10 + k}"


def json_items(items: dict) -> str:
    """The items of a JSON object on one line, without the braces: ``"a": 1, "b": "x"``."""
    return json.dumps(items, ensure_ascii=False)[1:-1]


def yaml_str(s: str) -> str:
    """A single-quoted YAML scalar."""
    return "'" + s.replace("'", "''") + "'"


def hard_limit(which: int) -> int:
    """The process's hard limit, -1 when unlimited."""
    hard = resource.getrlimit(which)[1]
    return -1 if hard == resource.RLIM_INFINITY else hard


def capped(hard: int, cap: int) -> int:
    return cap if hard < 0 or hard > cap else hard


# ---------------------------------------------------------------- cluster.json


def cluster_json(a: argparse.Namespace, inventories: dict[str, Path]) -> str:
    """One top-level key a line; each node on four lines."""
    top = {
        "subnet": f"{a.subnet}.0/24",
        "bridge": a.bridge,
        "gateway": f"{a.subnet}.1",
        "ssh_port": a.ssh_port,
        "user": "root",
        "key": a.key,
        "image": a.image,
        "image_id": a.image_id,
        "maxtext_image": a.maxtext_image,
        "maxtext_python": "/opt/cvs-maxtext/bin/python3",
        "ctl": a.ctl,
        "ssh_config": str(a.out / "ssh_config"),
        "inventories": {orch: str(path) for orch, path in inventories.items()},
        "state_dir": a.state_dir,
    }
    nodes = []
    for k in range(1, a.nodes + 1):
        name = node_name(k)
        state, sock = f"{a.state_dir}/{name}", f"{a.state_dir}/{name}/docker.sock"
        rows = (
            dict(name=name, index=k - 1, hostname=name, ns=f"cvsn{k}", ip=node_ip(a.subnet, k), veth=f"vcvs{k}"),
            {"sshd_pidfile": f"{state}/sshd.pid", "sshd_config": f"{state}/sshd_config"},
            {"docker_socket": sock, "docker_host": f"unix://{sock}", "docker_pidfile": f"{state}/docker.pid"},
            {"docker_data_root": f"{a.var_dir}/{name}/docker", "init_pidfile": f"{state}/init.pid"},
        )
        nodes.append("    {" + ",\n     ".join(json_items(row) for row in rows) + "}")
    head = "".join(f"  {json_items({key: value})},\n" for key, value in top.items())
    return "{\n" + head + '  "nodes": [\n' + ",\n".join(nodes) + "\n  ]\n}\n"


# ---------------------------------------------------------------- inventories

DOCKER_ARGS_NOTE = """\
          # --privileged, --ulimit memlock=-1 and nofile above the hard
          # limit fail on the simulated cluster (no CAP_SYS_RESOURCE)
"""

PODMAN_ARGS_NOTE = """\
          # --privileged and ulimits above the hard limits fail here (no
          # CAP_SYS_RESOURCE); podman replaces its default ulimits with the
          # ones given, so nproc is listed too. With --ipc host (the default)
          # the role drops --shm-size, which podman refuses there.
"""


# make demo trains real MaxText on the nodes' CPUs (tests/cluster/maxtext/cpu.yml)
DEMO_FLEET_METRICS = ("tflops_per_device", "tokens_per_device", "step_time_mean", "step_time_p50", "step_time_p95")
DEMO_FLEET = (
    "    # The nodes share this machine's CPU cores: MaxText's step times and throughput there measure which\n"
    "    # node got the cores, not the node, so the fleet comparison leaves them out (each node's record and\n"
    "    # the report's plots keep them).\n"
    "    cvs_fleet:\n"
    "      metrics:\n" + "".join(f"        {name}: ignore\n" for name in DEMO_FLEET_METRICS)
)


def render_nodes(out: Path) -> Path:
    """OUT/dri with one empty file per stand-in GPU (renderD128, ...), nothing else; returns the directory."""
    dri = out / "dri"
    dri.mkdir(exist_ok=True)
    wanted = {f"renderD{RENDER_MINOR + i}" for i in range(STAND_IN_GPUS)}
    for stale in dri.iterdir():
        if stale.name not in wanted:
            stale.unlink()
    for name in sorted(wanted):
        (dri / name).touch()
    return dri


DRI_NOTE = """\
          # the stand-in GPUs' render nodes (one file each): /dev/dri does not exist on the nodes
"""


def container_vars(image: str, runtime: str, note: str, ulimits: dict[str, int], dri: Path) -> str:
    limits = ", ".join(f'"{name}:{value}:{value}"' for name, value in ulimits.items())
    return (
        "    cvs_container:\n"
        "      lifetime: per_run\n"
        f"      image: {image}\n"
        "      name: cvs-node\n"
        "      ssh_port: 2224\n"
        "      runtime:\n"
        f"        name: {runtime}\n"
        "        args:\n"
        f"{note}"
        "          privileged: false\n"
        "          cap_add: [SYS_PTRACE, IPC_LOCK]\n"
        f"          ulimits: [{limits}]\n"
        "          shm_size: 256m\n"
        f"{DRI_NOTE}"
        f"          volumes: [{yaml_str(f'{dri}:/dev/dri:ro')}]\n"
    )


def inventory(a: argparse.Namespace, title: str, orchestrator: str, container: str = "") -> str:
    text = (
        f"# Generated by tests/cluster/up.sh (simulated cluster, {title}). Do not edit.\n"
        "---\nall:\n  vars:\n"
        "    ansible_user: root\n"
        f"    ansible_ssh_private_key_file: {yaml_str(a.key)}\n"
        f"    ansible_ssh_common_args: '{COMMON_SSH_ARGS}'\n"
        f"    cvs_orchestrator: {orchestrator}\n"
        f"{container}"
        "  children:\n    cvs_nodes:\n      vars:\n        ansible_python_interpreter: /usr/bin/python3\n      hosts:\n"
    )
    for k in range(1, a.nodes + 1):
        text += f"        {node_name(k)}:\n          ansible_host: {node_ip(a.subnet, k)}\n"
        if a.ssh_port != 22:
            text += f"          ansible_port: {a.ssh_port}\n"
    return text + f"    cvs_head:\n      hosts:\n        {node_name(1)}:\n"


# ---------------------------------------------------------------- ssh_config


def ssh_config(a: argparse.Namespace, path: Path) -> str:
    text = f"# Generated by tests/cluster/up.sh: ssh -F {path} node1\n"
    for k in range(1, a.nodes + 1):
        ip = node_ip(a.subnet, k)
        text += (
            f"Host {node_name(k)} {ip}\n  HostName {ip}\n  Port {a.ssh_port}\n  User root\n"
            f"  IdentityFile {a.key}\n  IdentitiesOnly yes\n"
            "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
        )
    return text


# ---------------------------------------------------------------- main


def write(path: Path, text: str) -> None:
    """Write path atomically: NAME.tmp, then renamed over NAME."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
    os.replace(tmp, path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--out", type=Path, required=True, help="the generated directory (written to and named in files)")
    p.add_argument("--nodes", type=int, required=True, help="number of nodes (node1..nodeN)")
    p.add_argument("--subnet", required=True, help="three octets, e.g. 10.77.0")
    p.add_argument("--ssh-port", type=int, required=True, help="the nodes' sshd port")
    p.add_argument("--bridge", required=True, help="the host bridge (br-cvs)")
    p.add_argument("--key", required=True, help="the harness's SSH private key")
    p.add_argument("--image", required=True, help="the node image reference")
    p.add_argument("--image-id", required=True, help="its image ID")
    p.add_argument("--maxtext-image", required=True, help="the node image plus real MaxText (tests/cluster/maxtext)")
    p.add_argument("--ctl", required=True, help="path of ctl.sh")
    p.add_argument("--state-dir", required=True, help="/run/cvs-sim")
    p.add_argument("--var-dir", required=True, help="/var/lib/cvs-sim")
    p.add_argument("--podman", action="store_true", help="also write inventory-podman.yml (podman is installed)")
    p.add_argument("--hard-nofile", type=int, help="hard nofile limit (-1: unlimited; default: this process's)")
    p.add_argument(
        "--hard-memlock", type=int, help="hard memlock limit, bytes (-1: unlimited; default: this process's)"
    )
    p.add_argument("--hard-nproc", type=int, help="hard nproc limit (-1: unlimited; default: this process's)")
    a = p.parse_args(argv)
    if a.nodes < 1:
        p.error("--nodes must be at least 1")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    nofile = capped(hard_limit(resource.RLIMIT_NOFILE) if a.hard_nofile is None else a.hard_nofile, 65536)
    memlock = hard_limit(resource.RLIMIT_MEMLOCK) if a.hard_memlock is None else a.hard_memlock
    nproc = capped(hard_limit(resource.RLIMIT_NPROC) if a.hard_nproc is None else a.hard_nproc, 32768)

    inventories = {orch: a.out / f"inventory-{orch}.yml" for orch in ("baremetal", "container")}
    if a.podman:
        inventories["podman"] = a.out / "inventory-podman.yml"
    inventories["demo"] = a.out / "inventory-demo.yml"
    dri = render_nodes(a.out)
    write(a.out / "cluster.json", cluster_json(a, inventories))
    write(inventories["baremetal"], inventory(a, "baremetal orchestrator", "baremetal"))
    docker_limits = {"nofile": nofile, "memlock": memlock}
    docker = container_vars(a.image, "docker", DOCKER_ARGS_NOTE, docker_limits, dri)
    write(inventories["container"], inventory(a, "container orchestrator", "container", docker))
    if a.podman:
        limits = {"nofile": nofile, "nproc": nproc, "memlock": memlock}
        podman = container_vars(a.image, "podman", PODMAN_ARGS_NOTE, limits, dri)
        write(inventories["podman"], inventory(a, "container orchestrator, podman", "container", podman))
    demo = container_vars(a.maxtext_image, "docker", DOCKER_ARGS_NOTE, docker_limits, dri)
    title = "make demo: container orchestrator, the image with real MaxText (-e @tests/cluster/maxtext/cpu.yml)"
    write(inventories["demo"], inventory(a, title, "container", demo + DEMO_FLEET))
    write(a.out / "ssh_config", ssh_config(a, a.out / "ssh_config"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
