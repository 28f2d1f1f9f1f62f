"""The cvs.cluster.check_result action plugin driven in-process (no Ansible run): it writes, refuses, checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.cvs.cluster.plugins.action import check_result as action_mod
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA


class FakeTask:
    def __init__(self, args: dict, check_mode: bool = False) -> None:
        self.args = args
        self.check_mode = check_mode
        self.async_val = 0
        self.action = "cvs.cluster.check_result"
        self._uuid = "task"


class FakeConnection:
    class _shell:
        tmpdir = "/nonexistent"

    become = None


def run(args: dict, check_mode: bool = False, **task_vars: Any) -> dict:
    loader = DataLoader()
    templar = Templar(loader=loader)
    action = action_mod.ActionModule(FakeTask(args, check_mode), FakeConnection(), PlayContext(), loader, templar, None)
    action._load_name = "cvs.cluster.check_result"
    return action.run(task_vars={"inventory_hostname": "host-a", **task_vars})


def args(tmp_path: Path, **record: Any) -> dict:
    return {"results_dir": str(tmp_path), "run_id": "r1", "check": "inference",
            "record": {"status": "PASS", "reason": "ok", **record}}  # fmt: skip


def test_writes_the_record_under_the_node_and_says_so_once(tmp_path: Path) -> None:
    result = run(args(tmp_path, benchmark={"rps": 3}), cvs_node="node1")
    path = tmp_path / "r1" / "checks" / "node1" / "inference.json"
    assert result["path"] == str(path) and result["changed"] and not result.get("failed")
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA and data["node"] == "node1" and data["check"] == "inference"
    assert data["benchmark"] == {"rps": 3}
    assert run(args(tmp_path, benchmark={"rps": 3}), cvs_node="node1")["changed"] is False
    assert [p.name for p in path.parent.iterdir()] == ["inference.json"]  # no temporary file left


def test_an_invalid_record_fails_naming_the_field_and_writes_nothing(tmp_path: Path) -> None:
    result = run(args(tmp_path, metrics=[{"metric": "rps", "value": "fast"}]))
    assert result["failed"]
    assert result["msg"] == (
        "check_result: the 'inference' record of host-a is invalid: metrics[0].value: must be a number, a boolean, "
        "a list of numbers or null, got 'fast'"
    )
    assert not (tmp_path / "r1").exists()


def test_check_mode_writes_nothing(tmp_path: Path) -> None:
    result = run(args(tmp_path), check_mode=True, cvs_node="node1")
    assert result["changed"] and result["status"] == "PASS" and not (tmp_path / "r1").exists()


def test_a_node_name_with_a_slash_stays_one_directory(tmp_path: Path) -> None:
    result = run(dict(args(tmp_path), node="rack1/node1"))
    assert Path(result["path"]).parent == tmp_path / "r1" / "checks" / "rack1%2Fnode1"


def test_an_unwritable_results_dir_keeps_the_verdict_as_a_fact_without_failing_the_host(tmp_path: Path) -> None:
    """A failed host would skip dispose: the write error is returned, the record kept in full for the end."""
    blocker = tmp_path / "r1"
    blocker.write_text("a file where the run directory should be")
    path = f"{blocker}/checks/node1/inference.json"
    earlier = {"rvs": {"path": "/x/rvs.json", "error": "e", "record": {"status": "PASS"}}}
    result = run(
        args(tmp_path, benchmark={"rps": 3}), cvs_node="node1", ansible_facts={"cvs_unwritten_records": earlier}
    )
    assert not result.get("failed") and result["changed"] is False
    assert result["write_error"] == f"check_result: could not write into '{path}': [Errno 20] Not a directory"
    assert result["warnings"] == [
        result["write_error"] + "; the inference verdict of node1 is printed in full at the end of the run"
    ]
    kept = result["ansible_facts"]["cvs_unwritten_records"]
    assert kept["rvs"] == earlier["rvs"], "a verdict kept before is kept"
    entry = kept["inference"]
    assert entry["path"] == path and entry["error"] == result["write_error"]
    assert entry["record"]["benchmark"] == {"rps": 3} and entry["record"]["node"] == "node1"
    assert entry["record"]["status"] == "PASS" and entry["record"]["schema"] == SCHEMA
    assert blocker.read_text() == "a file where the run directory should be"


def test_a_written_record_sets_no_fact(tmp_path: Path) -> None:
    result = run(args(tmp_path), cvs_node="node1")
    assert "ansible_facts" not in result and "write_error" not in result


def test_the_fields_every_suite_shares_come_from_the_run_variables(tmp_path: Path) -> None:
    job = {"id": "42", "name": "cvs-r1", "nodes": ["node1"]}
    steps = [{"id": "42.0", "name": "rvs gpup", "state": "COMPLETED", "exit_code": 0, "nodes": ["node1"]}]
    result = run({"check": "inference", "record": {"status": "PASS", "reason": "ok"}, "steps": steps},
                 cvs_node="node1", cvs_results_dir=str(tmp_path), cvs_run_id="r1", cvs_backend="slurm",
                 cvs_slurm_job=job)  # fmt: skip
    data = json.loads(Path(result["path"]).read_text())
    assert data["host"] == "host-a" and data["backend"] == "slurm"
    assert data["scheduler"] == {"type": "slurm", "job_id": "42", "job_name": "cvs-r1", "steps": steps}
    assert data["finished"].endswith("Z") and len(data["finished"]) == 20
    again = run({"check": "inference", "record": {"status": "PASS", "reason": "ok"}, "steps": steps},
                cvs_node="node1", cvs_results_dir=str(tmp_path), cvs_run_id="r1", cvs_backend="slurm",
                cvs_slurm_job=job)  # fmt: skip
    assert again["changed"] is False  # the first write's time is kept for the same record


def test_a_record_own_fields_win_and_no_job_means_no_scheduler(tmp_path: Path) -> None:
    result = run(args(tmp_path, host="other", backend="container", finished="2026-01-31T12:00:00Z"))
    data = json.loads(Path(result["path"]).read_text())
    assert (data["host"], data["backend"], data["finished"]) == ("other", "container", "2026-01-31T12:00:00Z")
    assert data["scheduler"] is None


def test_without_results_dir_or_run_id_the_task_says_which_variable_is_missing(tmp_path: Path) -> None:
    result = run({"check": "inference", "record": {"status": "PASS", "reason": "ok"}}, cvs_run_id="r1")
    assert result["failed"] and result["msg"] == "check_result: results_dir is not set and neither is cvs_results_dir"
