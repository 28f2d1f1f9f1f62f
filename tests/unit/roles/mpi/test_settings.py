"""The mpi role's settings mapping (roles/mpi/vars/main.yml) is what plugin_utils/_mpi.py checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.cvs.cluster.plugins.plugin_utils._mpi import SETTINGS_KEYS, MpiSettingsError, check_settings

ROLE = Path(__file__).resolve().parents[4] / "roles" / "mpi"


def test_every_setting_the_role_passes_is_one_the_check_reads() -> None:
    settings = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["_mpi_settings"]
    assert set(settings) == SETTINGS_KEYS
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    variables = {k: v for k, v in settings.items() if k not in ("env", "run_id")}
    assert all(value == f"{{{{ mpi_{key} }}}}" and f"mpi_{key}" in specs for key, value in variables.items())


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(MpiSettingsError, match=r"unknown setting\(s\) slots"):
        check_settings({"name": "job", "program": ["true"], "slots_per_node": 1, "timeout": 1, "slots": 2})
