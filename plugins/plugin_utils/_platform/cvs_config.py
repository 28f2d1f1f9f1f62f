# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Upstream CVS's platform configuration (``host_config.json``, the ``host`` block that its host_configs suite
reads), mapped onto the platform settings key by key.

Every key is honoured with upstream's meaning or refused naming its key path and the closest valid key; ``_…``
keys are comments. Upstream always checks ``iommu=pt``, NUMA balancing off and ACS off, which the MI300X default
set here checks as well; ``pci_realloc`` becomes the ``pci=realloc=<value>`` item of the kernel command line.
Upstream leaves the NIC links unchecked when ``nic_pcie_speed`` and ``nic_pcie_width`` are both absent (a NIC on
UALink), and so does the mapping. Pure logic, no Ansible imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.messages import closest, type_name

#: upstream key -> the platform setting it sets (the table of docs/migrating.md)
HONOURED = {
    "os_version": "os_version",
    "kernel_version": "kernel_version",
    "rocm_version": "rocm_version",
    "bios_version": "bios_version",
    "pci_realloc": "kernel_cmdline",
    "online_memory": "online_memory",
    "gpu_count": "gpu_count",
    "gpu_pcie_speed": "gpu_pcie",
    "gpu_pcie_width": "gpu_pcie",
    "nic_pcie_speed": "nic_pcie",
    "nic_pcie_width": "nic_pcie",
    "fw_dict": "gpu_firmware",
}
_PLACEHOLDER = re.compile(r"<changeme>|\{user-id\}", re.IGNORECASE)


class PlatformConfigError(ValueError):
    """A key of the upstream block that cannot be honoured; the message names its key path."""


def _scalar(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise PlatformConfigError(f"{where}: expected a string, got {type_name(value)}")
    text = str(value).strip()
    found = _PLACEHOLDER.search(text)
    if found:
        raise PlatformConfigError(f"{where}: still holds the placeholder {found.group(0)!r}; set a real value")
    return text


def platform_settings(config: Any, base: Any = None, where: str = "host") -> dict[str, Any]:
    """``{settings, honoured}``: ``base`` (the role's settings) with what the upstream file sets, and the upstream
    keys honoured (``{key: setting}``). ``config`` is the whole file (``{"host": {...}}``) or its ``host`` block."""
    if isinstance(config, Mapping) and set(k for k in config if not str(k).startswith("_")) == {"host"}:
        config = config["host"]
    if not isinstance(config, Mapping):
        raise PlatformConfigError(
            f"{where}: expected the host block of host_config.json (a mapping), got {type_name(config)}"
        )
    settings = dict(base or {})
    honoured: dict[str, str] = {}
    links: dict[str, dict[str, Any]] = {}
    for key, value in config.items():
        path = f"{where}.{key}"
        if str(key).startswith("_"):
            continue
        if key not in HONOURED:
            raise PlatformConfigError(f"{path}: not a key of upstream's host configuration" + closest(key, HONOURED))
        honoured[str(key)] = HONOURED[key]
        if key == "fw_dict":
            if not isinstance(value, Mapping):
                raise PlatformConfigError(
                    f"{path}: expected a mapping of firmware id to version, got {type_name(value)}"
                )
            settings["gpu_firmware"] = {
                str(k): _scalar(v, f"{path}.{k}") for k, v in value.items() if not str(k).startswith("_")
            }
        elif key == "pci_realloc":
            text = _scalar(value, path)
            kept = [i for i in settings.get("kernel_cmdline") or [] if not str(i).lstrip("!").startswith("pci=realloc")]
            settings["kernel_cmdline"] = [*kept, f"pci=realloc={text}"]
        elif key in ("gpu_pcie_speed", "gpu_pcie_width", "nic_pcie_speed", "nic_pcie_width"):
            kind, field = key.split("_pcie_")
            links.setdefault(f"{kind}_pcie", {})[field] = _scalar(value, path)
        else:
            settings[HONOURED[key]] = _scalar(value, path)
    for name, link in links.items():
        settings[name] = {"speed": link.get("speed"), "width": link.get("width")}
    if "nic_pcie" not in links:
        # upstream skips the NIC link test when both keys are absent (a NIC on UALink)
        settings["nic_pcie"] = False
    return {"settings": settings, "honoured": honoured}
