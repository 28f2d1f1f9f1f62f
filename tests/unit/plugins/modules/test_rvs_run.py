"""Module rvs_run (and its node code, module_utils/_rvs_run.py) on this machine's real processes: tests run one
after another, each cut at its timeout or deadline, also with the rvs stand-in of the test image hanging."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.module_utils import _rvs_run as runner
from ansible_collections.cvs.cluster.plugins.modules import rvs_run
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.judge import judge_rvs
from ansible_collections.cvs.cluster.tests.unit.plugins.plugin_utils.rvs_samples import CONF, RVS_BIN

DELTA = re.compile(r"\d+:\d\d:\d\d\.\d{6}")
# where ansible_collections is, for the module run as its own process
COLLECTIONS = str(Path(rvs_run.__file__).parents[5])


def test_each_test_runs_in_order_with_its_exit_status_output_and_duration() -> None:
    results = runner.run_tests([
        {"name": "a", "argv": ["sh", "-c", "echo out; echo err >&2; exit 3"], "deadline": 30},
        {"name": "b", "argv": ["printf", "x\\n\\n"], "deadline": 30},
    ])  # fmt: skip
    assert [r["name"] for r in results] == ["a", "b"]
    a, b = results
    assert (a["rc"], a["stdout"], a["stderr"], a["msg"]) == (3, "out", "err", None)
    assert (b["rc"], b["stdout"]) == (0, "x")  # trailing newlines dropped, as ansible.builtin.command does
    assert DELTA.fullmatch(a["delta"]) and DELTA.fullmatch(b["delta"])


def test_timeout_kills_an_overrunning_test_and_the_next_test_runs() -> None:
    started = time.monotonic()
    hung, after = runner.run_tests([
        {"name": "hung", "argv": ["timeout", "-k", "1", "1", "sh", "-c", "echo begun; exec sleep 30"], "deadline": 30},
        {"name": "after", "argv": ["echo", "ran"], "deadline": 30},
    ])  # fmt: skip
    assert hung["rc"] == 124 and hung["stdout"] == "begun" and hung["msg"] is None
    assert after["rc"] == 0 and after["stdout"] == "ran"
    assert time.monotonic() - started < 10


def test_a_test_still_running_at_its_deadline_is_killed_and_not_waited_for() -> None:
    started = time.monotonic()
    (late,) = runner.run_tests([{"name": "late", "argv": ["sh", "-c", "echo partial; exec sleep 30"], "deadline": 1}])
    assert late["rc"] is None and late["stdout"] == "partial"
    assert late["msg"] == "still running 1 s after it started; killed and not waited for"
    assert time.monotonic() - started < 10


def test_a_missing_program_is_reported_without_exit_status(tmp_path: Path) -> None:
    (missing,) = runner.run_tests([{"name": "x", "argv": [str(tmp_path / "nope")], "deadline": 5}])
    assert missing["rc"] is None and missing["msg"] == f"{tmp_path / 'nope'}: No such file or directory"


def test_the_hanging_stand_in_is_cut_and_its_partial_output_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rvs.json").write_text(json.dumps({"hang": ["iet_stress"]}))
    monkeypatch.setenv("CVS_STAND_IN_DIR", str(tmp_path))
    rvs = [sys.executable, str(RVS_BIN)]
    iet_conf = str(CONF / "MI300X" / "iet_stress.conf")
    iet, mem = runner.run_tests([
        {"name": "iet_stress", "argv": ["timeout", "-k", "1", "2", *rvs, "-c", iet_conf], "deadline": 30},
        {"name": "mem", "argv": ["timeout", "-k", "1", "30", *rvs, "-c", str(CONF / "mem.conf")], "deadline": 60},
    ])  # fmt: skip
    assert iet["rc"] == 124 and "[RESULT]" in iet["stdout"]
    assert mem["rc"] == 0 and judge_rvs(mem["stdout"], mem["rc"], "mem")["status"] == "PASS"


def test_the_module_takes_the_plan_commands_and_passes_the_environment_on(tmp_path: Path) -> None:
    args = tmp_path / "args.json"
    tests = [{"name": "env", "argv": ["sh", "-c", 'echo "$CVS_RUN_ID"'], "deadline": 30}]
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"tests": tests}}))
    done = subprocess.run([sys.executable, rvs_run.__file__, str(args)], capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin", "CVS_RUN_ID": "run-42", "PYTHONPATH": COLLECTIONS})  # fmt: skip
    result = json.loads(done.stdout)
    assert result["changed"] is False
    assert [(r["name"], r["rc"], r["stdout"]) for r in result["results"]] == [("env", 0, "run-42")]


def test_the_module_refuses_a_test_without_argv(tmp_path: Path) -> None:
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"tests": [{"name": "x", "deadline": 1}]}}))
    done = subprocess.run([sys.executable, rvs_run.__file__, str(args)], capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": COLLECTIONS})  # fmt: skip
    result = json.loads(done.stdout)
    assert result["failed"] is True and "argv" in result["msg"]


def test_garbage_output_comes_back_bounded_valid_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in's noise fault (issue 37): 50 MB of NUL bytes without a newline before a healthy run. The result
    is small, its JSON valid, the cut counted; a short burst of invalid UTF-8 is replaced and nothing is cut."""
    (tmp_path / "rvs.json").write_text(json.dumps({"noise": {"bytes": "nul", "size": 50_000_000, "newline": False}}))
    monkeypatch.setenv("CVS_STAND_IN_DIR", str(tmp_path))
    mem = [sys.executable, str(RVS_BIN), "-c", str(CONF / "mem.conf")]
    (big,) = runner.run_tests([{"name": "mem", "argv": mem, "deadline": 60}])
    assert big["rc"] == 0 and big["stdout_cut"] > 49_000_000 and big["stderr_cut"] == 0
    assert len(json.dumps(big)) < 200_000 and "\0" not in big["stdout"]
    assert "bytes cut here]" in big["stdout"] and "Summary" in big["stdout"]  # the tail, RVS's own end, is kept
    (tmp_path / "rvs.json").write_text(json.dumps({"noise": {"bytes": "invalid_utf8", "size": 1024}}))
    (small,) = runner.run_tests([{"name": "mem", "argv": mem, "deadline": 60}])
    assert small["stdout_cut"] == 0 and "\ufffd" in small["stdout"]
    assert judge_rvs(small["stdout"], small["rc"], "mem")["status"] == "PASS"
