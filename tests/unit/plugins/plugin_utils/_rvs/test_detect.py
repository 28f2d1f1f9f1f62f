"""RVS version and GPU model detection (plugin_utils/_rvs/detect.py), also on the rvs / amd-smi stand-ins."""

from __future__ import annotations

import json

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.detect import (
    gpu_config_folder,
    parse_rvs_version,
    rvs_version_supports_levels,
    rvs_version_text,
)
from ansible_collections.cvs.cluster.tests.unit.plugins.plugin_utils.rvs_samples import AMD_SMI_BIN, CONF, run_stand_in

# ---------------------------------------------------------------- RVS version


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.3.0\n", True),
        ("1.3.0.60400", True),
        ("1.10.2", True),
        ("2.0", True),
        ("ROCm Validation Suite version 1.1.0", False),
        ("ROCm Validation Suite (version 1.2.9)", False),
        ("\nROCm Validation Suite (version 1.6.75)\n", True),
        ("", False),
        ("rvs: error while loading shared libraries: libamdhip64.so", False),
        (None, False),
    ],
)
def test_rvs_version_supports_levels(text, expected):
    assert rvs_version_supports_levels(text) is expected


def test_parse_rvs_version():
    assert parse_rvs_version("ROCm Validation Suite version 1.1.0") == (1, 1, 0)
    assert parse_rvs_version("1.3") == (1, 3, 0)
    assert parse_rvs_version("none") is None


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("1.3.0\n", "1.3.0"),
        ("1.3.0.60400", "1.3.0.60400"),
        ("\nROCm Validation Suite (version 1.6.75)\n", "1.6.75"),
        ("rvs 2024.1 build, version 1.2.0-rc1", "1.2.0-rc1"),
        ("no version here", None),
        (None, None),
    ],
)
def test_the_version_as_printed_is_the_one_levels_are_decided_on(text, version):
    """Preflight compares this text across nodes; the RVS run's level gate reads the same match."""
    assert rvs_version_text(text) == version
    parsed = parse_rvs_version(text)
    assert (parsed is None) == (version is None)
    if version:
        assert version.startswith(".".join(map(str, parsed[:2])))


# ---------------------------------------------------------------- GPU config folder


AMD_SMI_LIST = json.dumps(
    [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "device_id": "0x74a1"}, "bus": {"bdf": "0000:05:00.0"}}],
    indent=4,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (AMD_SMI_LIST, "MI300X"),
        (json.dumps({"gpu": 0, "asic": {"market_name": "AMD Instinct MI325X"}}), "MI325X"),
        (json.dumps({"gpu_data": [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI355X"}}]}), "MI355X"),
        (json.dumps([{"gpu": 0, "ASIC": {"MARKET_NAME": "AMD Instinct MI300X VF"}}]), "MI300X"),
        ("WARNING: partition mode [SPX]\n" + AMD_SMI_LIST, "MI300X"),
        (json.dumps([{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}}]), "MI210"),
        (json.dumps([{"gpu": 0, "asic": {"market_name": "AMD Radeon RX 9070 GRE"}}]), "RX9070GRE"),
        (json.dumps([{"gpu": 0, "asic": {"market_name": "N/A"}}]), None),
        (json.dumps([{"gpu": 0, "bus": {"bdf": "0000:05:00.0"}}]), None),
        ("[]", None),
        ("not json at all", None),
        ("", None),
        ("GPU: 0\n    ASIC:\n        MARKET_NAME: AMD Instinct MI308X\n", "MI308X"),
    ],
)
def test_gpu_config_folder(text, expected):
    assert gpu_config_folder(text) == expected


def test_gpu_config_folder_accepts_decoded_data():
    assert gpu_config_folder(json.loads(AMD_SMI_LIST)) == "MI300X"


# ---------------------------------------------------------------- the rvs / amd-smi stand-ins


def test_stand_in_version_and_gpu_list(tmp_path):
    assert run_stand_in(tmp_path, ["--version"]).stdout == "1.3.0\n"
    assert rvs_version_supports_levels(run_stand_in(tmp_path, ["--version"]).stdout)
    old = run_stand_in(tmp_path, ["--version"], {"version": "1.1.0"})
    assert old.stdout == "1.1.0\n" and not rvs_version_supports_levels(old.stdout)
    gpus = run_stand_in(tmp_path, ["-g"], {}).stdout.splitlines()
    assert gpus[0] == "Supported GPUs available:"
    assert len(gpus) == 9
    assert gpus[1] == "0000:05:00.0 - GPU[ 2 - 42583] AMD Instinct MI300X (Device 29857)"


def test_stand_in_amd_smi_gives_mi300x_folder(tmp_path):
    result = run_stand_in(tmp_path, ["static", "-a", "-g", "0", "--json"], binary=AMD_SMI_BIN)
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert isinstance(data, list) and data[0]["asic"]["market_name"] == "AMD Instinct MI300X"
    assert gpu_config_folder(result.stdout) == "MI300X"
    assert (CONF / gpu_config_folder(result.stdout) / "gst_single.conf").is_file()
    assert "ROCm version" in run_stand_in(tmp_path, ["--version"], binary=AMD_SMI_BIN).stdout
