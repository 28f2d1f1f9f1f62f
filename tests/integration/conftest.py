"""Fixtures for integration tests on the simulated cluster (tests/cluster/).

Bring the cluster up first (``tests/cluster/up.sh``, root + Docker). Tests here
never skip: a cluster that is not up is a test failure with a clear message.

Fixtures:

* ``cluster`` (session): :class:`Cluster` loaded from
  ``tests/cluster/generated/cluster.json`` (nodes, IPs, key, inventories).
* ``run_playbook``: ``run_playbook(playbook_path_or_text, inventory,
  extravars=None, env=None, check=True) -> subprocess.CompletedProcess``.
* ``node_exec``: ``node_exec(node, cmd)`` runs inside the node's namespaces
  (``ctl.sh exec``); ``cmd`` is a string (``sh -c``) or an argv list.
* ``ssh_node``: ``ssh_node(node, cmd)`` runs ``cmd`` over SSH as root.
* ``sshd_stop`` / ``sshd_start`` / ``engine_stop`` / ``engine_start``: call
  ``ctl.sh``; whatever a test stopped is started again when the test ends.

All tests under tests/integration get the ``cluster`` marker, except the ones marked ``local`` (real runs on
local-connection hosts: ``make test`` runs them before the cluster is up).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
CLUSTER_DIR = REPO_ROOT / "tests" / "cluster"
GENERATED_DIR = CLUSTER_DIR / "generated"
CLUSTER_JSON = GENERATED_DIR / "cluster.json"
CTL = CLUSTER_DIR / "ctl.sh"
VENV_BIN = REPO_ROOT / ".venv" / "bin"
ANSIBLE_PLAYBOOK = VENV_BIN / "ansible-playbook"
ANSIBLE_CFG = REPO_ROOT / "ansible.cfg"

UP_HINT = "bring it up with `sudo tests/cluster/up.sh` (or `make cluster-up`)"

PathLike = Union[str, "os.PathLike[str]"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test collected from tests/integration with ``cluster``, except those marked ``local``."""
    for item in items:
        path = Path(str(getattr(item, "path", None) or item.fspath)).resolve()
        if HERE in path.parents and item.get_closest_marker("local") is None:
            item.add_marker(pytest.mark.cluster)


# --------------------------------------------------------------------------- cluster


@dataclass(frozen=True)
class Node:
    name: str
    index: int
    ip: str
    ns: str
    hostname: str
    docker_host: str
    docker_socket: str
    sshd_pidfile: str
    raw: Mapping[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class Cluster:
    """The simulated cluster as described by generated/cluster.json."""

    nodes: tuple[Node, ...]
    subnet: str
    gateway: str
    ssh_port: int
    user: str
    key: Path
    image: str
    image_id: str
    maxtext_image: str
    inventory_baremetal: Path
    inventory_container: Path
    ssh_config: Path
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def node(self, name_or_index: Union[str, int]) -> Node:
        for n in self.nodes:
            if name_or_index in (n.name, n.index, n.ip):
                return n
        raise KeyError(f"no node {name_or_index!r} in the simulated cluster ({', '.join(self.names)})")

    def inventory(self, kind: str = "baremetal") -> Path:
        if kind == "baremetal":
            return self.inventory_baremetal
        if kind == "container":
            return self.inventory_container
        raise ValueError(f"unknown inventory kind {kind!r} (baremetal or container)")


def load_cluster(path: Path = CLUSTER_JSON) -> Cluster:
    """Load cluster.json and check the cluster answers; raise RuntimeError if not."""
    if not path.is_file():
        raise RuntimeError(f"the simulated cluster is not up: {path} does not exist; {UP_HINT}")
    data = json.loads(path.read_text())
    nodes = tuple(
        Node(
            name=n["name"],
            index=int(n["index"]),
            ip=n["ip"],
            ns=n["ns"],
            hostname=n.get("hostname", n["name"]),
            docker_host=n["docker_host"],
            docker_socket=n["docker_socket"],
            sshd_pidfile=n["sshd_pidfile"],
            raw=n,
        )
        for n in data["nodes"]
    )
    cluster = Cluster(
        nodes=nodes,
        subnet=data["subnet"],
        gateway=data["gateway"],
        ssh_port=int(data.get("ssh_port", 22)),
        user=data.get("user", "root"),
        key=Path(data["key"]),
        image=data["image"],
        image_id=data.get("image_id", ""),
        maxtext_image=data.get("maxtext_image", ""),
        inventory_baremetal=Path(data["inventories"]["baremetal"]),
        inventory_container=Path(data["inventories"]["container"]),
        ssh_config=Path(data["ssh_config"]),
        raw=data,
    )
    problems = []
    for n in nodes:
        if not Path("/run/netns", n.ns).exists():
            problems.append(f"{n.name}: network namespace {n.ns} is missing")
            continue
        try:
            with socket.create_connection((n.ip, cluster.ssh_port), timeout=3):
                pass
        except OSError as exc:
            problems.append(f"{n.name}: sshd at {n.ip}:{cluster.ssh_port} does not answer ({exc})")
    if problems:
        raise RuntimeError("the simulated cluster is not up: " + "; ".join(problems) + f"; {UP_HINT}")
    return cluster


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    try:
        return load_cluster()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


# --------------------------------------------------------------------------- ansible-playbook


class PlaybookFailed(subprocess.CalledProcessError):
    """ansible-playbook exited non-zero; str() includes the output tail."""

    def __str__(self) -> str:
        out = (self.stdout or "")[-6000:]
        err = (self.stderr or "")[-3000:]
        return f"{super().__str__()}\n--- stdout (tail) ---\n{out}\n--- stderr (tail) ---\n{err}"


def _resolve_inventory(inventory: Union[PathLike, Sequence[PathLike]]) -> list[str]:
    items = [inventory] if isinstance(inventory, (str, os.PathLike)) else list(inventory)
    out: list[str] = []
    for inv in items:
        s = os.fspath(inv)
        if s in ("baremetal", "container"):
            s = str(GENERATED_DIR / f"inventory-{s}.yml")
        elif not os.path.isabs(s) and (REPO_ROOT / s).exists():
            s = str(REPO_ROOT / s)
        out += ["-i", s]
    return out


def run_playbook(
    playbook_path_or_text: PathLike,
    inventory: Union[PathLike, Sequence[PathLike]],
    extravars: Optional[Mapping[str, Any]] = None,
    env: Optional[Mapping[str, str]] = None,
    check: bool = True,
    *,
    args: Sequence[str] = (),
    timeout: Optional[float] = 1800,
) -> subprocess.CompletedProcess[str]:
    """Run ``ansible-playbook`` from the repo's venv with the repo's ansible.cfg.

    ``playbook_path_or_text``: a path (absolute, or relative to the repo root)
    or the YAML text of a playbook. ``inventory``: path(s), or ``"baremetal"`` /
    ``"container"`` for the generated inventories. ``extravars`` go in as JSON
    ``-e``. ``env`` is added to the environment. With ``check``, a non-zero
    exit raises :class:`PlaybookFailed` (a ``CalledProcessError``).
    """
    tmpdir: Optional[tempfile.TemporaryDirectory[str]] = None
    text = os.fspath(playbook_path_or_text)
    path = Path(text)
    if isinstance(playbook_path_or_text, os.PathLike):
        is_text = False
    elif "\n" in text:
        is_text = True
    else:  # a path, unless it is a one-line YAML text that names no file
        is_text = not (path.is_file() or (REPO_ROOT / path).is_file() or text.endswith((".yml", ".yaml")))
    if not is_text:
        if not path.is_absolute():
            path = REPO_ROOT / path
        if not path.is_file():
            raise FileNotFoundError(f"playbook {path} does not exist")
    try:
        if is_text:
            tmpdir = tempfile.TemporaryDirectory(prefix="cvs-playbook-")
            path = Path(tmpdir.name) / "playbook.yml"
            path.write_text(text)
        cmd = [str(ANSIBLE_PLAYBOOK), *_resolve_inventory(inventory), str(path)]
        if extravars:
            cmd += ["-e", json.dumps(dict(extravars))]
        cmd += list(args)
        full_env = dict(os.environ)
        full_env["ANSIBLE_CONFIG"] = str(ANSIBLE_CFG)
        full_env["PATH"] = f"{VENV_BIN}{os.pathsep}{full_env.get('PATH', '')}"
        full_env.setdefault("ANSIBLE_NOCOLOR", "1")
        full_env.setdefault("ANSIBLE_FORCE_COLOR", "0")
        if env:
            full_env.update(env)
        proc = subprocess.run(
            cmd, cwd=REPO_ROOT, env=full_env, capture_output=True, text=True, timeout=timeout, check=False
        )
    finally:
        if tmpdir is not None:
            tmpdir.cleanup()
    if check and proc.returncode != 0:
        raise PlaybookFailed(proc.returncode, cmd, proc.stdout, proc.stderr)
    return proc


@pytest.fixture(name="run_playbook")
def run_playbook_fixture(cluster: Cluster) -> Callable[..., subprocess.CompletedProcess[str]]:
    return run_playbook


# --------------------------------------------------------------------------- ctl.sh wrappers


def _node_name(node: Union[str, int, Node]) -> str:
    if isinstance(node, Node):
        return node.name
    if isinstance(node, int):
        return f"node{node}"
    return node


def ctl(
    *argv: str, check: bool = True, timeout: Optional[float] = 300, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run tests/cluster/ctl.sh with ``argv``."""
    proc = subprocess.run([str(CTL), *argv], capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout, proc.stderr)
    return proc


def node_exec(
    node: Union[str, int, Node],
    cmd: Union[str, Sequence[str]],
    check: bool = True,
    input: Optional[str] = None,
    timeout: Optional[float] = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` inside the node (not over SSH); a string goes through ``sh -c``."""
    argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
    return ctl("exec", _node_name(node), *argv, check=check, input=input, timeout=timeout)


def ssh_node(
    cluster: Cluster,
    node: Union[str, int, Node],
    cmd: Union[str, Sequence[str]],
    check: bool = True,
    port: Optional[int] = None,
    timeout: Optional[float] = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` on the node over SSH as root with the harness key."""
    n = node if isinstance(node, Node) else cluster.node(_node_name(node))
    remote = cmd if isinstance(cmd, str) else shlex.join(cmd)
    argv = [
        "ssh",
        "-F",
        str(cluster.ssh_config),
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "-p",
        str(port or cluster.ssh_port),
        n.name,
        remote,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, argv, proc.stdout, proc.stderr)
    return proc


@pytest.fixture(name="node_exec")
def node_exec_fixture(cluster: Cluster) -> Callable[..., subprocess.CompletedProcess[str]]:
    return node_exec


@pytest.fixture(name="ssh_node")
def ssh_node_fixture(cluster: Cluster) -> Callable[..., subprocess.CompletedProcess[str]]:
    def _ssh(node: Union[str, int, Node], cmd: Union[str, Sequence[str]], **kwargs: Any) -> Any:
        return ssh_node(cluster, node, cmd, **kwargs)

    return _ssh


def _restoring(stop: str, start: str) -> Iterator[Callable[[Union[str, int, Node]], subprocess.CompletedProcess[str]]]:
    stopped: list[str] = []

    def _stop(node: Union[str, int, Node]) -> subprocess.CompletedProcess[str]:
        name = _node_name(node)
        stopped.append(name)
        return ctl(stop, name)

    yield _stop
    errors = []
    for name in dict.fromkeys(stopped):
        proc = ctl(start, name, check=False)
        if proc.returncode != 0:
            errors.append(f"{start} {name}: {proc.stderr.strip()}")
    if errors:
        pytest.fail("could not restore the cluster: " + "; ".join(errors), pytrace=False)


@pytest.fixture
def sshd_stop(cluster: Cluster) -> Iterator[Callable[[Union[str, int, Node]], subprocess.CompletedProcess[str]]]:
    """Kill every sshd of a node; restarted when the test ends."""
    yield from _restoring("sshd-stop", "sshd-start")


@pytest.fixture
def sshd_start(cluster: Cluster) -> Callable[[Union[str, int, Node]], subprocess.CompletedProcess[str]]:
    return lambda node: ctl("sshd-start", _node_name(node))


@pytest.fixture
def engine_stop(cluster: Cluster) -> Iterator[Callable[[Union[str, int, Node]], subprocess.CompletedProcess[str]]]:
    """Stop a node's dockerd; restarted when the test ends."""
    yield from _restoring("engine-stop", "engine-start")


@pytest.fixture
def engine_start(cluster: Cluster) -> Callable[[Union[str, int, Node]], subprocess.CompletedProcess[str]]:
    return lambda node: ctl("engine-start", _node_name(node))
