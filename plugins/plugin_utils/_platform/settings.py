# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the platform suite expects of every node: the one check of its settings, their forms and the documented
default set for MI300X-class nodes (``MI300X_DEFAULTS``; the role's defaults/main.yml holds the same values).

A key that is null is not checked against a value; a fact in ``uniform`` is then still compared across the nodes.
An unknown key names the closest valid one. Pure logic, no Ansible imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.messages import closest, type_name

#: facts that may be compared across nodes (``uniform``), in the order problems are listed
UNIFORM_FACTS = (
    "os",
    "kernel",
    "rocm_version",
    "bios_version",
    "vbios_version",
    "driver_version",
    "online_memory",
    "numa_balancing",
    "thp_enabled",
)
THP_MODES = ("always", "madvise", "never")
#: ACS controls that make a bridge send peer-to-peer traffic up to the root complex (what Linux turns on when an
#: IOMMU isolates devices); any of them on a bridge between a GPU or NIC and its root port is a problem
ACS_REDIRECT = ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl")
#: backend NICs of MI300X-class nodes, by the name lspci prints: NVIDIA/Mellanox ConnectX and BlueField, AMD
#: Pensando (Pollara), Broadcom Thor/Thor2 (BCM575xx/BCM576xx); an on-board management NIC does not match
DEFAULT_NIC_PATTERN = r"ConnectX|BlueField|Pensando|Pollara|BCM57[56]\d\d"

MI300X_DEFAULTS: dict[str, Any] = {
    "kernel_cmdline": ["iommu=pt", "pci=realloc=off"],
    "numa_balancing": 0,
    "thp_enabled": ["always", "madvise"],
    "online_memory": None,
    "gpu_count": 8,
    "gpu_pcie": {"speed": 32, "width": 16},
    "nic_pcie": {"speed": 32, "width": 16},
    "nic_pattern": DEFAULT_NIC_PATTERN,
    "acs_disabled": True,
    "os_version": None,
    "kernel_version": None,
    "rocm_version": None,
    "bios_version": None,
    "gpu_firmware": {},
    "uniform": list(UNIFORM_FACTS),
}
KEYS = tuple(MI300X_DEFAULTS)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTPE]?)(?:i?B)?\s*$", re.IGNORECASE)
_UNITS = "BKMGTPE"


class PlatformSettingsError(ValueError):
    """A setting the judge cannot use (the message names the key, the value and the fix)."""


def size_bytes(value: Any, where: str) -> int:
    """Bytes from ``1.5T``, ``1536G``, ``512 GiB`` or a number of bytes (units of 1024, as lsmem prints them)."""
    if isinstance(value, bool):
        raise PlatformSettingsError(f"{where}: expected a size such as 1.5T or 1536G, got {value!r}")
    if isinstance(value, (int, float)):
        return int(value)
    found = _SIZE.match(str(value))
    if not found:
        raise PlatformSettingsError(f"{where}: expected a size such as 1.5T or 1536G, got {value!r}")
    return int(float(found.group(1)) * 1024 ** _UNITS.index((found.group(2) or "B").upper()))


def human_size(size: Optional[int]) -> Optional[str]:
    """A size as lsmem prints it: units of 1024, one decimal unless it is 0 (``1.5T``, ``512G``)."""
    if size is None:
        return None
    value, unit = float(size), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    text = f"{value:.1f}"
    if text.endswith(".0"):
        text = text[:-2]
    return f"{text}{_UNITS[unit]}"


def _number(value: Any, where: str, kind: type = int) -> Any:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise PlatformSettingsError(f"{where}: expected a number, got {value!r}")
    try:
        number = kind(float(value)) if kind is int else kind(value)
    except (TypeError, ValueError) as exc:
        raise PlatformSettingsError(f"{where}: expected a number, got {value!r}") from exc
    if number < 0:
        raise PlatformSettingsError(f"{where}: must not be negative, got {value!r}")
    return number


def _link(value: Any, where: str) -> Optional[dict[str, Any]]:
    """``{speed: GT/s, width: lanes}`` (either null: that one is judged against the device's capability); null
    judges both against the capability, false judges no link of these devices (``{"skip": true}``)."""
    if value is None:
        return None
    if value is False:
        return {"skip": True, "speed": None, "width": None}
    if not isinstance(value, Mapping):
        raise PlatformSettingsError(f"{where}: expected {{speed: <GT/s>, width: <lanes>}}, got {type_name(value)}")
    for key in value:
        if key not in ("speed", "width"):
            raise PlatformSettingsError(f"{where}: unknown key {key!r}" + closest(key, ("speed", "width")))
    speed = value.get("speed")
    if isinstance(speed, str):
        speed = speed.strip().upper().removesuffix("GT/S").removesuffix("GT").strip()
    width = value.get("width")
    if isinstance(width, str):
        width = width.strip().lower().lstrip("x")
    return {"speed": _number(speed, f"{where}.speed", float), "width": _number(width, f"{where}.width")}


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise PlatformSettingsError(f"{where}: expected a list of strings, got {type_name(value)}")
    return [str(v) for v in value]


def cmdline_item(item: str, where: str) -> tuple[bool, str, Optional[str]]:
    """``(absent, key, value)`` of ``iommu=pt``, ``quiet``, ``!amd_iommu=off``, ``!nomodeset``."""
    text = item.strip()
    absent = text.startswith("!")
    text = text[1:].strip() if absent else text
    if not text or any(c.isspace() for c in text):
        raise PlatformSettingsError(
            f"{where}: {item!r} is not one kernel parameter (key, key=value, or !key to require its absence)"
        )
    key, sep, value = text.partition("=")
    return absent, key, value if sep else None


def check_settings(settings: Any) -> dict[str, Any]:
    """The settings in their checked form, every key present (missing ones from ``MI300X_DEFAULTS``)."""
    if settings is None:
        settings = {}
    if not isinstance(settings, Mapping):
        raise PlatformSettingsError(f"the platform settings must be a mapping, got {type_name(settings)}")
    for key in settings:
        if key not in MI300X_DEFAULTS:
            raise PlatformSettingsError(f"unknown platform setting {key!r}" + closest(key, KEYS))
    raw = {**MI300X_DEFAULTS, **settings}
    out: dict[str, Any] = {}
    out["kernel_cmdline"] = _strings(raw["kernel_cmdline"] or [], "platform_kernel_cmdline")
    for i, item in enumerate(out["kernel_cmdline"]):
        cmdline_item(item, f"platform_kernel_cmdline[{i}]")
    out["numa_balancing"] = _number(raw["numa_balancing"], "platform_numa_balancing")
    thp = raw["thp_enabled"]
    if thp is not None:
        thp = [thp] if isinstance(thp, str) else _strings(thp, "platform_thp_enabled")
        for mode in thp:
            if mode not in THP_MODES:
                raise PlatformSettingsError(
                    f"platform_thp_enabled: {mode!r} is not a transparent huge page mode" + closest(mode, THP_MODES)
                )
    out["thp_enabled"] = thp
    memory = raw["online_memory"]
    out["online_memory"] = None if memory in (None, "") else size_bytes(memory, "platform_online_memory")
    out["gpu_count"] = _number(raw["gpu_count"], "platform_gpu_count")
    out["gpu_pcie"] = _link(raw["gpu_pcie"], "platform_gpu_pcie")
    out["nic_pcie"] = _link(raw["nic_pcie"], "platform_nic_pcie")
    pattern = str(raw["nic_pattern"] or "")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise PlatformSettingsError(f"platform_nic_pattern: invalid regular expression {pattern!r}: {exc}") from exc
    out["nic_pattern"] = pattern
    out["acs_disabled"] = bool(raw["acs_disabled"])
    for key in ("os_version", "kernel_version", "rocm_version", "bios_version"):
        value = raw[key]
        if value is not None and not isinstance(value, (str, int, float)):
            raise PlatformSettingsError(f"platform_{key}: expected text, got {type_name(value)}")
        out[key] = None if value in (None, "") else str(value)
    firmware = raw["gpu_firmware"] or {}
    if not isinstance(firmware, Mapping):
        raise PlatformSettingsError(
            f"platform_gpu_firmware: expected a mapping of firmware id to version, got {type_name(firmware)}"
        )
    out["gpu_firmware"] = {str(k): str(v) for k, v in firmware.items()}
    uniform = _strings(raw["uniform"] or [], "platform_uniform")
    for fact in uniform:
        if fact not in UNIFORM_FACTS:
            raise PlatformSettingsError(
                f"platform_uniform: unknown fact {fact!r}" + closest(fact, UNIFORM_FACTS, "facts")
            )
    out["uniform"] = [f for f in UNIFORM_FACTS if f in uniform]
    return out
