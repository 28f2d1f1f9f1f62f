"""What a node says about itself (module_utils/_node_probe.py), on this machine's real files and processes."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.module_utils._node_probe import (
    ProbeError,
    default_route_interface,
    describe,
    disk_space,
    find_binary,
    gpu_render_nodes,
    interface_address,
    kernel_log,
    memory_mb,
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


def test_the_default_route_with_the_lowest_metric_names_the_interface(tmp_path: Path) -> None:
    routes = tmp_path / "route"
    head = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    routes.write_text(
        head
        + "eth0\t00004D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        + "eth1\t00000000\t0100A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
        + "eth2\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
    )
    assert default_route_interface(str(routes)) == "eth2"
    routes.write_text(head + "eth0\t00004D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
    assert default_route_interface(str(routes)) is None
    assert default_route_interface(str(tmp_path / "missing")) is None


def test_memory_and_render_nodes_are_read_from_their_files(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemFree:  1 kB\n")
    assert memory_mb(str(meminfo)) == 24000
    meminfo.write_text("MemFree:  1 kB\n")
    assert memory_mb(str(meminfo)) is None
    dri = tmp_path / "dri"
    dri.mkdir()
    for name in ("card0", "card1", "renderD128", "renderD129"):
        (dri / name).touch()
    assert gpu_render_nodes(str(dri)) == 2
    assert gpu_render_nodes(str(tmp_path / "none")) == 0


def test_the_loopback_address_and_this_machine_are_described() -> None:
    assert interface_address("lo") == "127.0.0.1"
    assert interface_address("no-such-if0") is None
    node = describe()
    assert node["kernel"] == os.uname().release and node["cpus"] == os.cpu_count()
    assert isinstance(node["memory_mb"], int) and node["memory_mb"] > 0
    assert set(node) == {"hostname", "kernel", "cpus", "memory_mb", "address", "gpu_render_nodes"}
