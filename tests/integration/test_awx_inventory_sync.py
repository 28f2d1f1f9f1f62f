"""An AWX inventory sync of a broken CVS cluster file fails, naming the error (issue 34).

AWX runs ``ansible-inventory --list`` with ``ANSIBLE_INVENTORY_UNPARSED_FAILED=True`` and
``ANSIBLE_INVENTORY_EXPORT=True`` (its STANDARD_INVENTORY_UPDATE_ENV: "failure to parse inventory should always be
fatal"). A cluster file given directly that still holds upstream's placeholders used to sync with exit 0 and no host
there. The plain CLI keeps reporting the error and going on with an empty inventory (the playbooks' first play fails
the run with the message, tests/integration/test_inventory_check.py). Real ansible-inventory runs; no node is
contacted.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.local

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_INVENTORY = ROOT / ".venv" / "bin" / "ansible-inventory"
# awx/main/constants.py STANDARD_INVENTORY_UPDATE_ENV
AWX_SYNC_ENV = {"ANSIBLE_INVENTORY_UNPARSED_FAILED": "True", "ANSIBLE_INVENTORY_EXPORT": "True"}
PLACEHOLDER = "{xx.xx.xx.xx|hostname-1}"
# upstream CVS's cluster file template, as a user copies it without filling it in
UPSTREAM_TEMPLATE = {
    "orchestrator": "baremetal",
    "username": "{user-id}",
    "priv_key_file": "/home/{user-id}/.ssh/id_rsa",
    "head_node_dict": {"mgmt_ip": PLACEHOLDER},
    "node_dict": {
        PLACEHOLDER: {"bmc_ip": "NA", "vpc_ip": PLACEHOLDER},
        "{xx.xx.xx.xx|hostname-2}": {"bmc_ip": "NA", "vpc_ip": "{xx.xx.xx.xx|hostname-2}"},
    },
}
MESSAGE = f"node_dict.{PLACEHOLDER}: contains the template placeholder '{PLACEHOLDER}'; replace it with a real value"


def ansible_inventory(source: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "CVS_", "AWX_"))}
    environment.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", USER="alice", **env)
    return subprocess.run(
        [str(ANSIBLE_INVENTORY), "--list", "-i", str(source)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=str(source.parent),  # as AWX runs a project's source: in the project, with its ansible.cfg named
        timeout=120,
        check=False,
    )


@pytest.fixture
def template_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(UPSTREAM_TEMPLATE, indent=4))
    return path


def test_awx_sync_of_a_cluster_file_with_placeholders_fails_naming_the_placeholder(template_file: Path) -> None:
    proc = ansible_inventory(template_file, AWX_SYNC_ENV)
    assert proc.returncode == 4, (proc.returncode, proc.stdout, proc.stderr)
    assert f"[ERROR]: invalid CVS cluster file {template_file}: {MESSAGE}" in proc.stderr, proc.stderr
    assert proc.stdout == "", proc.stdout  # no inventory for AWX to import, not even an empty one


def test_any_unparsed_is_failed_makes_it_fatal_too(template_file: Path) -> None:
    proc = ansible_inventory(template_file, {"ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True"})
    assert proc.returncode == 4, proc.stderr
    assert MESSAGE in proc.stderr


def test_plain_cli_reports_the_placeholder_and_goes_on_with_no_host(template_file: Path) -> None:
    proc = ansible_inventory(template_file, {})
    assert proc.returncode == 0, proc.stderr
    assert f"[ERROR]: invalid CVS cluster file {template_file}: {MESSAGE}" in proc.stderr, proc.stderr
    listing = json.loads(proc.stdout)
    assert listing["_meta"]["hostvars"] == {}
    assert listing["all"]["children"] == ["ungrouped"]  # the builtin yaml plugin made no groups of the file


def test_awx_sync_of_a_yaml_source_of_the_same_file_fails_naming_it(template_file: Path) -> None:
    source = template_file.parent / "cluster.yml"
    source.write_text("plugin: cvs.cluster.cluster_json\npath: cluster.json\n")
    proc = ansible_inventory(source, AWX_SYNC_ENV)
    assert proc.returncode != 0, proc.stdout
    assert MESSAGE in proc.stderr, proc.stderr
    assert "No inventory was parsed" in proc.stderr


def test_awx_sync_of_a_slurm_source_whose_controller_fails_fails_naming_it(tmp_path: Path) -> None:
    source = tmp_path / "slurm.yml"
    source.write_text(f"plugin: cvs.cluster.slurm\npartition: gpu\nscontrol: {tmp_path / 'no-scontrol'}\n")
    proc = ansible_inventory(source, AWX_SYNC_ENV)
    assert proc.returncode != 0, proc.stdout
    assert f"{source}: Slurm: partition 'gpu': {tmp_path / 'no-scontrol'} --oneliner show partition gpu" in proc.stderr


def test_awx_sync_of_a_valid_cluster_file_lists_its_nodes(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(
        json.dumps({**UPSTREAM_TEMPLATE, "head_node_dict": {}, "node_dict": {"192.0.2.1": {}, "192.0.2.2": {}}})
    )
    proc = ansible_inventory(path, AWX_SYNC_ENV)
    assert proc.returncode == 0, proc.stderr
    listing = json.loads(proc.stdout)
    assert listing["cvs_nodes"]["hosts"] == ["192.0.2.1", "192.0.2.2"]
    assert listing["cvs_nodes"]["vars"]["ansible_user"] == "alice"  # --export: group vars stay on the group
