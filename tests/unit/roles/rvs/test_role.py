"""The rvs role's files agree with each other: the settings check passes every role variable the filter reads, and
the argument spec documents the defaults the role has."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.cvs.cluster.plugins.filter import rvs_plan

ROLE = Path(__file__).resolve().parents[4] / "roles" / "rvs"


def test_the_settings_check_passes_each_role_variable_the_filter_reads_under_its_own_name() -> None:
    (check, _ignored, _fail) = yaml.safe_load((ROLE / "tasks" / "check.yml").read_text())
    given = check["vars"]["_rvs_role_settings"]
    assert sorted(given) == sorted(rvs_plan._SETTINGS)
    assert all(value == "{{ " + name + " }}" for name, value in given.items())


def test_the_argument_spec_defaults_are_the_role_defaults() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    options = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    for name, spec in options.items():
        if "default" in spec:
            assert defaults[name] == spec["default"], name
    assert set(defaults) <= set(options)
