# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PCI devices of one node (as ``cvs.cluster.platform_probe`` read them from ``lspci -D -nn -vv``): which are
GPUs and backend NICs, the bridges between each of them and its root port, and what is wrong with their links and
ACS. Every problem names the device, what was expected and what was found. Pure logic, no Ansible imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.settings import ACS_REDIRECT

AMD_VENDOR = "1002"
_GPU_CLASSES = ("0300", "0302", "0380", "1200")


def _code(dev: Mapping[str, Any]) -> str:
    return str(dev.get("class_code") or "")


def is_gpu(dev: Mapping[str, Any]) -> bool:
    """An AMD display or processing-accelerator function (by IDs with ``-nn``, else by the names lspci prints)."""
    if dev.get("vendor_id"):
        return dev["vendor_id"] == AMD_VENDOR and _code(dev) in _GPU_CLASSES
    cls, name = str(dev.get("class") or "").lower(), str(dev.get("name") or "")
    return ("accelerator" in cls or "display" in cls or "vga" in cls) and "AMD/ATI" in name


def is_network(dev: Mapping[str, Any]) -> bool:
    if _code(dev):
        return _code(dev).startswith("02")
    cls = str(dev.get("class") or "").lower()
    return any(word in cls for word in ("ethernet", "network", "infiniband"))


def classify(devices: Sequence[Mapping[str, Any]], nic_pattern: str) -> dict[str, list[Mapping[str, Any]]]:
    """``{gpus, nics, other_nics}``: backend NICs are the network functions whose name matches ``nic_pattern``."""
    pattern = re.compile(nic_pattern, re.IGNORECASE) if nic_pattern else None
    gpus = [d for d in devices if is_gpu(d)]
    network = [d for d in devices if is_network(d)]
    nics = [d for d in network if pattern is None or pattern.search(str(d.get("name") or ""))]
    return {"gpus": gpus, "nics": nics, "other_nics": [d for d in network if d not in nics]}


def _bus_of(bdf: str) -> tuple[str, int]:
    domain, bus, _rest = bdf.split(":", 2)
    return domain, int(bus, 16)


def parent_bridge(dev: Mapping[str, Any], bridges: Sequence[Mapping[str, Any]]) -> Optional[Mapping[str, Any]]:
    """The bridge whose secondary bus is the device's (the narrowest range that holds it), or None at a root bus."""
    domain, bus = _bus_of(str(dev["bdf"]))
    best = None
    for bridge in bridges:
        if bridge is dev or _bus_of(str(bridge["bdf"]))[0] != domain:
            continue
        span = bridge["bus"]
        width = span["subordinate"] - span["secondary"]
        if span["secondary"] <= bus <= span["subordinate"] and (
            best is None or width < best["bus"]["subordinate"] - best["bus"]["secondary"]
        ):
            best = bridge
    return best


def path_to_root(dev: Mapping[str, Any], devices: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The bridges from the device up to its root port, nearest first."""
    bridges = [d for d in devices if d.get("bus")]
    path: list[Mapping[str, Any]] = []
    current = parent_bridge(dev, bridges)
    while current is not None and current not in path and len(path) < 32:
        path.append(current)
        current = parent_bridge(current, bridges)
    return path


def _speed(value: Any) -> str:
    return "unknown" if value is None else f"{float(value):g} GT/s"


def _width(value: Any) -> str:
    return "unknown" if value is None else f"x{int(value)}"


def _link_text(sta: Mapping[str, Any]) -> str:
    return f"{_speed(sta.get('speed'))} {_width(sta.get('width'))}"


def label(kind: str, dev: Mapping[str, Any]) -> str:
    return f"{kind} {dev.get('bdf')} ({dev.get('name') or dev.get('class') or '?'})"


def link_problems(kind: str, dev: Mapping[str, Any], expect: Optional[Mapping[str, Any]]) -> list[str]:
    """The device's negotiated link (LnkSta) against the inventory's speed and width, else its capability (LnkCap)."""
    cap, sta = dev.get("link_cap"), dev.get("link_sta")
    if not sta:
        return [f"{label(kind, dev)}: no PCIe link status in lspci's output (expected a PCI Express device)"]
    cap = cap or {}
    problems = []
    for field, show in (("speed", _speed), ("width", _width)):
        found, capable = sta.get(field), cap.get(field)
        want = (expect or {}).get(field)
        if want is None:
            want = capable
        if want is None:
            continue
        if found is None or float(found) != float(want):
            capable_text = f" (LnkCap {show(capable)})" if capable is not None else ""
            problems.append(f"{label(kind, dev)}: PCIe link {field} {show(found)}, expected {show(want)}{capable_text}")
    return problems


def acs_problems(devices: Sequence[Mapping[str, Any]], ends: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """ACS redirection turned on at a bridge between a GPU or NIC and its root port (one line per bridge, naming
    the devices below it)."""
    below: dict[str, list[str]] = {}
    bridges: dict[str, Mapping[str, Any]] = {}
    for kind, dev in ends:
        for bridge in path_to_root(dev, devices):
            bridges[str(bridge["bdf"])] = bridge
            below.setdefault(str(bridge["bdf"]), []).append(f"{kind} {dev['bdf']}")
    problems = []
    for bdf in sorted(bridges):
        ctl = bridges[bdf].get("acs_ctl") or {}
        on = [flag for flag in ACS_REDIRECT if ctl.get(flag)]
        if on:
            port = bridges[bdf].get("port_type") or "bridge"
            problems.append(
                f"ACS on {port} {bdf} ({bridges[bdf].get('name') or '?'}), on the path of {', '.join(below[bdf])}: "
                f"ACSCtl {' '.join(f + '+' for f in on)}, expected {' '.join(f + '-' for f in on)} "
                "(disable ACS in the BIOS or with setpci)"
            )
    return problems


def pci_problems(pci: Any, settings: Mapping[str, Any]) -> tuple[list[str], list[str], dict[str, Any]]:
    """``(problems, notes, facts)`` of the node's PCI devices against the settings."""
    if not isinstance(pci, Mapping):
        return ["the PCI devices were not read (no lspci output)"], [], {}
    if pci.get("rc") != 0:
        why = pci.get("problem") or f"exit {pci.get('rc')}: {str(pci.get('stderr') or '').strip() or 'no message'}"
        return [f"lspci -D -nn -vv failed ({why})"], [], {}
    if pci.get("access_denied"):
        return (
            [
                "lspci could not read the PCIe capabilities (<access denied>): the probe must run as root "
                "(platform_become: true)"
            ],
            [],
            {},
        )
    devices = list(pci.get("devices") or [])
    found = classify(devices, str(settings.get("nic_pattern") or ""))
    problems: list[str] = []
    notes: list[str] = []
    want = settings.get("gpu_count")
    if want is not None and len(found["gpus"]) != want:
        problems.append(f"{len(found['gpus'])} GPU(s) on the PCI bus, expected {want}")
    for kind, key in (("GPU", "gpu_pcie"), ("NIC", "nic_pcie")):
        expect = settings.get(key)
        if expect and expect.get("skip"):
            notes.append(f"{kind} PCIe links not checked (platform_{key}: false)")
            continue
        for dev in found["gpus" if kind == "GPU" else "nics"]:
            problems.extend(link_problems(kind, dev, expect))
    if not found["nics"]:
        pattern = settings.get("nic_pattern")
        notes.append(f"no network device matches platform_nic_pattern {pattern!r}: no NIC link checked")
    if found["other_nics"]:
        notes.append(
            "not judged (platform_nic_pattern does not match): "
            + ", ".join(label("NIC", d) for d in found["other_nics"])
        )
    if settings.get("acs_disabled"):
        ends = [("GPU", d) for d in found["gpus"]] + [("NIC", d) for d in found["nics"]]
        problems.extend(acs_problems(devices, ends))
    facts = {
        "gpus_on_pci": len(found["gpus"]),
        "backend_nics": len(found["nics"]),
        "pci_links": {str(d["bdf"]): _link_text(d.get("link_sta") or {}) for d in found["gpus"] + found["nics"]},
    }
    return problems, notes, facts
