"""Unit tests: run results and reports (plugin_utils/_report/record.py, action cvs.cluster.report)."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema

from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.record import (
    ReportError,
    absent_check,
    aggregate,
    describe_write_error,
    duration,
    ensure_writable,
    find_unreachable,
    normalise_check,
    read_checks,
    run_nodes,
    stats,
    to_html,
    to_junit,
    unreachable_reason,
    verdict_line,
    write_report,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.record import check_rows

REPO = Path(__file__).resolve().parents[5]
XSD = REPO / "tests" / "integration" / "fixtures" / "report" / "junit.xsd"
EVIL = "<script>alert('x')</script> & \"q\" \x01"

RVS_FAIL: dict[str, Any] = {
    "schema": SCHEMA,
    "check": "rvs",
    "node": "node2",
    "status": "FAIL",
    "reason": "node2: rvs test gst_single FAIL",
    "rvs_version": "1.3.0",
    "config_folder": "MI300X",
    "facts": {"rvs_version": "1.3.0", "gpu_model": "MI300X"},
    "tests": [
        {
            "name": "gst_single",
            "status": "FAIL",
            "reason": "1 failure",
            "duration": "0:00:01.5",
            "failures": [{"gpu": 2, "line": "[RESULT] [  1.0] gst-1 GPU 2 met: FALSE"}],
        },
        {"name": "mem", "status": "PASS", "reason": "ok", "failures": []},
    ],
    "started": "2026-01-01T10:00:00Z",
    "finished": "2026-01-01T10:00:30Z",
    "backend": "baremetal",
}
RVS_FAIL.update(check_rows(RVS_FAIL["tests"]))  # as the rvs role writes it


def _ok(check: str, node: str, **extra: Any) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "check": check,
        "node": node,
        "status": "PASS",
        "reason": "fine",
        "started": "2026-01-01T10:00:00Z",
        "finished": "2026-01-01T10:00:10Z",
        "backend": "baremetal",
        **extra,
    }


MAXTEXT_METRICS = [
    {"metric": "tflops_per_device", "value": 120.5, "status": "PASS", "kind": "min", "threshold": {"min": 100},
     "message": "120.5 >= 100"},
    {"metric": "loss", "value": 2.1, "status": "RECORD", "kind": "record", "threshold": None, "message": "recorded"},
]  # fmt: skip


def _found() -> dict[str, dict[str, Any]]:
    return {
        "node1": {"rvs": _ok("rvs", "node1"), "maxtext": _ok("maxtext", "node1", metrics=MAXTEXT_METRICS)},
        "node2": {"rvs": RVS_FAIL, "maxtext": _ok("maxtext", "node2")},
        "node3": {"rvs": _ok("rvs", "node3")},  # maxtext missing: interrupted there
    }


NODES = {n: {"host": n, "facts": {"kernel": "6.1"}} for n in ("node1", "node2", "node3")}


def test_duration() -> None:
    assert duration("2026-01-01T10:00:00Z", "2026-01-01T10:01:00Z") == 60.0
    assert duration(None, "2026-01-01T10:01:00Z") is None
    assert duration("garbage", "2026-01-01T10:01:00Z") is None


def test_aggregate_counts_failing_and_missing() -> None:
    rec = aggregate("run1", ["rvs", "maxtext"], NODES, _found())
    s = rec["summary"]
    assert s["counts"] == {"PASS": 4, "FAIL": 1, "ERROR": 0, "UNREACHABLE": 0, "MISSING": 1}
    assert s["status"] == "FAIL" and s["failing_nodes"] == ["node2"] and s["incomplete_nodes"] == ["node3"]
    assert rec["complete"] is False
    n2 = rec["nodes"]["node2"]
    assert n2["checks"]["rvs"]["lines"] == ["gst_single: GPU 2: [RESULT] [  1.0] gst-1 GPU 2 met: FALSE"]
    assert n2["facts"]["gpu_model"] == "MI300X" and n2["facts"]["rvs_version"] == "1.3.0"
    assert n2["checks"]["rvs"]["duration"] == 30.0
    fail = next(f for f in s["failures"] if f["status"] == "FAIL")
    assert fail["node"] == "node2" and fail["check"] == "rvs" and "GPU 2" in fail["line"]
    assert rec["nodes"]["node3"]["checks"]["maxtext"]["status"] == "MISSING"
    m = rec["nodes"]["node1"]["checks"]["maxtext"]["metrics"]
    assert [x["status"] for x in m] == ["PASS", "RECORD"] and m[0]["threshold"] == {"min": 100}


def test_aggregate_pass_and_not_complete() -> None:
    found = {"node1": {"rvs": _ok("rvs", "node1")}}
    nodes = {"node1": {"host": "node1", "facts": {}}}
    assert aggregate("r", ["rvs"], nodes, found)["summary"]["status"] == "PASS"
    rec = aggregate("r", ["rvs"], nodes, found, complete=False)
    assert rec["summary"]["status"] == "INCOMPLETE" and rec["complete"] is False


def test_a_pass_on_a_node_whose_preparation_failed_is_an_error_naming_why() -> None:
    """prepare failed after the node got its workload host (its scratch directory, say): the suites may still have
    run there and written PASS, but the node was never validated as the run meant, and the run does not pass."""
    nodes = {**NODES, "node3": {"host": "node3", "prepare_error": "node3: scratch.sh: cannot create /var/tmp/cvs"}}
    rec = aggregate("run1", ["rvs", "maxtext"], nodes, _found())
    rvs = rec["nodes"]["node3"]["checks"]["rvs"]
    assert rvs["status"] == "ERROR"
    assert (
        rvs["reason"]
        == "node3: rvs passed, but preparing the node failed: node3: scratch.sh: cannot create /var/tmp/cvs"
    )
    assert rec["nodes"]["node3"]["checks"]["maxtext"]["status"] == "ERROR"  # no record: not run, as before
    assert rec["nodes"]["node1"]["checks"]["rvs"]["status"] == "PASS"  # the other nodes keep their verdicts
    assert rec["nodes"]["node2"]["checks"]["rvs"]["status"] == "FAIL"
    assert "node3" in rec["summary"]["failing_nodes"] and rec["summary"]["status"] == "FAIL"


def test_unknown_status_and_garbage_file_are_errors() -> None:
    assert normalise_check("x", "n", {"status": "weird"})["status"] == "ERROR"
    rec = normalise_check("x", "n", "Expecting value: line 1", "/r/checks/n/x.json")
    assert rec["status"] == "ERROR" and "unreadable" in rec["reason"]


def test_nodes_only_in_files_are_added() -> None:
    rec = aggregate("r", ["rvs"], {}, {"nodeX": {"rvs": _ok("rvs", "nodeX")}})
    assert list(rec["nodes"]) == ["nodeX"]


def test_invalid_check_name() -> None:
    with pytest.raises(ValueError):
        aggregate("r", ["../x"], {}, {})


def test_junit_validates_and_counts() -> None:
    rec = aggregate("run1", ["rvs", "maxtext"], NODES, _found())
    text = to_junit(rec)
    xmlschema.XMLSchema(str(XSD)).validate(text)
    root = ET.fromstring(text)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("6", "1", "1")
    case = root.find("./testsuite[@name='rvs']/testcase[@name='node2']")
    assert case is not None and case.find("failure") is not None
    assert "GPU 2" in (case.find("failure").text or "")
    missing = root.find("./testsuite[@name='maxtext']/testcase[@name='node3']/error")
    assert missing is not None and missing.get("type") == "MISSING"


def test_junit_escapes_evil_text() -> None:
    found = {"node1": {"rvs": {**RVS_FAIL, "node": "node1", "reason": EVIL}}}
    text = to_junit(aggregate("r", ["rvs"], {}, found))
    xmlschema.XMLSchema(str(XSD)).validate(text)
    failure = ET.fromstring(text).find(".//failure")
    assert failure is not None and "<script>" in failure.get("message", "")


def test_html_escapes_everything() -> None:
    found = {
        "node<1>": {
            "rvs": {
                **RVS_FAIL,
                "node": "node<1>",
                "reason": EVIL,
                "tests": [{"name": EVIL, "status": "FAIL", "failures": [{"line": EVIL}]}],
            }
        }
    }
    page = to_html(aggregate("run<&>", ["rvs"], {}, found))
    assert page.count("<script>") == 1 and "<script>alert" not in page and "&lt;script&gt;" in page  # ours only
    assert "node&lt;1&gt;" in page and "run&lt;&amp;&gt;" in page
    assert "<details" in page and "http" not in page.replace("http-equiv", "")  # no external assets


def test_html_cells_and_colours() -> None:
    page = to_html(aggregate("run1", ["rvs", "maxtext"], NODES, _found()))
    assert page.count('<tr class="node"') == 3
    assert 'class="cell FAIL" data-node="node2" data-check="rvs"' in page
    assert 'class="cell MISSING" data-node="node3" data-check="maxtext"' in page
    assert '<tr class="RECORD"' in page and ".RECORD{" in page


def test_write_report_and_read_back(tmp_path: Path) -> None:
    for node, per in _found().items():
        d = tmp_path / "run1" / "checks" / node
        d.mkdir(parents=True)
        for check, data in per.items():
            (d / f"{check}.json").write_text(json.dumps(data))
    (tmp_path / "run1" / "checks" / "node1" / "broken.json").write_text("{not json")
    assert set(read_checks(str(tmp_path / "run1"))["node1"]) == {"rvs", "maxtext", "broken"}
    rec = write_report(str(tmp_path), "run1", ["rvs", "maxtext"], NODES)
    for key in ("results", "junit", "html"):
        assert os.path.getsize(rec["files"][key]) > 0
    data = json.loads((tmp_path / "run1" / "results.json").read_text())
    assert data["summary"]["failing_nodes"] == ["node2"] and data["checks"] == ["rvs", "maxtext"]
    st = stats(rec, str(tmp_path / "run1"))
    assert st["counts"]["FAIL"] == 1 and st["failing_nodes"] == ["node2"]
    # default checks: those of the earlier report, else whatever has files
    assert write_report(str(tmp_path), "run1", None, {})["checks"] == ["rvs", "maxtext"]
    (tmp_path / "run1" / "results.json").unlink()
    assert write_report(str(tmp_path), "run1", None, {})["checks"] == ["broken", "maxtext", "rvs"]


def test_unwritable_results_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ReportError, match=r"cannot write run results to .*file/sub.*Not a directory.*cvs_results_dir"):
        write_report(str(blocker / "sub"), "run1", ["rvs"], {})
    with pytest.raises(ReportError, match="invalid run id"):
        write_report(str(tmp_path), "../x", ["rvs"], {})


def test_action_plugin(tmp_path: Path) -> None:
    from unittest.mock import MagicMock

    from ansible.playbook.task import Task

    from ansible_collections.cvs.cluster.plugins.action.report import ActionModule

    def run(args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        task = Task()
        task.args = args
        task.async_val = 0
        action = ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None, shared_loader_obj=None)
        return action.run(task_vars=task_vars)

    (tmp_path / "r1" / "checks" / "n2").mkdir(parents=True)
    (tmp_path / "r1" / "checks" / "n2" / "rvs.json").write_text(json.dumps({**RVS_FAIL, "node": "n2"}))
    hostvars = {
        "h1": {"cvs_node": "n1", "cvs_node_index": 0, "cvs_node_facts": {"kernel": "6.1", "gpu_render_nodes": 8}},
        "h2": {"cvs_node": "n2", "cvs_node_index": 1},
    }
    res = run(
        {"results_dir": str(tmp_path), "run_id": "r1", "checks": ["rvs"]},
        {"hostvars": hostvars, "groups": {"cvs_exec": ["h2", "h1"]}},
    )
    assert not res.get("failed"), res
    assert res["nodes"] == {"n1": {"rvs": "MISSING"}, "n2": {"rvs": "FAIL"}}
    assert res["summary"]["failing_nodes"] == ["n2"] and res["summary"]["incomplete_nodes"] == ["n1"]
    data = json.loads((tmp_path / "r1" / "results.json").read_text())
    assert data["nodes"]["n1"]["facts"] == {"kernel": "6.1", "gpus": 8}
    blocker = tmp_path / "f"
    blocker.write_text("")
    res = run({"results_dir": str(blocker), "probe": True}, {})
    assert res["failed"] and "cannot write run results to" in res["msg"]


def test_rewrite_keeps_checks_of_earlier_report(tmp_path: Path) -> None:
    write_report(str(tmp_path), "r", ["rvs", "maxtext"], NODES, complete=False)
    rec = write_report(str(tmp_path), "r", [], {})
    assert rec["checks"] == ["rvs", "maxtext"] and rec["summary"]["counts"]["MISSING"] == 0  # no nodes known
    rec = write_report(str(tmp_path), "r", [], NODES)
    assert rec["summary"]["counts"]["MISSING"] == 6 and rec["summary"]["status"] == "INCOMPLETE"


SSH_MSG = "Failed to connect to the host via ssh: ssh: connect to host 10.77.0.12 port 22: Connection refused"


def test_unreachable_reason_quotes_the_ssh_error() -> None:
    assert (
        unreachable_reason("node2", SSH_MSG)
        == "node2: unreachable: ssh: connect to host 10.77.0.12 port 22: Connection refused"
    )
    assert unreachable_reason("n", "timed out\n  waiting") == "n: unreachable: timed out waiting"
    ping = (
        'Task failed: Data could not be sent to remote host "10.77.0.12". Make sure this host can be reached '
        "over ssh: ssh: connect to host 10.77.0.12 port 22: Connection refused"
    )
    assert (
        unreachable_reason("n", ping) == "n: unreachable: ssh: connect to host 10.77.0.12 port 22: Connection refused"
    )
    assert unreachable_reason("n", None) == "n: unreachable: Ansible could not connect to the node"


def test_find_unreachable_in_registered_results() -> None:
    assert find_unreachable({"cvs_reach": {"ping": "pong", "changed": False}}) is None
    assert find_unreachable({"cvs_reach": {"unreachable": True, "msg": SSH_MSG}}) == SSH_MSG
    later = {"cvs_reach": {"ping": "pong"}, "_rvs_runs": {"unreachable": True, "msg": "x",
             "results": [{"unreachable": True, "msg": "ssh: lost"}]}}  # fmt: skip
    assert find_unreachable(later) == "ssh: lost"
    assert find_unreachable({"r": {"unreachable": False, "msg": "no"}, "s": "unreachable"}) is None


def test_absent_check_says_why() -> None:
    assert absent_check("rvs", "n1", {})["status"] == "MISSING"
    rec = absent_check("rvs", "n2", {"unreachable": SSH_MSG, "prepare_error": "x"})
    assert rec["status"] == "UNREACHABLE" and rec["reason"].startswith("n2: unreachable: ssh: connect to host")
    full = "Write: Failed to replace '/r/run/checks/n1/rvs.json' with b'/t/.source.json': [Errno 28] No space left"
    rec = absent_check("rvs", "n1", {"errors": {"rvs": full}})
    assert (
        rec["status"] == "ERROR"
        and rec["reason"] == "n1: rvs result not recorded: no space left on device: /r/run/checks/n1/rvs.json"
    )
    rec = absent_check("maxtext", "n3", {"prepare_error": "cvs.cluster.prepare failed on n2: n2: unreachable"})
    assert (
        rec["status"] == "ERROR"
        and rec["reason"] == "n3: maxtext not run: cvs.cluster.prepare failed on n2: n2: unreachable"
    )
    assert describe_write_error("Permission denied") == "Permission denied"
    assert describe_write_error("[Errno 28] No space left on device", "/r") == "no space left on device: /r"


def test_every_requested_node_is_a_row_and_unreachable_fails_the_run() -> None:
    groups = {"cvs_nodes": ["n1", "n2", "n3", "n4"], "cvs_head": ["n1"], "cvs_exec": ["n3-ctr", "n1-ctr"]}
    hostvars: dict[str, Any] = {
        "n1": {"cvs_reach": {"ping": "pong"}, "cvs_node_index": 0},
        "n2": {"cvs_reach": {"unreachable": True, "msg": SSH_MSG}},
        "n3": {"cvs_reach": {"ping": "pong"}, "cvs_node_index": 2},
        "n4": {},  # left out with --limit: never reached for
        "n1-ctr": {"cvs_node": "n1", "cvs_node_index": 0, "cvs_node_facts": {"kernel": "6.1"}},
        "n3-ctr": {"cvs_node": "n3", "cvs_node_index": 2, "cvs_check_errors": {"rvs": "[Errno 28] No space left"}},
    }
    nodes = run_nodes(groups, hostvars, hostvars.get)
    assert list(nodes) == ["n1", "n2", "n3"]
    assert nodes["n1"]["host"] == "n1-ctr" and nodes["n1"]["facts"] == {"kernel": "6.1"}
    assert nodes["n2"]["host"] == "n2" and nodes["n2"]["unreachable"] == SSH_MSG
    rec = aggregate("r", ["rvs"], nodes, {"n1": {"rvs": _ok("rvs", "n1")}})
    s = rec["summary"]
    assert s["status"] == "FAIL" and s["unreachable_nodes"] == ["n2"] and s["failing_nodes"] == ["n2", "n3"]
    assert s["counts"] == {"PASS": 1, "FAIL": 0, "ERROR": 1, "UNREACHABLE": 1, "MISSING": 0}
    st = stats(rec, "/res/r")
    assert st["nodes"] == {"n1": {"rvs": "PASS"}, "n2": {"rvs": "UNREACHABLE"}, "n3": {"rvs": "ERROR"}}
    line = verdict_line(rec, "/res/r")
    assert line.startswith("run r: FAIL - n1: PASS; n2: UNREACHABLE (rvs: n2: unreachable: ssh: connect to host")
    assert "n3: ERROR (rvs: n3: rvs result not recorded: no space left on device)" in line
    assert line.endswith(" - see /res/r/report.html")
    assert verdict_line(rec, "/res/r", "no space left on device: /res/r/results.json").endswith(
        " - the report could not be written: no space left on device: /res/r/results.json"
    )
    # without the probe: the workload hosts' nodes; without those: cvs_nodes; explicit lists win
    assert list(run_nodes({"cvs_nodes": ["a", "b"], "cvs_exec": ["b"]}, {})) == ["b"]
    assert list(run_nodes({"cvs_nodes": ["a", "b"], "cvs_head": ["b"]}, {})) == ["b", "a"]
    assert list(run_nodes(groups, hostvars, nodes=["n4", "n2"])) == ["n2", "n4"]
    assert list(run_nodes(groups, hostvars, hosts=["n1-ctr"])) == ["n1"]


def test_full_disk_keeps_the_record_and_names_the_path(tmp_path: Path) -> None:
    import errno
    from unittest.mock import patch

    enospc = OSError(errno.ENOSPC, "No space left on device")
    target = "ansible_collections.cvs.cluster.plugins.plugin_utils._report.record.atomic_write"
    with patch(target, side_effect=enospc), pytest.raises(ReportError) as info:
        write_report(str(tmp_path), "r", ["rvs"], NODES)
    assert str(info.value).startswith(f"no space left on device: cannot write {tmp_path}/r/results.json")
    assert info.value.record is not None and list(info.value.record["nodes"]) == list(NODES)
    full = rf"cannot write run results to {tmp_path}: no space left on device"
    with patch("os.fdopen", side_effect=enospc), pytest.raises(ReportError, match=full):
        ensure_writable(str(tmp_path))
