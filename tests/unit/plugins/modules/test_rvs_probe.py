"""Module rvs_probe on this machine's real files and processes, with the rvs and amd-smi stand-ins of the test image."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.modules import rvs_probe
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.detect import gpu_config_folder
from ansible_collections.cvs.cluster.tests.unit.plugins.plugin_utils.rvs_samples import AMD_SMI_BIN, CONF, RVS_BIN


def script(path: Path, body: str, mode: int = 0o755) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(mode)
    return path


@pytest.fixture(autouse=True)
def healthy_stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-ins read their faults from CVS_STAND_IN_DIR: an empty folder is a healthy node."""
    (tmp_path / "faults").mkdir()
    monkeypatch.setenv("CVS_STAND_IN_DIR", str(tmp_path / "faults"))


def test_a_directory_is_taken_as_the_folder_holding_rvs(tmp_path: Path) -> None:
    assert rvs_probe.find_rvs(str(RVS_BIN)) == {"path": str(RVS_BIN), "usable": True}
    assert rvs_probe.find_rvs(str(RVS_BIN.parent)) == {"path": f"{RVS_BIN.parent}/rvs", "usable": True}
    assert rvs_probe.find_rvs(str(tmp_path)) == {"path": f"{tmp_path}/rvs", "usable": False}
    (tmp_path / "rvs").mkdir()  # <dir>/rvs that is a directory again is no binary
    assert rvs_probe.find_rvs(str(tmp_path)) == {"path": f"{tmp_path}/rvs", "usable": False}
    plain = script(tmp_path / "plain", "echo", mode=0o644)
    assert rvs_probe.find_rvs(str(plain)) == {"path": str(plain), "usable": False}
    assert rvs_probe.find_rvs("/opt/nowhere/bin/rvs") == {"path": "/opt/nowhere/bin/rvs", "usable": False}


def test_the_stand_ins_give_version_model_and_configuration_files() -> None:
    files = ["mem.conf", "gst_single.conf", "no_such.conf", "mem.conf", str(CONF / "rvs.conf")]
    found = rvs_probe.probe(str(RVS_BIN.parent), "/opt/rocm/lib", str(AMD_SMI_BIN), str(CONF), files, 30)
    assert found["rvs"] == {"path": f"{RVS_BIN.parent}/rvs", "usable": True}
    assert found["version"]["rc"] == 0 and found["version"]["stdout"].strip() == "1.3.0"
    assert found["amd_smi"]["rc"] == 0 and gpu_config_folder(found["amd_smi"]["stdout"]) == "MI300X"
    assert found["configs"] == [f"{CONF}/mem.conf", f"{CONF}/gst_single.conf", f"{CONF}/MI300X/gst_single.conf",
                                str(CONF / "rvs.conf")]  # fmt: skip


def test_nothing_is_run_when_rvs_is_missing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    amd_smi = script(tmp_path / "amd-smi", f"touch {marker}")
    found = rvs_probe.probe("/opt/nowhere/bin/rvs", "", str(amd_smi), str(CONF), ["mem.conf"], 30)
    assert found == {"rvs": {"path": "/opt/nowhere/bin/rvs", "usable": False}, "version": None, "amd_smi": None,
                     "configs": []}  # fmt: skip
    assert not marker.exists()


def test_rvs_gets_the_library_path_and_amd_smi_does_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    rvs = script(tmp_path / "rvs", 'echo "lib=$LD_LIBRARY_PATH"')
    amd_smi = script(tmp_path / "amd-smi", 'echo "lib=${LD_LIBRARY_PATH-unset}"; exit 3')
    found = rvs_probe.probe(str(rvs), "/my/rocm/lib", str(amd_smi), str(tmp_path / "conf"), ["mem.conf"], 30)
    assert found["version"] == {"rc": 0, "stdout": "lib=/my/rocm/lib\n", "stderr": "", "problem": None}
    assert found["amd_smi"]["rc"] == 3 and found["amd_smi"]["stdout"] == "lib=unset\n"
    assert found["configs"] == []  # no configuration folder at all


def test_a_missing_or_slow_command_is_reported_not_raised(tmp_path: Path) -> None:
    slow = script(tmp_path / "rvs", "sleep 20")
    found = rvs_probe.probe(str(slow), "", str(tmp_path / "no-amd-smi"), str(CONF), [], 0.5)
    assert found["version"] == {
        "rc": None,
        "stdout": "",
        "stderr": "",
        "problem": f"{slow} did not answer within 0.5 s",
    }
    assert found["amd_smi"]["rc"] is None
    assert found["amd_smi"]["problem"] == f"{tmp_path / 'no-amd-smi'}: No such file or directory"


def test_the_module_runs_with_its_arguments_and_returns_json(tmp_path: Path) -> None:
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {
        "rvs_path": str(RVS_BIN), "amd_smi_path": str(AMD_SMI_BIN), "config_dir": str(CONF),
        "config_files": ["babel.conf"], "_ansible_check_mode": True}}))  # fmt: skip
    # the module imports its module_utils by the collection path, as AnsiballZ lays them out on a node
    collections = Path(rvs_probe.__file__).parents[5]
    env = {**os.environ, "PYTHONPATH": str(collections)}
    done = subprocess.run(
        [sys.executable, rvs_probe.__file__, str(args)], capture_output=True, text=True, check=False, env=env
    )
    result = json.loads(done.stdout)
    assert result["changed"] is False and result["rvs"]["usable"] is True
    assert result["configs"] == [f"{CONF}/babel.conf", f"{CONF}/MI300X/babel.conf"]
