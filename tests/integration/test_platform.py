"""The platform configuration suite (role cvs.cluster.platform, playbooks/platform.yml) on the simulated cluster.

The suite runs on the nodes themselves (cvs_nodes), so the baremetal inventory exercises it as every backend does.
Each node gets a directory of this suite's own under its private /tmp: a kernel command line file (read through
platform_cmdline_path, as /proc/cmdline would be), a link to the lspci stand-in (tests/cluster/image/stand-ins/
usr/local/bin/lspci, on the filesystem the nodes share; platform_lspci_path points at the link, so removing it
makes lspci missing on one node only) and a stand-in fault directory (CVS_STAND_IN_DIR through platform_env).

Four runs: a healthy one on each backend (every node passes, with its facts; on the container backend the check
still reads the nodes themselves); a faulty one given upstream's host_config.json with
-e @file (node1 without lspci, node2 booted with pci=realloc=on, node3's NIC 0000:13:00.0 at half width), each node
named with its own problem, device, expected and found value; and an upstream file with a misspelt key, refused
naming the closest valid one before any node is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CTL = REPO / "tests" / "cluster" / "ctl.sh"
LSPCI = REPO / "tests" / "cluster" / "image" / "stand-ins" / "usr" / "local" / "bin" / "lspci"
NODES = ["node1", "node2", "node3"]
CMDLINE = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-60-generic root=UUID=0f3c5d2e ro quiet {params} amd_iommu=on"
GOOD = "iommu=pt pci=realloc=off"
LEASES = Path("/var/tmp/cvs/leases")  # cvs_lease_dir's default, on the filesystem the nodes share
LEASE_ATTEMPTS = 8
NIC = "0000:13:00.0"  # the ConnectX-7 next to GPU 1 in the stand-in's PCI tree


def _node_exec(node: str, cmd: str) -> None:
    subprocess.run([str(CTL), "exec", node, "sh", "-c", cmd], text=True, check=True, timeout=120, capture_output=True)


def _container_settings(cluster: Any) -> dict[str, Any]:
    """The generated inventory's container, under a name and an SSH port of this suite's own."""
    settings = yaml.safe_load(Path(cluster.inventory("container")).read_text())["all"]["vars"]["cvs_container"]
    return {**settings, "name": f"cvs-plat-{uuid.uuid4().hex[:6]}", "ssh_port": 2271}


def _playbook(inventory: Any, extra: dict[str, Any], *files: Path) -> subprocess.CompletedProcess[str]:
    """ansible-playbook playbooks/platform.yml; a run refused because another run on the shared cluster holds the
    nodes' leases is run again once no lease is held (the lease is what makes concurrent runs wait)."""
    cmd = [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(inventory), "playbooks/platform.yml"]
    cmd += ["-e", json.dumps(extra)]
    for path in files:
        cmd += ["-e", f"@{path}"]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    results = Path(extra["cvs_results_dir"])
    for _attempt in range(LEASE_ATTEMPTS):
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
        if " is in use by run " not in proc.stdout:
            break
        shutil.rmtree(results, ignore_errors=True)
        deadline = time.monotonic() + 1200
        while list(LEASES.glob("*.lease")) and time.monotonic() < deadline:
            time.sleep(2)
    return proc


def _records(results: Path, proc: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    runs = [p for p in results.iterdir() if p.is_dir()] if results.is_dir() else []
    assert len(runs) == 1 and all((runs[0] / "checks" / n / "platform.json").is_file() for n in NODES), (
        proc.stdout[-4000:] + proc.stderr[-2000:]
    )
    (run,) = runs
    return {n: json.loads((run / "checks" / n / "platform.json").read_text()) for n in NODES}


def _summary(results: Path) -> dict[str, Any]:
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    return json.loads((run / "results.json").read_text())


@pytest.fixture(scope="module")
def node_dirs(cluster: Any) -> Iterator[str]:
    """/tmp/cvs-plat-<tag> on every node: cmdline (healthy), bin/lspci (the stand-in) and faults/ (empty)."""
    base = f"/tmp/cvs-plat-{uuid.uuid4().hex[:8]}"
    for node in NODES:
        _node_exec(
            node,
            f"mkdir -p {base}/bin {base}/faults && ln -s {LSPCI} {base}/bin/lspci"
            f" && echo '{CMDLINE.format(params=GOOD)}' > {base}/cmdline",
        )
    try:
        yield base
    finally:
        for node in NODES:
            _node_exec(node, f"rm -rf {base}")


def _extra(base: str, results: Path) -> dict[str, Any]:
    return {
        "cvs_results_dir": str(results),
        "platform_cmdline_path": f"{base}/cmdline",
        "platform_lspci_path": f"{base}/bin/lspci",
        "platform_env": {"CVS_STAND_IN_DIR": f"{base}/faults", "LD_LIBRARY_PATH": "/opt/rocm/lib"},
    }


@pytest.fixture(scope="module")
def healthy(cluster: Any, node_dirs: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    results = tmp_path_factory.mktemp("platform-healthy")
    proc = _playbook(cluster.inventory("baremetal"), _extra(node_dirs, results))
    return {"proc": proc, "records": _records(results, proc), "summary": _summary(results)}


@pytest.fixture(scope="module")
def healthy_container(
    cluster: Any, node_dirs: str, healthy: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The healthy run on the container backend: the check still runs on the nodes themselves."""
    results = tmp_path_factory.mktemp("platform-container")
    extra = {**_extra(node_dirs, results), "cvs_container": _container_settings(cluster)}
    proc = _playbook(cluster.inventory("container"), extra)
    return {"proc": proc, "records": _records(results, proc), "summary": _summary(results)}


def _upstream_file(directory: Path, **extra: Any) -> Path:
    """A host_config.json written after upstream's (cvs/input/config_file/platform/host_config.json)."""
    release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    host: dict[str, Any] = {
        "os_version": release["PRETTY_NAME"].strip('"'),
        "kernel_version": os.uname().release,
        "rocm_version": "6.4.1",
        "pci_realloc": "off",
        "gpu_count": "8",
        "gpu_pcie_speed": "32",
        "gpu_pcie_width": "16",
        "nic_pcie_speed": "32",
        "_comment_nic_pcie_speed": "delete both nic_pcie keys when the NICs hang off UALink",
        "nic_pcie_width": "16",
        **extra,
    }
    path = directory / "host_config.json"
    path.write_text(json.dumps({"host": host}, indent=4))
    return path


@pytest.fixture(scope="module")
def faulty(
    cluster: Any, node_dirs: str, healthy_container: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict:
    """After the healthy runs: node1 loses lspci, node2 boots with pci=realloc=on, node3's NIC runs at x8."""
    base = node_dirs
    _node_exec("node1", f"rm -f {base}/bin/lspci")
    _node_exec("node2", f"echo '{CMDLINE.format(params='iommu=pt pci=realloc=on')}' > {base}/cmdline")
    _node_exec("node3", f"echo '{json.dumps({'links': {NIC: {'width': 8}}})}' > {base}/faults/lspci.json")
    tmp = tmp_path_factory.mktemp("platform-faulty")
    results = tmp / "results"
    proc = _playbook(cluster.inventory("baremetal"), _extra(base, results), _upstream_file(tmp))
    return {"proc": proc, "records": _records(results, proc), "summary": _summary(results)}


def test_a_healthy_cluster_passes_with_its_facts(healthy: dict[str, Any]) -> None:
    proc = healthy["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for node, record in healthy["records"].items():
        assert record["status"] == "PASS", record
        assert record["reason"] == f"platform configuration as expected on {node}"
        facts = record["facts"]
        assert facts["gpus_on_pci"] == 8 and facts["backend_nics"] == 8
        assert record["pci_links"][NIC] == "32 GT/s x16" and record["pci_links"]["0000:05:00.0"] == "32 GT/s x16"
        assert facts["rocm_version"] == "6.4.1" and facts["numa_balancing"] in (0, 1)
        # the on-board management NIC is not a backend NIC: named in a note, not judged
        assert record["lines"] == [
            "note: not judged (platform_nic_pattern does not match): NIC 0000:c1:00.0 "
            "(Broadcom Inc. and subsidiaries NetXtreme BCM5720 Gigabit Ethernet PCIe)"
        ]
    assert healthy["summary"]["nodes"]["node2"]["checks"]["platform"]["status"] == "PASS"


def test_the_container_backend_checks_the_nodes_themselves(healthy_container: dict[str, Any]) -> None:
    proc = healthy_container["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for node, record in healthy_container["records"].items():
        assert record["status"] == "PASS", record
        assert record["backend"] == "container" and record["host"] == node
        assert record["facts"]["gpus_on_pci"] == 8


def test_each_faulty_node_is_named_with_device_expected_and_found(faulty: dict[str, Any]) -> None:
    proc, records = faulty["proc"], faulty["records"]
    assert proc.returncode != 0, proc.stdout[-3000:]
    node1 = records["node1"]
    assert node1["status"] == "ERROR"
    assert node1["reason"].startswith("node1: platform could not be checked: nothing checked: lspci not found on node1")
    assert "install pciutils or set platform_lspci_path" in node1["reason"]
    assert records["node2"]["status"] == "FAIL"
    assert records["node2"]["lines"][0] == "kernel command line: expected pci=realloc=off, found pci=realloc=on"
    assert [x for x in records["node2"]["lines"] if not x.startswith("note: ")] == [records["node2"]["lines"][0]]
    assert records["node3"]["status"] == "FAIL"
    assert [x for x in records["node3"]["lines"] if not x.startswith("note: ")] == [
        f"NIC {NIC} (Mellanox Technologies MT2910 Family [ConnectX-7]): PCIe link width x8, expected x16 (LnkCap x16)"
    ]
    assert records["node3"]["reason"].startswith(f"node3: NIC {NIC} ")
    summary = faulty["summary"]
    assert summary["summary"]["status"] == "FAIL"
    assert {n: summary["nodes"][n]["checks"]["platform"]["status"] for n in NODES} == {
        "node1": "ERROR",
        "node2": "FAIL",
        "node3": "FAIL",
    }
    # the console names the nodes and their problems
    assert "node2: kernel command line: expected pci=realloc=off, found pci=realloc=on" in proc.stdout


def test_upstream_host_config_is_honoured_key_by_key(faulty: dict[str, Any]) -> None:
    honoured = faulty["records"]["node2"]["upstream"]
    assert honoured == {
        "os_version": "os_version",
        "kernel_version": "kernel_version",
        "rocm_version": "rocm_version",
        "pci_realloc": "kernel_cmdline",
        "gpu_count": "gpu_count",
        "gpu_pcie_speed": "gpu_pcie",
        "gpu_pcie_width": "gpu_pcie",
        "nic_pcie_speed": "nic_pcie",
        "nic_pcie_width": "nic_pcie",
    }


def test_an_unknown_upstream_key_is_refused_naming_the_closest_before_anything_runs(
    cluster: Any, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    proc = _playbook(
        cluster.inventory("baremetal"),
        {"cvs_results_dir": str(results)},
        _upstream_file(tmp_path, gpu_pcie_sped="32"),
    )
    assert proc.returncode != 0
    assert (
        "host.gpu_pcie_sped: not a key of upstream's host configuration; did you mean 'gpu_pcie_speed'?" in proc.stdout
    ), proc.stdout[-3000:]
    assert f"-e @{tmp_path / 'host_config.json'}" in proc.stdout
    # refused in the settings check: no node was prepared, no check record written
    assert "Prepare the node" not in proc.stdout
    assert not list(results.glob("*/checks"))
