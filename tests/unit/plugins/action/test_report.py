"""The cvs.cluster.report action plugin driven in-process: a run whose dispose failed never reads PASS, and a verdict
check_result could not write is named with its write error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.cvs.cluster.plugins.action import report as action_mod
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA


class FakeTask:
    def __init__(self, args: dict) -> None:
        self.args = args
        self.check_mode = False
        self.async_val = 0
        self.action = "cvs.cluster.report"
        self._uuid = "task"


class FakeConnection:
    class _shell:
        tmpdir = "/nonexistent"

    become = None


NODES = ["node1", "node2"]


def run(tmp_path: Path, hostvars: dict[str, Any]) -> dict:
    loader = DataLoader()
    action = action_mod.ActionModule(
        FakeTask({"results_dir": str(tmp_path), "run_id": "r1", "checks": ["rvs"]}),
        FakeConnection(),
        PlayContext(),
        loader,
        Templar(loader=loader),
        None,
    )
    action._load_name = "cvs.cluster.report"
    groups = {"all": NODES, "cvs_nodes": NODES, "cvs_exec": NODES, "cvs_head": ["node1"]}
    values = {
        n: {"inventory_hostname": n, "cvs_node": n, "cvs_reach": {"ping": "pong"}, **hostvars.get(n, {})} for n in NODES
    }
    return action.run(task_vars={"groups": groups, "hostvars": values, "inventory_hostname": "localhost"})


def passed(tmp_path: Path, *nodes: str) -> None:
    for node in nodes:
        path = tmp_path / "r1" / "checks" / node / "rvs.json"
        path.parent.mkdir(parents=True)
        record = {"schema": SCHEMA, "check": "rvs", "node": node, "status": "PASS", "reason": "all passed"}
        path.write_text(json.dumps(record))


def test_a_run_whose_dispose_failed_reads_error_naming_the_nodes_and_the_tools_message(tmp_path: Path) -> None:
    passed(tmp_path, *NODES)
    error = "cancel the Slurm job cvs-r1: squeue: error: Unable to contact slurm controller (connect failure)"
    result = run(tmp_path, {n: {"cvs_dispose_error": error} for n in NODES})
    assert not result.get("failed"), result
    assert result["msg"].startswith(f"run r1: ERROR - dispose failed on node1, node2: {error} - checks: node1: PASS")
    assert "PASS -" not in result["msg"].split(" - checks: ")[0]
    assert result["summary"]["status"] == "ERROR"
    assert result["summary"]["dispose_errors"] == [{"node": n, "error": error} for n in NODES]
    on_disk = json.loads((tmp_path / "r1" / "results.json").read_text())
    assert on_disk["summary"]["status"] == "PASS", "results.json keeps the checks' own status"


def test_a_clean_dispose_leaves_the_verdict_alone(tmp_path: Path) -> None:
    passed(tmp_path, *NODES)
    result = run(tmp_path, {})
    assert result["msg"].startswith("run r1: PASS - node1: PASS; node2: PASS")
    assert result["summary"]["status"] == "PASS" and "dispose_errors" not in result["summary"]


def test_a_verdict_that_could_not_be_written_is_an_error_naming_the_write_error(tmp_path: Path) -> None:
    passed(tmp_path, "node1")
    error = "check_result: could not write into '/r/r1/checks/node2/rvs.json': [Errno 30] Read-only file system"
    unwritten = {"rvs": {"path": "/r/r1/checks/node2/rvs.json", "error": error, "record": {"status": "PASS"}}}
    result = run(tmp_path, {"node2": {"ansible_facts": {"cvs_unwritten_records": unwritten}}})
    assert result["nodes"]["node2"] == {"rvs": "ERROR"}, result["nodes"]
    assert "node2: rvs result not recorded" in result["msg"] and "Read-only file system" in result["msg"], result["msg"]
