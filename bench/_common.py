# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared helpers of the benches: the simulated cluster, alias inventories, playbook runs, CPU accounting.

Nothing here is part of the collection. Every bench runs ansible-playbook as a child
process and measures it from outside (wall clock, ``RUSAGE_CHILDREN``, /proc), and
sends traffic only to the hosts of the cluster inventory (the simulated cluster's
namespace addresses, or 127.0.0.0/8 with CVS_BENCH_INVENTORY pointing elsewhere).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV_BIN = REPO / ".venv" / "bin"
RESULTS = BENCH / "results"
WORK = RESULTS / "tmp"
GENERATED = REPO / "tests" / "cluster" / "generated"
CALLBACKS = BENCH / "callback_plugins"
# CVS_BENCH_COLLECTIONS: a collections path holding a modified copy of cvs.cluster, searched
# first (for experiments with a candidate change; the checkout is never modified)
EXPERIMENT = os.environ.get("CVS_BENCH_COLLECTIONS")
# short: unix socket paths are limited to 108 bytes
CP_DIR = Path.home() / ".ansible" / "cvsb"
REMOTE_DIR = os.environ.get("CVS_BENCH_REMOTE_DIR", "/var/tmp/cvs-bench")
CONTROL_PERSIST = "900s"
SSH_ARGS = (
    f"-o ControlMaster=auto -o ControlPersist={CONTROL_PERSIST} -o ServerAliveInterval=15 -o ServerAliveCountMax=4"
)
CLK_TCK = os.sysconf("SC_CLK_TCK")

# the patterns a MaxText job would use; the completion marker never matches the bench's lines
ERROR_PATTERNS = {"nan": r"loss:\s*nan", "oom": "RESOURCE_EXHAUSTED", "segv": "Segmentation fault"}
IGNORE_PATTERNS = {"retry": "will retry"}
NEVER_MARKER = r"completed step:\s*99999999,"

sys.path.insert(0, str(CALLBACKS))
from cvs_bench import log_block  # noqa: E402

__all__ = ["log_block"]


# ---------------------------------------------------------------- small utilities


def say(*parts: Any) -> None:
    print(*parts, flush=True)


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


def env_list(name: str, default: Sequence[str]) -> list[str]:
    value = os.environ.get(name)
    return [v.strip() for v in value.split(",") if v.strip()] if value else list(default)


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def human_size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def med(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def pct(values: Iterable[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[index]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def write_results(name: str, data: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    tag = os.environ.get("CVS_BENCH_TAG")
    if tag:
        name = f"{name}-{tag}"
    if EXPERIMENT:
        data = dict(data, experiment_collections=EXPERIMENT)
    data = dict(data, bench=name, finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), machine=machine_info())
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


LOAD_AT_START = [round(x, 2) for x in os.getloadavg()]


def machine_info() -> dict:
    load = os.getloadavg()
    return {
        "loadavg_at_start": LOAD_AT_START,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "loadavg_at_end": [round(x, 2) for x in load],
    }


# ---------------------------------------------------------------- the cluster


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


# ---------------------------------------------------------------- CPU accounting


def _proc_cpu(pid: int | str, children: bool = False) -> float:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    # fields[0] is state (field 3); utime=14, stime=15, cutime=16, cstime=17
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK_TCK


def master_cpu() -> dict[int, float]:
    """CPU seconds of every bench ControlMaster process (they daemonise, so RUSAGE_CHILDREN misses them)."""
    marker = str(CP_DIR).encode()
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:
            continue
        if cmd.startswith(b"ssh: ") and marker in cmd and b"[mux]" in cmd:
            out[int(entry.name)] = _proc_cpu(entry.name)
    return out


def _tcp_table(pid: int | str) -> dict[int, tuple[int, int]]:
    """socket inode -> (local port, remote port) for the TCP sockets of pid's network namespace."""
    out = {}
    try:
        with open(f"/proc/{pid}/net/tcp") as fh:
            next(fh)
            for row in fh:
                cols = row.split()
                out[int(cols[9])] = (int(cols[1].rsplit(":", 1)[1], 16), int(cols[2].rsplit(":", 1)[1], 16))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    return out


def _socket_inodes(pid: int | str) -> list[int]:
    out = []
    try:
        for fd in os.scandir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(fd.path)
            except OSError:
                continue
            if target.startswith("socket:["):
                out.append(int(target[8:-1]))
    except OSError:
        pass
    return out


def node_side_cpu(masters: Iterable[int]) -> float:
    """CPU seconds (incl. reaped children) of the node-side sshd processes serving the given ControlMasters."""
    return sum(_proc_cpu(pid, children=True) for pid in node_server_pids(masters))


def node_server_pids(masters: Iterable[int]) -> list[int]:
    """The node-side sshd processes serving the given ControlMasters.

    On the simulated cluster these are the per-connection ``sshd: root@notty``
    processes in the nodes' network namespaces; every shell and reader a round runs is
    their child, so their cutime/cstime is the remote side of our rounds (which on
    this machine shares the controller's 2 cores). Other processes in the node
    namespaces (other people's tests, containers) are not counted.
    """
    masters = list(masters)
    if not masters:
        return []
    table = _tcp_table("self")
    ports = set()
    for pid in masters:
        for inode in _socket_inodes(pid):
            if inode in table:
                ports.add(table[inode][0])
    try:
        mine = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return []
    tables: dict[int, dict[int, tuple[int, int]]] = {}
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/comm") as fh:
                if fh.read().strip() != "sshd":
                    continue
            netns = os.stat(f"/proc/{entry.name}/ns/net").st_ino
        except OSError:
            continue
        if netns == mine:
            continue
        if netns not in tables:
            tables[netns] = _tcp_table(entry.name)
        if any(tables[netns].get(i, (0, 0))[1] in ports for i in _socket_inodes(entry.name)):
            found.append(int(entry.name))
    return found


def tree_cpu(root: int) -> float:
    """CPU seconds of root and all its live descendants, each with its reaped children."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / CLK_TCK
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


class Sampler(threading.Thread):
    """Samples, every interval seconds, the CPU of an ansible-playbook process tree, of the bench's
    ControlMasters and of the node-side sshd processes serving them, so CPU can be taken over
    a steady-state window (between two events) instead of over the whole run."""

    def __init__(self, root: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.masters = list(master_cpu())
        self.node_pids = node_server_pids(self.masters)
        self.node_last: dict[int, float] = {}
        self.samples: list[tuple[float, float, float, float, float]] = []
        self.mem_available: list[int] = []
        self._stop_event = threading.Event()

    def sample(self) -> None:
        t = time.time()
        tree = tree_cpu(self.root)
        masters = sum(_proc_cpu(p) for p in self.masters)
        for p in self.node_pids:  # a process that went away keeps its last value: the sum never drops
            cpu = _proc_cpu(p, children=True)
            if cpu:
                self.node_last[p] = max(cpu, self.node_last.get(p, 0.0))
        nodes = sum(self.node_last.values())
        main = _proc_cpu(self.root)  # the ansible-playbook main process alone (strategy, results, callbacks)
        self.samples.append((t, tree, masters, nodes, main))
        self.mem_available.append(mem_available())

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def at(self, t: float) -> tuple[float, ...]:
        """(tree, masters, nodes, main) CPU at time t, interpolated between samples."""
        s = self.samples
        if not s:
            return (0.0, 0.0, 0.0, 0.0)
        if t <= s[0][0]:
            return s[0][1:]
        for a, b in zip(s, s[1:]):
            if a[0] <= t <= b[0]:
                f = (t - a[0]) / (b[0] - a[0]) if b[0] > a[0] else 0.0
                return tuple(x + f * (y - x) for x, y in zip(a[1:], b[1:]))  # type: ignore[return-value]
        return s[-1][1:]


def mem_available() -> int:
    """MemAvailable in KiB."""
    with open("/proc/meminfo") as fh:
        for row in fh:
            if row.startswith("MemAvailable:"):
                return int(row.split()[1])
    return 0


def system_busy() -> float:
    with open("/proc/stat") as fh:
        parts = [int(x) for x in fh.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return (sum(parts[:8]) - parts[3] - parts[4]) / CLK_TCK


@dataclass
class CpuSnap:
    children: float
    masters: dict[int, float]
    nodes: float
    busy: float
    wall: float

    @classmethod
    def take(cls) -> CpuSnap:
        masters = master_cpu()
        nodes = node_side_cpu(masters)
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(ru.ru_utime + ru.ru_stime, masters, nodes, system_busy(), time.perf_counter())


@dataclass
class CpuDelta:
    wall: float
    controller: float  # ansible-playbook + workers + ssh clients (RUSAGE_CHILDREN) + ControlMaster processes
    children: float
    masters: float
    nodes: float
    busy: float

    def per(self, n: float) -> dict:
        return {k: getattr(self, k) / n for k in ("wall", "controller", "children", "masters", "nodes", "busy")}


def cpu_between(a: CpuSnap, b: CpuSnap) -> CpuDelta:
    masters = sum(cpu - a.masters.get(pid, 0.0) for pid, cpu in b.masters.items())
    children = b.children - a.children
    return CpuDelta(b.wall - a.wall, children + masters, children, masters, b.nodes - a.nodes, b.busy - a.busy)


# ---------------------------------------------------------------- playbook runs


def ansible_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_CALLBACK_PLUGINS=str(CALLBACKS),
        ANSIBLE_STDOUT_CALLBACK="cvs_bench",
        ANSIBLE_SSH_ARGS=SSH_ARGS,
        ANSIBLE_HOST_KEY_CHECKING="False",
        ANSIBLE_RETRY_FILES_ENABLED="False",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_DEPRECATION_WARNINGS="False",
    )
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    if EXPERIMENT:
        env["ANSIBLE_COLLECTIONS_PATH"] = f"{EXPERIMENT}:{REPO / '.cache' / 'collections'}"
    env.update(extra or {})
    return env


@dataclass
class PlayRun:
    rc: int
    cpu: CpuDelta
    events: list[dict]
    stdout: str
    stderr: str
    argv: list[str] = field(default_factory=list)
    sampler: Sampler | None = None

    def by_host(self, event: str | None = None, task: str | None = None) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for e in self.events:
            if "host" in e and (event is None or e["ev"] == event) and (task is None or e.get("task") == task):
                out.setdefault(e["host"], []).append(e)
        return out

    def task_start(self, task: str) -> float | None:
        return next((e["t"] for e in self.events if e["ev"] == "task_start" and e["task"] == task), None)


def yaml_dump(obj: Any) -> str:
    # JSON is valid YAML; ansible-playbook reads it as a playbook
    return json.dumps(obj, indent=1) + "\n"


class Runner:
    """Runs playbooks from a bench work directory and measures them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dir = WORK / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = self.dir / "state"
        self.count = 0

    def start(
        self,
        plays: list[dict],
        inventory: Path,
        forks: int,
        env: dict | None = None,
        args: Sequence[str] = (),
        program: Sequence[str] | None = None,
    ) -> tuple[subprocess.Popen, Path, Path]:
        self.count += 1
        playbook = self.dir / f"play{self.count}.yml"
        playbook.write_text(yaml_dump(plays))
        events = self.dir / f"events{self.count}.jsonl"
        events.unlink(missing_ok=True)
        argv = [*(program or [str(VENV_BIN / "ansible-playbook")])]
        argv += ["-i", str(inventory), "-f", str(forks), *args, str(playbook)]
        with open(self.dir / f"out{self.count}.txt", "wb") as out, open(self.dir / f"err{self.count}.txt", "wb") as err:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=err,
                env=ansible_env(dict(env or {}, CVS_BENCH_EVENTS=str(events))),
                cwd=str(self.dir),
            )
        proc.out_path, proc.err_path = out.name, err.name  # type: ignore[attr-defined]
        return proc, events, playbook

    def run(
        self,
        plays: list[dict],
        inventory: Path,
        forks: int,
        env: dict | None = None,
        timeout: float = 1800,
        args: Sequence[str] = (),
        check: bool = True,
        program: Sequence[str] | None = None,
        sample: float | None = None,
        monitor: Callable[[subprocess.Popen, Path], None] | None = None,
    ) -> PlayRun:
        """Run to the end. With sample=SECONDS, a Sampler follows the CPU of the run (see steady_window);
        monitor(proc, events_path) runs while the playbook does (e.g. to end a poll from outside)."""
        before = CpuSnap.take()
        proc, events, _playbook = self.start(plays, inventory, forks, env, args, program)
        sampler = Sampler(proc.pid, sample) if sample else None
        if sampler:
            sampler.start()
        try:
            if monitor:
                monitor(proc, events)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if sampler:
                sampler.stop()
        after = CpuSnap.take()
        stdout = Path(proc.out_path).read_text(errors="replace")  # type: ignore[attr-defined]
        stderr = Path(proc.err_path).read_text(errors="replace")  # type: ignore[attr-defined]
        run = PlayRun(proc.returncode, cpu_between(before, after), read_events(events), stdout, stderr, proc.args)
        run.sampler = sampler
        if check and (proc.returncode not in (0, 2) or not any(e["ev"] == "stats" for e in run.events)):
            raise RuntimeError(f"ansible-playbook rc={proc.returncode}\n{stdout[-2000:]}\n{stderr[-2000:]}")
        bad = [e for e in run.events if e["ev"] == "unreachable"]
        if check and bad:
            raise RuntimeError(f"{len(bad)} host(s) unreachable, e.g. {bad[0]}")
        return run


class EventTail:
    """Reads a growing events file incrementally."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.events = path, 0, []

    def poll(self) -> list[dict]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        cut = data.rfind(b"\n") + 1
        self.offset += cut
        new = []
        for line in data[:cut].splitlines():
            try:
                new.append(json.loads(line))
            except ValueError:
                continue
        self.events.extend(new)
        return new


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def warm_masters(runner: Runner, inventory: Path, hosts: Sequence[Host]) -> None:
    """Open every host's ControlMaster before measuring (a real poll starts after earlier tasks did this)."""
    play = {"hosts": "bench", "gather_facts": False, "tasks": [{"name": "warm", "ansible.builtin.raw": "true"}]}
    runner.run([play], inventory, forks=min(32, max(1, len(hosts))))


def log_poll_task(
    name: str,
    log: str,
    retries: int,
    delay: float,
    state_dir: Path,
    start: str = "end",
    ignore_errors: bool = True,
    **extra: Any,
) -> dict:
    task = {
        "name": name,
        "cvs.cluster.log_poll": {
            "logs": [log],
            "error_patterns": ERROR_PATTERNS,
            "ignore_error_patterns": IGNORE_PATTERNS,
            "complete": {"pattern": NEVER_MARKER, "policy": "all"},
            "start": start,
            "timeout": 7200,
            "state_dir": str(state_dir),
            **extra,
        },
        "register": "poll",
        "until": "poll.finished",
        "retries": retries,
        "delay": delay,
    }
    if ignore_errors:
        task["ignore_errors"] = True
    return task


def round_intervals(run: PlayRun, task: str, skip: int = 1) -> dict[str, list[float]]:
    """Per host: seconds between consecutive retry events of task = duration of one poll round as run by Ansible.

    The first ``skip`` intervals are dropped (the first round pays the worker fork and
    state setup, which a long poll pays once).
    """
    out = {}
    for host, evs in run.by_host("retry", task).items():
        times = [e["t"] for e in evs]
        gaps = [b - a for a, b in zip(times, times[1:])]
        out[host] = gaps[skip:]
    return out


def steady_window(run: PlayRun, task: str) -> dict:
    """Wall and CPU over the steady state of a polling run: from the moment every host has finished its
    first round to the moment the first host finished its last one (start-up, worker forks and
    the final result are outside). Needs run(..., sample=...)."""
    retries = run.by_host("retry", task)
    t_a = max(evs[0]["t"] for evs in retries.values())
    t_b = min(evs[-1]["t"] for evs in retries.values())
    host_rounds = sum(1 for evs in retries.values() for e in evs if t_a < e["t"] <= t_b)
    if run.sampler is None or host_rounds == 0 or t_b <= t_a:
        raise RuntimeError("no steady-state window (too few rounds, or run without sample=)")
    a, b = run.sampler.at(t_a), run.sampler.at(t_b)
    tree, masters, nodes, main = (y - x for x, y in zip(a, b))
    hosts = len(retries)
    mem = run.sampler.mem_available
    return {
        "window_s": t_b - t_a,
        "host_rounds": host_rounds,
        "cluster_round_s": (t_b - t_a) * hosts / host_rounds,
        "controller_cpu_per_host_round_s": (tree + masters) / host_rounds,
        "controller_tree_cpu_per_host_round_s": tree / host_rounds,
        "controller_master_cpu_per_host_round_s": masters / host_rounds,
        "node_cpu_per_host_round_s": nodes / host_rounds,
        "main_process_cpu_per_host_round_s": main / host_rounds,
        "main_process_busy_fraction": main / (t_b - t_a),
        "memory_used_peak_mib": (mem[0] - min(mem)) / 1024 if mem else None,
        "samples": len(run.sampler.samples),
    }


def delivered_bytes(run: PlayRun, task: str) -> dict[str, float]:
    """Mean bytes delivered per round, per host, from the cursor offsets reported by each retry."""
    out = {}
    for host, evs in run.by_host("retry", task).items():
        offs = [sum((e["r"].get("offsets") or {}).values()) for e in evs if e["r"].get("offsets")]
        if len(offs) > 1:
            out[host] = (offs[-1] - offs[0]) / (len(offs) - 1)
    return out


# ---------------------------------------------------------------- remote files


def shared_filesystem(host: Host, remote_path: str) -> bool:
    """True if remote_path on the node is the same file as on the controller (simulated cluster's /var/tmp)."""
    try:
        remote = ssh(host, f"stat -c %d:%i {shlex.quote(remote_path)}", timeout=30, check=False).strip()
        st = os.stat(remote_path)
    except (OSError, subprocess.SubprocessError):
        return False
    return remote == f"{st.st_dev}:{st.st_ino}"


MAKE_LOG = r"""
import os, sys
path, size = sys.argv[1], int(sys.argv[2])
line = ("completed step: {step}, seconds: 1.234, TFLOP/s/device: 187.654, Tokens/s/device: 4821.330, "
        "total_weights: 65536, loss: 5.4321")
block = "".join(line.format(step=i)[:127].ljust(127) + "\n" for i in range(8192)).encode()  # 1 MiB
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path + ".tmp", "wb") as fh:
    left = size
    while left > 0:
        fh.write(block[: min(left, len(block))])
        left -= len(block)
    fh.flush()
    os.fsync(fh.fileno())  # no writeback of the new file during the measurements
os.replace(path + ".tmp", path)
print(os.path.getsize(path))
"""


def make_remote_log(host: Host, path: str, size: int) -> None:
    """A log of real 128-byte lines, size bytes (a multiple of 128), written on the node itself."""
    size -= size % 128
    out = ssh(host, f"python3 - {shlex.quote(path)} {size}", stdin=MAKE_LOG.encode(), timeout=900)
    if int(out.strip()) != size:
        raise RuntimeError(f"made {out.strip()} bytes, wanted {size}")


# ---------------------------------------------------------------- the log_poll reader without Ansible

# the wire protocol, from the collection the benches measure (the experiment's copy when one is given)
sys.path.insert(0, EXPERIMENT or str(REPO / ".cache" / "collections"))
from ansible_collections.cvs.cluster.plugins.plugin_utils import _reader_protocol as protocol  # noqa: E402

reader_program = protocol.reader_program
parse_reply = protocol.parse_reply


def remote_python(host: Host) -> str:
    interp = str(host.node.hostvars.get("ansible_python_interpreter") or "python3")
    return "python3" if interp.startswith("auto") or "{" in interp else interp


def reader_command(interpreter: str = "python3", cmd_timeout: int = 30, flags: str = "-S") -> str:
    """The command log_poll runs on the node (``flags`` as it passes them by default). Ansible's ssh connection
    then wraps it in ``/bin/sh -c '...; sleep 0'``."""
    return protocol.reader_command(interpreter, cmd_timeout, flags=flags)


class RawReader:
    """Runs the log_poll reader over plain ssh (the same ControlMaster), carrying its cursor like the action does."""

    def __init__(self, host: Host, path: str, interpreter: str | None = None) -> None:
        self.host, self.path = host, path
        # the interpreter log_poll would use: ansible_python_interpreter if set, else python3 on PATH
        self.interpreter = interpreter or remote_python(host)
        reply = self._call({"logs": [{"path": path, "offset": None}], "max_bytes": 1024, "start": "arm"})
        self.cursor = protocol.cursor_of(reply["logs"][0])

    def _call(self, request: dict) -> dict:
        request = dict(request, cmd_timeout=30)
        out = ssh(self.host, reader_command(self.interpreter), stdin=reader_program(request), timeout=120)
        reply = parse_reply(out)
        if reply is None:
            raise ValueError(f"not a reader reply: {out[-200:]!r}")
        return reply

    def round(self) -> int:
        log = dict(self.cursor, path=self.path)
        reply = self._call({"logs": [log], "max_bytes": 2 * 1024 * 1024, "start": "end"})
        entry = reply["logs"][0]
        before = self.cursor["offset"]
        self.cursor = protocol.cursor_of(entry)
        return self.cursor["offset"] - before


class Appender:
    """Appends 1 KiB of log lines to remote logs: directly when the file is shared with the controller,
    else over ssh (one exec per append, outside any timed section)."""

    def __init__(self, host: Host, path: str, size: int = 1024) -> None:
        self.host, self.path, self.block = host, path, log_block(size)
        self.local = shared_filesystem(host, path)

    def append(self, data: bytes | None = None) -> None:
        data = self.block if data is None else data
        if self.local:
            with open(self.path, "ab") as fh:
                fh.write(data)
        else:
            ssh(self.host, f"cat >> {shlex.quote(self.path)}", stdin=data)

    def callback_env(self, task: str) -> dict:
        """Env for the cvs_bench callback to append one block per retry of task (shared filesystem only)."""
        if not self.local:
            return {}
        return {"CVS_BENCH_APPEND": json.dumps({"task": task, "path": self.path, "bytes": len(self.block)})}

    def start_background(self, interval: float) -> subprocess.Popen | None:
        """Non-shared filesystems only: append one block every interval seconds from a loop on the node."""
        if self.local:
            return None
        block = f"{self.path}.block"
        ssh(self.host, f"cat > {shlex.quote(block)}", stdin=self.block)
        loop = f"while echo .; do cat {shlex.quote(block)} >> {shlex.quote(self.path)}; sleep {interval}; done"
        return subprocess.Popen(ssh_argv(self.host, loop), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_background(proc: subprocess.Popen | None) -> None:
    if proc is not None:
        proc.terminate()
        proc.wait(timeout=30)
