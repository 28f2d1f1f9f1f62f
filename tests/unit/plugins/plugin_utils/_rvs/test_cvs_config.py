"""Unit tests of plugin_utils/_rvs/cvs_config.py: an upstream CVS rvs block mapped onto the role's settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.cvs_config import (
    LEVEL_TIMEOUT,
    TEST_TIMEOUT,
    RvsConfigError,
    rvs_settings,
)

FIXTURE = Path(__file__).resolve().parents[4] / "integration" / "fixtures" / "rvs" / "cvs_health_config.json"


def test_fixture_block_maps_every_honoured_key() -> None:
    out = rvs_settings(json.loads(FIXTURE.read_text())["rvs"])
    s = out["settings"]
    assert s["path"] == "/opt/rocm/bin" and s["rocm_runtime_lib_path"] == ""
    assert s["config_path_default"] == "/opt/rocm/share/rocm-validation-suite/conf" and s["rvs_test_level"] == 4
    assert s["level"] == {
        "name": "level_config",
        "timeout": 3,
        "fail_regex_patterns": ["RVS-ERROR", "PACKAGE RCCL INSTALLED VERSION IS 2\\.22"],
        "description": "all modules at level 4, cut short for the test",
    }
    assert s["tests"] == [
        {
            "name": "mem_test",
            "timeout": 9000,
            "fail_regex_patterns": ["FAIL|\\[ERROR\\s*\\]|RVS-ERROR"],
            "description": "Memory Test",
            "config_file": "mem.conf",
        }
    ]
    assert [m.split(":")[0] for m in out["ignored"]] == [
        "rvs.git_install_path",
        "rvs.git_url",
        "rvs.nfs_install",
        "rvs.rocm_path",
        "rvs.config_path_mi300x",
    ]


def test_upstream_defaults_fill_what_the_block_leaves_out() -> None:
    s = rvs_settings({"tests": [{"name": "gst_single", "config_file": "gst_single.conf"}]})["settings"]
    assert s["tests"][0]["timeout"] == TEST_TIMEOUT == 9000
    assert s["level"] == {"name": "level_config", "timeout": LEVEL_TIMEOUT, "fail_regex_patterns": []}
    assert LEVEL_TIMEOUT == 7200
    assert rvs_settings({"tests": [{"name": "level_config"}]})["settings"]["level"]["timeout"] == 7200


def test_only_set_keys_are_returned_and_comments_pass() -> None:
    assert rvs_settings({"_comment_x": "anything", "rvs_test_level": "0"}) == {
        "settings": {"rvs_test_level": 0},
        "ignored": [],
    }
    assert rvs_settings({"rocm_runtime_lib_path": None})["settings"] == {"rocm_runtime_lib_path": ""}


def test_a_bare_test_name_is_a_test() -> None:
    assert rvs_settings({"tests": ["mem"]})["settings"]["tests"] == [
        {"name": "mem", "timeout": 9000, "fail_regex_patterns": []}
    ]


def test_both_pattern_keys_are_kept_in_order() -> None:
    (t,) = rvs_settings({"tests": [{"name": "mem", "fail_regex_pattern": "a", "fail_regex_patterns": ["b", "c"]}]})[
        "settings"
    ]["tests"]
    assert t["fail_regex_patterns"] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("not a block", "rvs: expected the rvs block"),
        ({"tets": []}, "rvs.tets: is not a key of upstream's rvs schema; did you mean 'tests'?"),
        (
            {"tests": [{"name": "mem", "timout": 5}]},
            "rvs.tests[0].timout: is not a key of upstream's rvs schema; did you mean 'timeout'?",
        ),
        ({"path": "<changeme>/bin"}, "rvs.path: still holds the placeholder '<changeme>'"),
        (
            {"config_path_default": "/home/{user-id}/conf"},
            "rvs.config_path_default: still holds the placeholder '{user-id}'",
        ),
        ({"path": "{xx.xx.xx.xx|hostname}"}, "placeholder '{xx.xx.xx.xx|hostname}'"),
        ({"rvs_test_level": 6}, "rvs.rvs_test_level: must be 0"),
        ({"rvs_test_level": True}, "rvs.rvs_test_level: must be 0"),
        ({"tests": {"name": "mem"}}, "rvs.tests: expected a list"),
        ({"tests": [3]}, "rvs.tests[0]: expected a test name or a mapping"),
        ({"tests": [{"config_file": "mem.conf"}]}, "rvs.tests[0].name: every test needs a name"),
        ({"tests": [{"name": "mem", "timeout": 0}]}, "rvs.tests[0].timeout: expected a positive number"),
        ({"tests": [{"name": "mem", "timeout": "soon"}]}, "rvs.tests[0].timeout: expected seconds"),
        ({"tests": [{"name": "mem", "expected_pass": False}]}, "rvs.tests[0].expected_pass: only true"),
        (
            {"tests": [{"name": "mem", "fail_regex_pattern": "("}]},
            "rvs.tests[0].fail_regex_pattern: invalid regular expression '('",
        ),
        (
            {"tests": [{"name": "mem", "fail_regex_patterns": ["ok", 3]}]},
            "rvs.tests[0].fail_regex_patterns[1]: expected a regular expression",
        ),
        (
            {"tests": [{"name": "mem", "fail_regex_patterns": "x"}, {"name": "mem"}]},
            "rvs.tests: mem listed more than once",
        ),
        ({"tests": [{"name": "level_config", "config_file": "x.conf"}]}, "rvs.tests[0].config_file: the level run"),
    ],
)
def test_bad_blocks_are_refused_naming_the_key_path(block: Any, message: str) -> None:
    with pytest.raises(RvsConfigError) as err:
        rvs_settings(block)
    assert message in str(err.value)
