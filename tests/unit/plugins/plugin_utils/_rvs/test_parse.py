"""RVS output into records (plugin_utils/_rvs/parse.py, filter rvs_parse): one test per module or line kind."""

from __future__ import annotations

import pytest

from ansible_collections.cvs.cluster.plugins.filter.rvs_parse import FilterModule
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.judge import judge_rvs, summarize_rvs
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.parse import parse_rvs_output
from ansible_collections.cvs.cluster.tests.unit.plugins.plugin_utils.rvs_samples import (
    BABEL,
    ESC,
    GPU_IDS,
    GST_OLD,
    IET,
    MEM,
    PBQT,
    PEBB,
    RCQT_LEVEL1,
    SMQT,
    box,
    by_kind,
    gst_current,
)

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


# ---------------------------------------------------------------- extra fail patterns, record keys


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


# ---------------------------------------------------------------- filter


FILTERS = FilterModule().filters()


def test_filter_rvs_parse_from_text_lines_and_registered_result():
    assert len(FILTERS["rvs_parse"](IET)) == 3
    assert len(FILTERS["rvs_parse"](IET.splitlines())) == 3
    registered = {"rc": 0, "stdout": SMQT, "stderr": "RVS-ERROR [smqt] [action_1] Action failed to run successfully."}
    records = FILTERS["rvs_parse"](registered)
    assert [r["kind"] for r in records] == ["result", "result", "error"]
