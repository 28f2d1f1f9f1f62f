"""The path_component filter (plugins/filter/paths.py): the same rule as plugin_utils/_common/paths.py, as a filter."""

from __future__ import annotations

from ansible_collections.cvs.cluster.plugins.filter.paths import FilterModule
from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import path_component

FILTER = FilterModule().filters()["path_component"]


def test_the_filter_names_a_host_the_way_save_dir_and_the_check_records_do() -> None:
    hostile = "gpu01$(touch${IFS}/tmp/x)"
    assert FILTER(hostile) == path_component(hostile) == "gpu01$(touch${IFS}%2Ftmp%2Fx)"
    assert FILTER("..") == "%2E%2E" and FILTER("node1") == "node1"
    assert len(FILTER("n" * 300).encode()) == 255
