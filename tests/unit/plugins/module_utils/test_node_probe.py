"""What a node says about itself (module_utils/_node_probe.py), on this machine's real files and processes."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.module_utils._node_probe import (
    ProbeError,
    disk_space,
    find_binary,
    kernel_log,
    probe,
    rdma_ports,
    read_kmsg,
    run_command,
)


def test_a_command_runs_without_a_shell_and_a_missing_or_slow_one_is_reported(tmp_path: Path) -> None:
    ok = run_command(["echo", "a;b", "$HOME"], 10)
    assert ok["rc"] == 0 and ok["stdout"] == "a;b $HOME\n" and ok["problem"] is None
    assert run_command([str(tmp_path / "nope")], 10)["problem"] == f"{tmp_path / 'nope'} not found"
    slow = run_command(["sleep", "5"], 0.2)
    assert slow["rc"] is None and slow["problem"] == "sleep did not answer within 0.2 s"


def test_binaries_are_found_on_path_then_in_the_search_folders(tmp_path: Path) -> None:
    tool = tmp_path / "mytool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert find_binary("mytool") is None
    assert find_binary("mytool", [str(tmp_path)]) == str(tool)
    assert find_binary(str(tool)) == str(tool)
    tool.chmod(0o644)
    assert find_binary(str(tool)) is None


def test_free_space_of_a_missing_directory_is_measured_on_its_nearest_parent(tmp_path: Path) -> None:
    out = disk_space(str(tmp_path / "a" / "b"))
    st = os.statvfs(tmp_path)
    assert out["probed"] == str(tmp_path) and out["free_mb"] == st.f_bavail * st.f_frsize // 2**20


def test_kernel_log_records_are_matched_and_ignore_patterns_win() -> None:
    lines = ["6,1,5000000,-;amdgpu 0000:05:00.0: ring gfx timeout", "6,2,6000000,-;eth0: link up"]

    def fake_reader() -> list[str]:
        return [f"[{int(r.split(',')[2]) / 1e6:12.6f}] {r.split(';', 1)[1]}" for r in lines]

    out = kernel_log({"gpu": re.compile(r"ring \S+ timeout")}, {}, fake_reader)
    assert out["matches"] == [{"name": "gpu", "line": "[    5.000000] amdgpu 0000:05:00.0: ring gfx timeout"}]
    ignored = kernel_log({"gpu": re.compile("timeout")}, {"known": re.compile("gfx")}, fake_reader)
    assert ignored["matched"] == 0 and ignored["lines"] == 2


def test_a_missing_kernel_log_is_reported_not_raised() -> None:
    def missing() -> list[str]:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory")

    out = kernel_log({"x": re.compile("x")}, {}, missing)
    assert out["readable"] is False and "no kernel log in this namespace" in out["problem"]


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="reading /dev/kmsg needs root")
def test_the_real_kernel_log_reads_to_its_end_without_blocking() -> None:
    lines = read_kmsg()  # the kernel log since boot is never empty; every record gets its time stamp
    assert lines and all(re.match(r"^\[\s*\d+\.\d{6}\] ", line) for line in lines), lines[:5]


def test_rdma_ports_are_read_from_sysfs_shaped_folders(tmp_path: Path) -> None:
    port = tmp_path / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "phys_state").write_text("5: LinkUp\n")
    assert rdma_ports(str(tmp_path)) == [{"device": "mlx5_0", "port": "1", "state": "ACTIVE", "phys_state": "LinkUp"}]
    assert rdma_ports(str(tmp_path / "none")) == []


def test_a_bad_pattern_is_named() -> None:
    with pytest.raises(ProbeError, match=r"kernel_log_patterns\[bad\]: '\(unclosed'"):
        probe({}, [], [], {"bad": "(unclosed"}, {}, 5)


def test_a_probe_of_this_machine_has_every_part(tmp_path: Path) -> None:
    out = probe({"py": ["python3", "-c", "print(42)"]}, ["python3", "no-such-tool-x"], [str(tmp_path)], {}, {}, 10)
    assert out["commands"]["py"]["stdout"] == "42\n" and out["binaries"]["no-such-tool-x"] is None
    assert out["kernel"] == os.uname().release and out["disk"][0]["free_mb"] > 0
    assert out["kernel_log"]["readable"] is None


def test_a_command_can_keep_only_the_lines_the_caller_needs() -> None:
    out = probe({"many": {"argv": ["printf", "a:1\\nb:2\\na:3\\n"], "keep": "^a:"}}, [], [], {}, {}, 10)
    assert out["commands"]["many"]["stdout"] == "a:1\na:3\n"
    with pytest.raises(ProbeError, match=r"commands\[many\]\.keep: '\['"):
        probe({"many": {"argv": ["true"], "keep": "["}}, [], [], {}, {}, 10)
    with pytest.raises(ProbeError, match=r"commands\[many\]: unknown key\(s\) kep"):
        probe({"many": {"argv": ["true"], "kep": "x"}}, [], [], {}, {}, 10)
    with pytest.raises(ProbeError, match=r"commands\[many\] must be a non-empty list"):
        probe({"many": "true"}, [], [], {}, {}, 10)
