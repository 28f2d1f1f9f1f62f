"""MPI launch (role cvs.cluster.mpi) and the RCCL suite (cvs.cluster.rccl, playbooks/rccl.yml) on the simulated
cluster, both backends, with real Open MPI: every rank of the all_reduce_perf stand-in does a real MPI_Allreduce
across the three nodes (tests/cluster/image/stand-ins/opt/rccl-tests/build/all_reduce_perf).

Faults reach the stand-in through a fault directory of the test's own under each node's private /tmp, shared
with the container through a volume; ``mpi_yield_when_idle`` keeps three ranks from spinning on two cores.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

NODES = ["node1", "node2", "node3"]
BACKENDS = ["baremetal", "container"]
SIZES = ["-b", "8", "-e", "512K", "-f", "4"]  # 8 B .. 512 KiB, 9 sizes


def _results(results_dir: Path) -> dict[str, Any]:
    (run,) = [p for p in results_dir.iterdir() if p.is_dir()]
    return json.loads((run / "results.json").read_text())


def _record(results_dir: Path, node: str) -> dict[str, Any]:
    (path,) = results_dir.glob(f"*/checks/{node}/rccl.json")
    return json.loads(path.read_text())


@pytest.fixture
def fault_dir(node_exec: Callable[..., Any]) -> Iterator[str]:
    base = f"/tmp/cvs-mpi-{uuid.uuid4().hex[:8]}"
    for node in NODES:
        node_exec(node, f"mkdir -p {base}/faults")
    try:
        yield base
    finally:
        for node in NODES:
            node_exec(node, f"rm -rf {base}")


def _extra(cluster: Any, backend: str, results: Path, base: str, port: int, **over: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "cvs_results_dir": str(results),
        "rccl_ranks_per_node": 1,
        "rccl_mca": {"mpi_yield_when_idle": 1},
        "rccl_env": {"CVS_STAND_IN_DIR": f"{base}/faults"},
        "rccl_timeout": 120,
        **over,
    }
    if backend == "container":
        settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
        args = {**settings["runtime"]["args"], "volumes": [f"{base}:{base}"]}
        extra["cvs_container"] = {**settings, "name": f"cvs-mpi-{uuid.uuid4().hex[:6]}", "ssh_port": port,
                                  "runtime": {**settings["runtime"], "args": args}}  # fmt: skip
    return extra


def _no_ranks_left(node_exec: Callable[..., Any]) -> None:
    """No rank, mpirun or orted runs anywhere, and no job key is left in a node's authorized_keys."""
    for node in NODES:
        left = node_exec(node, "pgrep -af '[a]ll_reduce_perf|[m]pirun|[o]rted' || true").stdout.strip()
        assert left == "", (node, left)
        keys = node_exec(node, "grep -c ' cvs-mpi-' /root/.ssh/authorized_keys || true").stdout.strip()
        assert keys == "0", (node, keys)


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_reduce_across_three_nodes_passes_with_parsed_bandwidths(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], fault_dir: str, backend: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    tests = [{"name": "all_reduce_perf", "args": SIZES, "thresholds": {"512K": 0.0001, "8": 0}}]
    port = 2271 if backend == "container" else 0
    run_playbook("playbooks/rccl.yml", backend, _extra(cluster, backend, tmp_path, fault_dir, port, rccl_tests=tests))
    data = _results(tmp_path)
    assert data["checks"] == ["preflight", "rccl"] and data["summary"]["status"] == "PASS"
    for node in NODES:
        pre = data["nodes"][node]["checks"]["preflight"]
        assert pre["status"] == "PASS" and pre["reason"] == f"all preflight checks passed on {node}", pre
        assert pre["facts"]["gpus"] == 8 and pre["facts"]["rvs_version"] == "1.3.0" and pre["facts"]["hostname"] == node
        assert pre["facts"]["rocm_version"] == "6.4.1" and pre["facts"]["gpu_model"] == "AMD Instinct MI300X"
        metrics = {m["metric"]: m for m in pre["metrics"]}
        assert abs(metrics["clock_skew"]["value"]) <= 5 and metrics["clock_skew"]["status"] == "PASS"
        assert [m["value"] >= 1024 for name, m in metrics.items() if name.startswith("free_mb ")] == [True]
        # a container has no /dev/kmsg: said, not failed; the baremetal node's kernel log was read
        notes = [line for line in pre["lines"] if line.startswith("note: ")]
        assert notes == (["note: kernel log not checked: /dev/kmsg: no kernel log in this namespace"]
                         if backend == "container" else [])  # fmt: skip
        rec = _record(tmp_path, node)
        (test,) = rec["tests"]
        assert rec["status"] == "PASS" and test["mpi"]["status"] == "PASS" and test["mpi"]["nodes"] == NODES
        assert [row["size"] for row in test["table"]] == [8 * 4**k for k in range(9)]
        assert all(row["wrong"] == 0 and row["busbw"] > 0 for row in test["table"][-3:])
        assert test["avg_busbw"] > 0
        assert rec["reason"] == f"all_reduce_perf: 9 sizes, largest 524288 B at {test['table'][-1]['busbw']:.2f} GB/s"
        assert {m["metric"]: m["status"] for m in rec["metrics"]} == {
            "all_reduce_perf busbw 524288B": "PASS",
            "all_reduce_perf busbw 8B": "PASS",
            "all_reduce_perf avg busbw": "RECORD",
        }
        assert data["nodes"][node]["checks"]["rccl"]["status"] == "PASS"
    _no_ranks_left(node_exec)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_low_bandwidth_fails_by_size_and_a_rank_that_exits_non_zero_stops_every_rank_and_is_named(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], fault_dir: str, backend: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    # every rank reads the fault file; only rank 2 (node3, --map-by node) acts on it, from its 4th message size on
    fault = {"exit_rank": 2, "exit_code": 3, "exit_after_sizes": 3, "size_delay": 0.5}
    for node in NODES:
        node_exec(node, f"echo '{json.dumps(fault)}' > {fault_dir}/faults/all_reduce_perf.json")
    tests = [
        # two sizes: the fault never fires; a bus bandwidth no loopback veth gives fails naming size and value
        {"name": "all_reduce_perf", "args": ["-b", "8", "-e", "16", "-f", "2"], "thresholds": {"16": 5000}},
        # seventeen sizes: rank 2 exits with status 3 after three, while the others are mid-run
        {"name": "all_reduce_perf", "args": ["-b", "8", "-e", "512K", "-f", "2"]},
    ]
    port = 2272 if backend == "container" else 0
    extra = _extra(cluster, backend, tmp_path, fault_dir, port, rccl_tests=tests)
    proc = run_playbook("playbooks/rccl.yml", backend, extra, check=False)
    assert proc.returncode != 0, proc.stdout[-3000:]
    for node in NODES:
        rec = _record(tmp_path, node)
        low, died = rec["tests"]
        assert low["status"] == "FAIL" and low["mpi"]["status"] == "PASS"
        value = low["table"][-1]["busbw"]
        assert low["reason"] == f"all_reduce_perf: bus bandwidth {value:.2f} GB/s at 16 B is below 5000.00 GB/s"
        assert [m["status"] for m in low["metrics"] if m["metric"] == "all_reduce_perf busbw 16B"] == ["FAIL"]
        assert died["reason"] == (
            "all_reduce_perf: rank 2 on node3 exited with status 3 (first to fail); every rank was stopped"
        ), died["reason"]
        assert died["mpi"]["failed_rank"] == 2 and died["mpi"]["rc"] != 0  # None: stopped before mpirun exited
        # the survivors were stopped mid-run: rank 0 printed some sizes, never the end of the table
        assert 0 < len(died["table"]) < 17 and died["avg_busbw"] is None
        assert rec["status"] == "FAIL" and rec["failed_node"] == "node3"
        assert rec["reason"] == f"{low['reason']}; {died['reason']}"
    _no_ranks_left(node_exec)


def test_a_node_without_mpirun_too_many_slots_and_bad_mca_settings_are_named_before_the_launch(
    run_playbook: Callable[..., Any], node_exec: Callable[..., Any], fault_dir: str, tmp_path: Path
) -> None:
    bindir = f"{fault_dir}/bin"  # mpirun and ompi_info on node1 and node3 only (node-private /tmp)
    for node in ("node1", "node3"):
        node_exec(node, f"mkdir -p {bindir} && ln -s /usr/bin/mpirun /usr/bin/ompi_info {bindir}/")
    extra = _extra(None, "baremetal", tmp_path, fault_dir, 0, rccl_mpirun=f"{bindir}/mpirun", rccl_ranks_per_node=64,
                   rccl_mca={"pml": "no_such_pml", "btl_tcp_if_inclde": "eth0", "mpi_yield_when_idle": 1})  # fmt: skip
    proc = run_playbook("playbooks/rccl.yml", "baremetal", extra, check=False)
    assert proc.returncode != 0
    assert "Launch mpirun detached" not in proc.stdout
    rec = _record(tmp_path, "node1")
    assert rec["status"] == "ERROR"
    reason = rec["reason"]
    assert reason.startswith("cvs.cluster.mpi rccl-all_reduce_perf cannot start: node1: 64 slots per node asked")
    for node in ("node1", "node3"):
        assert f"{node}: 64 slots per node asked (mpi_slots_per_node) but the node has" in reason
    assert f"node2: mpirun not found ({bindir}/mpirun, setting mpi_mpirun)" in reason
    assert "--mca pml no_such_pml: no pml component named 'no_such_pml' (this Open MPI has " in reason
    assert (
        "--mca btl_tcp_if_inclde eth0: Open MPI knows no parameter 'btl_tcp_if_inclde' (did you mean "
        "btl_tcp_if_include?) (setting mpi_mca)"
    ) in reason
    assert all(_record(tmp_path, n)["reason"] == reason for n in NODES)
    _no_ranks_left(node_exec)


def test_an_unreachable_ssh_port_is_named_before_the_launch(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], fault_dir: str, tmp_path: Path
) -> None:
    extra = _extra(cluster, "container", tmp_path, fault_dir, 2273, rccl_ssh_port=2299)
    proc = run_playbook("playbooks/rccl.yml", "container", extra, check=False)
    assert proc.returncode != 0
    assert "Launch mpirun detached" not in proc.stdout
    reason = _record(tmp_path, "node2")["reason"]
    for node, ip in (("node2", "10.77.0.12"), ("node3", "10.77.0.13")):
        assert (f"node1 cannot reach {node} at {ip} port 2299 (mpi_ssh_port) over SSH: ssh: connect to host {ip} "
                "port 2299: Connection refused") in reason  # fmt: skip
    _no_ranks_left(node_exec)
