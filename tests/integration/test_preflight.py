"""The preflight suite (role cvs.cluster.preflight, the first check of validate.yml) on the simulated cluster, both
backends.

A healthy cluster passing preflight, with its facts, is shown by tests/integration/test_mpi_rccl.py
(playbooks/rccl.yml runs preflight first). Here each of three nodes is made to differ in one way - node1's scratch
path is a 1 MiB tmpfs, node2's rvs reports another version, node3's amd-smi one GPU fewer (stand-in knobs in a
fault directory of the test's own under the node's private /tmp, shared with the container through a volume) - and
validate.yml names each node with its own problem, then records RVS as not run.
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


def _results(results_dir: Path) -> dict[str, Any]:
    (run,) = [p for p in results_dir.iterdir() if p.is_dir()]
    return json.loads((run / "results.json").read_text())


def _container_settings(cluster: Any, tag: str, port: int, volumes: list[str]) -> dict[str, Any]:
    """The generated inventory's container, renamed, on an SSH port of this suite's own, with ``volumes``."""
    settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
    args = {**settings["runtime"]["args"], "volumes": volumes}
    return {**settings, "name": f"cvs-pf-{tag}", "ssh_port": port, "runtime": {**settings["runtime"], "args": args}}


@pytest.fixture
def node_faults(node_exec: Callable[..., Any]) -> Iterator[str]:
    """/tmp/cvs-pf-<tag> on every node (node-private): faults/ for the stand-ins, space/ a 1 MiB tmpfs on node1."""
    base = f"/tmp/cvs-pf-{uuid.uuid4().hex[:8]}"
    for node in NODES:
        node_exec(node, f"mkdir -p {base}/faults {base}/space")
    node_exec("node1", f"mount -t tmpfs -o size=1m tmpfs {base}/space")
    node_exec("node2", f"echo '{json.dumps({'version': '1.2.0'})}' > {base}/faults/rvs.json")
    node_exec("node3", f"echo '{json.dumps({'gpu_count': 7})}' > {base}/faults/amd-smi.json")
    try:
        yield base
    finally:
        node_exec("node1", f"umount {base}/space")
        for node in NODES:
            node_exec(node, f"rm -rf {base}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_node_that_differs_is_named_and_the_heavy_suites_do_not_run(
    run_playbook: Callable[..., Any], cluster: Any, node_faults: str, backend: str, tmp_path: Path
) -> None:
    base = node_faults
    extra: dict[str, Any] = {
        "cvs_results_dir": str(tmp_path),
        "cvs_validate_checks": ["preflight", "rvs"],
        "preflight_gpu_count": 8,
        "preflight_paths": [f"{base}/space"],
        "preflight_env": {"CVS_STAND_IN_DIR": f"{base}/faults", "LD_LIBRARY_PATH": "/opt/rocm/lib"},
    }
    if backend == "container":
        extra["cvs_container"] = _container_settings(cluster, uuid.uuid4().hex[:6], 2262, [f"{base}:{base}"])
    proc = run_playbook("playbooks/validate.yml", backend, extra, check=False)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "preflight did not pass on node1, node2, node3: rvs will not run" in proc.stdout
    data = _results(tmp_path)
    pre = {n: data["nodes"][n]["checks"]["preflight"] for n in NODES}
    assert {n: r["status"] for n, r in pre.items()} == dict.fromkeys(NODES, "FAIL")
    node1 = [line for line in pre["node1"]["lines"] if not line.startswith("note: ")]
    assert len(node1) == 1 and node1[0].endswith(f"MiB free under {base}/space ({base}/space), needs 1024 MiB")
    assert int(node1[0].split()[0]) <= 1
    assert [m["status"] for m in pre["node1"]["metrics"] if m["metric"] == f"free_mb {base}/space"] == ["FAIL"]
    assert [x for x in pre["node2"]["lines"] if not x.startswith("note: ")] == [
        "rvs_version is 1.2.0, not 1.3.0 as on node1, node3"
    ]
    assert [x for x in pre["node3"]["lines"] if not x.startswith("note: ")] == [
        "7 GPU(s) found, the inventory expects 8",
        "gpus is 7, not 8 as on node1, node2",
    ]
    assert pre["node3"]["reason"].startswith("node3: 7 GPU(s) found")
    for node in NODES:
        rvs = data["nodes"][node]["checks"]["rvs"]  # RVS's own record would replace this one had it run
        assert rvs["status"] == "ERROR"
        assert rvs["reason"] == (
            f"{node}: rvs not run: preflight did not pass on node1, node2, node3 "
            "(set cvs_preflight_gate=false to run the suites anyway)"
        )
    assert data["summary"]["status"] == "FAIL"
