"""The platform verdict (plugin_utils/_platform/judge.py, pci.py, settings.py) on probes as the module returns them:
the PCI tree of the lspci stand-in, read by the node-side parser, with one thing wrong at a time."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.module_utils._platform_probe import parse_lspci, relevant_devices
from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.judge import (
    cmdline_problems,
    firmware_versions,
    judge,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.pci import path_to_root
from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.settings import (
    PlatformSettingsError,
    check_settings,
    human_size,
    size_bytes,
)

REPO = Path(__file__).resolve().parents[5]
LSPCI = REPO / "tests" / "cluster" / "image" / "stand-ins" / "usr" / "local" / "bin" / "lspci"
VERSION = "AMDSMI Tool: 24.7.1+0012a68 | AMDSMI Library version: 24.7.1.0 | ROCm version: 6.4.1\n"


def _devices(tmp_path: Path, faults: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    env = {"CVS_STAND_IN_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    (tmp_path / "lspci.json").write_text(json.dumps(faults or {}))
    out = subprocess.run([str(LSPCI), "-D", "-nn", "-vv"], env=env, capture_output=True, text=True, check=True)
    return relevant_devices(parse_lspci(out.stdout)["devices"])


def _probe(devices: list[dict[str, Any]], cmdline: str = "ro iommu=pt pci=realloc=off") -> dict[str, Any]:
    return {
        "kernel": "6.8.0-60-generic",
        "missing": [],
        "cmdline": {"value": cmdline, "problem": None},
        "numa_balancing": {"value": "0", "problem": None},
        "thp": {"enabled": {"value": "madvise"}},
        "memory": {"bytes": 1536 * 1024**3, "source": "/sys/devices/system/memory", "problem": None},
        "os_release": {"value": {"PRETTY_NAME": "Ubuntu 24.04.1 LTS"}},
        "bios_version": {"value": "1.12.2", "problem": None},
        "commands": {"amd_smi_version": {"rc": 0, "stdout": VERSION, "stderr": "", "problem": None}},
        "pci": {"rc": 0, "problem": None, "stderr": "", "devices": devices, "access_denied": False},
    }


@pytest.fixture(scope="module")
def healthy_devices(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _devices(tmp_path_factory.mktemp("lspci"))


def test_a_healthy_node_passes_and_the_management_nic_is_a_note(healthy_devices: list[dict[str, Any]]) -> None:
    verdict = judge({"node1": _probe(healthy_devices)}, {})["node1"]
    assert verdict["status"] == "PASS", verdict["problems"]
    assert verdict["facts"]["gpus_on_pci"] == 8 and verdict["facts"]["online_memory"] == "1.5T"
    assert verdict["pci_links"]["0000:13:00.0"] == "32 GT/s x16"
    assert verdict["notes"] == [
        "not judged (platform_nic_pattern does not match): NIC 0000:c1:00.0 "
        "(Broadcom Inc. and subsidiaries NetXtreme BCM5720 Gigabit Ethernet PCIe)"
    ]


def test_a_nic_at_half_width_and_acs_on_are_named(tmp_path: Path) -> None:
    devices = _devices(tmp_path, {"links": {"0000:13:00.0": {"width": 8}}, "acs": ["0000:12:00.0"]})
    verdict = judge({"node3": _probe(devices)}, {})["node3"]
    assert verdict["status"] == "FAIL"
    assert verdict["problems"] == [
        "NIC 0000:13:00.0 (Mellanox Technologies MT2910 Family [ConnectX-7]): PCIe link width x8, expected x16 "
        "(LnkCap x16)",
        "ACS on Downstream Port 0000:12:00.0 (Broadcom / LSI PEX890xx PCIe Gen 5 Switch), on the path of NIC "
        "0000:13:00.0: ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+, expected SrcValid- ReqRedir- "
        "CmpltRedir- UpstreamFwd- (disable ACS in the BIOS or with setpci)",
    ]
    assert verdict["reason"].startswith("node3: NIC 0000:13:00.0 ")


def test_a_slower_gpu_is_judged_against_the_inventory_else_its_capability(tmp_path: Path) -> None:
    devices = _devices(tmp_path, {"links": {"0000:65:00.0": {"speed": 16}}})
    problem = (
        "GPU 0000:65:00.0 (Advanced Micro Devices, Inc. [AMD/ATI] Aqua Vanjaram [Instinct MI300X]): PCIe link speed "
        "16 GT/s, expected 32 GT/s (LnkCap 32 GT/s)"
    )
    assert judge({"n": _probe(devices)}, {"gpu_pcie": None})["n"]["problems"] == [problem]
    assert judge({"n": _probe(devices)}, {"gpu_pcie": {"speed": 16, "width": 16}})["n"]["problems"] == [
        p.replace("16 GT/s, expected 32 GT/s", "32 GT/s, expected 16 GT/s").replace("65:00.0", x)
        for x in ("05:00.0", "15:00.0", "75:00.0", "85:00.0", "95:00.0", "e5:00.0", "f5:00.0")
        for p in [problem]
    ]
    assert judge({"n": _probe(devices)}, {"gpu_pcie": False})["n"]["status"] == "PASS"


def test_the_path_to_the_root_port(healthy_devices: list[dict[str, Any]]) -> None:
    gpu = next(d for d in healthy_devices if d["bdf"] == "0000:15:00.0")
    assert [b["bdf"] for b in path_to_root(gpu, healthy_devices)] == ["0000:12:01.0", "0000:11:00.0", "0000:00:03.1"]


def test_kernel_command_line_items() -> None:
    line = "BOOT_IMAGE=/vmlinuz ro quiet iommu=pt pci=noaer,realloc=off amd_iommu=on"
    assert cmdline_problems(line, ["iommu=pt", "pci=realloc=off", "quiet", "!nomodeset"]) == []
    assert cmdline_problems("ro pci=realloc=on", ["pci=realloc=off", "iommu=pt", "!pci=realloc=on"]) == [
        "kernel command line: expected pci=realloc=off, found pci=realloc=on",
        "kernel command line: expected iommu=pt, found not set",
        "kernel command line: pci=realloc=on must not be set, found pci=realloc=on",
    ]


def test_node_settings_and_versions(healthy_devices: list[dict[str, Any]]) -> None:
    probe = _probe(healthy_devices)
    probe["numa_balancing"]["value"] = "1"
    probe["thp"]["enabled"]["value"] = "never"
    settings = {"online_memory": "1.3T", "os_version": "22.04", "rocm_version": "7.0.2", "bios_version": "1.12"}
    assert judge({"n": probe}, settings)["n"]["problems"] == [
        "NUMA balancing (kernel.numa_balancing) is 1, expected 0",
        "transparent huge pages (transparent_hugepage/enabled) is never, expected always or madvise",
        "online memory is 1.5T, expected 1.3T",
        "OS release is Ubuntu 24.04.1 LTS, expected 22.04",
        "ROCm version is 6.4.1, expected 7.0.2",
    ]


def test_a_node_that_differs_from_the_others_is_named(healthy_devices: list[dict[str, Any]]) -> None:
    odd = _probe(healthy_devices)
    odd["bios_version"]["value"] = "1.9.0"
    verdicts = judge({"a": _probe(healthy_devices), "b": _probe(healthy_devices), "c": odd}, {})
    assert verdicts["c"]["problems"] == ["bios_version is 1.9.0, not 1.12.2 as on a, b"]
    assert verdicts["a"]["status"] == "PASS"


def test_missing_tools_failed_probes_and_access_denied(healthy_devices: list[dict[str, Any]]) -> None:
    denied = _probe(healthy_devices)
    denied["pci"]["access_denied"] = True
    verdicts = judge(
        {
            "node1": {"kernel": "x", "missing": [{"tool": "lspci", "path": "lspci"}], "tools": {"lspci": None}},
            "node2": {"unreachable": True, "msg": "Failed to connect to the host via ssh"},
            "node3": denied,
        },
        {},
    )
    assert verdicts["node1"]["status"] == "ERROR"
    assert verdicts["node1"]["reason"] == (
        "node1: platform could not be checked: nothing checked: lspci not found on node1 (lspci): "
        "install pciutils or set platform_lspci_path"
    )
    assert verdicts["node2"]["reason"] == (
        "node2: platform could not be checked: Failed to connect to the host via ssh"
    )
    assert verdicts["node3"]["problems"] == [
        "lspci could not read the PCIe capabilities (<access denied>): the probe must run as root "
        "(platform_become: true)"
    ]


def test_gpu_firmware_against_amd_smi_firmware_json(healthy_devices: list[dict[str, Any]]) -> None:
    firmware = [
        {
            "gpu": 0,
            "fw_list": [{"fw_id": "CP_MEC1", "fw_version": "32945"}, {"fw_id": "PM", "fw_version": "07.85.11.01"}],
        },
        {
            "gpu": 1,
            "fw_list": [{"fw_id": "CP_MEC1", "fw_version": "32944"}, {"fw_id": "PM", "fw_version": "07.85.11.01"}],
        },
    ]
    assert firmware_versions(json.dumps({"gpu_data": firmware}))["CP_MEC1"] == [(0, "32945"), (1, "32944")]
    probe = copy.deepcopy(_probe(healthy_devices))
    probe["commands"]["amd_smi_firmware"] = {"rc": 0, "stdout": json.dumps(firmware), "stderr": "", "problem": None}
    wanted = {"CP_MEC1": "32945", "PM": "07.85.11.01", "RLC": "65"}
    assert judge({"n": probe}, {"gpu_firmware": wanted})["n"]["problems"] == [
        "GPU 1 firmware CP_MEC1: expected 32945, found 32944",
        "GPU firmware RLC: expected 65, not reported by amd-smi",
    ]


def test_settings_are_checked_and_a_typo_names_the_closest_key() -> None:
    assert check_settings({})["gpu_pcie"] == {"speed": 32.0, "width": 16}
    assert check_settings({"nic_pcie": {"speed": "32GT/s", "width": "x16"}})["nic_pcie"] == {"speed": 32.0, "width": 16}
    with pytest.raises(PlatformSettingsError, match=r"unknown platform setting 'gpu_pcei'; did you mean 'gpu_pcie'"):
        check_settings({"gpu_pcei": {}})
    with pytest.raises(PlatformSettingsError, match=r"platform_thp_enabled: 'madvice' .*did you mean 'madvise'"):
        check_settings({"thp_enabled": ["madvice"]})
    with pytest.raises(PlatformSettingsError, match=r"platform_gpu_pcie: unknown key 'widht'; did you mean 'width'"):
        check_settings({"gpu_pcie": {"widht": 16}})
    with pytest.raises(PlatformSettingsError, match=r"platform_kernel_cmdline\[0\]: 'iommu=pt pci=x' is not one"):
        check_settings({"kernel_cmdline": ["iommu=pt pci=x"]})
    with pytest.raises(PlatformSettingsError, match=r"platform_uniform: unknown fact 'kernal'; did you mean 'kernel'"):
        check_settings({"uniform": ["kernal"]})


def test_sizes_as_lsmem_prints_them() -> None:
    assert size_bytes("1.5T", "x") == size_bytes("1536G", "x") == 1536 * 1024**3
    assert human_size(1536 * 1024**3) == "1.5T" and human_size(512 * 1024**3) == "512G"
    with pytest.raises(PlatformSettingsError, match=r"expected a size such as 1\.5T"):
        size_bytes("lots", "platform_online_memory")
