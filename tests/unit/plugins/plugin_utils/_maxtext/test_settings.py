"""Unit tests for plugin_utils/_maxtext/settings.py (the settings check of the maxtext role, once
roles/maxtext/templates/input_problems.j2 and the threshold tasks of validate.yml) and the maxtext_settings filter:
the messages are the ones users see after "<host>: invalid MaxText settings: "."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.maxtext_role import FilterModule
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import (
    DEFAULT_ERROR_PATTERNS,
    DEFAULT_IGNORE_ERROR_PATTERNS,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.settings import (
    check_settings,
    input_problems,
    known_metrics,
    threshold_problems,
)

DEFAULTS = Path(__file__).resolve().parents[5] / "roles" / "maxtext" / "defaults" / "main.yml"
FILTERS = FilterModule().filters()


def settings(**changes: Any) -> dict[str, Any]:
    """The role's defaults as the play sees them, with ``changes``."""
    values = yaml.safe_load(DEFAULTS.read_text())
    values.pop("maxtext_results_dir")
    values["maxtext_error_patterns"] = dict(DEFAULT_ERROR_PATTERNS)
    values["maxtext_ignore_error_patterns"] = dict(DEFAULT_IGNORE_ERROR_PATTERNS)
    values["cvs_env"] = {}
    return {**values, **changes}


def test_the_defaults_are_fine() -> None:
    assert check_settings(settings()) == {"problems": [], "thresholds": {}, "budget_seconds": 7205}


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"maxtext_steps": 0}, "maxtext_steps must be an integer >= 1, got 0"),
        ({"maxtext_steps": "5x"}, "maxtext_steps must be an integer >= 1, got 5x"),
        ({"maxtext_steps": 2.5}, "maxtext_steps must be an integer >= 1, got 2.5"),
        (
            {"maxtext_sweep_name": ".hidden"},
            "maxtext_sweep_name must be 1-64 letters, digits, '.', '_' or '-' (not starting with '.', '_' or '-'), "
            "got '.hidden'",
        ),
        (
            {"maxtext_check_name": 7},
            "maxtext_check_name must be 1-64 letters, digits, '.', '_' or '-' (not starting with '.', '_' or '-'), "
            "got '7'",
        ),
        ({"maxtext_coordinator_port": 70000}, "maxtext_coordinator_port must be a TCP port (1-65535), got 70000"),
        ({"maxtext_coordinator_port": "x"}, "maxtext_coordinator_port must be a TCP port (1-65535), got x"),
        ({"maxtext_timeout": -1}, "maxtext_timeout must be a number >= 0, got -1"),
        ({"maxtext_stall_timeout": True}, "maxtext_stall_timeout must be a number >= 0, got True"),
        ({"maxtext_metrics_window": "ten"}, "maxtext_metrics_window must be a number >= 0, got ten"),
        ({"maxtext_poll_interval": 0}, "maxtext_poll_interval must be a number > 0, got 0"),
        ({"maxtext_train_scripts": "/a/train.py"}, "maxtext_train_scripts must be a list of absolute paths"),
        (
            {"maxtext_train_scripts": [], "maxtext_train_module": ""},
            "maxtext_train_scripts is empty and maxtext_train_module is empty: nothing names the train script",
        ),
        ({"maxtext_train_scripts": ["train.py"]}, "maxtext_train_scripts: 'train.py' is not an absolute path"),
        ({"maxtext_env": []}, "maxtext_env must be a mapping"),
        ({"cvs_env": None}, "cvs_env must be a mapping"),
        (
            {"maxtext_env": {"1BAD": "x"}},
            "maxtext_env: '1BAD' is not an environment variable name (letters, digits and '_', not starting with a "
            "digit)",
        ),
        (
            {"maxtext_error_patterns_extra": {"x": ""}},
            "maxtext_error_patterns_extra: pattern x must be a non-empty regex string",
        ),
        (
            {"maxtext_config_overrides": {"steps": 3}},
            "maxtext_config_overrides: steps is set by the role (use maxtext_steps)",
        ),
        ({"maxtext_config_overrides": {"run_name": "r"}}, "maxtext_config_overrides: run_name is set by the role"),
        ({"maxtext_extra_args": "steps=3"}, "maxtext_extra_args must be a list of strings"),
        ({"maxtext_extra_args": ["steps=3"]}, "maxtext_extra_args: 'steps=3' is set by the role (use maxtext_steps)"),
        (
            {"maxtext_extra_args": ["base_output_directory=/x"]},
            "maxtext_extra_args: 'base_output_directory=/x' is set by the role",
        ),
        ({"maxtext_python": ""}, "maxtext_python must name a Python interpreter"),
    ],
)
def test_each_problem_names_the_variable_and_what_is_wrong(changes: dict[str, Any], problem: str) -> None:
    assert input_problems(settings(**changes)) == [problem]


def test_integers_and_numbers_may_be_strings_with_spaces() -> None:
    assert input_problems(settings(maxtext_steps=" 12 ", maxtext_timeout="1.5e3", maxtext_coordinator_port="123")) == []


def test_every_problem_is_listed_in_order_and_thresholds_wait_for_them() -> None:
    result = check_settings(
        settings(maxtext_steps=0, maxtext_python="", maxtext_thresholds={"tflops_per_device": {"minimum": 1}})
    )
    assert result == {
        "problems": ["maxtext_steps must be an integer >= 1, got 0", "maxtext_python must name a Python interpreter"],
        "thresholds": {},
        "budget_seconds": None,
    }


def test_an_unknown_threshold_kind_is_named_with_its_metric() -> None:
    result = check_settings(settings(maxtext_thresholds={"tflops_per_device": {"minimum": 100}}))
    (problem,) = result["problems"]
    assert problem.startswith("maxtext_thresholds: unknown threshold kind 'minimum'") and (
        "for metric 'tflops_per_device'" in problem
    )


def test_an_unknown_metric_lists_the_known_ones() -> None:
    thresholds, problems = threshold_problems({"tflops": {"min": 1}, "steps": {"min": 1}, "x": {"max": 2}})
    assert thresholds == {}
    assert problems == [f"maxtext_thresholds: unknown metric(s) tflops, x; known metrics: {', '.join(known_metrics())}"]
    assert known_metrics()[0] == "tflops_per_sec_per_gpu" and "tflops_per_device" in known_metrics()


UPSTREAM = {
    "NNODES=3,STEPS=20,PRECISION=BF16": {"training.tflops_per_sec_per_gpu": {"kind": "min", "value": 100.0}},
    "NNODES=3,STEPS=20,PRECISION=FP8": {"training.tflops_per_sec_per_gpu": {"kind": "min", "value": 200.0}},
}


def test_an_upstream_threshold_file_needs_its_cell_named() -> None:
    _, problems = threshold_problems(UPSTREAM, "")
    assert problems == [
        "maxtext_thresholds: the threshold file has 2 cells; choose one with maxtext_threshold_cell: "
        "NNODES=3,STEPS=20,PRECISION=BF16; NNODES=3,STEPS=20,PRECISION=FP8"
    ]
    result = check_settings(
        settings(maxtext_thresholds=UPSTREAM, maxtext_threshold_cell="NNODES=3,STEPS=20,PRECISION=FP8")
    )
    assert result["problems"] == [] and result["thresholds"] == {"tflops_per_sec_per_gpu": {"min": 200.0}}


def test_the_budget_is_the_timeout_and_the_stop_grace() -> None:
    assert check_settings(settings(maxtext_timeout="100.7", maxtext_stop_grace="5.5"))["budget_seconds"] == 105


def test_the_filter_wants_a_mapping() -> None:
    assert FILTERS["maxtext_settings"](settings())["problems"] == []
    with pytest.raises(AnsibleFilterError, match="maxtext_settings expects a mapping of the role's variable names"):
        FILTERS["maxtext_settings"](["maxtext_steps"])
