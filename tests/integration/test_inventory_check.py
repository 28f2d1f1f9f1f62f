"""A broken inventory fails the run, naming the file and the error (issue 13).

Ansible goes on with an empty inventory when a source cannot be parsed, so without the collection's first play a
broken CVS cluster file made validate.yml, health_rvs.yml and train_maxtext.yml exit 0 having done nothing. Real
ansible-playbook runs; no node is contacted (the check play runs on localhost before anything else).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

PLAYBOOKS = ["playbooks/validate.yml", "playbooks/health_rvs.yml", "playbooks/train_maxtext.yml"]
BROKEN = '{\n  "username": "root",\n  "priv_key_file": "/root/.ssh/id_ed25519",\n  "node_dict": {\n    "10.77.0.11": {"bmc_ip": "NA",}\n  }\n}\n'  # noqa: E501


def _cluster_file(tmp_path: Path, cluster: Any, **changes: Any) -> Path:
    data = {"username": "root", "priv_key_file": str(cluster.inventory("baremetal").parent / "id_ed25519"),
            "node_dict": {n.ip: {"bmc_ip": "NA", "vpc_ip": n.ip} for n in cluster.nodes}, **changes}  # fmt: skip
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def _assert_stopped_first(proc: Any, message: str) -> None:
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert f'fatal: [localhost]: FAILED! => {{"changed": false, "msg": "{message}' in proc.stdout, proc.stdout[-3000:]
    assert "PLAY [Check the inventory before anything starts]" in proc.stdout
    assert proc.stdout.count("PLAY [") == 1, proc.stdout  # nothing after the check


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_a_cluster_file_with_a_json_error_fails_naming_line_and_column(
    playbook: str, run_playbook: Callable[..., Any], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(BROKEN)
    proc = run_playbook(playbook, broken, check=False)
    _assert_stopped_first(
        proc,
        f"invalid CVS cluster file {broken}: not valid JSON: Expecting property name enclosed in double quotes "
        "(line 5, column 35)",
    )


def test_a_cvs_yml_source_of_a_broken_file_fails_the_same_way(run_playbook: Callable[..., Any], tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text(BROKEN)
    source = tmp_path / "inventory.cvs.yml"
    source.write_text("plugin: cvs.cluster.cluster_json\npath: broken.json\n")
    proc = run_playbook("playbooks/validate.yml", source, check=False)
    _assert_stopped_first(proc, f"invalid CVS cluster file {tmp_path / 'broken.json'}: not valid JSON")


def test_a_placeholder_left_in_the_file_is_named_with_its_key(
    cluster: Any, run_playbook: Callable[..., Any], tmp_path: Path
) -> None:
    path = _cluster_file(tmp_path, cluster, username="<changeme>")
    proc = run_playbook("playbooks/health_rvs.yml", path, check=False)
    _assert_stopped_first(proc, f"invalid CVS cluster file {path}: username:")
    assert "<changeme>" in proc.stdout


def test_an_inventory_without_cvs_nodes_names_its_sources(run_playbook: Callable[..., Any], tmp_path: Path) -> None:
    ini = tmp_path / "hosts.ini"
    ini.write_text("[gpu]\n10.77.0.11\n")
    proc = run_playbook("playbooks/validate.yml", ini, check=False)
    _assert_stopped_first(proc, f"no host in the group cvs_nodes of the inventory {ini}: give a CVS cluster file")


def test_a_valid_cluster_file_passes_the_check(cluster: Any, run_playbook: Callable[..., Any], tmp_path: Path) -> None:
    proc = run_playbook("playbooks/check_inventory.yml", _cluster_file(tmp_path, cluster), check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "skipping: [localhost]" in proc.stdout


def test_an_unknown_key_is_named_with_the_file_and_the_closest_valid_key(
    cluster: Any, run_playbook: Callable[..., Any], tmp_path: Path
) -> None:
    path = _cluster_file(tmp_path, cluster, env_var={"NCCL_DEBUG": "INFO"})
    proc = run_playbook("playbooks/validate.yml", path, check=False)
    _assert_stopped_first(
        proc, f"invalid CVS cluster file {path}: env_var: is not a key of a CVS cluster file; did you mean 'env_vars'?"
    )


def test_an_upstream_maxtext_config_that_enforces_absent_thresholds_stops_before_prepare(
    run_playbook: Callable[..., Any], tmp_path: Path
) -> None:
    """Written after upstream's documented jaxmaxtext schema (schema_version 1, the training layout): it is read, and
    enforce_thresholds true without the threshold file given stops the run showing the -e to add (before, -e @file
    was accepted and the run trained the role's defaults)."""
    config = {
        "schema_version": 1,
        "framework": "jaxmaxtext",
        "gpu_arch": "mi300x",
        "enforce_thresholds": True,
        "threshold_json": "my_threshold.json",
        "model": {"id": "llama3.1-8b", "remote": 0, "precision": "bfloat16"},
        "training": {"distributed": True, "steps": 30, "maxtext_config": {"model_name": "llama3.1-8b"}},
    }
    path = tmp_path / "mi300x_jaxmaxtext_llama.json"
    path.write_text(json.dumps(config))
    proc = run_playbook("playbooks/validate.yml", "baremetal", args=["-e", f"@{path}"], check=False)
    assert proc.returncode == 2, proc.stdout[-3000:]
    out = " ".join(proc.stdout.split())
    assert (
        f"node1: invalid MaxText settings: the upstream CVS MaxText config (-e @{path}): "
        "enforce_thresholds: true, but no thresholds were given: add -e" in out
    ), out[-3000:]
    assert "my_threshold.json" in out.split("thresholds were given", 1)[1][:200]
    assert "PLAY [Prepare the workload namespace" not in proc.stdout
