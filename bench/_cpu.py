# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU accounting from outside the playbook: RUSAGE_CHILDREN, the bench's ControlMaster processes, the
node-side sshds serving them, and /proc sampling of a playbook's process tree over a run.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from _env import CP_DIR

CLK_TCK = os.sysconf("SC_CLK_TCK")


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
