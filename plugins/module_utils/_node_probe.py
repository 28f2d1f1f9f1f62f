# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one node says about itself before a run (runs on the node; stdlib only).

``cvs.cluster.node_probe`` calls :func:`probe`: the node's clock and kernel, the output of a few read-only
commands (amd-smi, ``rvs --version``), where required binaries are, free space under the run directories,
kernel-log lines matching GPU/RAS/PCIe error patterns, and the state of RDMA ports. Judging (uniformity across
nodes, expectations) happens on the controller (``plugin_utils/_preflight.py``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import socket
import struct
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ansible_collections.cvs.cluster.plugins.module_utils import _process

MAX_OUTPUT = 256 * 1024
MAX_LOG_MATCHES = 50
KMSG = "/dev/kmsg"
RDMA_ROOT = "/sys/class/infiniband"
MEMINFO = "/proc/meminfo"
ROUTES = "/proc/net/route"
DRI = "/dev/dri"
SIOCGIFADDR = 0x8915


class ProbeError(ValueError):
    """A setting the probe cannot use (the message names it)."""


def compile_patterns(patterns: Mapping[str, str], option: str) -> Dict[str, re.Pattern[str]]:
    compiled: Dict[str, re.Pattern[str]] = {}
    for name, pattern in patterns.items():
        try:
            compiled[str(name)] = re.compile(str(pattern))
        except re.error as exc:
            raise ProbeError(f"invalid regular expression in {option}[{name}]: {pattern!r}: {exc}") from exc
    return compiled


def run_command(
    argv: Sequence[str], timeout: float, search: Sequence[str] = (), keep: Optional[re.Pattern[str]] = None
) -> Dict[str, Any]:
    """Run one read-only command without a shell; a missing program or a timeout is reported, never raised.

    With ``keep``, only the output lines it matches are returned (a tool such as ``ompi_info --all`` prints
    far more than the caller needs)."""
    program = find_binary(str(argv[0]), search)
    if program is None:
        return {"rc": None, "stdout": "", "stderr": "", "problem": f"{argv[0]} not found"}
    done = _process.run_command([program, *[str(a) for a in argv[1:]]], timeout)
    if done["problem"]:
        done["problem"] = done["problem"].replace(program, str(argv[0]), 1)
        return done
    stdout = done["stdout"]
    if keep is not None:
        stdout = "".join(line for line in stdout.splitlines(keepends=True) if keep.search(line))
    return {**done, "stdout": stdout[:MAX_OUTPUT], "stderr": done["stderr"][:MAX_OUTPUT]}


def find_binary(name: str, search: Sequence[str] = ()) -> Optional[str]:
    """An absolute path as it is (when executable), else the first match on PATH, then in ``search``."""
    if "/" in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    found = shutil.which(name)
    if found:
        return found
    for folder in search:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def disk_space(path: str) -> Dict[str, Any]:
    """Free and total MiB of the file system that holds ``path`` (or its nearest existing parent)."""
    probed = os.path.abspath(path)
    while not os.path.exists(probed) and probed != "/":
        probed = os.path.dirname(probed)
    try:
        st = os.statvfs(probed)
    except OSError as exc:
        return {"path": path, "probed": probed, "free_mb": None, "total_mb": None, "problem": str(exc)}
    return {
        "path": path,
        "probed": probed,
        "free_mb": st.f_bavail * st.f_frsize // (1024 * 1024),
        "total_mb": st.f_blocks * st.f_frsize // (1024 * 1024),
        "problem": None,
    }


def read_kmsg(path: str = KMSG, opener: Callable[[str, int], int] = os.open) -> List[str]:
    """Every record of the kernel log since boot (what ``dmesg`` prints), read without blocking."""
    fd = opener(path, os.O_RDONLY | os.O_NONBLOCK)
    lines: List[str] = []
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # the ring buffer overwrote the record being read: go on
                    continue
                raise
            if not record:
                break
            text = record.decode("utf-8", "replace")
            head, _sep, message = text.partition(";")
            stamp = head.split(",")[2] if head.count(",") >= 2 else ""
            line = message.split("\n", 1)[0]
            lines.append(f"[{int(stamp) / 1e6:12.6f}] {line}" if stamp.isdigit() else line)
    finally:
        os.close(fd)
    return lines


def kernel_log(
    patterns: Mapping[str, re.Pattern[str]],
    ignore: Mapping[str, re.Pattern[str]],
    reader: Callable[[], List[str]] = read_kmsg,
) -> Dict[str, Any]:
    """Kernel-log lines matching an error pattern and no ignore pattern (first MAX_LOG_MATCHES)."""
    try:
        lines = reader()
    except OSError as exc:
        why = "no kernel log in this namespace" if exc.errno == errno.ENOENT else (exc.strerror or str(exc))
        return {"readable": False, "problem": f"{KMSG}: {why}", "matches": [], "matched": 0, "lines": 0}
    matches: List[Dict[str, str]] = []
    matched = 0
    for line in lines:
        if any(p.search(line) for p in ignore.values()):
            continue
        for name, pattern in patterns.items():
            if pattern.search(line):
                matched += 1
                if len(matches) < MAX_LOG_MATCHES:
                    matches.append({"name": name, "line": line})
                break
    return {"readable": True, "problem": None, "matches": matches, "matched": matched, "lines": len(lines)}


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read().strip()


def rdma_ports(root: str = RDMA_ROOT) -> List[Dict[str, Any]]:
    """``{device, port, state, phys_state}`` of every RDMA port (``4: ACTIVE`` is read as ``ACTIVE``)."""
    ports: List[Dict[str, Any]] = []
    try:
        devices = sorted(os.listdir(root))
    except OSError:
        return ports
    for device in devices:
        port_root = os.path.join(root, device, "ports")
        try:
            numbers = sorted(os.listdir(port_root), key=lambda p: int(p) if p.isdigit() else 0)
        except OSError:
            continue
        for number in numbers:
            row: Dict[str, Any] = {"device": device, "port": number}
            for key in ("state", "phys_state"):
                try:
                    value = _read(os.path.join(port_root, number, key))
                except OSError:
                    value = ""
                row[key] = value.split(":", 1)[1].strip() if ":" in value else value
            ports.append(row)
    return ports


def memory_mb(path: str = MEMINFO) -> Optional[int]:
    """MemTotal in MiB (as Ansible's ``memtotal_mb``), or None when the file does not say."""
    try:
        for line in _read(path).splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_route_interface(path: str = ROUTES) -> Optional[str]:
    """The interface of the IPv4 default route with the lowest metric (``/proc/net/route``), or None."""
    best: Optional[tuple[int, str]] = None
    try:
        rows = _read(path).splitlines()[1:]
    except OSError:
        return None
    for row in rows:
        fields = row.split()
        if len(fields) < 8 or fields[1] != "00000000" or fields[7] != "00000000":
            continue
        try:
            metric = int(fields[6])
        except ValueError:
            continue
        if best is None or metric < best[0]:
            best = (metric, fields[0])
    return best[1] if best else None


def interface_address(name: str) -> Optional[str]:
    """The IPv4 address of interface ``name`` (the kernel's SIOCGIFADDR), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
    except OSError:
        return None
    return socket.inet_ntoa(packed[20:24])


def gpu_render_nodes(path: str = DRI) -> int:
    """How many DRM render nodes (``renderD*``) the node shows: one per GPU the kernel driver exposes."""
    try:
        return sum(1 for name in os.listdir(path) if name.startswith("renderD"))
    except OSError:
        return 0


def describe() -> Dict[str, Any]:
    """What the run's node table and report say about a node: host name, kernel, CPUs, memory, the address of
    the default route and the GPUs the kernel shows. Cheap (files under /proc and /dev, one ioctl)."""
    interface = default_route_interface()
    return {
        "hostname": socket.gethostname(),
        "kernel": os.uname().release,
        "cpus": os.cpu_count(),
        "memory_mb": memory_mb(),
        "address": interface_address(interface) if interface else None,
        "gpu_render_nodes": gpu_render_nodes(),
    }


def command_spec(name: str, spec: Any) -> tuple[List[str], Optional[re.Pattern[str]]]:
    """``[program, arg ...]`` or ``{argv: [...], keep: <regex of the output lines to return>}``."""
    keep = None
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"argv", "keep"})
        if unknown:
            raise ProbeError(f"commands[{name}]: unknown key(s) {', '.join(unknown)} (known: argv, keep)")
        if spec.get("keep"):
            try:
                keep = re.compile(str(spec["keep"]))
            except re.error as exc:
                raise ProbeError(
                    f"invalid regular expression in commands[{name}].keep: {spec['keep']!r}: {exc}"
                ) from exc
        spec = spec.get("argv")
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence) or not spec:
        raise ProbeError(f"commands[{name}] must be a non-empty list: the program and its arguments")
    return [str(a) for a in spec], keep


def probe(
    commands: Mapping[str, Any],
    binaries: Sequence[str],
    paths: Sequence[str],
    kernel_log_patterns: Mapping[str, str],
    kernel_log_ignore: Mapping[str, str],
    command_timeout: float,
    search: Sequence[str] = (),
) -> Dict[str, Any]:
    patterns = compile_patterns(kernel_log_patterns, "kernel_log_patterns")
    ignore = compile_patterns(kernel_log_ignore, "kernel_log_ignore")
    specs = {name: command_spec(name, spec) for name, spec in commands.items()}
    result: Dict[str, Any] = {
        "time": time.time(),
        **describe(),
        "commands": {name: run_command(argv, command_timeout, search, keep) for name, (argv, keep) in specs.items()},
        "binaries": {name: find_binary(name, search) for name in binaries},
        "disk": [disk_space(p) for p in paths],
        "kernel_log": kernel_log(patterns, ignore)
        if patterns
        else {"readable": None, "problem": None, "matches": [], "matched": 0, "lines": 0},
        "rdma": rdma_ports(),
    }
    return result
