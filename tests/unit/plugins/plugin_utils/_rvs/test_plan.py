"""Unit tests of plugin_utils/_rvs/plan.py: the rvs role's settings check and the plan of a node's run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.plan import (
    ASYNC_MARGIN,
    STEP_MARGIN,
    check_settings,
    plan_run,
    unknown_tests,
)

DEFAULTS = yaml.safe_load((Path(__file__).resolve().parents[5] / "roles" / "rvs" / "defaults" / "main.yml").read_text())
KNOWN = DEFAULTS["rvs_known_tests"]
CONF = "/opt/rocm/share/rocm-validation-suite/conf"
AMD_SMI = '[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X"}}]'


def role(**changes: Any) -> dict[str, Any]:
    """The role variables as check.yml passes them, the defaults changed by ``changes``."""
    given = {
        k: v for k, v in DEFAULTS.items() if k not in ("rvs_results_dir", "rvs_fail_on_error", "rvs_poll_interval")
    }
    given.update(changes)
    return given


def probe(version: str = "1.3.0", folder_files: tuple[str, ...] = (), common_files: tuple[str, ...] = ()) -> dict:
    """An rvs_probe result: rvs usable, its version, an MI300X, the configuration files found."""
    configs = [f"{CONF}/MI300X/{f}" for f in folder_files] + [f"{CONF}/{f}" for f in common_files]
    return {
        "rvs": {"path": "/opt/rocm/bin/rvs", "usable": True},
        "version": {"rc": 0, "stdout": f"{version}\n", "stderr": "", "problem": None},
        "amd_smi": {"rc": 0, "stdout": AMD_SMI, "stderr": "", "problem": None},
        "configs": configs,
    }


# ---------------------------------------------------------------- settings check


def test_defaults_pass_with_the_level_run_and_the_seven_tests() -> None:
    s = check_settings(role(), None, "node1")
    assert s["problem"] is None and s["ignored"] == []
    assert (s["path"], s["library_path"], s["config_dir"]) == ("/opt/rocm/bin/rvs", "/opt/rocm/lib", CONF)
    assert s["level"] == "4" and s["kill_grace"] == 10
    assert [t["name"] for t in s["tests"]] == ["mem", "gst_single", "iet_stress", "pebb_single", "pbqt_single",
                                                "babel_stream", "peqt"]  # fmt: skip
    assert s["tests"][5] == {"name": "babel_stream", "config_file": "babel.conf", "timeout": 1800, "patterns": []}
    assert s["level_run"] == {"timeout": 1800, "patterns": []}
    # the individual tests' 7 x (1800 + 10) outlast the level run's 1810
    assert s["budget_seconds"] == 7 * 1810


@pytest.mark.parametrize("level", ["6", "-1", "high", "", None, True, 4.0, "1 2"])
def test_a_level_outside_0_to_5_names_node_and_value(level: Any) -> None:
    s = check_settings(role(rvs_test_level=level), None, "node2")
    shown = str(level).strip()
    assert s["problem"] == (
        f"node2: rvs_test_level must be 0 (individual tests) or 1-5 (RVS level mode), got '{shown}'"
    )
    assert s["budget_seconds"] == 0


@pytest.mark.parametrize("level", [0, "0", 5, " 3 "])
def test_levels_0_to_5_as_number_or_text_are_kept_as_text(level: Any) -> None:
    s = check_settings(role(rvs_test_level=level), None, "node1")
    assert s["problem"] is None and s["level"] == str(level).strip()


def test_unknown_tests_are_named_together_with_the_known_names() -> None:
    tests = ["mem", {"name": "bogus"}, {"config_file": "x.conf"}, 7, "also_bogus", {"name": "mine", "config_file": "m"}]
    s = check_settings(role(rvs_tests=tests), None, "node1")
    assert s["problem"] == (
        "node1: rvs test bogus, rvs test (unnamed), rvs test (unnamed), rvs test also_bogus are unknown "
        "(each test needs a name, and a config_file unless it is one of: " + ", ".join(KNOWN) + ")"
    )
    one = check_settings(role(rvs_tests=[{"name": "bogus"}]), None, "node3")["problem"]
    assert one.startswith("node3: rvs test bogus is unknown (each test needs a name")


def test_unknown_tests_lists_only_the_bad_entries() -> None:
    assert unknown_tests(["mem", "peqt", {"name": "x", "config_file": "/x.conf"}], KNOWN) == []
    assert unknown_tests(["nope", {"name": ""}, {"name": "mem", "config_file": "o.conf"}], KNOWN) == ["nope", ""]


def test_a_test_list_error_is_found_in_level_mode_too() -> None:
    assert (
        "rvs test bogus is unknown" in check_settings(role(rvs_test_level=4, rvs_tests=["bogus"]), None, "n")["problem"]
    )


def test_test_entries_take_their_timeout_file_and_patterns() -> None:
    tests = [
        {"name": "mem", "timeout": "30"},
        {"name": "gst_single", "timeout": 0, "fail_regex_pattern": "met: FALSE"},
        {"name": "own", "config_file": "/etc/own.conf", "timeout": 12.7, "fail_regex_patterns": ["a", "b"]},
        {"name": "peqt", "fail_regex_patterns": [], "fail_regex_pattern": "ignored when patterns are given"},
    ]
    s = check_settings(role(rvs_tests=tests, rvs_fail_regex_patterns=["RVS-ERROR"], rvs_kill_grace=5), None, "n")
    assert s["problem"] is None
    assert s["tests"] == [
        {"name": "mem", "config_file": "mem.conf", "timeout": 30, "patterns": ["RVS-ERROR"]},
        # 0 is no timeout: the default applies, as the role's default(…, true) did
        {
            "name": "gst_single",
            "config_file": "gst_single.conf",
            "timeout": 1800,
            "patterns": ["RVS-ERROR", "met: FALSE"],
        },
        {"name": "own", "config_file": "/etc/own.conf", "timeout": 12, "patterns": ["RVS-ERROR", "a", "b"]},
        {"name": "peqt", "config_file": "peqt_single.conf", "timeout": 1800, "patterns": ["RVS-ERROR"]},
    ]
    assert s["level_run"] == {"timeout": 1800, "patterns": ["RVS-ERROR"]}
    assert s["budget_seconds"] == max(1805, 35 + 1805 + 17 + 1805)


@pytest.mark.parametrize("timeout", ["soon", -5, [1], True])
def test_a_timeout_that_is_no_positive_number_is_named(timeout: Any) -> None:
    s = check_settings(role(rvs_tests=["mem", {"name": "peqt", "timeout": timeout}]), None, "node1")
    assert s["problem"] == (
        f"node1: rvs_tests[1].timeout (peqt): expected a positive number of seconds, got {timeout!r}"
    )


def test_invalid_fail_patterns_are_named_before_anything_runs() -> None:
    s = check_settings(role(rvs_fail_regex_patterns=["ok", "met:(FALSE"]), None, "node1")
    assert s["problem"].startswith("node1: rvs_fail_regex_patterns: invalid fail pattern 'met:(FALSE': ")
    s = check_settings(role(rvs_tests=[{"name": "mem", "fail_regex_patterns": ["["]}]), None, "node1")
    assert s["problem"].startswith("node1: fail patterns of rvs test mem: invalid fail pattern '[': ")


def test_the_level_budget_counts_only_in_level_mode() -> None:
    s = check_settings(role(rvs_test_level=3, rvs_tests=["mem"], rvs_default_timeout=100, rvs_kill_grace=1), None, "n")
    assert s["budget_seconds"] == 101
    s = check_settings(role(rvs_test_level=0, rvs_tests=[], rvs_default_timeout=100), None, "n")
    assert s["budget_seconds"] == 0


# ---------------------------------------------------------------- the upstream CVS rvs block


def test_an_upstream_block_overrides_the_role_variables() -> None:
    block = {
        "path": "/opt/rvs/bin",
        "rocm_runtime_lib_path": "",
        "rvs_test_level": "0",
        "git_url": "https://example.invalid/rvs.git",
        "tests": [
            {"name": "level_config", "timeout": 3, "fail_regex_patterns": ["X"]},
            {"name": "mem_test", "config_file": "mem.conf", "fail_regex_pattern": "FAIL"},
        ],
    }
    s = check_settings(role(rvs_fail_regex_patterns=["R"]), block, "node1")
    assert s["problem"] is None
    assert (s["path"], s["library_path"], s["config_dir"], s["level"]) == ("/opt/rvs/bin", "", CONF, "0")
    assert s["tests"] == [{"name": "mem_test", "config_file": "mem.conf", "timeout": 9000, "patterns": ["R", "FAIL"]}]
    assert s["level_run"] == {"timeout": 3, "patterns": ["R", "X"]}
    assert s["ignored"] == [
        "rvs.git_url: ignored: upstream's installer builds RVS from it; this collection installs nothing"
    ]
    assert s["budget_seconds"] == 9010


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"test": []}, "rvs.test: is not a key of upstream's rvs schema; did you mean 'tests'?"),
        ({"path": "<changeme>/bin"}, "rvs.path: still holds the placeholder '<changeme>'"),
        ("not a block", "rvs: expected the rvs block of a CVS health configuration (a mapping)"),
    ],
)
def test_an_upstream_block_error_names_where_the_block_came_from_and_its_key(block: Any, message: str) -> None:
    s = check_settings(role(), block, "node1", "-e @health.json")
    assert s["problem"].startswith(f"upstream CVS rvs block (-e @health.json): {message}")
    assert s["ignored"] == [] and s["budget_seconds"] == 0


# ---------------------------------------------------------------- plan


def settings(**changes: Any) -> dict[str, Any]:
    s = check_settings(role(**changes), None, "node1")
    assert s["problem"] is None
    return s


def test_level_mode_runs_one_level_test() -> None:
    plan = plan_run(settings(rvs_fail_regex_patterns=["P"]), probe(), "node1")
    assert plan["problem"] is None and plan["note"] is None
    assert (plan["mode"], plan["version"], plan["folder"], plan["path"]) == (
        "level",
        "1.3.0",
        "MI300X",
        "/opt/rocm/bin/rvs",
    )
    (test,) = plan["tests"]
    assert test == {
        "name": "level4",
        "mode": "level",
        "config_file": None,
        "timeout": 1800,
        "patterns": ["P"],
        "args": ["-r", "4"],
        "command": "/opt/rocm/bin/rvs -r 4",
    }
    assert plan["commands"] == [
        {
            "name": "level4",
            "argv": ["timeout", "-k", "10", "1800", "/opt/rocm/bin/rvs", "-r", "4"],
            "deadline": 1810 + STEP_MARGIN,
        }
    ]
    assert plan["lease_seconds"] == 1810 and plan["async_seconds"] == 1810 + STEP_MARGIN + ASYNC_MARGIN


@pytest.mark.parametrize("version", ["1.1.0", "rvs version 1.2.9", "wrapper"])
def test_an_rvs_without_levels_runs_the_individual_tests_and_says_so(version: str) -> None:
    plan = plan_run(settings(rvs_test_level=2, rvs_tests=["mem"]), probe(version, common_files=("mem.conf",)), "node2")
    assert plan["mode"] == "individual" and [t["name"] for t in plan["tests"]] == ["mem"]
    assert plan["note"] == (
        f"node2: RVS version '{version}' has no test levels (needs >= 1.3.0); running the individual tests instead "
        "of level 2"
    )


def test_a_failed_version_query_also_falls_back() -> None:
    p = probe(common_files=("mem.conf",))
    p["version"] = {"rc": 127, "stdout": "1.3.0", "stderr": "lib missing", "problem": None}
    plan = plan_run(settings(rvs_tests=["mem"]), p, "node1")
    assert plan["mode"] == "individual" and "has no test levels" in plan["note"]


def test_individual_tests_take_the_model_folder_first_then_the_common_folder() -> None:
    tests = ["mem", "gst_single", {"name": "own", "config_file": "/etc/own.conf", "timeout": 5}]
    p = probe(folder_files=("gst_single.conf",), common_files=("mem.conf", "gst_single.conf"))
    p["configs"].append("/etc/own.conf")
    plan = plan_run(settings(rvs_test_level=0, rvs_tests=tests, rvs_kill_grace=2), p, "node1", ["srun", "-x"])
    assert plan["problem"] is None and plan["note"] is None and plan["mode"] == "individual"
    assert [(t["name"], t["config_file"], t["command"]) for t in plan["tests"]] == [
        ("mem", f"{CONF}/mem.conf", f"/opt/rocm/bin/rvs -c {CONF}/mem.conf"),
        ("gst_single", f"{CONF}/MI300X/gst_single.conf", f"/opt/rocm/bin/rvs -c {CONF}/MI300X/gst_single.conf"),
        ("own", "/etc/own.conf", "/opt/rocm/bin/rvs -c /etc/own.conf"),
    ]
    assert plan["commands"][2] == {
        "name": "own",
        "argv": ["srun", "-x", "timeout", "-k", "2", "5", "/opt/rocm/bin/rvs", "-c", "/etc/own.conf"],
        "deadline": 7 + STEP_MARGIN,
    }
    assert plan["lease_seconds"] == 1802 * 2 + 7
    assert plan["async_seconds"] == 1802 * 2 + 7 + 3 * STEP_MARGIN + ASYNC_MARGIN


def test_without_a_gpu_model_only_the_common_folder_is_tried() -> None:
    p = probe(folder_files=("mem.conf",))
    p["amd_smi"] = {"rc": None, "stdout": "", "stderr": "", "problem": "/opt/rocm/bin/amd-smi: No such file"}
    plan = plan_run(settings(rvs_test_level=0, rvs_tests=["mem"]), p, "node1")
    assert plan["folder"] is None
    assert plan["problem"] == f"node1: configuration file of rvs test mem not found (tried {CONF}/mem.conf)"


def test_missing_configuration_files_are_named_with_every_path_tried() -> None:
    tests = ["mem", {"name": "my_gst", "config_file": "no_such_gst.conf"}, {"name": "abs", "config_file": "/x/a.conf"}]
    plan = plan_run(settings(rvs_test_level=0, rvs_tests=tests), probe(common_files=("mem.conf",)), "node3")
    assert plan["problem"] == (
        f"node3: configuration file of rvs test my_gst not found (tried {CONF}/MI300X/no_such_gst.conf, "
        f"{CONF}/no_such_gst.conf); configuration file of rvs test abs not found (tried /x/a.conf)"
    )
    # what the record keeps about the node
    assert (plan["mode"], plan["version"], plan["folder"], plan["commands"]) == ("individual", "1.3.0", "MI300X", [])


def test_an_empty_test_list_is_a_problem_in_individual_mode() -> None:
    plan = plan_run(settings(rvs_test_level=0, rvs_tests=[]), probe(), "node1")
    assert plan["problem"] == "node1: no rvs test to run (rvs_tests is empty)"
    assert plan_run(settings(rvs_test_level=4, rvs_tests=[]), probe(), "node1")["problem"] is None


def test_a_missing_rvs_is_named_with_its_path_and_nothing_else_is_known() -> None:
    p = {"rvs": {"path": "/opt/nowhere/bin/rvs", "usable": False}, "version": None, "amd_smi": None, "configs": []}
    plan = plan_run(settings(rvs_path="/opt/nowhere/bin/rvs"), p, "node1")
    assert plan["problem"] == "node1: rvs binary not found or not executable at /opt/nowhere/bin/rvs"
    assert (plan["mode"], plan["version"], plan["folder"], plan["tests"]) == (None, None, None, [])


def test_every_argv_element_is_text_and_a_path_with_spaces_is_one_word_of_the_command() -> None:
    p = probe()
    p["rvs"]["path"] = "/opt/my rocm/rvs"
    plan = plan_run(settings(), p, "node1")
    assert plan["tests"][0]["command"] == "'/opt/my rocm/rvs' -r 4"
    assert all(isinstance(a, str) for a in plan["commands"][0]["argv"])
