"""Unit tests: RVS output parsing/judging (module_utils/_rvs.py, filters rvs_parse/rvs_judge) and the rvs stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.rvs_parse import FilterModule
from ansible_collections.cvs.cluster.plugins.module_utils._rvs import (
    gpu_config_folder,
    judge_rvs,
    parse_rvs_output,
    parse_rvs_version,
    rvs_version_supports_levels,
    summarize_rvs,
)

REPO = Path(__file__).resolve().parents[2]
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


# ---------------------------------------------------------------- GST


def test_gst_current_format_all_pass_one_record_per_gpu():
    records = parse_rvs_output(gst_current())
    assert len(records) == 8
    assert [r["gpu"] for r in records] == GPU_IDS
    first = records[0]
    assert first["action"] == "gst-1215Tflops-4K4K8K-rand-fp8"
    assert first["module"] == "gst"
    assert first["passed"] is True
    assert first["metrics"] == {"gflops": 1263000.0, "target_gflops": 1215000.0}
    assert first["line"].endswith("met: TRUE")
    assert first["kind"] == "result" and first["reason"] is None
    summary = judge_rvs(gst_current(), 0, "gst_single")
    assert summary["status"] == "PASS" and summary["passed"] is True
    assert summary["gpus"] == sorted(GPU_IDS)
    assert summary["metrics"]["gflops"] == {"min": 1263000.0, "max": 1263700.0, "mean": 1263350.0, "count": 8}
    assert summary["parsed"] == 8 and summary["failures"] == []
    assert summary["actions"] == {"gst-1215Tflops-4K4K8K-rand-fp8": {"module": "gst", "status": "PASS"}}


def test_gst_current_format_met_false_any_case_fails_that_gpu():
    text = gst_current(fail={36479: (732544, "false"), 1590: (700000, "False")})
    summary = judge_rvs(text, 0, "gst_single")
    assert summary["status"] == "FAIL" and summary["passed"] is False
    assert [f["gpu"] for f in summary["failures"]] == [36479, 1590]
    assert "732544" in summary["failures"][0]["reason"]
    assert summary["failures"][0]["line"].endswith("met: false")
    assert summary["counts"] == {"passed": 6, "failed": 2, "info": 0}
    assert summary["actions"]["gst-1215Tflops-4K4K8K-rand-fp8"]["status"] == "FAIL"


def test_gst_older_format_pass_field_and_scaled_metrics():
    records = parse_rvs_output(GST_OLD)
    assert [(r["gpu"], r["passed"]) for r in records] == [(33367, True), (3254, True), (50599, False)]
    assert all(r["module"] == "gst" and r["action"] == "action_2" for r in records)
    metrics = records[0]["metrics"]
    assert metrics["gflops"] == pytest.approx(6478.066983)
    assert metrics["flops_per_op"] == pytest.approx(382.205952e9)
    assert metrics["bytes_copied_per_op"] == 398131200
    assert metrics["try_ops_per_sec"] == pytest.approx(13.081952)
    summary = summarize_rvs(records, "gst_old")
    assert summary["status"] == "FAIL"
    assert summary["failures"][0]["gpu"] == 50599


def test_gst_gpu_with_progress_but_no_verdict_is_a_failure():
    text = gst_current()
    cut = text[: text.index("[GPU:: 11806] GFLOPS 1260006")]  # output ends while GPU 11806 runs
    cut = cut[: cut.rindex("\n") + 1]
    records = parse_rvs_output(cut)
    missing = by_kind(records, "missing")
    assert [r["gpu"] for r in missing] == [11806]
    assert missing[0]["passed"] is False and "11806" in missing[0]["reason"]
    summary = judge_rvs(cut, -15, "gst_single")
    assert summary["status"] == "FAIL"
    assert "rc -15" in summary["reason"]


# ---------------------------------------------------------------- other modules


def test_iet_pass_lines_case_insensitive_and_power_lines_are_not_results():
    records = parse_rvs_output(IET)
    assert [(r["gpu"], r["passed"]) for r in records] == [(42583, True), (36479, True), (1590, False)]
    assert {r["module"] for r in records} == {"iet"}
    assert records[2]["reason"] == "GPU 1590: pass: FALSE"


def test_tst_verdicts_use_action_prefix_without_module_line():
    text = (
        "[RESULT] [1.1] [tst-thermal-100C] [GPU:: 3254] pass: TRUE\n"
        "[RESULT] [1.2] [tst-thermal-100C] [GPU:: 50599] PASS: FALSE\n"
    )
    records = parse_rvs_output(text)
    assert [(r["module"], r["gpu"], r["passed"]) for r in records] == [("tst", 3254, True), ("tst", 50599, False)]


def test_smqt_lower_case_false_and_info_lines_ignored():
    records = parse_rvs_output(SMQT)
    assert [(r["module"], r["gpu"], r["passed"]) for r in records] == [("smqt", 3254, False), ("smqt", 50599, True)]
    assert judge_rvs(SMQT, 0, "smqt")["status"] == "FAIL"


@pytest.mark.parametrize(("word", "passed"), [("true", True), ("false", False), ("FALSE", False), ("True", True)])
def test_peqt_verdict(word, passed):
    text = f"[RESULT] [302695.130515] Action name :pcie_act_1\n[RESULT] [302695.289685] [pcie_act_1] peqt {word}\n"
    records = parse_rvs_output(text)
    assert len(records) == 1
    assert (records[0]["module"], records[0]["action"], records[0]["gpu"], records[0]["passed"]) == (
        "peqt",
        "pcie_act_1",
        None,
        passed,
    )
    assert judge_rvs(text, 0, "peqt")["status"] == ("PASS" if passed else "FAIL")


def test_mem_test_lines_and_bandwidth_metric():
    records = parse_rvs_output(MEM)
    verdicts = [r for r in records if r["passed"] is not None]
    assert [r["metrics"]["test"] for r in verdicts] == [1, 2, 3, 11]
    assert all(r["passed"] is True and r["module"] == "mem" for r in verdicts)
    bandwidth = [r for r in records if r["passed"] is None]
    assert bandwidth[0]["metrics"] == {"test": 11, "elapsed_ms": 1986.53894, "bandwidth_gbps": 6443.431641}
    assert judge_rvs(MEM, 0, "mem")["status"] == "PASS"


def test_mem_fail_and_error_count():
    text = MEM + "[INFO  ] [1.0] [action_1] mem Number of errors :17\n[RESULT] [1.1] [action_1] mem Test 5 : fail\n"
    summary = judge_rvs(text, 0, "mem")
    assert summary["status"] == "FAIL"
    assert [f["reason"] for f in summary["failures"]] == ["mem: 17 memory errors", "mem Test 5 FAIL"]
    zero = parse_rvs_output("[INFO  ] [1.0] [action_1] mem Number of errors :0\n")
    assert zero[0]["passed"] is True and zero[0]["metrics"] == {"errors": 0}


def test_pebb_final_lines_are_metric_records_interval_lines_skipped():
    records = parse_rvs_output(PEBB)
    assert len(records) == 4
    first = records[0]
    assert (first["module"], first["action"], first["gpu"], first["passed"]) == (
        "pebb",
        "pcie_h2d_bandwidth",
        42583,
        None,
    )
    assert first["metrics"] == {
        "bandwidth_gbps": 57.678,
        "duration_s": 0.223392,
        "h2d": True,
        "d2h": False,
        "cpu_node": 0,
        "gpu_node": 2,
        "bdf": "0000:05:00.0",
        "transfer": 1,
    }
    assert records[2]["gpu"] == 1590 and records[2]["metrics"]["h2d"] is True  # upper-case flags
    summary = judge_rvs(PEBB, 0, "pebb_single")
    assert summary["status"] == "PASS"
    assert summary["metrics"]["bandwidth_gbps"]["min"] == 54.034
    assert summary["metrics"]["bandwidth_gbps"]["max"] == 57.708
    assert "transfer" not in summary["metrics"] and "h2d" not in summary["metrics"]
    assert summary["counts"] == {"passed": 0, "failed": 0, "info": 4}


def test_pebb_not_measured_is_a_failure():
    text = (
        "[RESULT] [1.0] [pcie_h2d] pcie-bandwidth [ 3/16] [CPU:: 0] [GPU:: 3 - 27226 - 0000:15:00.0] "
        "h2d::true d2h::false (not measured) duration: 0.000000 secs\n"
    )
    records = parse_rvs_output(text)
    assert records[0]["passed"] is False and records[0]["gpu"] == 27226
    assert records[0]["reason"] == "GPU 27226: bandwidth not measured"


def test_pbqt_p2p_and_all_to_all_lines():
    records = parse_rvs_output(PBQT)
    assert [r["module"] for r in records] == ["pbqt"] * 5
    one, two, a2a_pair, a2a_gpu, a2a_all = records
    assert (one["gpu"], one["metrics"]["peer_gpu"], one["metrics"]["bandwidth_gbps"]) == (42583, 27226, 61.37)
    assert one["metrics"]["bidirectional"] is False and two["metrics"]["bidirectional"] is True
    assert one["metrics"]["duration_s"] == 0.227452 and one["passed"] is None
    assert (a2a_pair["gpu"], a2a_pair["metrics"]) == (42583, {"bandwidth_gbps": 48.125, "peer_gpu": 27226})
    assert a2a_gpu["metrics"] == {"aggregate_peer_bandwidth_gbps": 336.875}
    assert a2a_all["metrics"] == {"gpus": 8, "transfers": 56, "aggregate_bandwidth_gbps": 2695.0}


def test_babel_table_rows():
    records = parse_rvs_output(BABEL)
    assert [(r["module"], r["action"], r["gpu"]) for r in records] == [("babel", "babel-double-825MiB", 42583)] * 3
    assert records[1]["metrics"] == {
        "copy_mbytes_per_sec": 6224488.986,
        "copy_max_mbytes_per_sec": 6224488.986,
        "copy_min_mbytes_per_sec": 6037686.546,
        "copy_avg_mbytes_per_sec": 6150313.849,
    }
    failing = BABEL + "[ERROR ] [302447.1] Validation failed on a[]. Average error 0.031250\n"
    summary = judge_rvs(failing, 0, "babel")
    assert summary["status"] == "FAIL"
    assert summary["failures"][0]["action"] == "babel-double-825MiB"
    assert summary["failures"][0]["reason"].startswith("[ERROR] Validation failed")


def test_gpup_properties_are_metrics():
    text = (
        "[RESULT] [1.0] Action name :RVS-GPUP-TC1\n"
        "[RESULT] [1.1] [RVS-GPUP-TC1] gpup 42583 simd_count 1216\n"
        "[RESULT] [1.2] [RVS-GPUP-TC1] gpup 57875 7 weight 15\n"
    )
    records = parse_rvs_output(text)
    assert [(r["module"], r["gpu"], r["metrics"]) for r in records] == [
        ("gpup", 42583, {"simd_count": 1216.0}),
        ("gpup", 57875, {"weight": 15.0, "io_link": 7}),
    ]


# ---------------------------------------------------------------- summary box, packages, errors


def test_summary_box_rows_with_colours_and_overview_ignored():
    text = gst_current() + box([("gst-1215Tflops-4K4K8K-rand-fp8", "GST", "PASS"), ("iet-stress", "IET", "FAIL")])
    records = parse_rvs_output(text)
    rows = by_kind(records, "summary")
    assert [(r["action"], r["module"], r["passed"]) for r in rows] == [
        ("gst-1215Tflops-4K4K8K-rand-fp8", "gst", True),
        ("iet-stress", "iet", False),
    ]
    assert ESC not in rows[1]["line"]
    assert len(records) == 10  # 8 GPU verdicts + 2 rows; "Operating System" etc. are not results
    summary = summarize_rvs(records, "level")
    assert summary["status"] == "FAIL"
    assert summary["failures"] == [
        {
            "action": "iet-stress",
            "module": "iet",
            "gpu": None,
            "line": rows[1]["line"],
            "reason": "RVS summary: action 'iet-stress' (iet) FAIL",
        }
    ]


def test_summary_box_alone_is_a_result_and_redrawn_rows_and_stderr_inside_box():
    text = box([("pcie_act_1", "PEQT", "PASS")], colour=False)
    assert judge_rvs(text, 0, "peqt")["status"] == "PASS"
    lines = box([("a1", "GST", "PASS"), ("a2", "IET", "FAIL")]).split("\n")
    # -q mode: a progress cell redrawn with \r, and a stderr line merged into the box
    lines[-3] = "| a1                               | GST            | In Progress\r" + lines[-3]
    lines.insert(-2, "RVS-ERROR [iet] [a2] Action failed to run successfully.")
    records = parse_rvs_output("\n".join(lines))
    assert [(r["kind"], r["action"], r["passed"]) for r in records] == [
        ("summary", "a1", True),
        ("error", "a2", False),
        ("summary", "a2", False),
    ]


def test_level_mode_package_counts():
    records = parse_rvs_output(RCQT_LEVEL1)
    packages = by_kind(records, "package")
    assert [(r["action"], r["metrics"], r["passed"]) for r in packages] == [
        ("metapackage-validation", {"total_packages": 3}, None),
        ("metapackage-validation", {"installed_packages": 1}, None),
        ("metapackage-validation", {"missing_packages": 1}, False),
        ("metapackage-validation", {"version_mismatch_packages": 1}, False),
        ("packagelist-install-validation", {"missing_packages": 0}, True),
        ("packagelist-install-validation", {"installed_packages": 2}, None),
    ]
    summary = judge_rvs(RCQT_LEVEL1, 0, "level1")
    assert summary["status"] == "FAIL"
    reasons = [f["reason"] for f in summary["failures"]]
    assert "Missing packages: 1" in reasons and "Version mismatch packages: 1" in reasons
    assert any(r.startswith("RVS-ERROR") for r in reasons)
    assert any("rocm-language-runtime not installed" in r for r in reasons)  # the "Error:" line


@pytest.mark.parametrize(
    ("line", "passed"),
    [
        ("    Missing packages             : <0>", True),
        ("    MISSING PACKAGES : 12", False),
        ("\tversion mismatch packages    : 0", True),
        ("\tVersion mismatch packages    : 3", False),
    ],
)
def test_package_count_variants(line, passed):
    records = parse_rvs_output(line)
    assert len(records) == 1 and records[0]["passed"] is passed and records[0]["module"] == "rcqt"


def test_error_lines_fail():
    text = (
        "[RESULT] [1.0] Action name :gst-x\n"
        "[ERROR ] [1.1] [gst-x] [GPU:: 42583] hipMalloc failed\n"
        "RVS-ERROR [PESM] [act1] invalid 'deviceid' key value: xxx\n"
        "hipErrorNoDevice ERROR: no ROCm-capable device is detected\n"
        "[RESULT] [1.2] [gst-x] GPU stress test FAILED on device 3\n"
    )
    records = parse_rvs_output(text)
    assert [(r["kind"], r["module"], r["gpu"], r["passed"]) for r in records] == [
        ("error", "gst", 42583, False),
        ("error", "pesm", None, False),
        ("error", "gst", None, False),
        ("error", "gst", None, False),
    ]
    assert records[0]["reason"] == "[ERROR] [GPU:: 42583] hipMalloc failed"
    assert records[1]["action"] == "act1" and records[1]["reason"] == "RVS-ERROR: invalid 'deviceid' key value: xxx"
    assert records[2]["reason"].startswith("failure marker 'ERROR:'")
    assert records[3]["reason"].startswith("failure marker 'FAIL'")


def test_words_inside_action_names_or_identifiers_are_not_failures():
    text = (
        "[RESULT] [1.0] Action name :gst-fail-fast\n"
        "[RESULT] [1.1] [gst-fail-fast] [GPU:: 42583] Start of GPU ramp up\n"
        "[DEBUG ] [1.2] [gst-fail-fast] hipGetLastError: hipSuccess\n"
        "[RESULT] [1.3] [gst-fail-fast] [GPU:: 42583] GFLOPS 1100 Target GFLOPS: 1000 met: TRUE\n"
    )
    summary = judge_rvs(text, 0, "gst")
    assert summary["status"] == "PASS", summary["failures"]
    assert summary["parsed"] == 1


# ---------------------------------------------------------------- verdict rules, rc, patterns


@pytest.mark.parametrize("text", ["", "\n\n", "ROCm Validation Suite\nloading modules\ndone\n"])
def test_unparseable_output_is_error(text):
    summary = judge_rvs(text, 0, "gst_single")
    assert summary["status"] == "ERROR" and summary["passed"] is False
    assert summary["reason"].startswith("unparseable output")
    assert summary["parsed"] == 0 and summary["test"] == "gst_single" and summary["rc"] == 0


def test_nonzero_rc_with_no_results_is_error_naming_rc():
    summary = judge_rvs("bash: /opt/rocm/bin/rvs: No such file or directory\n", 127, "gst_single")
    assert summary["status"] == "ERROR"
    assert "rc 127" in summary["reason"]
    assert summary["rc"] == 127


def test_nonzero_rc_never_passes_but_zero_rc_does_not_pass_failures():
    assert judge_rvs(gst_current(), 1, "t")["status"] == "ERROR"
    assert "rc 1 " in judge_rvs(gst_current(), 1, "t")["reason"]
    failing = gst_current(fail={42583: (1, "FALSE")})
    assert judge_rvs(failing, 0, "t")["status"] == "FAIL"
    assert judge_rvs(failing, 3, "t")["status"] == "FAIL"
    assert judge_rvs(gst_current(), None, "t")["status"] == "PASS"
    assert judge_rvs(gst_current(), "0", "t")["status"] == "PASS"
    with pytest.raises(ValueError, match="rc must be an integer"):
        judge_rvs(gst_current(), "zero", "t")


def test_extra_fail_patterns_case_insensitive():
    text = gst_current() + "[INFO  ] [1.0] amdgpu: GPU HANG detected on ring gfx_0.1.0\n"
    assert judge_rvs(text, 0, "t")["status"] == "PASS"
    summary = judge_rvs(text, 0, "t", [r"gpu\s+hang"])
    assert summary["status"] == "FAIL"
    assert summary["failures"][0]["reason"] == "matched fail pattern 'gpu\\\\s+hang'"
    # a pattern matching a passing result line turns it into a failure
    flagged = parse_rvs_output(gst_current(), [r"GPU:: 17010\] GFLOPS \d+ Target"])
    assert [r["gpu"] for r in flagged if r["passed"] is False] == [17010]
    assert [r["kind"] for r in flagged if r["passed"] is False] == ["result"]


def test_extra_fail_patterns_as_named_dict():
    text = gst_current() + "[INFO  ] [1.0] amdgpu: GPU HANG detected on ring gfx_0.1.0\n"
    summary = judge_rvs(text, 0, "t", {"gpu_hang": r"gpu\s+hang", "oom": "out of memory"})
    assert summary["status"] == "FAIL"
    assert [f["reason"] for f in summary["failures"]] == ["matched fail pattern 'gpu_hang'"]
    with pytest.raises(ValueError, match=r"invalid fail pattern 'oom' \('\(oom'\): missing \)"):
        parse_rvs_output(text, {"oom": "(oom"})


@pytest.mark.parametrize("pattern", ["met:(", "[unclosed", "*star"])
def test_invalid_fail_pattern_names_pattern_and_error(pattern):
    with pytest.raises(ValueError) as info:
        parse_rvs_output("x", [pattern])
    message = str(info.value)
    assert repr(pattern) in message
    assert "invalid fail pattern" in message
    assert any(word in message for word in ("missing", "unterminated", "nothing to repeat"))


def test_records_have_the_documented_keys():
    record = parse_rvs_output(IET)[0]
    assert set(record) == {"action", "module", "gpu", "passed", "metrics", "line", "lineno", "kind", "reason"}
    assert record["lineno"] == 9
    summary = judge_rvs(IET, 0, "iet")
    assert set(summary) == {
        "test",
        "passed",
        "status",
        "reason",
        "failures",
        "gpus",
        "metrics",
        "actions",
        "counts",
        "parsed",
        "rc",
    }
    assert set(summary["failures"][0]) == {"action", "module", "gpu", "line", "reason"}


# ---------------------------------------------------------------- version and GPU folder


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.3.0\n", True),
        ("1.3.0.60400", True),
        ("1.10.2", True),
        ("2.0", True),
        ("ROCm Validation Suite version 1.1.0", False),
        ("ROCm Validation Suite (version 1.2.9)", False),
        ("\nROCm Validation Suite (version 1.6.75)\n", True),
        ("", False),
        ("rvs: error while loading shared libraries: libamdhip64.so", False),
        (None, False),
    ],
)
def test_rvs_version_supports_levels(text, expected):
    assert rvs_version_supports_levels(text) is expected


def test_parse_rvs_version():
    assert parse_rvs_version("ROCm Validation Suite version 1.1.0") == (1, 1, 0)
    assert parse_rvs_version("1.3") == (1, 3, 0)
    assert parse_rvs_version("none") is None


AMD_SMI_LIST = json.dumps(
    [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "device_id": "0x74a1"}, "bus": {"bdf": "0000:05:00.0"}}],
    indent=4,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (AMD_SMI_LIST, "MI300X"),
        (json.dumps({"gpu": 0, "asic": {"market_name": "AMD Instinct MI325X"}}), "MI325X"),
        (json.dumps({"gpu_data": [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI355X"}}]}), "MI355X"),
        (json.dumps([{"gpu": 0, "ASIC": {"MARKET_NAME": "AMD Instinct MI300X VF"}}]), "MI300X"),
        ("WARNING: partition mode [SPX]\n" + AMD_SMI_LIST, "MI300X"),
        (json.dumps([{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}}]), "MI210"),
        (json.dumps([{"gpu": 0, "asic": {"market_name": "AMD Radeon RX 9070 GRE"}}]), "RX9070GRE"),
        (json.dumps([{"gpu": 0, "asic": {"market_name": "N/A"}}]), None),
        (json.dumps([{"gpu": 0, "bus": {"bdf": "0000:05:00.0"}}]), None),
        ("[]", None),
        ("not json at all", None),
        ("", None),
        ("GPU: 0\n    ASIC:\n        MARKET_NAME: AMD Instinct MI308X\n", "MI308X"),
    ],
)
def test_gpu_config_folder(text, expected):
    assert gpu_config_folder(text) == expected


def test_gpu_config_folder_accepts_decoded_data():
    assert gpu_config_folder(json.loads(AMD_SMI_LIST)) == "MI300X"


# ---------------------------------------------------------------- filters


FILTERS = FilterModule().filters()


def test_filter_rvs_parse_from_text_lines_and_registered_result():
    assert len(FILTERS["rvs_parse"](IET)) == 3
    assert len(FILTERS["rvs_parse"](IET.splitlines())) == 3
    registered = {"rc": 0, "stdout": SMQT, "stderr": "RVS-ERROR [smqt] [action_1] Action failed to run successfully."}
    records = FILTERS["rvs_parse"](registered)
    assert [r["kind"] for r in records] == ["result", "result", "error"]


def test_filter_rvs_judge_uses_registered_rc_unless_given():
    registered = {"rc": 2, "stdout": "", "stderr": "", "failed": True}
    summary = FILTERS["rvs_judge"](registered, test="gst_single")
    assert summary["status"] == "ERROR" and "rc 2" in summary["reason"] and summary["test"] == "gst_single"
    passing = {"rc": 0, "stdout": gst_current(), "stderr": ""}
    assert FILTERS["rvs_judge"](passing)["status"] == "PASS"
    assert FILTERS["rvs_judge"](passing, 1)["status"] == "ERROR"
    assert FILTERS["rvs_judge"](gst_current(), 0, "x", ["met: TRUE"])["status"] == "FAIL"


def test_filter_errors_are_ansible_filter_errors():
    with pytest.raises(AnsibleFilterError, match=r"invalid fail pattern '\(oops': missing \)"):
        FILTERS["rvs_judge"]("text", 0, "t", ["(oops"])
    with pytest.raises(AnsibleFilterError, match=r"rvs_parse: .*invalid fail pattern"):
        FILTERS["rvs_parse"]("text", ["[x"])
    with pytest.raises(AnsibleFilterError, match="expected RVS output"):
        FILTERS["rvs_parse"](42)
    with pytest.raises(AnsibleFilterError, match="without stdout/stderr"):
        FILTERS["rvs_judge"]({"foo": "bar"})
    with pytest.raises(AnsibleFilterError, match="rc must be an integer"):
        FILTERS["rvs_judge"]("x", True)
    with pytest.raises(AnsibleFilterError, match="rc must be an integer"):
        FILTERS["rvs_judge"]("x", "abc")
    with pytest.raises(AnsibleFilterError, match="fail_patterns must be a list"):
        FILTERS["rvs_judge"]("x", 0, "t", 5)
    with pytest.raises(AnsibleFilterError, match=r"invalid fail pattern 'hang' \(1\): expected a string"):
        FILTERS["rvs_judge"]("x", 0, "t", {"hang": 1})


# ---------------------------------------------------------------- the rvs / amd-smi stand-ins


def run_stand_in(tmp_path: Path, args: list[str], faults: dict | None = None, timeout: float = 30, binary=RVS_BIN):
    env = dict(os.environ, CVS_STAND_IN_DIR=str(tmp_path))
    if faults is not None:
        (tmp_path / "rvs.json").write_text(json.dumps(faults))
    return subprocess.run(
        [sys.executable, str(binary), *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def judged(result: subprocess.CompletedProcess, test: str) -> dict:
    return judge_rvs(result.stdout + result.stderr, result.returncode, test)


def test_stand_in_version_and_gpu_list(tmp_path):
    assert run_stand_in(tmp_path, ["--version"]).stdout == "1.3.0\n"
    assert rvs_version_supports_levels(run_stand_in(tmp_path, ["--version"]).stdout)
    old = run_stand_in(tmp_path, ["--version"], {"version": "1.1.0"})
    assert old.stdout == "1.1.0\n" and not rvs_version_supports_levels(old.stdout)
    gpus = run_stand_in(tmp_path, ["-g"], {}).stdout.splitlines()
    assert gpus[0] == "Supported GPUs available:"
    assert len(gpus) == 9
    assert gpus[1] == "0000:05:00.0 - GPU[ 2 - 42583] AMD Instinct MI300X (Device 29857)"


@pytest.mark.parametrize(
    "conf",
    sorted(p.relative_to(CONF).as_posix() for p in CONF.rglob("*.conf") if "levels" not in p.parts),
)
def test_stand_in_every_conf_passes_healthy(tmp_path, conf):
    result = run_stand_in(tmp_path, ["-c", str(CONF / conf)], {})
    assert result.returncode == 0, result.stderr
    assert "stand-in" not in (result.stdout + result.stderr).lower()
    summary = judged(result, conf)
    assert summary["status"] == "PASS", summary["failures"][:3]
    assert "ROCm Validation Suite (RVS) Summary" in result.stdout


def test_stand_in_fail_injection_gst_gpu2_still_exits_0(tmp_path):
    result = run_stand_in(
        tmp_path, ["-c", str(CONF / "MI300X" / "gst_single.conf")], {"fail": ["gst_single"], "fail_gpu": 2}
    )
    assert result.returncode == 0
    assert "met: FALSE" in result.stdout
    summary = judged(result, "gst_single")
    assert summary["status"] == "FAIL"
    assert {f["gpu"] for f in summary["failures"] if f["gpu"] is not None} == {36479}
    assert {f["reason"].split(":")[0] for f in summary["failures"]} >= {"RVS-ERROR", "RVS summary"}


def test_stand_in_old_version_prints_old_gst_format_without_box(tmp_path):
    faults = {"version": "1.1.0", "fail": ["gst"], "fail_gpu": 57875}
    result = run_stand_in(tmp_path, ["-c", str(CONF / "MI300X" / "gst_single.conf")], faults)
    assert " Gflop: " in result.stdout and "pass: FALSE" in result.stdout and "met:" not in result.stdout
    assert "Summary" not in result.stdout
    summary = judged(result, "gst_single")
    assert [f["gpu"] for f in summary["failures"]] == [57875]
    level = run_stand_in(tmp_path, ["-r", "1"], faults)
    assert level.returncode != 0 and "RVS-ERROR" in level.stderr


def test_stand_in_level_mode_package_checks(tmp_path):
    healthy = run_stand_in(tmp_path, ["-r", "1"], {})
    assert "Missing packages             : 0" in healthy.stdout
    assert judged(healthy, "level1")["status"] == "PASS"
    broken = run_stand_in(tmp_path, ["-r", "2"], {"missing_packages": 2, "version_mismatch_packages": 1})
    assert "Missing packages             : 2" in broken.stdout
    summary = judged(broken, "level2")
    assert summary["status"] == "FAIL"
    reasons = [f["reason"] for f in summary["failures"]]
    assert "Missing packages: 2" in reasons and "Version mismatch packages: 1" in reasons
    rows = [r for r in parse_rvs_output(broken.stdout) if r["kind"] == "summary"]
    assert [r["action"] for r in rows] == [
        "metapackage-validation",
        "pcie_capability",
        "hbm_basic",
        "xgmi_interface",
        "pcie_interface",
    ]


def test_stand_in_hang_and_exit_code(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired) as info:
        run_stand_in(tmp_path, ["-c", str(CONF / "MI300X" / "iet_stress.conf")], {"hang": ["iet_stress"]}, timeout=3)
    partial = info.value.stdout or b""
    partial = partial.decode() if isinstance(partial, bytes) else partial
    assert "Power(W)" in partial
    summary = judge_rvs(partial, None, "iet_stress")
    assert summary["status"] == "FAIL" and {r["gpu"] for r in summary["failures"]} == set(GPU_IDS)
    result = run_stand_in(tmp_path, ["-c", str(CONF / "peqt_single.conf")], {"exit_code": 3})
    assert result.returncode == 3 and judged(result, "peqt")["status"] == "ERROR"


def test_stand_in_amd_smi_gives_mi300x_folder(tmp_path):
    result = run_stand_in(tmp_path, ["static", "-a", "-g", "0", "--json"], binary=AMD_SMI_BIN)
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert isinstance(data, list) and data[0]["asic"]["market_name"] == "AMD Instinct MI300X"
    assert gpu_config_folder(result.stdout) == "MI300X"
    assert (CONF / gpu_config_folder(result.stdout) / "gst_single.conf").is_file()
    assert "ROCm version" in run_stand_in(tmp_path, ["--version"], binary=AMD_SMI_BIN).stdout
