"""RVS output samples, the rvs / amd-smi stand-ins and helpers shared by test_rvs_parse.py, test_rvs_judge.py and
test_rvs_detect.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
STAND_INS = REPO / "tests" / "cluster" / "image" / "stand-ins"
RVS_BIN = STAND_INS / "opt" / "rocm" / "bin" / "rvs"
AMD_SMI_BIN = STAND_INS / "opt" / "rocm" / "bin" / "amd-smi"
CONF = STAND_INS / "opt" / "rocm" / "share" / "rocm-validation-suite" / "conf"

ESC = "\x1b"
GPU_IDS = [42583, 27226, 36479, 17010, 1590, 51771, 11806, 57875]


def box(rows: list[tuple[str, str, str]], colour: bool = True) -> str:
    """A summary box as RVS >= 1.3 prints it (colour codes around the result)."""
    lines = [
        "+" + "=" * 69 + "+",
        "|" + "ROCm Validation Suite (RVS) Summary".center(69) + "|",
        "+" + "=" * 69 + "+",
        "|" + "System Overview".center(69) + "|",
        "+" + "-" * 69 + "+",
        f"| {'Operating System':<32} | {'Ubuntu 22.04.5 LTS':<32} |",
        f"| {'RVS version':<32} | {'1.6.75':<32} |",
        f"| {'GPUs':<32} | {'8':<32} |",
        "+" + "-" * 69 + "+",
        f"| {'AMD Instinct MI300X - 42583':<32} | {'AMD Instinct MI300X - 27226':<32} |",
        f"| {'0 - 2 - 0000:05:00.0':<32} | {'1 - 3 - 0000:15:00.0':<32} |",
        "+" + "=" * 69 + "+",
        f"| {'Action Name':<32} | {'Module':<14} | {'Result':<14}  |",
        "+" + "=" * 69 + "+",
    ]
    for action, module, result in rows:
        start, end = (f"{ESC}[{'32' if result == 'PASS' else '31'}m", f"{ESC}[0m") if colour else ("", "")
        lines.append(f"| {action:<32} | {module:<14} | {start}{result:<14}{end}  |")
    lines.append("+" + "-" * 69 + "+")
    return "\n".join(lines)


def gst_current(action: str = "gst-1215Tflops-4K4K8K-rand-fp8", fail: dict | None = None, target: int = 1215000) -> str:
    fail = fail or {}
    out = [
        f"[RESULT] [301995.91241 ] Action name :{action}",
        "[RESULT] [301995.175394] Module name :gst",
    ]
    for n, gpu in enumerate(GPU_IDS):
        out += [
            f"[RESULT] [302001.{n}61732] [{action}] [GPU:: {gpu:5d}] Start of GPU ramp up",
            f"[RESULT] [302001.{n}61733] [{action}] [GPU:: {gpu:5d}] GFLOPS 536870",
            f"[RESULT] [302002.{n}61726] [{action}] [GPU:: {gpu:5d}] End of GPU ramp up",
            f"[RESULT] [302005.{n}76647] [{action}] [GPU:: {gpu:5d}] GFLOPS {1260000 + n}",
        ]
        gflops, verdict = fail.get(gpu, (1263000 + n * 100, "TRUE"))
        out.append(
            f"[RESULT] [302017.{n}67195] [{action}] [GPU:: {gpu:5d}] GFLOPS {gflops} Target GFLOPS: {target} "
            f"met: {verdict}"
        )
    return "\n".join(out) + "\n"


GST_OLD = """\
[RESULT] [497560.11904 ] Action name :action_2
[RESULT] [497560.12904 ] Module name :gst
[RESULT] [497564.86904 ] [action_2] gst 33367 Gflop: 6478.066983 flops_per_op: 382.205952x1e9 \
bytes_copied_per_op: 398131200 try_ops_per_sec: 13.081952 pass: TRUE
[RESULT] [497565.12120 ] [action_2] gst 3254 Gflop: 6012.500000 flops_per_op: 382.205952x1e9 \
bytes_copied_per_op: 398131200 try_ops_per_sec: 12.140000 pass: TRUE
[RESULT] [497566.2342  ] [action_2] gst 50599 Gflop: 2101.750000 flops_per_op: 382.205952x1e9 \
bytes_copied_per_op: 398131200 try_ops_per_sec: 4.240000 pass: FALSE
"""

IET = """\
[RESULT] [302166.984877] Action name :iet-stress-1400W-true
[RESULT] [302167.47707 ] Module name :iet
[RESULT] [302167.678963] [iet-stress-1400W-true] [GPU:: 42583] Power(W) 241.000000
[RESULT] [302167.679266] [iet-stress-1400W-true] [GPU:: 36479] Power(W) 238.000000
[RESULT] [302167.686277] [iet-stress-1400W-true] [GPU::  1590] Power(W) 244.000000
[RESULT] [302172.680300] [iet-stress-1400W-true] [GPU:: 36479] Power(W) 1398.000000
[RESULT] [302172.680303] [iet-stress-1400W-true] [GPU:: 42583] Power(W) 1398.000000
[RESULT] [302172.687390] [iet-stress-1400W-true] [GPU::  1590] Power(W) 1049.000000
[RESULT] [302347.729796] [iet-stress-1400W-true] [GPU:: 42583] pass: TRUE
[RESULT] [302347.732052] [iet-stress-1400W-true] [GPU:: 36479] Pass: True
[RESULT] [302347.737108] [iet-stress-1400W-true] [GPU::  1590] pass: FALSE
"""

SMQT = """\
[RESULT] [257936.11] Action name :action_1
[RESULT] [257936.12] Module name :smqt
[INFO  ] [257936.568768] [action_1]  smqt 3254 bar1_size      17179869184 (16.00 GB)
[INFO  ] [257936.568768] [action_1]  smqt 3254 bar5_size      0 (0.00 B)
[RESULT] [257936.568920] [action_1]  smqt 3254 pass: false
[INFO  ] [257936.569234] [action_1]  smqt 50599 bar1_size      17179869184 (16.00 GB)
[RESULT] [257936.569281] [action_1]  smqt 50599 pass: true
"""

MEM = """\
[RESULT] [302697.357999] Action name :action_1
[RESULT] [302697.415572] Module name :mem
[RESULT] [302697.637264] [action_1] mem   The following memory tests will run
[RESULT] [302697.637269] =============== Test 1  [Walking 1 bit]
[RESULT] [302697.637270] =============== Test 2  [Own address test]
[RESULT] [302697.869004] [action_1] mem Test 1: Change one bit memory addresss
[RESULT] [302697.895754] [action_1] mem Test 1 : PASS
[RESULT] [302697.895771] [action_1] mem Test 2: Each Memory location is filled with its own address
[RESULT] [302697.896227] [action_1] mem Test 2 : PASS
[RESULT] [302697.900155] [action_1] mem Test 3 : PASS\x20
[RESULT] [302732.976817] [action_1] mem Test 11: elapsedtime = 1986.538940 bandwidth = 6443.431641GB/s
[RESULT] [302732.978980] [action_1] mem Test 11 : PASS
"""

PEBB = """\
[RESULT] [302349.492047] Action name :pcie_h2d_bandwidth
[RESULT] [302349.671479] Module name :pebb
[RESULT] [302349.671823] [pcie_h2d_bandwidth] pcie-bandwidth [CPU:: 0] [GPU:: 2 - 42583 - 0000:05:00.0] \
distance:20 PCIe:20
[RESULT] [302349.671837] [pcie_h2d_bandwidth] pcie-bandwidth [CPU:: 1] [GPU:: 2 - 42583 - 0000:05:00.0] \
distance:52 PCIe:52
[INFO  ] [302352.11    ] [pcie_h2d_bandwidth] pcie-bandwidth [ 1/4] [CPU:: 0] [GPU:: 2 - 42583 - 0000:05:00.0] \
h2d::true d2h::false 55.100 GBps
[INFO  ] [302352.12    ] [pcie_h2d_bandwidth] pcie-bandwidth [ 2/4] [CPU:: 1] [GPU:: 2 - 42583 - 0000:05:00.0] \
h2d::true d2h::false 12.000 GBps (*)
[RESULT] [302379.847423] [pcie_h2d_bandwidth] pcie-bandwidth [ 1/4] [CPU:: 0] [GPU:: 2 - 42583 - 0000:05:00.0] \
h2d::true d2h::false 57.678 GBps duration: 0.223392 secs
[RESULT] [302379.847438] [pcie_h2d_bandwidth] pcie-bandwidth [ 2/4] [CPU:: 1] [GPU:: 2 - 42583 - 0000:05:00.0] \
h2d::true d2h::false 54.034 GBps duration: 0.238461 secs
[RESULT] [302379.847449] [pcie_h2d_bandwidth] pcie-bandwidth [ 3/4] [CPU:: 0] [GPU:: 6 -  1590 - 0000:85:00.0] \
H2D::TRUE D2H::FALSE 57.708 GBps duration: 0.204669 secs
[RESULT] [302379.847451] [pcie_h2d_bandwidth] pcie-bandwidth [ 4/4] [CPU:: 1] [GPU:: 6 -  1590 - 0000:85:00.0] \
h2d::true d2h::false 55.223 GBps duration: 0.213882 secs
"""

PBQT = """\
[RESULT] [302380.159634] Action name :xgmi_d2d_unidir_bandwidth
[RESULT] [302380.356991] Module name :pbqt
[RESULT] [302380.357340] [xgmi_d2d_unidir_bandwidth] p2p [GPU:: 2 - 42583 - 0000:05:00.0] \
[GPU:: 3 - 27226 - 0000:15:00.0] peers:true distance:15 xGMI:15
[RESULT] [302410.443673] [xgmi_d2d_unidir_bandwidth] p2p-bandwidth[ 1/2] [GPU:: 2 - 42583 - 0000:05:00.0] \
[GPU:: 3 - 27226 - 0000:15:00.0] bidirectional: false 61.370 GBps duration: 0.227452 secs
[RESULT] [302410.444726] [xgmi_d2d_unidir_bandwidth] p2p-bandwidth[ 2/2] [GPU:: 3 - 27226 - 0000:15:00.0] \
[GPU:: 2 - 42583 - 0000:05:00.0] bidirectional: true 122.741 GBps duration: 0.227453 secs
[RESULT] [302410.5] [a2a] a2a-p2p-bandwidth[ 1/2] [GPU:: 2 - 42583 - 0000:05:00.0] [GPU:: 3 - 27226 - 0000:15:00.0] \
48.125 GBps
[RESULT] [302410.6] [a2a] a2a-gpu-bandwidth [GPU:: 2 - 42583 - 0000:05:00.0] Aggregate peer bandwidth: 336.875 GBps
[RESULT] [302410.7] [a2a] a2a-bandwidth [8 GPUs][56 p2p transfers] Aggregate bandwidth: 2695.000 GBps
"""

BABEL = """\
[RESULT] [302411.15197 ] Action name :babel-double-825MiB
[RESULT] [302411.96856 ] Module name :babel
[RESULT] [302411.735270] [babel-double-825MiB] [GPU:: 42583] Starting the Babel memory stress test
[RESULT] [302411.735337] Running kernels 2000 times, Precision: double
[RESULT] [302411.735378] Array size: 6920.6 MB (=6.9 GB), Total size: 20761.8 MB (=20.8 GB)

[RESULT] [302446.903905]
---------------------------------------------------------------------------------
GPU Id      Function    MBytes/sec     Max MB/s       Min MB/s       Avg MB/s
---------------------------------------------------------------------------------
42583       Read        7090191.900    7090191.900    6638148.386    7019091.298
42583       Copy        6224488.986    6224488.986    6037686.546    6150313.849
42583       Triad       6031416.066    6031416.066    5879289.313    5950804.403
---------------------------------------------------------------------------------
"""

RCQT_LEVEL1 = """\
[RESULT] [302695.777282] Action name :metapackage-validation
[RESULT] [302695.777442] Module name :rcqt
Meta package rocm-hip-runtime :
Package rocm-core installed version is 6.4.1.60401
Error: package rocm-language-runtime not installed\x20
Error: version mismatch for package hipblaslt expected version: 0.12.0.60401 but installed 0.10.0.60300
Meta package validation complete :\x20
\tTotal packages validated     : 3
\tInstalled packages           : 1
\tMissing packages             : 1
\tVersion mismatch packages    : 1
RVS-ERROR [rcqt] [metapackage-validation] Action failed to run successfully.
[RESULT] [496559.219160] Action name :packagelist-install-validation
[RESULT] [496559.219161]  Module name :rcqt

Package rocm-hip-libraries installed version is 6.3.0.60300
Package rocm-core installed version is 6.3.0.60300
Packages install validation complete :
\tMissing packages      : 0
\tInstalled packages    : 2
"""


def by_kind(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["kind"] == kind]


def run_stand_in(tmp_path: Path, args: list[str], faults: dict | None = None, timeout: float = 30, binary=RVS_BIN):
    env = dict(os.environ, CVS_STAND_IN_DIR=str(tmp_path))
    if faults is not None:
        (tmp_path / "rvs.json").write_text(json.dumps(faults))
    return subprocess.run(
        [sys.executable, str(binary), *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
