"""The path_component and component_problems filters (plugins/filter/paths.py): the rule of
plugin_utils/_common/paths.py, as filters."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.paths import FilterModule
from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import path_component

FILTER = FilterModule().filters()["path_component"]


def test_the_filter_names_a_host_the_way_save_dir_and_the_check_records_do() -> None:
    hostile = "gpu01$(touch${IFS}/tmp/x)"
    assert FILTER(hostile) == path_component(hostile) == "gpu01$(touch${IFS}%2Ftmp%2Fx)"
    assert FILTER("..") == "%2E%2E" and FILTER("node1") == "node1"
    assert len(FILTER("n" * 300).encode()) == 255


def test_component_problems_names_each_refused_variable_and_skips_unset_ones() -> None:
    problems = FilterModule().filters()["component_problems"]
    assert problems({"cvs_run_id": "20261207-214839-ab12cd", "cvs_finish_run": None}) == []
    refused = problems({"cvs_run_id": "../x", "cvs_finish_run": "..", "other": "ok"})
    assert [p.split(":")[0] for p in refused] == ["cvs_run_id", "cvs_finish_run"]
    assert refused[0].startswith("cvs_run_id: '../x' cannot be used: it holds '/';")
    with pytest.raises(AnsibleFilterError, match="expects a mapping"):
        problems(["cvs_run_id"])
