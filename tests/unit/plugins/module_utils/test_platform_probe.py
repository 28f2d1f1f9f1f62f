"""The node side of the platform suite (module_utils/_platform_probe.py): the lspci parser on lspci's real formats,
the files it reads, and the probe on this machine with the lspci stand-in.

The lspci samples follow the formats quoted in docs/formats.md ("lspci -vv"): pciutils >= 3.10 (nothing after an
equal value, `(downgraded)` only on endpoints and upstream ports), pciutils 3.6-3.9 (`(ok)`/`(downgraded)` after
every LnkSta value), pciutils before 3.6 (LnkSta flags on the same line, `Speed unknown` for a speed it does not
know), output pasted with spaces instead of tabs, and a run as a user other than root (`<access denied>`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.module_utils._platform_probe import (
    online_memory,
    os_release,
    parse_lspci,
    probe,
    relevant_devices,
    thp_mode,
)

REPO = Path(__file__).resolve().parents[4]
LSPCI = REPO / "tests" / "cluster" / "image" / "stand-ins" / "usr" / "local" / "bin" / "lspci"
AMD_SMI = REPO / "tests" / "cluster" / "image" / "stand-ins" / "opt" / "rocm" / "bin" / "amd-smi"

# pciutils >= 3.10 with -D -nn: a root port with ACS on, then an MI300X whose link trained at Gen4 x8
ROOT_PORT = (
    "0000:00:01.1 PCI bridge [0604]: Advanced Micro Devices, Inc. [AMD] Genoa/Bergamo/Siena PCIe GPP Bridge"
    " [1022:14ab] (prog-if 00 [Normal decode])"
)
MI300X = (
    "Processing accelerators [1200]: Advanced Micro Devices, Inc. [AMD/ATI] Aqua Vanjaram [Instinct MI300X] [1002:74a1]"
)
CURRENT = f"""\
{ROOT_PORT}
\tControl: I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR+ FastB2B- DisINTx+
\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0
\tCapabilities: [58] Express (v2) Root Port (Slot+), IntMsgNum 0
\t\tLnkCap:\tPort #1, Speed 32GT/s, Width x16, ASPM L1, Exit Latency L1 <64us
\t\t\tClockPM- Surprise- LLActRep+ BwNot+ ASPMOptComp+
\t\tLnkSta:\tSpeed 16GT/s, Width x8
\t\t\tTrErr- Train- SlotClk+ DLActive+ BWMgmt+ ABWMgmt-
\tCapabilities: [2a0 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\tKernel driver in use: pcieport

0000:01:00.0 {MI300X}
\tSubsystem: Advanced Micro Devices, Inc. [AMD/ATI] Device [1002:74a1]
\tCapabilities: [64] Express (v2) Endpoint, IntMsgNum 0
\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported
\t\tLnkSta:\tSpeed 16GT/s (downgraded), Width x8 (downgraded)
\t\t\tTrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-
\tKernel driver in use: amdgpu
"""

# pciutils 3.6-3.9 (Ubuntu 22.04's 3.7.0), no -D, no -nn; indented with spaces as pasted into an issue
OLDER = """\
c1:00.0 Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]
        Subsystem: Mellanox Technologies Device 0041
        Capabilities: [60] Express (v2) Endpoint, MSI 00
                LnkCap: Port #0, Speed 16GT/s, Width x16, ASPM not supported
                        ClockPM- Surprise- LLActRep- BwNot- ASPMOptComp+
                LnkSta: Speed 16GT/s (ok), Width x16 (ok)
                        TrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-
"""

# pciutils before 3.6: flags on the LnkSta line, and a Gen5 capability it cannot name ("Speed unknown")
OLDEST = """\
41:00.0 Infiniband controller: Mellanox Technologies MT2910 Family [ConnectX-7]
\tCapabilities: [60] Express (v2) Endpoint, MSI 00
\t\tLnkCap:\tPort #0, Speed unknown, Width x16, ASPM not supported, Exit Latency L0s unlimited, L1 <4us
\t\tLnkSta:\tSpeed 16GT/s, Width x16, TrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-
"""

NOT_ROOT = f"""\
0000:05:00.0 {MI300X}
\tSubsystem: Advanced Micro Devices, Inc. [AMD/ATI] Device [1002:74a1]
\tFlags: bus master, fast devsel, latency 0, IRQ 1042, NUMA node 0, IOMMU group 14
\tCapabilities: <access denied>
\tKernel driver in use: amdgpu
"""


def test_current_format_with_domains_and_numeric_ids() -> None:
    parsed = parse_lspci(CURRENT)
    assert parsed["access_denied"] is False
    root, gpu = parsed["devices"]
    assert root["bdf"] == "0000:00:01.1" and root["class_code"] == "0604" and root["port_type"] == "Root Port"
    assert root["bus"] == {"primary": 0, "secondary": 1, "subordinate": 1}
    assert root["name"] == "Advanced Micro Devices, Inc. [AMD] Genoa/Bergamo/Siena PCIe GPP Bridge"
    assert {k for k, on in root["acs_ctl"].items() if on} == {"SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"}
    assert root["link_sta"]["speed_note"] is None  # lspci >= 3.10 marks no downgrade on a root port
    assert gpu["vendor_id"] == "1002" and gpu["device_id"] == "74a1" and gpu["class"] == "Processing accelerators"
    assert gpu["name"] == "Advanced Micro Devices, Inc. [AMD/ATI] Aqua Vanjaram [Instinct MI300X]"
    assert gpu["link_cap"] == {"speed": 32.0, "width": 16, "speed_note": None, "width_note": None}
    assert gpu["link_sta"] == {"speed": 16.0, "width": 8, "speed_note": "downgraded", "width_note": "downgraded"}
    assert gpu["bus"] is None and gpu["acs_ctl"] is None


def test_older_formats_without_domains_ids_or_tabs() -> None:
    (nic,) = parse_lspci(OLDER)["devices"]
    assert nic["bdf"] == "0000:c1:00.0" and nic["class_code"] is None and nic["vendor_id"] is None
    assert nic["class"] == "Ethernet controller" and nic["port_type"] == "Endpoint"
    assert nic["link_sta"] == {"speed": 16.0, "width": 16, "speed_note": "ok", "width_note": "ok"}
    (cx7,) = parse_lspci(OLDEST)["devices"]
    assert cx7["link_cap"]["speed"] is None and cx7["link_cap"]["width"] == 16
    assert cx7["link_sta"]["speed"] == 16.0 and cx7["link_sta"]["width"] == 16


def test_a_run_without_root_says_the_capabilities_were_denied() -> None:
    parsed = parse_lspci(NOT_ROOT)
    assert parsed["access_denied"] is True and parsed["devices"][0]["link_sta"] is None


def test_only_bridges_gpus_and_network_functions_travel_back() -> None:
    text = CURRENT + "\n0000:00:14.0 USB controller [0c03]: Advanced Micro Devices, Inc. [AMD] Device [1022:15b6]\n"
    kept = relevant_devices(parse_lspci(text)["devices"])
    assert [d["bdf"] for d in kept] == ["0000:00:01.1", "0000:01:00.0"]


def test_the_stand_in_prints_what_the_parser_reads() -> None:
    out = subprocess.run([str(LSPCI), "-D", "-nn", "-vv"], capture_output=True, text=True, check=True).stdout
    devices = parse_lspci(out)["devices"]
    gpus = [d for d in devices if d["vendor_id"] == "1002"]
    assert len(gpus) == 8 and all(d["link_sta"]["width"] == 16 for d in gpus)


def test_files_thp_memory_and_os_release(tmp_path: Path) -> None:
    assert thp_mode("always [madvise] never") == "madvise" and thp_mode(None) is None
    memory = tmp_path / "memory"
    for i, state in enumerate(["1", "1", "0"]):
        (memory / f"memory{i}").mkdir(parents=True)
        (memory / f"memory{i}" / "online").write_text(state + "\n")
    (memory / "block_size_bytes").write_text("8000000\n")  # 128 MiB, hex as the kernel writes it
    assert online_memory(str(memory), "/nonexistent") == {
        "bytes": 2 * 128 * 1024**2,
        "source": str(memory),
        "problem": None,
    }
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       263856120 kB\nMemFree: 1 kB\n")
    assert online_memory(str(tmp_path / "none"), str(meminfo))["bytes"] == 263856120 * 1024
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Ubuntu 24.04.1 LTS"\nVERSION_ID="24.04"\n')
    assert os_release((str(release),))["value"]["PRETTY_NAME"] == "Ubuntu 24.04.1 LTS"


def test_a_missing_tool_is_named_and_nothing_is_read(tmp_path: Path) -> None:
    result = probe("/proc/cmdline", str(tmp_path / "lspci"), "no-such-amd-smi-here", False, 10)
    assert result["missing"] == [
        {"tool": "lspci", "path": str(tmp_path / "lspci")},
        {"tool": "amd-smi", "path": "no-such-amd-smi-here"},
    ]
    assert "cmdline" not in result and "pci" not in result


def test_the_probe_with_the_stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("BOOT_IMAGE=/vmlinuz ro iommu=pt pci=realloc=off\n")
    (tmp_path / "lspci.json").write_text(json.dumps({"links": {"0000:13:00.0": {"width": 8}}}))
    monkeypatch.setenv("CVS_STAND_IN_DIR", str(tmp_path))
    result = probe(str(cmdline), str(LSPCI), str(AMD_SMI), False, 30)
    assert result["missing"] == [] and result["cmdline"]["value"].endswith("pci=realloc=off")
    nic = next(d for d in result["pci"]["devices"] if d["bdf"] == "0000:13:00.0")
    assert nic["link_sta"]["width"] == 8 and nic["link_sta"]["width_note"] == "downgraded"
    assert result["commands"]["amd_smi_version"]["rc"] == 0
    expected_access_denied = os.geteuid() != 0
    assert result["pci"]["access_denied"] is expected_access_denied
