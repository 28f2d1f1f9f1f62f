# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster a bench runs on: its nodes, alias hosts (each with its own ControlMaster), bench
inventories, and plain ssh over the same ControlMaster.

Nothing in bench/ is part of the collection. Every bench runs ansible-playbook as a child process and
measures it from outside (wall clock, ``RUSAGE_CHILDREN``, /proc, see _cpu.py), and sends traffic only
to the hosts of the cluster inventory (the simulated cluster's namespace addresses, or 127.0.0.0/8
with CVS_BENCH_INVENTORY pointing elsewhere).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from _env import CONTROL_PERSIST, CP_DIR, GENERATED, VENV_BIN, ansible_env, env_float
from _results import say


@dataclass
class Node:
    name: str
    hostvars: dict

    @property
    def address(self) -> str:
        return str(self.hostvars.get("ansible_host", self.name))

    @property
    def port(self) -> int:
        return int(self.hostvars.get("ansible_port", self.hostvars.get("ansible_ssh_port", 22)))

    @property
    def user(self) -> str:
        return str(self.hostvars.get("ansible_user", self.hostvars.get("ansible_ssh_user", "root")))

    @property
    def key(self) -> str | None:
        key = self.hostvars.get("ansible_ssh_private_key_file") or self.hostvars.get("ansible_private_key_file")
        return str(key) if key else None


def cluster_inventory() -> Path:
    override = os.environ.get("CVS_BENCH_INVENTORY")
    return Path(override) if override else GENERATED / "inventory-baremetal.yml"


def load_nodes(inventory: Path) -> list[Node]:
    out = subprocess.run(
        [str(VENV_BIN / "ansible-inventory"), "-i", str(inventory), "--list"],
        capture_output=True,
        text=True,
        env=ansible_env(),
        timeout=120,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"ansible-inventory failed on {inventory}: {out.stderr.strip()[-500:]}")
    data = json.loads(out.stdout)
    hostvars = data.get("_meta", {}).get("hostvars", {})
    names = data.get("cvs_nodes", {}).get("hosts") or sorted(hostvars)
    keep = ("ansible_host", "ansible_port", "ansible_user", "ansible_ssh_private_key_file", "ansible_ssh_common_args")
    keep += ("ansible_private_key_file", "ansible_ssh_extra_args", "ansible_python_interpreter", "ansible_connection")
    nodes = []
    for name in names:
        hv = hostvars.get(name, {})
        nodes.append(Node(name, {k: hv[k] for k in keep if k in hv}))
    if not nodes:
        raise RuntimeError(f"no hosts in {inventory}")
    return nodes


def wait_quiet() -> None:
    """With CVS_BENCH_MAX_LOAD=X, wait (up to CVS_BENCH_QUIET_WAIT s, default 1800) for a 1-minute load below X."""
    limit = env_float("CVS_BENCH_MAX_LOAD", 0)
    if not limit:
        return
    deadline = time.time() + env_float("CVS_BENCH_QUIET_WAIT", 1800)
    while os.getloadavg()[0] >= limit and time.time() < deadline:
        say(f"waiting for a quieter machine: load {os.getloadavg()[0]:.1f} >= {limit:g}")
        time.sleep(30)


def wait_for_cluster() -> list[Node]:
    """The cluster's nodes; wait up to CVS_BENCH_WAIT seconds (default 0) for the inventory to appear."""
    wait_quiet()
    inventory = cluster_inventory()
    deadline = time.time() + env_float("CVS_BENCH_WAIT", 0)
    announced = False
    while True:
        if inventory.exists():
            try:
                nodes = load_nodes(inventory)
                if all(ssh_ok(Host(n.name, n)) for n in nodes):
                    return nodes
            except (RuntimeError, ValueError, subprocess.SubprocessError) as exc:
                if time.time() >= deadline:
                    raise
                if not announced:
                    say(f"waiting: {exc}")
        if time.time() >= deadline:
            raise SystemExit(
                f"no reachable cluster: {inventory} is missing or its hosts do not answer. "
                "Start it with `make cluster-up` (or set CVS_BENCH_INVENTORY), "
                "or set CVS_BENCH_WAIT=SECONDS to wait for it."
            )
        if not announced:
            say(f"waiting for the simulated cluster ({inventory}) ...")
            announced = True
        time.sleep(10)


@dataclass
class Host:
    """An inventory host for a bench: a node, or an alias of one with its own SSH ControlMaster."""

    name: str
    node: Node

    @property
    def control_path(self) -> str:
        return str(CP_DIR / self.name)

    def inventory_vars(self) -> dict:
        return dict(self.node.hostvars, ansible_control_path=self.control_path, bench_node=self.node.name)


def aliases(nodes: Sequence[Node], count: int, prefix: str = "h") -> list[Host]:
    """count hosts spread round-robin over the nodes (h000 -> node 0, h001 -> node 1, ...)."""
    width = max(3, len(str(count - 1)))
    return [Host(f"{prefix}{i:0{width}d}", nodes[i % len(nodes)]) for i in range(count)]


def write_inventory(path: Path, hosts: Sequence[Host], group: str = "bench", host_vars: dict | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = {}
    for h in hosts:
        entries[h.name] = dict(h.inventory_vars(), **((host_vars or {}).get(h.name, {})))
    data = {"all": {"children": {group: {"hosts": entries}}}}
    path.write_text(json.dumps(data, indent=1) + "\n")  # JSON is YAML
    return path


# ---------------------------------------------------------------- raw ssh over the same ControlMaster


def ssh_argv(host: Host, command: str) -> list[str]:
    node = host.node
    argv = ["ssh", "-o", "ControlMaster=auto", "-o", f"ControlPersist={CONTROL_PERSIST}"]
    argv += ["-o", f"ControlPath={host.control_path}", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes"]
    argv += ["-o", "LogLevel=ERROR", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15"]
    if node.key:
        argv += ["-i", node.key]
    for extra in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if node.hostvars.get(extra):
            argv += shlex.split(str(node.hostvars[extra]))
    argv += ["-p", str(node.port), "-l", node.user, node.address, command]
    return argv


def ssh(host: Host, command: str, stdin: bytes | None = None, timeout: float = 600, check: bool = True) -> str:
    CP_DIR.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(ssh_argv(host, command), input=stdin, capture_output=True, timeout=timeout, check=False)
    if res.returncode == 255:  # ssh's own failure (e.g. a master that just expired): once more
        time.sleep(0.2)
        res = subprocess.run(ssh_argv(host, command), input=stdin, capture_output=True, timeout=timeout, check=False)
    if check and res.returncode != 0:
        raise RuntimeError(f"ssh {host.name} {command[:80]!r}: rc={res.returncode} {res.stderr.decode()[-400:]}")
    return res.stdout.decode(errors="replace")


def ssh_ok(host: Host) -> bool:
    try:
        return ssh(host, "echo ok", timeout=30, check=False).strip() == "ok"
    except subprocess.SubprocessError:
        return False


def stop_masters(hosts: Iterable[Host]) -> None:
    for h in hosts:
        if os.path.exists(h.control_path):
            subprocess.run(
                ["ssh", "-o", f"ControlPath={h.control_path}", "-O", "exit", "x"], capture_output=True, check=False
            )


# ---------------------------------------------------------------- what a host's node is like


def shared_filesystem(host: Host, remote_path: str) -> bool:
    """True if remote_path on the node is the same file as on the controller (simulated cluster's /var/tmp)."""
    try:
        remote = ssh(host, f"stat -c %d:%i {shlex.quote(remote_path)}", timeout=30, check=False).strip()
        st = os.stat(remote_path)
    except (OSError, subprocess.SubprocessError):
        return False
    return remote == f"{st.st_dev}:{st.st_ino}"


def remote_python(host: Host) -> str:
    interp = str(host.node.hostvars.get("ansible_python_interpreter") or "python3")
    return "python3" if interp.startswith("auto") or "{" in interp else interp
