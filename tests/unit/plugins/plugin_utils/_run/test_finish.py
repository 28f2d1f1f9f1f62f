"""The command line that finishes an interrupted run (plugin_utils/_run/finish.py)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._run.finish import finish_argv, is_validate_playbook

VALIDATE = "/c/playbooks/validate.yml"


def test_validate_run_keeps_options_and_adds_the_run_id() -> None:
    argv = ["-i", "inv.yml", "-l", "node1,node2", "playbooks/validate.yml", "-e", '{"rvs": {"tests": ["mem"]}}', "-v"]
    got = finish_argv(argv, ["playbooks/validate.yml"], "20261202-x", VALIDATE)
    assert got == [
        "-i", "inv.yml", "-l", "node1,node2", "-e", '{"rvs": {"tests": ["mem"]}}', "-v",
        VALIDATE, "-e", json.dumps({"cvs_finish_run": "20261202-x"}),
    ]  # fmt: skip


def test_other_playbooks_only_dispose() -> None:
    got = finish_argv(["-i", "inv.yml", "playbooks/health_rvs.yml"], ["playbooks/health_rvs.yml"], "r1", VALIDATE)
    assert got[-2:] == ["--skip-tags", "facts,maxtext,report,rvs"]
    assert "playbooks/health_rvs.yml" not in got and VALIDATE in got


def test_collection_name_counts_as_validate() -> None:
    assert is_validate_playbook("cvs.cluster.validate")
    assert is_validate_playbook("/x/validate.yml")
    assert not is_validate_playbook("validate.yaml.bak")
    assert "--skip-tags" not in finish_argv(["cvs.cluster.validate"], ["cvs.cluster.validate"], "r", VALIDATE)


def test_options_that_would_skip_dispose_are_dropped() -> None:
    argv = ["--start-at-task", "Run the RVS tests", "--step", "--start-at-task=X", "-i", "i", "validate.yml"]
    assert finish_argv(argv, ["validate.yml"], "r", VALIDATE)[:2] == ["-i", "i"]


def test_only_the_playbook_argument_is_removed_not_an_equal_option_value() -> None:
    got = finish_argv(["-i", "site.yml", "site.yml"], ["site.yml"], "r", VALIDATE)
    assert got[:3] == ["-i", "site.yml", VALIDATE]


def test_no_run_id_is_an_error() -> None:
    with pytest.raises(ValueError, match="no run id"):
        finish_argv(["validate.yml"], ["validate.yml"], "", VALIDATE)
