"""rccl-tests output read and judged, the suite's tests checked and its record (plugin_utils/_rccl.py)."""

from __future__ import annotations

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._rccl import (
    RcclSettingsError,
    check_tests,
    judge,
    judge_test,
    parse,
    size_bytes,
    suite_record,
    summary_rows,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA, validate

# an all_reduce_perf run as rccl-tests prints it (rank 0), two nodes x 8 GPUs
OUTPUT = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20
#
# Using devices
#  Rank  0 Group  0 Pid  41882 on gpu-node1 device  0 [0x05] AMD Instinct MI300X
#  Rank  1 Group  0 Pid  41883 on gpu-node1 device  1 [0x15] AMD Instinct MI300X
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    34.64    0.00    0.00      0    33.91    0.00    0.00      0
     1048576        262144     float     sum      -1    98.71   10.62   19.92      0    97.40   10.77   20.19      0
   134217728      33554432     float     sum      -1   1234.5  108.72  190.26      0   1230.1  109.11  190.94      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 70.0600
#
"""


def test_the_table_is_read_row_by_row() -> None:
    table = parse(OUTPUT)
    assert [r["size"] for r in table["rows"]] == [8, 1048576, 134217728]
    last = table["rows"][-1]
    assert last["oop"] == {"time_us": 1234.5, "algbw": 108.72, "busbw": 190.26, "wrong": 0}
    assert last["ip"]["busbw"] == 190.94 and table["avg_busbw"] == 70.06 and table["out_of_bounds"] == 0
    assert summary_rows(table["rows"])[1] == {"size": 1048576, "busbw": 19.92, "busbw_in_place": 20.19, "wrong": 0,
                                               "time_us": 98.71}  # fmt: skip


def test_thresholds_met_pass_and_the_metrics_fit_a_check_record() -> None:
    out = judge(OUTPUT, "all_reduce_perf", {"1M": 15, "128M": 180})
    assert out["status"] == "PASS", out["reason"]
    assert out["reason"] == "all_reduce_perf: 3 sizes, largest 134217728 B at 190.26 GB/s"
    rec = validate({"schema": SCHEMA, "check": "rccl", "node": "n1", "status": "PASS", "reason": "x",
                    "metrics": out["metrics"]})  # fmt: skip
    assert [m["metric"] for m in rec["metrics"]] == [
        "all_reduce_perf busbw 1048576B", "all_reduce_perf busbw 134217728B", "all_reduce_perf avg busbw"
    ]  # fmt: skip


def test_a_bandwidth_below_its_threshold_fails_naming_size_and_value() -> None:
    out = judge(OUTPUT, "all_reduce_perf", {"128M": 300})
    assert out["status"] == "FAIL"
    assert out["reason"] == "all_reduce_perf: bus bandwidth 190.26 GB/s at 134217728 B is below 300.00 GB/s"
    assert judge(OUTPUT, "all_reduce_perf", {"128M": 190.5}, in_place=True)["status"] == "PASS"


def test_wrong_values_out_of_bounds_and_unmeasured_sizes_fail() -> None:
    wrong = OUTPUT.replace("19.92      0    97.40", "19.92     12    97.40").replace("values : 0 OK", "values : 3 BAD")
    out = judge(wrong, "all_reduce_perf", {"64M": 1})
    assert out["lines"] == [
        "size 67108864 B has a threshold but was not measured",
        "12 wrong value(s) at 1048576 B (out-of-place)",
        "3 out-of-bounds value(s)",
    ]


def test_no_table_is_an_error_and_n_a_wrong_counts_are_unknown_not_wrong() -> None:
    assert judge("mpirun: command not found", "all_reduce_perf")["status"] == "ERROR"
    unchecked = OUTPUT.replace(
        "0.00      0    33.91    0.00    0.00      0", "0.00    N/A    33.91    0.00    0.00    N/A"
    )
    assert judge(unchecked, "all_reduce_perf")["status"] == "PASS"
    assert parse(unchecked)["rows"][0]["oop"]["wrong"] is None


@pytest.mark.parametrize(("text", "size"), [("8", 8), ("1K", 1024), ("128M", 134217728), ("1G", 2**30), (64, 64)])
def test_sizes(text: object, size: int) -> None:
    assert size_bytes(text) == size


def test_a_bad_threshold_is_named() -> None:
    with pytest.raises(ValueError, match="threshold 1Q"):
        judge(OUTPUT, "all_reduce_perf", {"1Q": 3})
    with pytest.raises(ValueError, match="threshold 1M: 'fast'"):
        judge(OUTPUT, "all_reduce_perf", {"1M": "fast"})


# ---------------------------------------------------------------- the suite: tests, per-test verdict, record


@pytest.mark.parametrize(
    ("tests", "message"),
    [
        ([{"name": "all_reduce_perf; rm -rf /"}], "rccl_tests: 'all_reduce_perf; rm -rf /' must name an rccl-tests binary (letters, digits, '.', '_', '-')"),  # noqa: E501
        ([{"args": ["-b", "8"]}], "rccl_tests: '?' must name an rccl-tests binary (letters, digits, '.', '_', '-')"),
        (["all_reduce_perf"], "rccl_tests: '?' must name an rccl-tests binary"),
        ([{"name": "all_reduce_perf", "thresholds": {"1Q": 3}}], "rccl_tests: all_reduce_perf: threshold 1Q: 3:"),
        ([{"name": "all_reduce_perf", "args": "-b 8"}], "rccl_tests: all_reduce_perf: args must be a list"),
        ("all_reduce_perf", "rccl_tests must be a list of tests"),
    ],
)  # fmt: skip
def test_a_test_that_cannot_run_is_named(tests: object, message: str) -> None:
    with pytest.raises(RcclSettingsError) as err:
        check_tests(tests)
    assert str(err.value).startswith(message)


def test_tests_are_normalised() -> None:
    assert check_tests([{"name": "all_reduce_perf", "args": ["-b", 8], "timeout": 60}]) == [
        {"name": "all_reduce_perf", "args": ["-b", "8"], "thresholds": {}, "timeout": 60}
    ]


def _job(status: str = "PASS", **over: object) -> dict:
    return {"name": "rccl-all_reduce_perf", "status": status, "reason": "mpirun rccl-all_reduce_perf: 6 ranks exited 0",
            "failed_node": None, "error_line": None, **over}  # fmt: skip


def test_a_test_whose_job_passed_is_judged_from_rank_0s_table() -> None:
    entry = judge_test({"name": "all_reduce_perf", "thresholds": {"128M": 300}}, _job(), OUTPUT, False)
    assert entry["status"] == "FAIL" and entry["table"][-1]["busbw"] == 190.26 and entry["mpi"]["status"] == "PASS"
    assert entry["reason"] == "all_reduce_perf: bus bandwidth 190.26 GB/s at 134217728 B is below 300.00 GB/s"
    assert entry["lines"] == [entry["reason"].split(": ", 1)[1]] and entry["avg_busbw"] == 70.06


def test_a_test_whose_job_failed_takes_the_jobs_reason_and_error_line() -> None:
    line = "cvs-mpi: rank 2 on node3 exited with status 3"
    job = _job("FAIL", reason="rank 2 on node3 exited with status 3 (first to fail); every rank was stopped",
               failed_node="node3", error_line=line)  # fmt: skip
    entry = judge_test({"name": "all_reduce_perf"}, job, OUTPUT.split("  1048576")[0], False)
    assert entry["status"] == "FAIL" and entry["failed_node"] == "node3" and entry["lines"] == [line]
    assert (
        entry["reason"]
        == "all_reduce_perf: rank 2 on node3 exited with status 3 (first to fail); every rank was stopped"
    )
    assert len(entry["table"]) == 1 and entry["avg_busbw"] is None


def test_the_record_passes_when_every_test_passed_and_else_names_the_failed_ones() -> None:
    passed = judge_test({"name": "all_reduce_perf"}, _job(), OUTPUT, False)
    failed = judge_test({"name": "all_reduce_perf"}, _job("FAIL", reason="x", failed_node="node2"), "", False)
    ok = suite_record([passed, passed], None, "2026-12-07T00:00:00Z")
    assert ok["status"] == "PASS" and ok["reason"] == f"{passed['reason']}; {passed['reason']}"
    assert ok["started"] == "2026-12-07T00:00:00Z" and len(ok["metrics"]) == 2 and ok["failed_node"] is None
    bad = suite_record([passed, failed], None, None)
    assert bad["status"] == "FAIL" and bad["reason"] == "all_reduce_perf: x" and bad["failed_node"] == "node2"
    rec = validate({"schema": SCHEMA, "check": "rccl", "node": "n1", **bad})
    assert [t["name"] for t in rec["tests"]] == ["all_reduce_perf", "all_reduce_perf"]


def test_a_suite_that_stopped_is_an_error_keeping_the_tests_that_ran() -> None:
    passed = judge_test({"name": "all_reduce_perf"}, _job(), OUTPUT, False)
    why = "cvs.cluster.mpi rccl-all_gather_perf cannot start: node2: mpirun not found (mpirun, setting mpi_mpirun)"
    rec = suite_record([passed], why, None)
    assert rec["status"] == "ERROR" and rec["reason"] == why and len(rec["tests"]) == 1
