"""Unit tests for the node-local health program (plugin_utils/_quarantine/health.py) as installed by
plugin_utils/_quarantine/install.py: the shipped files alone, under ``python3 -I``, with the GPU-tool stand-ins and
a stand-in scontrol that keeps one node's state in a file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.baseline import build
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.health import new_kernel_lines
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.install import InstallError, files, read_baseline

from .test_baseline import FACTS, passing_results

REPO = Path(__file__).resolve().parents[5]
STAND_INS = REPO / "tests/cluster/image/stand-ins/opt/rocm/bin"
SCONTROL = """#!/bin/sh
# stand-in scontrol for one node: show prints a real 22.05 line from $STATE (state|reason), update rewrites it
echo "$*" >>"$STATE.calls"
case "$1 $2" in
"--oneliner show")
  IFS='|' read -r st reason <"$STATE"
  line="NodeName=$5 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUTot=2 State=$st ThreadsPerCore=1 Partitions=cvs"
  [ -n "$reason" ] && line="$line Reason=$reason [root@2026-12-07T02:03:30]"
  echo "$line" ;;
"update NodeName="*)
  [ -n "$FAIL_UPDATE" ] && { echo "slurm_update error: Unable to contact slurm controller" >&2; exit 1; }
  case "$3" in
  State=DRAIN) echo "IDLE+DRAIN|${4#Reason=}" >"$STATE" ;;
  State=RESUME) echo "IDLE|" >"$STATE" ;;
  esac ;;
esac
"""


def _install(tmp_path: Path, config: dict[str, Any], node_facts: dict[str, Any] | None = None) -> Path:
    data = build(passing_results(node2=node_facts or {}), None, {"node2": "gpu2"})
    dest = tmp_path / "opt"
    for rel, spec in files(data, config, None, sys.executable).items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(spec["content"])
        path.chmod(int(spec["mode"], 8))
    return dest


@pytest.fixture(name="node")
def node_fixture(tmp_path: Path) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(SCONTROL)
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IXUSR)
    faults = tmp_path / "faults"
    faults.mkdir()
    state = tmp_path / "slurm-state"
    state.write_text("IDLE|\n")
    config = {
        "commands": {
            "amd_smi_version": [str(STAND_INS / "amd-smi"), "version"],
            "amd_smi_static": [str(STAND_INS / "amd-smi"), "static", "--asic", "--driver", "--vbios", "--json"],
            "rvs_version": [str(STAND_INS / "rvs"), "--version"],
        },
        "facts": ["rocm_version", "rvs_version", "gpu_model", "gpus"],
        "paths": [{"path": str(tmp_path), "min_free_mb": 1}],
        "slurm": {"enabled": True, "scontrol": str(scontrol)},
        "state_dir": str(tmp_path / "state"),
    }
    env = {"PATH": "/usr/bin:/bin", "CVS_STAND_IN_DIR": str(faults), "STATE": str(state)}
    return {"config": config, "env": env, "faults": faults, "state": state, "tmp": tmp_path}


def _run(node: dict[str, Any], dest: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(dest / "cvs-health"), "--node", "gpu2", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**node["env"], **env},
        check=False,
    )


def test_a_node_whose_rvs_version_moved_is_drained_then_resumed_once_put_back(node: dict[str, Any]) -> None:
    dest = _install(node["tmp"], node["config"], {"rocm_version": "6.4.1"})
    healthy = _run(node, dest)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.startswith("cvs-health: gpu2: healthy (")
    (node["faults"] / "rvs.json").write_text(json.dumps({"version": "1.1.0"}))
    sick = _run(node, dest)
    assert sick.returncode == 1, sick.stdout + sick.stderr
    assert "cvs-health: gpu2: UNHEALTHY" in sick.stdout and "rvs_version is 1.1.0, baseline 1.3.0" in sick.stdout
    assert node["state"].read_text() == "IDLE+DRAIN|cvs: health: rvs_version is 1.1.0, baseline 1.3.0\n"
    again = _run(node, dest)
    assert again.returncode == 1 and "stays drained" in again.stdout
    (node["faults"] / "rvs.json").unlink()
    back = _run(node, dest)
    assert back.returncode == 0 and "resumed gpu2 (was IDLE+DRAIN: cvs: health: rvs_version" in back.stdout
    assert node["state"].read_text() == "IDLE|\n"


@pytest.mark.parametrize("reason", ["bad fan", "cvs: rvs: test mem FAIL (run r1)"])
def test_a_drain_of_an_admin_or_of_a_validate_run_is_left_alone(node: dict[str, Any], reason: str) -> None:
    dest = _install(node["tmp"], node["config"])
    node["state"].write_text(f"IDLE+DRAIN|{reason}\n")
    healthy = _run(node, dest)
    assert healthy.returncode == 0 and "resumed" not in healthy.stdout
    (node["faults"] / "rvs.json").write_text(json.dumps({"version": "1.1.0"}))
    sick = _run(node, dest)
    assert sick.returncode == 1 and f"already IDLE+DRAIN ({reason}): left as it is" in sick.stdout
    assert node["state"].read_text() == f"IDLE+DRAIN|{reason}\n"


def test_gpu_count_free_space_and_a_gpu_test_are_checked(node: dict[str, Any]) -> None:
    config = {
        **node["config"],
        "paths": [{"path": str(node["tmp"]), "min_free_mb": 10**9}],
        "gpu_test": ["/bin/sh", "-c", "echo 'gpu 3: hang' >&2; exit 3"],
    }
    dest = _install(node["tmp"], config)
    (node["faults"] / "amd-smi.json").write_text(json.dumps({"gpu_count": 7}))
    sick = _run(node, dest, "--no-drain")
    assert sick.returncode == 1
    assert "gpus is 7, baseline 8" in sick.stdout and "MiB free under" in sick.stdout
    assert "GPU test /bin/sh -c" in sick.stdout and "exit 3: gpu 3: hang" in sick.stdout
    assert node["state"].read_text() == "IDLE|\n", "--no-drain never drains"


def test_an_error_of_the_program_exits_2_and_drains_only_when_asked(node: dict[str, Any]) -> None:
    dest = _install(node["tmp"], node["config"])
    config = json.loads((dest / "config.json").read_text())
    (dest / "config.json").write_text(json.dumps({**config, "kernel_log_patterns": {"bad": "(["}}))
    broken = _run(node, dest)
    assert broken.returncode == 2 and "cvs-health: internal error: invalid regular expression in " in broken.stderr
    assert node["state"].read_text() == "IDLE|\n"
    (dest / "config.json").write_text(
        json.dumps({**config, "kernel_log_patterns": {"bad": "(["}, "drain_on_error": True})
    )
    drained = _run(node, dest)
    assert drained.returncode == 2 and node["state"].read_text().startswith("IDLE+DRAIN|cvs: health: internal error:")


def test_an_unknown_node_and_another_baseline_schema_are_errors_naming_the_file(node: dict[str, Any]) -> None:
    dest = _install(node["tmp"], node["config"])
    unknown = subprocess.run(
        [str(dest / "cvs-health"), "--node", "nope"],
        capture_output=True,
        text=True,
        env={**node["env"], "SLURMD_NODENAME": ""},
        check=False,
    )
    assert unknown.returncode == 2 and f"{dest}/baseline.json: nodes: none of nope" in unknown.stderr
    data = json.loads((dest / "baseline.json").read_text())
    (dest / "baseline.json").write_text(json.dumps({**data, "schema": 2}))
    refused = _run(node, dest)
    assert refused.returncode == 2 and f"{dest}/baseline.json: schema: 2 is not a baseline schema" in refused.stderr


def test_slurm_refusing_the_drain_is_said_and_the_node_still_fails(node: dict[str, Any]) -> None:
    dest = _install(node["tmp"], node["config"])
    (node["faults"] / "rvs.json").write_text(json.dumps({"version": "1.1.0"}))
    sick = _run(node, dest, FAIL_UPDATE="1")
    assert sick.returncode == 1 and "gpu2: could not drain: scontrol update NodeName=gpu2" in sick.stderr


def test_the_kernel_log_counts_only_lines_after_the_last_check() -> None:
    lines = ["[    1.000000] amdgpu: ring gfx timeout", "[    5.500000] amdgpu: fault", "no stamp"]
    assert new_kernel_lines(lines, {}, "b1") == ([], 5.5, False), "the first check only sets the mark"
    assert new_kernel_lines(lines, {"kmsg_mark": 1.0, "boot_id": "b1"}, "b1")[0] == ["[    5.500000] amdgpu: fault"]
    assert len(new_kernel_lines(lines, {"kmsg_mark": 9.0, "boot_id": "b0"}, "b1")[0]) == 3, "a new boot reads all"


def test_the_shipped_files_are_all_the_program_imports(tmp_path: Path) -> None:
    """Installed alone (``-I``: no site-packages, no PYTHONPATH), the program imports and prints its usage."""
    dest = _install(tmp_path, {})
    done = subprocess.run(
        [str(dest / "cvs-health"), "--help"], capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"}
    )
    assert done.returncode == 0 and "usage: cvs-health" in done.stdout, done.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["baseline.json", "config.json", "cvs-health", "lib"]
    assert (dest / "cvs-health").read_text().startswith(f"#!{sys.executable} -I\n")


def test_the_install_refuses_a_bad_config_key_a_relative_python_and_a_foreign_baseline(tmp_path: Path) -> None:
    data = build(passing_results(), "sim")
    with pytest.raises(InstallError, match="config: unknown key\\(s\\) gpu_tests; known:"):
        files(data, {"gpu_tests": []}, "sim", "/usr/bin/python3")
    with pytest.raises(InstallError, match="python: 'python3' must be an absolute path"):
        files(data, {}, "sim", "python3")
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        InstallError, match=f"{path}: cluster.name: the baseline is of cluster 'sim', this inventory's "
    ):
        read_baseline(str(path), "prod", "node1")
    assert read_baseline(str(path), "sim", "node1")["nodes"]["node1"]["facts"] == FACTS
    assert os.path.basename(path) == "baseline.json"
