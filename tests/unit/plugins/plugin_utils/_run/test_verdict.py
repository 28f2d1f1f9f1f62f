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


def test_the_run_fails_naming_the_nodes_dispose_could_not_clean() -> None:
    passed = {"msg": "run r1: PASS", "summary": {"status": "PASS"}}
    got = verdict.run_failure(passed, [("n1", "Stop every process: survived"), ("n3", "unreachable")])
    assert got == "run r1: PASS; dispose failed on n1: Stop every process: survived; n3: unreachable"


def test_verdict_fails_a_node_with_its_checks_and_localhost_with_the_run() -> None:
    nodes = ["n1", "n2"]
    node_vars = [{"cvs_dispose_error": "x: boom"}, {}]
    assert verdict.verdict(REPORT, "n2-ctr", "n2", nodes, []) == "n2: rvs FAIL; rccl ERROR - see /res/r1/report.html"
    assert (
        verdict.verdict(REPORT, "localhost", "", nodes, node_vars) == REPORT["msg"] + "; dispose failed on n1: x: boom"
    )
