# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one node says about its platform configuration (runs on the node; stdlib only, Python >= 3.9).

``cvs.cluster.platform_probe`` calls :func:`probe`: the kernel command line (from a path the caller chooses,
``/proc/cmdline`` by default), NUMA balancing, transparent huge pages, online memory (what ``lsmem`` sums), the OS
release, the BIOS version, every PCI device that matters for a GPU node (GPUs, NICs and the bridges above them) read
from ``lspci -D -nn -vv`` into a few fields each, and the output of ``amd-smi version``/``static``/``firmware``.

Tools are looked up first: a node that lacks one runs nothing and says which (``missing``). ``lspci -vv`` prints
about 4 KiB per device, so it is read here and only the fields the judge needs travel back. Judging happens on the
controller (``plugins/plugin_utils/_platform/``). The command runner and the program lookup are the node probe's
(``_node_probe.py``).
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.cvs.cluster.plugins.module_utils import _process
from ansible_collections.cvs.cluster.plugins.module_utils._node_probe import MAX_OUTPUT, find_binary, run_command

CMDLINE = "/proc/cmdline"
NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"
THP_ROOT = "/sys/kernel/mm/transparent_hugepage"
MEMORY_ROOT = "/sys/devices/system/memory"
MEMINFO = "/proc/meminfo"
OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")
BIOS_VERSION = "/sys/class/dmi/id/bios_version"
#: where programs named without a "/" are looked for after PATH (lspci is in /usr/sbin on RHEL-like systems)
SYSTEM_SEARCH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

# ---------------------------------------------------------------------------------------------- lspci -D -nn -vv

_HEADER = re.compile(
    r"^(?P<bdf>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<cls>[^:\[]+?)(?:\s+\[(?P<code>[0-9a-fA-F]{4})\])?:\s+(?P<rest>.*)$"
)
_IDS = re.compile(r"\s*\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]\s*$")
_SUFFIX = re.compile(r"\s+\((?:rev [0-9a-fA-F]+|prog-if [^)]*)\)\s*$")
_SPEED = re.compile(r"Speed\s+(?P<speed>[\d.]+|unknown)(?:GT/s)?(?:\s*\((?P<note>[^)]*)\))?", re.IGNORECASE)
_WIDTH = re.compile(r"Width\s+x(?P<width>\d+)(?:\s*\((?P<note>[^)]*)\))?", re.IGNORECASE)
_EXPRESS = re.compile(r"Capabilities:\s*\[[0-9a-fA-F]+\]\s*Express\s*\([^)]*\)\s*(?P<type>[^,(]+?)\s*(?:\(|,|$)")
_BUS = re.compile(
    r"Bus:\s*primary=(?P<p>[0-9a-fA-F]+),\s*secondary=(?P<s>[0-9a-fA-F]+),\s*subordinate=(?P<u>[0-9a-fA-F]+)"
)
_FLAG = re.compile(r"([A-Za-z][A-Za-z0-9]*)([+-])")


def _bdf(text: str) -> str:
    """``0000:05:00.0`` from ``05:00.0`` or ``0000:05:00.0`` (lower case)."""
    text = text.lower()
    return text if text.count(":") == 2 else f"0000:{text}"


def _link(line: str) -> Dict[str, Any]:
    speed, width = _SPEED.search(line), _WIDTH.search(line)
    out: Dict[str, Any] = {"speed": None, "width": None, "speed_note": None, "width_note": None}
    if speed:
        out["speed"] = None if speed.group("speed").lower() == "unknown" else float(speed.group("speed"))
        out["speed_note"] = speed.group("note")
    if width:
        out["width"] = int(width.group("width"))
        out["width_note"] = width.group("note")
    return out


def _flags(line: str) -> Dict[str, bool]:
    body = line.split(":", 1)[1] if ":" in line else line
    return {name: sign == "+" for name, sign in _FLAG.findall(body)}


def parse_lspci(text: str) -> Dict[str, Any]:
    """``lspci -D -nn -vv`` (``-D`` and ``-nn`` optional) as ``{devices, access_denied}``.

    Each device: ``bdf`` (with its domain), ``class``, ``class_code`` (``1200``, with ``-nn``), ``vendor_id``,
    ``device_id`` (with ``-nn``), ``name``, ``port_type`` (of its PCI Express capability: ``Endpoint``,
    ``Root Port``, ``Upstream Port``, ``Downstream Port`` ...), ``link_cap`` and ``link_sta`` (``speed`` in GT/s,
    ``width`` in lanes, and lspci's note: ``downgraded``, ``ok``, ``overdriven``), ``acs_ctl`` (ACS control flags,
    name to on/off), ``bus`` (a bridge's ``primary``/``secondary``/``subordinate`` bus numbers) and
    ``access_denied`` (lspci could not read the capabilities: not root)."""
    devices: List[Dict[str, Any]] = []
    current: Optional[Dict[str, Any]] = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if not raw[0].isspace():
            head = _HEADER.match(raw.strip())
            if not head:
                current = None
                continue
            rest = head.group("rest")
            while True:
                stripped = _SUFFIX.sub("", rest)
                if stripped == rest:
                    break
                rest = stripped
            ids = _IDS.search(rest)
            current = {
                "bdf": _bdf(head.group("bdf")),
                "class": head.group("cls").strip(),
                "class_code": (head.group("code") or "").lower() or None,
                "vendor_id": ids.group("vendor").lower() if ids else None,
                "device_id": ids.group("device").lower() if ids else None,
                "name": _IDS.sub("", rest).strip(),
                "port_type": None,
                "link_cap": None,
                "link_sta": None,
                "acs_ctl": None,
                "bus": None,
                "access_denied": False,
            }
            devices.append(current)
            continue
        if current is None:
            continue
        line = raw.strip()
        if line.startswith("Capabilities:") and "access denied" in line:
            current["access_denied"] = True
        elif line.startswith("Capabilities:") and "Express" in line:
            express = _EXPRESS.search(line)
            if express and current["port_type"] is None:
                current["port_type"] = express.group("type").strip()
        elif line.startswith("LnkCap:") and current["link_cap"] is None:
            current["link_cap"] = _link(line)
        elif line.startswith("LnkSta:") and current["link_sta"] is None:
            current["link_sta"] = _link(line)
        elif line.startswith("ACSCtl:"):
            current["acs_ctl"] = _flags(line)
        elif line.startswith("Bus:"):
            bus = _BUS.search(line)
            if bus:
                current["bus"] = {
                    "primary": int(bus.group("p"), 16),
                    "secondary": int(bus.group("s"), 16),
                    "subordinate": int(bus.group("u"), 16),
                }
    return {"devices": devices, "access_denied": any(d["access_denied"] for d in devices)}


def relevant_devices(devices: Sequence[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
    """Bridges (class 06xx or a bus range), display and accelerator devices (03xx, 12xx) and network devices
    (02xx): what the judge reads; host bridges' functions, USB, SATA ... stay on the node."""
    keep = []
    for dev in devices:
        code = str(dev.get("class_code") or "")
        cls = str(dev.get("class") or "").lower()
        if (
            dev.get("bus")
            or code[:2] in ("02", "03", "06", "12")
            or any(w in cls for w in ("bridge", "network", "ethernet", "infiniband", "accelerator", "display", "vga"))
        ):
            keep.append(dev)
    return keep


# ---------------------------------------------------------------------------------------------- files


def read_text(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return {"path": path, "value": handle.read(MAX_OUTPUT).strip(), "problem": None}
    except OSError as exc:
        return {"path": path, "value": None, "problem": f"{path}: {exc.strerror or exc}"}


def thp_mode(text: Optional[str]) -> Optional[str]:
    """The selected mode of ``always [madvise] never``."""
    if text is None:
        return None
    found = re.search(r"\[([^\]]+)\]", text)
    return found.group(1) if found else text.strip() or None


def os_release(paths: Sequence[str] = OS_RELEASE) -> Dict[str, Any]:
    for path in paths:
        read = read_text(path)
        if read["value"] is None:
            continue
        fields: Dict[str, str] = {}
        for line in read["value"].splitlines():
            key, sep, value = line.partition("=")
            if sep:
                fields[key.strip()] = value.strip().strip('"').strip("'")
        return {"path": path, "value": fields, "problem": None}
    return {"path": paths[0], "value": None, "problem": f"{paths[0]}: not found"}


def online_memory(root: str = MEMORY_ROOT, meminfo: str = MEMINFO) -> Dict[str, Any]:
    """Bytes of online memory as ``lsmem`` sums them (online memory blocks x block size); where the kernel has no
    memory-block directory, ``MemTotal`` of ``/proc/meminfo`` (``source`` says which)."""
    try:
        block = int(read_text(os.path.join(root, "block_size_bytes"))["value"] or "", 16)
        online = 0
        for entry in os.listdir(root):
            if not re.fullmatch(r"memory\d+", entry):
                continue
            state = read_text(os.path.join(root, entry, "online"))["value"]
            if state is None:
                state = "1" if read_text(os.path.join(root, entry, "state"))["value"] == "online" else "0"
            online += 1 if state.strip() == "1" else 0
        if online:
            return {"bytes": online * block, "source": root, "problem": None}
    except (OSError, ValueError):
        pass
    read = read_text(meminfo)
    found = re.search(r"^MemTotal:\s+(\d+)\s*kB", read["value"] or "", re.MULTILINE)
    if found:
        return {"bytes": int(found.group(1)) * 1024, "source": meminfo, "problem": None}
    return {"bytes": None, "source": None, "problem": read["problem"] or f"{meminfo}: no MemTotal line"}


# ---------------------------------------------------------------------------------------------- the probe


def probe(
    cmdline_path: str,
    lspci: Optional[str],
    amd_smi: Optional[str],
    firmware: bool,
    command_timeout: float,
    search: Sequence[str] = (),
) -> Dict[str, Any]:
    """Everything the platform judge reads; ``missing`` (tools not found) makes it run nothing else."""
    folders = list(search) + [f for f in SYSTEM_SEARCH if f not in search]
    tools = {name: path for name, path in (("lspci", lspci), ("amd-smi", amd_smi)) if path}
    found = {name: find_binary(path, folders) for name, path in tools.items()}
    missing = [{"tool": name, "path": tools[name]} for name, where in found.items() if where is None]
    result: Dict[str, Any] = {"kernel": os.uname().release, "missing": missing, "tools": found}
    if missing:
        return result
    cmdline = read_text(cmdline_path)
    thp = {key: read_text(os.path.join(THP_ROOT, key)) for key in ("enabled", "defrag")}
    result.update(
        cmdline=cmdline,
        numa_balancing=read_text(NUMA_BALANCING),
        thp={key: {**read, "value": thp_mode(read["value"])} for key, read in thp.items()},
        memory=online_memory(),
        os_release=os_release(),
        bios_version=read_text(BIOS_VERSION),
        commands={},
        pci=None,
    )
    if "lspci" in found:
        done = _process.run_command([str(found["lspci"]), "-D", "-nn", "-vv"], command_timeout)
        parsed = parse_lspci(done["stdout"]) if done["rc"] == 0 else {"devices": [], "access_denied": False}
        result["pci"] = {
            "rc": done["rc"],
            "problem": done["problem"],
            "stderr": done["stderr"][-2000:],
            "devices": relevant_devices(parsed["devices"]),
            "all_devices": len(parsed["devices"]),
            "access_denied": parsed["access_denied"],
        }
    if "amd-smi" in found:
        program = str(found["amd-smi"])
        commands = {
            "amd_smi_version": [program, "version"],
            "amd_smi_static": [program, "static", "--asic", "--driver", "--vbios", "--json"],
        }
        if firmware:
            commands["amd_smi_firmware"] = [program, "firmware", "--json"]
        result["commands"] = {name: run_command(argv, command_timeout) for name, argv in commands.items()}
    return result
