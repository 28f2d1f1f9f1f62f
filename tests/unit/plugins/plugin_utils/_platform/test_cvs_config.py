"""Upstream CVS's host_config.json (plugin_utils/_platform/cvs_config.py): every key honoured or refused.

The file below is written after upstream's cvs/input/config_file/platform/host_config.json (ROCm/cvs): the same
keys and value forms, other values."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.filter.platform import platform_cvs_config
from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.cvs_config import (
    HONOURED,
    PlatformConfigError,
    platform_settings,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.settings import MI300X_DEFAULTS, check_settings

HOST_CONFIG: dict[str, Any] = {
    "host": {
        "os_version": "Ubuntu 22.04.5 LTS",
        "kernel_version": "5.15.0-119-generic",
        "rocm_version": "6.4.1",
        "bios_version": "2.3.4",
        "pci_realloc": "off",
        "online_memory": "2T",
        "gpu_count": "8",
        "gpu_pcie_speed": "32",
        "gpu_pcie_width": "16",
        "nic_pcie_speed": "16",
        "_comment_nic_pcie_speed": "remove both nic keys for a NIC on UALink",
        "nic_pcie_width": "16",
        "fw_dict": {"CP_MEC1": "32945", "PSP_SOSDRV": "00.36.02.56"},
    }
}


def test_every_upstream_key_is_honoured() -> None:
    out = platform_settings(HOST_CONFIG, MI300X_DEFAULTS)
    settings = check_settings(out["settings"])
    assert set(out["honoured"]) == set(HONOURED) and out["honoured"]["pci_realloc"] == "kernel_cmdline"
    assert settings["kernel_cmdline"] == ["iommu=pt", "pci=realloc=off"]
    assert settings["os_version"] == "Ubuntu 22.04.5 LTS" and settings["kernel_version"] == "5.15.0-119-generic"
    assert settings["rocm_version"] == "6.4.1" and settings["bios_version"] == "2.3.4"
    assert settings["online_memory"] == 2 * 1024**4 and settings["gpu_count"] == 8
    assert settings["gpu_pcie"] == {"speed": 32.0, "width": 16} and settings["nic_pcie"] == {"speed": 16.0, "width": 16}
    assert settings["gpu_firmware"] == {"CP_MEC1": "32945", "PSP_SOSDRV": "00.36.02.56"}
    # what upstream always checks stays on
    assert settings["numa_balancing"] == 0 and settings["acs_disabled"] is True


def test_the_host_block_alone_and_pci_realloc_replacing_the_default_item() -> None:
    out = platform_settings({"pci_realloc": "on"}, {"kernel_cmdline": ["iommu=pt", "pci=realloc=off"]})
    assert out["settings"]["kernel_cmdline"] == ["iommu=pt", "pci=realloc=on"]


def test_no_nic_keys_means_no_nic_link_check_as_upstream() -> None:
    block = {k: v for k, v in HOST_CONFIG["host"].items() if not k.startswith("nic_")}
    assert check_settings(platform_settings(block, {})["settings"])["nic_pcie"]["skip"] is True


def test_an_unknown_key_names_the_closest_valid_one() -> None:
    with pytest.raises(
        PlatformConfigError,
        match=r"host\.gpu_pcie_sped: not a key of upstream's host configuration; "
        r"did you mean 'gpu_pcie_speed'\?",
    ):
        platform_settings({"host": {"gpu_pcie_sped": "32"}})


def test_bad_values_are_refused_naming_the_key_path() -> None:
    with pytest.raises(PlatformConfigError, match=r"host\.rocm_version: still holds the placeholder '<changeme>'"):
        platform_settings({"rocm_version": "<changeme>"})
    with pytest.raises(PlatformConfigError, match=r"host\.fw_dict: expected a mapping"):
        platform_settings({"fw_dict": ["CP_MEC1"]})
    with pytest.raises(Exception, match=r"upstream CVS host configuration .*platform_online_memory: expected a size"):
        platform_cvs_config({"online_memory": "lots"}, {})


def test_no_file_leaves_the_role_settings() -> None:
    assert platform_cvs_config(None, {"gpu_count": 4}) == {"settings": {"gpu_count": 4}, "honoured": {}}
