"""Unit tests of plugin_utils/_rvs/verdict.py: every test of a node's run judged, the node's status and reason."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.verdict import judge_run, judge_test, node_verdict
from ansible_collections.cvs.cluster.tests.unit.plugins.plugin_utils.rvs_samples import GPU_IDS, MEM, gst_current

STEP = "cvs.cluster.step: 4711.3\n"


def planned(name: str, timeout: int = 1800, patterns: Any = None) -> dict[str, Any]:
    return {
        "name": name,
        "mode": "individual",
        "config_file": f"/conf/{name}.conf",
        "timeout": timeout,
        "patterns": patterns or [],
        "args": ["-c", f"/conf/{name}.conf"],
        "command": f"/opt/rocm/bin/rvs -c /conf/{name}.conf",
    }


def ran(name: str, rc: Any = 0, stdout: str = "", stderr: str = "", msg: Any = None) -> dict[str, Any]:
    return {"name": name, "rc": rc, "stdout": stdout, "stderr": stderr, "delta": "0:00:01.500000", "msg": msg}


def test_a_passing_run_keeps_every_field_of_the_record() -> None:
    verdict = judge_run({"results": [ran("gst", stdout=gst_current())]}, {"tests": [planned("gst")]}, "node1")
    assert verdict["status"] == "PASS" and verdict["reason"] == "all 1 test(s) passed" and verdict["steps"] == []
    (test,) = verdict["tests"]
    assert list(test) == ["name", "mode", "config_file", "command", "timeout", "rc", "timed_out", "status", "reason",
                          "failures", "gpus", "metrics", "duration", "output_cut", "step"]  # fmt: skip
    assert test["status"] == "PASS" and test["rc"] == 0 and test["timed_out"] is False
    assert test["reason"] == "8 result(s), 8 passed, none failed"
    assert test["gpus"] == sorted(GPU_IDS) and test["metrics"]["gflops"]["count"] == 8
    assert (test["duration"], test["step"], test["config_file"]) == ("0:00:01.500000", None, "/conf/gst.conf")


def test_a_failing_gpu_is_named_in_the_reason_with_its_line() -> None:
    bad = gst_current(fail={GPU_IDS[2]: (1000, "FALSE")})
    verdict = judge_run(
        {"results": [ran("gst", stdout=bad), ran("mem", stdout=MEM)]}, {"tests": [planned("gst"), planned("mem")]}, "n2"
    )
    assert verdict["status"] == "FAIL"
    assert verdict["reason"].startswith("n2: rvs test gst FAIL (1 failing result(s); first: ")
    assert f" - GPU {GPU_IDS[2]}: [RESULT]" in verdict["reason"] and verdict["reason"].endswith("met: FALSE")
    assert [t["status"] for t in verdict["tests"]] == ["FAIL", "PASS"]


@pytest.mark.parametrize("rc", [124, 137])
def test_a_test_killed_by_timeout_fails_and_the_others_are_judged(rc: int) -> None:
    run = {"results": [ran("iet", rc=rc, stdout="[RESULT] [1.0] Action name :iet\n"), ran("mem", stdout=MEM)]}
    verdict = judge_run(run, {"tests": [planned("iet", timeout=4), planned("mem")]}, "node2")
    iet, mem = verdict["tests"]
    assert iet["status"] == "FAIL" and iet["timed_out"] is True and iet["rc"] == rc
    assert iet["reason"] == "timed out after 4 s; rvs was killed"
    assert mem["status"] == "PASS"
    assert verdict["status"] == "FAIL"
    assert verdict["reason"] == "node2: rvs test iet FAIL (timed out after 4 s; rvs was killed)"


def test_failing_lines_are_gpu_lines_first_and_three_at_most() -> None:
    test = {
        "name": "t",
        "status": "FAIL",
        "reason": "r",
        "failures": [{"gpu": None, "line": "  plain  "}] + [{"gpu": g, "line": f"l{g}"} for g in (1, 2, 3, 4)],
    }
    assert node_verdict([test], "n") == ("FAIL", "n: rvs test t FAIL (r) - GPU 1: l1 | GPU 2: l2 | GPU 3: l3")
    test["failures"] = [{"gpu": None, "line": "  plain  "}]
    assert node_verdict([test], "n")[1] == "n: rvs test t FAIL (r) - plain"


def test_fail_wins_over_error_and_error_over_pass() -> None:
    def t(status: str) -> dict[str, Any]:
        return {"name": status.lower(), "status": status, "reason": "why", "failures": []}

    assert node_verdict([t("PASS"), t("ERROR"), t("FAIL")], "n")[0] == "FAIL"
    assert node_verdict([t("PASS"), t("ERROR")], "n") == ("ERROR", "n: rvs test error ERROR (why)")
    assert node_verdict([t("PASS"), t("PASS")], "n") == ("PASS", "all 2 test(s) passed")


def test_unparseable_output_is_an_error_naming_the_test() -> None:
    verdict = judge_run({"results": [ran("mem", stdout="loading modules ...\ndone: 0 actions")]},
                        {"tests": [planned("mem")]}, "node1")  # fmt: skip
    assert verdict["status"] == "ERROR"
    assert verdict["reason"] == "node1: rvs test mem ERROR (unparseable output: no RVS result line found)"


def test_a_non_zero_exit_never_passes() -> None:
    (test,) = judge_run({"results": [ran("mem", rc=3, stdout=MEM)]}, {"tests": [planned("mem")]}, "n")["tests"]
    assert test["status"] == "ERROR" and test["reason"] == "rvs exited with rc 3 although no failing result was parsed"


def test_a_test_without_exit_status_is_an_error_with_the_module_or_run_message() -> None:
    run = {"results": [ran("mem", rc=None, stdout=MEM, msg="still running 1870 s after it started")]}
    (test,) = judge_run(run, {"tests": [planned("mem")]}, "n")["tests"]
    assert test["status"] == "ERROR" and test["reason"] == "rvs did not finish: still running 1870 s after it started"
    assert test["metrics"]  # what it printed is still read

    # the run itself failed (async limit, a node lost): every test is an error with the run's message
    failed = {"failed": True, "msg": "async task did not complete within the requested time - 70s"}
    verdict = judge_run(failed, {"tests": [planned("mem"), planned("gst")]}, "node3")
    assert [(t["status"], t["rc"], t["duration"]) for t in verdict["tests"]] == [("ERROR", None, None)] * 2
    assert verdict["reason"] == (
        "node3: rvs test mem ERROR (rvs did not finish: async task did not complete within the requested time - 70s); "
        "rvs test gst ERROR (rvs did not finish: async task did not complete within the requested time - 70s)"
    )
    skipped = judge_run({"skipped": True}, {"tests": [planned("mem")]}, "n")
    assert skipped["tests"][0]["reason"] == "rvs did not finish: no exit status"


def test_tests_with_the_same_name_keep_their_own_results() -> None:
    run = {"results": [ran("mem", stdout=MEM), ran("mem", rc=124)]}
    verdict = judge_run(run, {"tests": [planned("mem"), planned("mem", timeout=9)]}, "n")
    assert [t["status"] for t in verdict["tests"]] == ["PASS", "FAIL"]


def test_fail_patterns_apply_to_stdout_and_stderr() -> None:
    run = {"results": [ran("mem", stdout=MEM, stderr="driver: RAS event\n")]}
    (test,) = judge_run(run, {"tests": [planned("mem", patterns=["ras EVENT"])]}, "n")["tests"]
    assert test["status"] == "FAIL" and "matched fail pattern 'ras EVENT'" in test["reason"]


def test_slurm_steps_are_taken_out_of_stderr_and_returned_as_steps() -> None:
    run = {"results": [ran("mem", stdout=MEM, stderr=STEP), ran("gst", rc=None, stderr="cvs.cluster.step: 4711.4\n"),
                       ran("peqt", rc=124, stderr="cvs.cluster.step: 4711.5\n")]}  # fmt: skip
    verdict = judge_run(run, {"tests": [planned("mem"), planned("gst"), planned("peqt")]}, "node1", "snode1")
    assert [t["step"] for t in verdict["tests"]] == ["4711.3", "4711.4", "4711.5"]
    assert verdict["tests"][0]["status"] == "PASS"  # the marker line is no output of rvs
    assert verdict["steps"] == [
        {"id": "4711.3", "name": "rvs mem", "state": "COMPLETED", "exit_code": 0, "nodes": ["snode1"]},
        {"id": "4711.4", "name": "rvs gst", "state": "UNKNOWN", "exit_code": None, "nodes": ["snode1"]},
        {"id": "4711.5", "name": "rvs peqt", "state": "FAILED", "exit_code": 124, "nodes": ["snode1"]},
    ]


def test_judge_test_without_a_result_uses_the_reason_given() -> None:
    test = judge_test(planned("mem"), None, "the node went away")
    assert (test["status"], test["reason"], test["failures"]) == ("ERROR", "rvs did not finish: the node went away", [])


def test_a_passing_output_that_was_cut_is_an_error_naming_the_bytes_cut() -> None:
    """rvs_run keeps each output's head and tail: a failing line may have been cut, so what was kept passing is no
    PASS; a failure in what was kept still fails."""
    cut = {**ran("gst", stdout=gst_current()), "stdout_cut": 49_000_000}
    (test,) = judge_run({"results": [cut]}, {"tests": [planned("gst")]}, "node1")["tests"]
    assert test["status"] == "ERROR" and test["output_cut"] == 49_000_000
    assert test["reason"].startswith("output too large to judge whole: 49000000 bytes of it were cut")
    bad = {**ran("gst", stdout=gst_current(fail={GPU_IDS[0]: (1000, "FALSE")})), "stderr_cut": 10}
    (failed,) = judge_run({"results": [bad]}, {"tests": [planned("gst")]}, "node1")["tests"]
    assert failed["status"] == "FAIL"


def test_a_node_lost_while_polling_is_an_error_naming_the_node_and_the_transport_error() -> None:
    lost = {"unreachable": True, "msg": "Failed to connect to the host via ssh: Connection refused", "changed": False}
    verdict = judge_run(lost, {"tests": [planned("gst"), planned("mem")]}, "node2")
    assert verdict["status"] == "ERROR" and [t["status"] for t in verdict["tests"]] == ["ERROR", "ERROR"]
    why = "node2 stopped answering while the tests ran (Failed to connect to the host via ssh: Connection refused)"
    assert why in verdict["reason"]


def test_a_job_still_running_when_the_poll_gave_up_is_an_error_saying_so() -> None:
    running = {"started": 1, "finished": 0, "ansible_job_id": "j1.2", "attempts": 10}
    (test,) = judge_run(running, {"tests": [planned("gst")]}, "node1")["tests"]
    assert test["status"] == "ERROR" and "still running when the role stopped waiting" in test["reason"]
