"""Unit tests: run results and reports (plugin_utils/_report.py, action cvs.cluster.report)."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema

from ansible_collections.cvs.cluster.plugins.plugin_utils._report import (
    ReportError,
    aggregate,
    duration,
    normalise_check,
    read_checks,
    stats,
    to_html,
    to_junit,
    write_report,
)

REPO = Path(__file__).resolve().parents[2]
XSD = REPO / "tests" / "integration" / "fixtures" / "report" / "junit.xsd"
EVIL = "<script>alert('x')</script> & \"q\" \x01"

RVS_FAIL: dict[str, Any] = {
    "check": "rvs",
    "node": "node2",
    "status": "FAIL",
    "reason": "node2: rvs test gst_single FAIL",
    "rvs_version": "1.3.0",
    "config_folder": "MI300X",
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


def _ok(check: str, node: str, **extra: Any) -> dict[str, Any]:
    return {
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
    assert s["counts"] == {"PASS": 4, "FAIL": 1, "ERROR": 0, "MISSING": 1}
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
    (tmp_path / "r1" / "checks" / "n2" / "rvs.json").write_text(json.dumps(RVS_FAIL))
    hostvars = {
        "h1": {"cvs_node": "n1", "cvs_node_index": 0, "ansible_kernel": "6.1", "cvs_gpu_nodes": {"matched": 8}},
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
