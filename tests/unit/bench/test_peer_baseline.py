"""The peer baseline of bench/orchestration_tax.py (bench/_peer_baseline.py): the RVS suite's steps as upstream CVS
issues them, one command for every host per step. The commands run here under bash on the rvs / amd-smi
stand-ins, as parallel-ssh would run them on a node."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _peer_baseline import (
    RUN_DIR,
    HostResult,
    RvsSettings,
    RvsTest,
    host_command,
    load_role_settings,
    plan_from_records,
    role_settings,
    run_statuses,
    step_failures,
    suite_steps,
)

REPO = Path(__file__).resolve().parents[3]
STAND_INS = REPO / "tests" / "cluster" / "image" / "stand-ins" / "opt" / "rocm" / "bin"
LEVEL4 = {"name": "level4", "command": "/opt/rocm/bin/rvs -r 4", "timeout": 1800, "duration": "0:00:00.081"}


def record(node: str, *tests: dict) -> dict:
    return {"node": node, "status": "PASS", "tests": list(tests)}


def test_role_settings_come_from_the_role_defaults():
    settings = load_role_settings(REPO)
    assert settings == RvsSettings("/opt/rocm/lib", "/opt/rocm/bin/amd-smi", 10)


def test_role_settings_name_the_missing_default():
    with pytest.raises(KeyError, match="no rvs_amd_smi_path, rvs_kill_grace"):
        role_settings({"rvs_rocm_runtime_lib_path": "/opt/rocm/lib"})


def test_plan_from_records_reads_the_plan_every_host_ran():
    gst = {"name": "gst_single", "command": "'/opt/my rocm/rvs' -c /c/gst_single.conf", "timeout": "600"}
    tests = plan_from_records([record("n1", gst, LEVEL4), record("n2", gst, LEVEL4)])
    assert tests == [
        RvsTest("gst_single", ("/opt/my rocm/rvs", "-c", "/c/gst_single.conf"), 600),
        RvsTest("level4", ("/opt/rocm/bin/rvs", "-r", "4"), 1800),
    ]


def test_plan_from_records_refuses_different_plans_and_no_test():
    with pytest.raises(ValueError, match=r"different RVS plans \(level4 on 2 host\(s\); none on 1 host\(s\)\)"):
        plan_from_records([record("n1", LEVEL4), record("n2", LEVEL4), record("n3")])
    with pytest.raises(ValueError, match="no RVS test"):
        plan_from_records([record("n1"), record("n2")])
    with pytest.raises(ValueError, match="no RVS test"):
        plan_from_records([])


def test_suite_steps_for_a_level_run():
    steps = suite_steps([RvsTest("level4", ("/opt/rocm/bin/rvs", "-r", "4"), 1800)], load_role_settings(REPO))
    assert [(s.name, s.phase, s.read_timeout) for s in steps] == [
        ("rvs --version", "probe", 30),
        ("amd-smi static", "probe", 30),
        ("write the config", "write_config", 60),
        ("run level4", "run", 1870),
        ("read the outputs", "read_outputs", 60),
        ("clean up", "cleanup", 60),
    ]
    assert steps[0].command == "LD_LIBRARY_PATH=/opt/rocm/lib /opt/rocm/bin/rvs --version"
    assert steps[1].command == "/opt/rocm/bin/amd-smi static -a -g 0 --json"
    assert "LD_LIBRARY_PATH=/opt/rocm/lib timeout -k 10 1800 /opt/rocm/bin/rvs -r 4 >" in steps[3].command


def test_host_command_quotes_the_run_directory():
    step = suite_steps([RvsTest("level4", ("/x/rvs", "-r", "4"), 5)], RvsSettings("/l", "/a", 1))[-1]
    assert step.command == f"rm -rf {RUN_DIR}"
    assert host_command(step, "/var/tmp/b e/h000") == "rm -rf '/var/tmp/b e/h000'"


def run_step(command: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "CVS_STAND_IN_DIR": str(tmp_path / "faults")}
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120, check=False)


def test_the_steps_run_the_suite_on_the_stand_ins(tmp_path):
    tests = [
        RvsTest("level1", (str(STAND_INS / "rvs"), "-r", "1"), 60),
        RvsTest("gpu list", (str(STAND_INS / "rvs"), "-g"), 60),
    ]
    run_dir = str(tmp_path / "run dir" / "h000")
    out = {}
    for step in suite_steps(tests, RvsSettings("/nonexistent lib", str(STAND_INS / "amd-smi"), 2)):
        proc = run_step(host_command(step, run_dir), tmp_path)
        assert proc.returncode == 0, (step.name, proc.stderr)
        out[step.name] = proc.stdout
        if step.phase == "write_config":
            plan = json.loads((Path(run_dir) / "rvs-plan.json").read_text())
            assert plan == [{"name": t.name, "argv": list(t.argv), "timeout": 60} for t in tests]
    assert out["rvs --version"] == "1.3.0\n"
    assert json.loads(out["amd-smi static"])[0]["asic"]["market_name"] == "AMD Instinct MI300X"
    statuses = run_statuses(out["read the outputs"], len(tests))
    assert [rc for rc, _seconds in statuses] == [0, 0]
    assert all(0 < seconds < 60 for _rc, seconds in statuses)
    assert "Supported GPUs available:" in out["read the outputs"]
    assert "RVS" in out["read the outputs"]
    assert not Path(run_dir).exists()


def test_a_test_past_its_timeout_is_killed_and_read_as_124(tmp_path):
    (tmp_path / "faults").mkdir()
    (tmp_path / "faults" / "rvs.json").write_text(json.dumps({"hang": ["all"]}))
    tests = [RvsTest("level1", (str(STAND_INS / "rvs"), "-r", "1"), 1)]
    run_dir = str(tmp_path / "h000")
    steps = {s.phase: s for s in suite_steps(tests, RvsSettings("/l", str(STAND_INS / "amd-smi"), 1))}
    for phase in ("write_config", "run", "read_outputs"):
        proc = run_step(host_command(steps[phase], run_dir), tmp_path)
        assert proc.returncode == 0, proc.stderr
    [(rc, seconds)] = run_statuses(proc.stdout, 1)
    assert rc == 124 and 1 <= seconds < 10


def test_run_statuses_refuses_what_is_not_a_status_line():
    assert run_statuses("0 100.5 102.75\n124 1 2.5\nrvs output\n", 2) == [(0, 2.25), (124, 1.5)]
    with pytest.raises(ValueError, match="not an exit status line of a test: 'rvs output'"):
        run_statuses("0 1 2\nrvs output\n", 2)
    with pytest.raises(ValueError, match="2 exit status line"):
        run_statuses("0 1 2\n", 2)


def test_step_failures_name_each_host_and_why():
    results = [
        HostResult("h000", "", 0, None),
        HostResult("h001", "", 2, None),
        HostResult("h002", "", None, "Timeout: read timeout"),
    ]
    assert step_failures(results) == ["h001: exit status 2", "h002: Timeout: read timeout"]
    assert step_failures(results[:1]) == []
