"""The verdict of validate.yml's last play (plugins/plugin_utils/_run/verdict.py), with the messages users see."""

from __future__ import annotations

from ansible_collections.cvs.cluster.plugins.plugin_utils._run import verdict

REPORT = {
    "msg": "run r1: FAIL - n2: FAIL (rvs: gst failed)",
    "summary": {"status": "FAIL", "results_dir": "/res/r1"},
    "nodes": {"n1": {"rvs": "PASS", "maxtext": "PASS"}, "n2": {"rvs": "FAIL", "maxtext": "PASS", "rccl": "ERROR"}},
}


def test_a_node_fails_naming_the_checks_that_did_not_pass() -> None:
    assert verdict.node_failure(REPORT, "n2") == "n2: rvs FAIL; rccl ERROR - see /res/r1/report.html"
    assert verdict.node_failure(REPORT, "n1") == ""
    assert verdict.node_failure({"nodes": {"n1": {"rvs": "MISSING"}}}, "n1") == (
        "n1: rvs MISSING - see the results directory/report.html"
    )
    assert verdict.node_failure({}, "n1") == ""


def test_the_run_fails_unless_it_passed() -> None:
    assert verdict.run_failure(REPORT, []) == REPORT["msg"]
    passed = {"msg": "run r1: PASS", "summary": {"status": "PASS"}}
    assert verdict.run_failure(passed, []) == ""
    assert verdict.run_failure({"failed": True, "summary": {"status": "PASS"}}, []) == "the run report was not written"
    assert verdict.run_failure({}, []) == "the run report was not written"


def test_the_run_fails_naming_the_nodes_dispose_could_not_clean_and_never_reads_pass() -> None:
    passed = {"msg": "run r1: PASS - n1: PASS; n3: PASS - see /res/r1/report.html", "summary": {"status": "PASS"}}
    got = verdict.run_failure(passed, [("n1", "stop: survived"), ("n3", "unreachable")])
    assert got == (
        "run r1: ERROR - dispose failed on n1: stop: survived; on n3: unreachable"
        " - checks: n1: PASS; n3: PASS - see /res/r1/report.html"
    )
    assert "PASS -" not in got.split(" - checks: ")[0]
    # the report already named them (cvs.cluster.report read cvs_dispose_error): not twice
    named = {"msg": "run r1: ERROR - dispose failed on n1: x", "summary": {"status": "ERROR", "dispose_errors": [1]}}
    assert verdict.run_failure(named, [("n1", "x")]) == named["msg"]


def test_nodes_with_the_same_dispose_error_are_named_once_together() -> None:
    errors = [("n1", "cancel: Unable to contact slurm controller"), ("n2", "lease: held"),
              ("n3", "cancel: Unable to contact slurm controller")]  # fmt: skip
    assert verdict.dispose_text(errors) == (
        "dispose failed on n1, n3: cancel: Unable to contact slurm controller; on n2: lease: held"
    )


def test_with_dispose_keeps_a_failed_status_and_turns_pass_into_error() -> None:
    errors = [("n1", "boom")]
    assert verdict.with_dispose("run r1: FAIL - n1: FAIL (rvs: x)", "FAIL", errors) == (
        "FAIL",
        "run r1: FAIL - dispose failed on n1: boom - checks: n1: FAIL (rvs: x)",
    )
    assert verdict.with_dispose("run r1: PASS - n1: PASS", "PASS", []) == ("PASS", "run r1: PASS - n1: PASS")
    assert verdict.with_dispose("the run report was not written", "PASS", errors) == (
        "ERROR",
        "the run report was not written; dispose failed on n1: boom",
    )


def test_a_step_failure_is_the_tools_own_message() -> None:
    slurm = {
        "failed": True,
        "rc": 1,
        "msg": "non-zero return code",
        "stderr": "squeue: error: Unable to contact slurm controller (connect failure)\n",
    }
    assert verdict.step_failure(slurm) == "squeue: error: Unable to contact slurm controller (connect failure)"
    assert (
        verdict.step_failure({"failed": True, "msg": "lease of n1 is held by run r2"})
        == "lease of n1 is held by run r2"
    )
    assert verdict.step_failure({"failed": True, "rc": 137, "stderr": "a\nb\nc\nd\n"}) == "b; c; d (exit 137)"
    assert verdict.step_failure({"failed": True, "msg": "Docker said no", "stderr": "x"}) == "Docker said no: x"
    assert verdict.step_failure({"unreachable": True, "msg": "ssh: timed out"}) == "ssh: timed out"
    assert verdict.step_failure({"failed": True}) == "failed"
    assert len(verdict.step_failure({"failed": True, "msg": "y" * 2000}) or "") == 500
    for fine in ({}, {"skipped": True}, {"changed": True, "rc": 0}, None, "x"):
        assert verdict.step_failure(fine) is None


def test_dispose_failures_names_each_failed_step_in_order() -> None:
    steps = {
        "cancel the Slurm job cvs-r1": {"failed": True, "rc": 1, "stderr": "squeue: error: Unable to contact"},
        "stop the processes of the run": {"changed": False, "processes": []},
        "remove the per-run container": {"skipped": True},
        "give the node back (release the lease)": {"failed": True, "msg": "lease file: [Errno 13] denied"},
    }
    assert verdict.dispose_failures(steps) == (
        "cancel the Slurm job cvs-r1: squeue: error: Unable to contact; "
        "give the node back (release the lease): lease file: [Errno 13] denied"
    )
    assert verdict.dispose_failures({"a": {}, "b": {"skipped": True}}) == ""


def test_unwritten_verdicts_are_listed_in_full_in_host_order() -> None:
    rec = {"node": "node2", "check": "rvs", "status": "FAIL", "reason": "gst failed"}
    host_vars = [
        {"ansible_facts": {}},
        {"cvs_node": "node2", "ansible_facts": {"cvs_unwritten_records": {"rvs": {"path": "/r/rvs.json", "error": "e30",
                                                                                   "record": rec}}}},
        {},
    ]  # fmt: skip
    got = verdict.unwritten_verdicts(["node1-ctr", "node2-ctr", "node3-ctr"], host_vars)
    assert got == [{"node": "node2", "check": "rvs", "path": "/r/rvs.json", "error": "e30", "record": rec}]
    assert verdict.unwritten_records({"ansible_facts": {"cvs_unwritten_records": "junk"}}) == {}


def test_verdict_fails_a_node_with_its_checks_and_localhost_with_the_run() -> None:
    nodes = ["n1", "n2"]
    node_vars = [{"cvs_dispose_error": "x: boom"}, {}]
    assert verdict.verdict(REPORT, "n2-ctr", "n2", nodes, []) == "n2: rvs FAIL; rccl ERROR - see /res/r1/report.html"
    assert verdict.verdict(REPORT, "localhost", "", nodes, node_vars) == (
        "run r1: FAIL - dispose failed on n1: x: boom - checks: n2: FAIL (rvs: gst failed)"
    )
