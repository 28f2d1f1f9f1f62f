"""Unit tests for plugin_utils/_maxtext/node_checks.py and the maxtext_node_problems filter: the messages a node
that is not ready gets before anything is launched."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.maxtext_role import FilterModule
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.node_checks import node_problems

PROBLEMS = FilterModule().filters()["maxtext_node_problems"]
ARMED = {"armed": True, "cursors": {}}


def checks(found: dict) -> dict:
    return {"rc": 0, "stdout": json.dumps(found) + "\n", "stderr": ""}


def test_a_ready_node_has_its_findings_and_no_problem() -> None:
    found = {"train_script": "/w/MaxText/train.py", "problems": []}
    assert PROBLEMS(checks(found), ARMED, "node1", "python3") == {"found": found, "problems": []}


def test_each_problem_of_the_node_checks_is_named_with_the_node_and_the_field() -> None:
    found = {"train_script": "", "problems": [["maxtext_train_scripts", "no train script at any configured path (/a)"],
                                              ["maxtext_workdir", "/w is not a directory"]]}  # fmt: skip
    assert node_problems("node2", "python3", checks(found), ARMED)["problems"] == [
        "node2: maxtext_train_scripts: no train script at any configured path (/a)",
        "node2: maxtext_workdir: /w is not a directory",
    ]


@pytest.mark.parametrize(
    ("result", "said"),
    [
        ({"rc": 127, "stdout": "", "stderr": "python9: not found\n"}, "(rc 127): python9: not found"),
        ({"rc": 0, "stdout": "{not json", "stderr": ""}, "(rc 0): "),
        ({"unreachable": True, "msg": "ssh: refused"}, "(rc ?): ssh: refused"),
        ({"rc": 1, "stdout": "", "stderr": "x" * 500}, "(rc 1): " + "x" * 400),
    ],
)
def test_node_checks_that_could_not_run_name_the_interpreter(result: dict, said: str) -> None:
    out = node_problems("node1", "python9", result, ARMED)
    assert out["found"] is None
    assert out["problems"] == [f"node1: maxtext_python: could not run the node checks with python9 {said}"]


def test_a_watch_that_could_not_be_armed_names_the_pattern_settings() -> None:
    armed = {"armed": False, "msg": "error_patterns: 'bad': invalid regex"}
    assert node_problems("node3", "python3", checks({"problems": []}), armed)["problems"] == [
        "node3: maxtext_error_patterns/maxtext_ignore_error_patterns: error_patterns: 'bad': invalid regex"
    ]
    assert node_problems("node3", "python3", checks({"problems": []}), {})["problems"] == [
        "node3: maxtext_error_patterns/maxtext_ignore_error_patterns: log watch could not be armed"
    ]


def test_the_filter_wants_registered_results() -> None:
    with pytest.raises(AnsibleFilterError, match="maxtext_node_problems expects the registered result of the node"):
        PROBLEMS("out", ARMED, "n", "p")
    with pytest.raises(AnsibleFilterError, match="arming the log watch"):
        PROBLEMS({}, None, "n", "p")
