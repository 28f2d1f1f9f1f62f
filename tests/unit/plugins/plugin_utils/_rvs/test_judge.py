"""One verdict per RVS run (plugin_utils/_rvs/judge.py, filter rvs_judge), also over the rvs stand-in's output."""

from __future__ import annotations

import subprocess

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.rvs_parse import FilterModule
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.judge import judge_rvs
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.parse import parse_rvs_output
from ansible_collections.cvs.cluster.tests.unit.plugins.plugin_utils.rvs_samples import (
    CONF,
    GPU_IDS,
    gst_current,
    run_stand_in,
)

# ---------------------------------------------------------------- verdict rules, rc


@pytest.mark.parametrize("text", ["", "\n\n", "ROCm Validation Suite\nloading modules\ndone\n"])
def test_unparseable_output_is_error(text):
    summary = judge_rvs(text, 0, "gst_single")
    assert summary["status"] == "ERROR" and summary["passed"] is False
    assert summary["reason"].startswith("unparseable output")
    assert summary["parsed"] == 0 and summary["test"] == "gst_single" and summary["rc"] == 0


def test_nonzero_rc_with_no_results_is_error_naming_rc():
    summary = judge_rvs("bash: /opt/rocm/bin/rvs: No such file or directory\n", 127, "gst_single")
    assert summary["status"] == "ERROR"
    assert "rc 127" in summary["reason"]
    assert summary["rc"] == 127


def test_nonzero_rc_never_passes_but_zero_rc_does_not_pass_failures():
    assert judge_rvs(gst_current(), 1, "t")["status"] == "ERROR"
    assert "rc 1 " in judge_rvs(gst_current(), 1, "t")["reason"]
    failing = gst_current(fail={42583: (1, "FALSE")})
    assert judge_rvs(failing, 0, "t")["status"] == "FAIL"
    assert judge_rvs(failing, 3, "t")["status"] == "FAIL"
    assert judge_rvs(gst_current(), None, "t")["status"] == "PASS"
    assert judge_rvs(gst_current(), "0", "t")["status"] == "PASS"
    with pytest.raises(ValueError, match="rc must be an integer"):
        judge_rvs(gst_current(), "zero", "t")


# ---------------------------------------------------------------- filters


FILTERS = FilterModule().filters()


def test_filter_rvs_judge_uses_registered_rc_unless_given():
    registered = {"rc": 2, "stdout": "", "stderr": "", "failed": True}
    summary = FILTERS["rvs_judge"](registered, test="gst_single")
    assert summary["status"] == "ERROR" and "rc 2" in summary["reason"] and summary["test"] == "gst_single"
    passing = {"rc": 0, "stdout": gst_current(), "stderr": ""}
    assert FILTERS["rvs_judge"](passing)["status"] == "PASS"
    assert FILTERS["rvs_judge"](passing, 1)["status"] == "ERROR"
    assert FILTERS["rvs_judge"](gst_current(), 0, "x", ["met: TRUE"])["status"] == "FAIL"


def test_filter_errors_are_ansible_filter_errors():
    with pytest.raises(AnsibleFilterError, match=r"invalid fail pattern '\(oops': missing \)"):
        FILTERS["rvs_judge"]("text", 0, "t", ["(oops"])
    with pytest.raises(AnsibleFilterError, match=r"rvs_parse: .*invalid fail pattern"):
        FILTERS["rvs_parse"]("text", ["[x"])
    with pytest.raises(AnsibleFilterError, match="expected RVS output"):
        FILTERS["rvs_parse"](42)
    with pytest.raises(AnsibleFilterError, match="without stdout/stderr"):
        FILTERS["rvs_judge"]({"foo": "bar"})
    with pytest.raises(AnsibleFilterError, match="rc must be an integer"):
        FILTERS["rvs_judge"]("x", True)
    with pytest.raises(AnsibleFilterError, match="rc must be an integer"):
        FILTERS["rvs_judge"]("x", "abc")
    with pytest.raises(AnsibleFilterError, match="fail_patterns must be a list"):
        FILTERS["rvs_judge"]("x", 0, "t", 5)
    with pytest.raises(AnsibleFilterError, match=r"invalid fail pattern 'hang' \(1\): expected a string"):
        FILTERS["rvs_judge"]("x", 0, "t", {"hang": 1})


# ---------------------------------------------------------------- the rvs stand-in, judged


def judged(result: subprocess.CompletedProcess, test: str) -> dict:
    return judge_rvs(result.stdout + result.stderr, result.returncode, test)


@pytest.mark.parametrize(
    "conf",
    sorted(p.relative_to(CONF).as_posix() for p in CONF.rglob("*.conf") if "levels" not in p.parts),
)
def test_stand_in_every_conf_passes_healthy(tmp_path, conf):
    result = run_stand_in(tmp_path, ["-c", str(CONF / conf)], {})
    assert result.returncode == 0, result.stderr
    assert "stand-in" not in (result.stdout + result.stderr).lower()
    summary = judged(result, conf)
    assert summary["status"] == "PASS", summary["failures"][:3]
    assert "ROCm Validation Suite (RVS) Summary" in result.stdout


def test_stand_in_fail_injection_gst_gpu2_still_exits_0(tmp_path):
    result = run_stand_in(
        tmp_path, ["-c", str(CONF / "MI300X" / "gst_single.conf")], {"fail": ["gst_single"], "fail_gpu": 2}
    )
    assert result.returncode == 0
    assert "met: FALSE" in result.stdout
    summary = judged(result, "gst_single")
    assert summary["status"] == "FAIL"
    assert {f["gpu"] for f in summary["failures"] if f["gpu"] is not None} == {36479}
    assert {f["reason"].split(":")[0] for f in summary["failures"]} >= {"RVS-ERROR", "RVS summary"}


def test_stand_in_old_version_prints_old_gst_format_without_box(tmp_path):
    faults = {"version": "1.1.0", "fail": ["gst"], "fail_gpu": 57875}
    result = run_stand_in(tmp_path, ["-c", str(CONF / "MI300X" / "gst_single.conf")], faults)
    assert " Gflop: " in result.stdout and "pass: FALSE" in result.stdout and "met:" not in result.stdout
    assert "Summary" not in result.stdout
    summary = judged(result, "gst_single")
    assert [f["gpu"] for f in summary["failures"]] == [57875]
    level = run_stand_in(tmp_path, ["-r", "1"], faults)
    assert level.returncode != 0 and "RVS-ERROR" in level.stderr


def test_stand_in_level_mode_package_checks(tmp_path):
    healthy = run_stand_in(tmp_path, ["-r", "1"], {})
    assert "Missing packages             : 0" in healthy.stdout
    assert judged(healthy, "level1")["status"] == "PASS"
    broken = run_stand_in(tmp_path, ["-r", "2"], {"missing_packages": 2, "version_mismatch_packages": 1})
    assert "Missing packages             : 2" in broken.stdout
    summary = judged(broken, "level2")
    assert summary["status"] == "FAIL"
    reasons = [f["reason"] for f in summary["failures"]]
    assert "Missing packages: 2" in reasons and "Version mismatch packages: 1" in reasons
    rows = [r for r in parse_rvs_output(broken.stdout) if r["kind"] == "summary"]
    assert [r["action"] for r in rows] == [
        "metapackage-validation",
        "pcie_capability",
        "hbm_basic",
        "xgmi_interface",
        "pcie_interface",
    ]


def test_stand_in_hang_and_exit_code(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired) as info:
        run_stand_in(tmp_path, ["-c", str(CONF / "MI300X" / "iet_stress.conf")], {"hang": ["iet_stress"]}, timeout=3)
    partial = info.value.stdout or b""
    partial = partial.decode() if isinstance(partial, bytes) else partial
    assert "Power(W)" in partial
    summary = judge_rvs(partial, None, "iet_stress")
    assert summary["status"] == "FAIL" and {r["gpu"] for r in summary["failures"]} == set(GPU_IDS)
    result = run_stand_in(tmp_path, ["-c", str(CONF / "peqt_single.conf")], {"exit_code": 3})
    assert result.returncode == 3 and judged(result, "peqt")["status"] == "ERROR"
