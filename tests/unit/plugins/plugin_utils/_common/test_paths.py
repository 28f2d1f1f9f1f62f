"""The one path rule (plugins/plugin_utils/_common/paths.py) over hostile names: escaped names stay one file name
inside their directory, distinct names stay distinct, and ids that would need escaping are refused by name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import (
    NAME_MAX,
    component_problem,
    component_problems,
    path_component,
)

HOSTILE = [
    "..",
    ".",
    "",
    "a/b",
    "/etc",
    "../../../x/d",
    "line\nbreak",
    "nul\x00byte",
    "tab\tand\x7fdel",
    "%2F",
    "n" * 300,
    "ü" * 200,  # 400 bytes of UTF-8
]


@pytest.mark.parametrize("name", HOSTILE, ids=repr)
def test_a_hostile_name_is_one_file_name_inside_its_directory(name: str, tmp_path: Path) -> None:
    component = path_component(name)
    assert component and component not in (".", "..")
    assert "/" not in component and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in component)
    assert len(component.encode("utf-8", "surrogateescape")) <= NAME_MAX
    made = tmp_path / "root" / component / "launch.sh"
    made.parent.mkdir(parents=True)
    made.write_text("x")
    # the file exists where it was meant to, and nowhere else
    assert os.path.realpath(made).startswith(str(tmp_path / "root") + os.sep)
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == [component]


def test_distinct_names_stay_distinct_and_usual_names_unchanged() -> None:
    names = [*HOSTILE, "a%2Fb", "a%252Fb", "n" * 299 + "m", "%", "%2E%2E", "line%0Abreak"]
    assert len({path_component(n) for n in names}) == len(names)
    for usual in ("node1", "node1-ctr", "gpu-01.example.com", "20261207-214839-ab12cd"):
        assert path_component(usual) == usual
    assert path_component("line\nbreak") == "line%0Abreak" and path_component("..") == "%2E%2E"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("..", "'..' names a directory that exists already"),
        ("../x", "it holds '/'"),
        ("a/b", "it holds '/'"),
        ("run\n1", "it holds a control character"),
        ("", "it is empty"),
        ("r" * 300, f"it is longer than {NAME_MAX} bytes"),
        ("50%", "it holds '%'"),
    ],
    ids=repr,
)
def test_an_id_that_would_need_escaping_is_refused_naming_the_variable_and_the_value(value: str, why: str) -> None:
    problem = component_problem(value, "cvs_run_id")
    assert problem.startswith(f"cvs_run_id: {value!r} cannot be used: {why};")
    assert "letters, digits" in problem  # the fix


def test_a_usual_id_is_accepted_and_unset_variables_are_not_checked() -> None:
    assert component_problem("20261207-214839-ab12cd", "cvs_run_id") == ""
    assert component_problem(5, "cvs_run_id").startswith("cvs_run_id: 5 is not a string")
    assert component_problems({"cvs_run_id": None, "cvs_finish_run": "../y"}) == [
        component_problem("../y", "cvs_finish_run")
    ]
