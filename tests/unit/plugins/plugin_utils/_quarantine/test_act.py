"""Unit tests for plugin_utils/_quarantine/act.py: one pass over a run's results with a stand-in for the submit
host's scontrol (the action's ``execute``): drain, resume, check mode, Slurm unreachable, the files written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.act import quarantine
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.plan import QuarantineError

from .test_baseline import passing_results

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "slurm"
RUN = "20261207-220000-abcdef"


class FakeSlurm:
    """``scontrol`` as the submit host runs it: show node (the fixture's real lines) and update."""

    def __init__(self, states: dict[str, tuple[str, str]], refuse: str = "", down: bool = False) -> None:
        self.states, self.refuse, self.down, self.calls = states, refuse, down, []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        if self.down:
            return 1, "", "slurm_load_node error: Unable to contact slurm controller (connect failure)\n"
        if argv[1:3] == ["--oneliner", "show"]:
            lines = []
            for line in (FIXTURES / "show-node-3-idle.txt").read_text().splitlines():
                name = line.split()[0].split("=", 1)[1].replace("n", "node")
                state, reason = self.states.get(name, ("IDLE", ""))
                line = re.sub(r"State=\S+ ", f"State={state} ", line.split(" Reason=", 1)[0])
                line = line.replace(line.split()[0], f"NodeName={name}")
                lines.append(line + (f" Reason={reason} [root@2026-12-07T02:03:30]" if reason else ""))
            return 0, "\n".join(lines) + "\n", ""
        if self.refuse and f"NodeName={self.refuse}" in argv:
            return 1, "", "slurm_update error: Invalid node state specified\n"
        return 0, "", ""


def _write(tmp_path: Path, results: dict[str, Any]) -> Path:
    run = tmp_path / RUN
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({**results, "run_id": RUN}))
    return run


def _failing_node2() -> dict[str, Any]:
    results = passing_results(RUN)
    results["summary"]["status"] = "FAIL"
    results["nodes"]["node2"]["checks"]["rvs"] = {"status": "FAIL", "reason": "node2: rvs test gst_single FAIL"}
    return results


def _args(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"results_dir": str(tmp_path), "run_id": RUN, "slurm": True, **extra}


def test_drain_runs_one_show_and_one_update_and_keeps_an_admins_drain(tmp_path: Path) -> None:
    run = _write(tmp_path, _failing_node2())
    slurm = FakeSlurm({"node3": ("IDLE+DRAIN", "bad fan")})
    result = quarantine(_args(tmp_path, mode="drain"), slurm)
    assert not result.get("failed") and result["changed"]
    assert slurm.calls == [
        ["scontrol", "--oneliner", "show", "node", "node1,node2,node3"],
        ["scontrol", "update", "NodeName=node2", "State=DRAIN", f"Reason=cvs: rvs: test gst_single FAIL (run {RUN})"],
    ]
    assert f"node2: drained (Reason=cvs: rvs: test gst_single FAIL (run {RUN}))" in result["lines"]
    assert "node3: keep: passed, but IDLE+DRAIN by an admin (bad fan): left drained" in result["lines"]
    saved = json.loads((run / "quarantine.json").read_text())
    assert saved["mode"] == "drain" and [a["done"] for a in saved["actions"]] == [False, True, False]
    assert result["baseline"] is None and "did not pass" in result["baseline_note"]


def test_report_mode_and_check_mode_change_nothing_and_show_the_diff(tmp_path: Path) -> None:
    run = _write(tmp_path, _failing_node2())
    slurm = FakeSlurm({})
    report = quarantine(_args(tmp_path), slurm)
    assert len(slurm.calls) == 1 and not report["changed"]
    assert report["lines"][-1] == "cvs_quarantine is report (a dry run): set cvs_quarantine=drain to act"
    assert "node2: would drain" in report["msg"]
    (run / "quarantine.json").unlink()
    checked = quarantine(_args(tmp_path, mode="drain"), slurm, check_mode=True)
    assert len(slurm.calls) == 2 and checked["changed"], "check mode reads Slurm, updates nothing"
    assert checked["diff"] == {
        "before": "node2: State=IDLE Reason=(null)\n",
        "after": f"node2: State=DRAIN Reason=cvs: rvs: test gst_single FAIL (run {RUN})\n",
    }
    assert not (run / "quarantine.json").exists(), "check mode writes nothing"


def test_a_passing_run_writes_its_baseline_and_resumes_only_our_drains(tmp_path: Path) -> None:
    run = _write(tmp_path, passing_results(RUN))
    slurm = FakeSlurm(
        {"node2": ("IDLE+DRAIN", "cvs: rvs: test gst_single FAIL (run r0)"), "node3": ("IDLE+DRAIN", "bad fan")}
    )
    result = quarantine(_args(tmp_path, mode="drain", cluster_name="sim"), slurm, now="2026-12-07T22:00:00Z")
    assert slurm.calls[1:] == [["scontrol", "update", "NodeName=node2", "State=RESUME"]]
    baseline = json.loads((run / "baseline.json").read_text())
    assert result["baseline"] == str(run / "baseline.json") and baseline["cluster"]["name"] == "sim"
    assert baseline["run_id"] == RUN and baseline["created"] == "2026-12-07T22:00:00Z"


def test_slurm_unreachable_while_draining_names_the_nodes_not_drained_and_fails(tmp_path: Path) -> None:
    _write(tmp_path, _failing_node2())
    result = quarantine(_args(tmp_path, mode="drain"), FakeSlurm({}, down=True))
    assert result["failed"]
    assert result["msg"] == (
        f"run {RUN}: Slurm could not be asked about node1, node2, node3: slurm_load_node error: Unable to contact "
        "slurm controller (connect failure); not drained: node2"
    )
    report = quarantine(_args(tmp_path), FakeSlurm({}, down=True))
    assert not report["failed"], "a dry run does not fail for it"


def test_an_update_slurm_refuses_fails_naming_the_node_and_slurms_words(tmp_path: Path) -> None:
    _write(tmp_path, _failing_node2())
    result = quarantine(_args(tmp_path, mode="drain"), FakeSlurm({}, refuse="node2"))
    assert result["failed"] and result["not_done"] == [
        "node2: not drained: slurm_update error: Invalid node state specified"
    ]


def test_without_slurm_the_report_names_the_nodes_and_the_group(tmp_path: Path) -> None:
    _write(tmp_path, _failing_node2())
    calls: list[Any] = []
    result = quarantine(_args(tmp_path, slurm=False, group="out"), lambda argv: calls.append(argv) or (0, "", ""))
    assert calls == [] and result["take_out"] == [{"node": "node2", "check": "rvs", "why": "test gst_single FAIL"}]
    assert "node2: take out of the run's inventory, into group out (rvs: test gst_single FAIL)" in result["msg"]


def test_off_writes_only_the_baseline_and_a_run_directory_may_be_named(tmp_path: Path) -> None:
    run = _write(tmp_path, passing_results(RUN))
    result = quarantine({"results_dir": "/elsewhere", "run_id": str(run) + "/", "mode": "off"}, lambda a: (1, "", ""))
    assert result["msg"].startswith("cvs_quarantine is off") and (run / "baseline.json").exists()
    assert not (run / "quarantine.json").exists()


def test_a_missing_run_is_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(QuarantineError, match=f"cannot read run nope's results {tmp_path}/nope/results.json"):
        quarantine({"results_dir": str(tmp_path), "run_id": "nope"}, lambda a: (0, "", ""))
