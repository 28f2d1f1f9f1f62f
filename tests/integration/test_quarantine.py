"""Quarantine and the node-local health program on the simulated cluster's real Slurm (tests/cluster/slurm.sh).

* validate.yml on the Slurm backend with node2's RVS failing (the stand-in's fault file) drains node2 with the
  ``cvs:`` reason; the next run, which passes, resumes it; node3, drained by hand for another reason, stays drained
  through both (``scontrol show node`` read here). The second run runs over SSH on the nodes the
  ``cvs.cluster.slurm`` inventory lists (a drained node is not allocated by Slurm, so the run that vouches for it
  runs beside Slurm), and writes the baseline.
* The health program installed from that baseline and set as slurmd's HealthCheckProgram (HealthCheckInterval 5 s,
  ``scontrol reconfigure``): node2's RVS version changed drains node2 within an interval, put back resumes it; the
  admin's drain of node3 is never lifted by it.
* Slurm unreachable while draining fails the run naming the node not drained; another cluster's baseline is refused
  naming the file and the field.

Slurm is shared: every node this module drains is resumed, and slurm.conf restored, in a finally. Slurm is started
when it is not running (and then stopped at the end), else used as it is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

# the functions behind the function-scoped fixtures, for the module-scoped runs
from ansible_collections.cvs.cluster.tests.integration.conftest import node_exec as _node_exec
from ansible_collections.cvs.cluster.tests.integration.conftest import run_playbook

REPO = Path(__file__).resolve().parents[2]
SLURM_SH = REPO / "tests/cluster/slurm.sh"
SLURM_CONF = "/run/cvs-sim/slurm/slurm.conf"
VALIDATE = "playbooks/validate.yml"
RVS_FAULT = "/root/.cvs-stand-in/rvs.json"
RVS_VARS = {"rvs_poll_interval": 1, "rvs_test_level": 0, "rvs_default_timeout": 60, "rvs_tests": ["mem"]}
INTERVAL = 5
DEFAULT_CONSOLE = {"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default"}  # per-host recap lines


def _host(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLURM_CONF": SLURM_CONF}
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env, check=check)


def _node(name: str) -> dict[str, str]:
    line = _host("scontrol", "--oneliner", "show", "node", name).stdout.strip()
    state = re.search(r"\bState=(\S+)", line)
    reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*@[^\]]*\])?$", line)
    return {"state": state.group(1) if state else "", "reason": reason.group(1) if reason else ""}


def _drained(name: str) -> bool:
    return "DRAIN" in _node(name)["state"]


def _wait(what: str, predicate: Callable[[], bool], seconds: float) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > seconds:
            pytest.fail(f"{what}: not within {seconds:g} s (node2 {_node('node2')})")
        time.sleep(0.5)
    return time.monotonic() - start


def _playbook(run_playbook: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """run_playbook, again while another engineer's run holds a node (the run lease refuses, it does not wait)."""
    deadline = time.monotonic() + 1800
    while True:
        proc = run_playbook(*args, check=False, **kwargs)
        if "is in use by run" not in proc.stdout or time.monotonic() > deadline:
            return proc
        time.sleep(10)


@pytest.fixture(name="slurm", scope="module")
def slurm_fixture(cluster: Any) -> Iterator[Any]:
    running = subprocess.run([str(SLURM_SH), "status"], capture_output=True, text=True, check=False).returncode == 0
    if not running:
        started = subprocess.run([str(SLURM_SH), "start"], capture_output=True, text=True, timeout=180, check=False)
        assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield cluster
    finally:
        if not running:
            subprocess.run([str(SLURM_SH), "stop"], capture_output=True, text=True, timeout=180, check=False)


def _inventories(cluster: Any, tmp: Path) -> tuple[Path, list[Path]]:
    """The Slurm backend's inventory, and the cvs.cluster.slurm inventory (with the SSH settings beside it)."""
    data = yaml.safe_load(cluster.inventory("baremetal").read_text())
    data["all"]["vars"]["cvs_orchestrator"] = "slurm"
    data["all"]["vars"]["cvs_slurm"] = {"partition": "cvs", "time_limit": "30"}
    backend = tmp / "inventory-slurm.yml"
    backend.write_text(yaml.safe_dump(data))
    plugin = tmp / "slurm.yml"
    plugin.write_text(f"plugin: cvs.cluster.slurm\nslurm_conf: {SLURM_CONF}\npartition: cvs\n")
    ssh = {k: v for k, v in data["all"]["vars"].items() if k.startswith("ansible_")}
    ssh["ansible_python_interpreter"] = "/usr/bin/python3"
    ssh["cvs_slurm"] = {"conf": SLURM_CONF}
    settings = tmp / "ssh.yml"
    settings.write_text(yaml.safe_dump({"all": {"vars": ssh}}))
    return backend, [plugin, settings]


@pytest.fixture(name="runs", scope="module")
def runs_fixture(slurm: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two validate runs with cvs_quarantine=drain: node2's RVS failing, then passing; node3 drained by hand."""
    node_exec = _node_exec
    tmp = tmp_path_factory.mktemp("quarantine")
    results = tmp / "results"
    backend, plugin = _inventories(slurm, tmp)
    seen: dict[str, Any] = {"results": results, "plugin": plugin, "tmp": tmp}
    saved = node_exec("node2", f"cat {RVS_FAULT} 2>/dev/null; true").stdout
    _host("scontrol", "update", "NodeName=node3", "State=DRAIN", "Reason=bad fan")
    try:
        node_exec("node2", f"mkdir -p /root/.cvs-stand-in && cat > {RVS_FAULT}", input=json.dumps({"fail": ["all"]}))
        extravars = {
            **RVS_VARS,
            "cvs_results_dir": str(results),
            "cvs_validate_checks": ["rvs"],
            "cvs_quarantine": "drain",
        }
        seen["first"] = _playbook(run_playbook, VALIDATE, backend, extravars)
        seen["first_dir"] = _run_dirs(results)[-1]
        seen["after_first"] = {n: _node(n) for n in ("node1", "node2", "node3")}
        node_exec("node2", f"rm -f {RVS_FAULT}")
        extravars["cvs_validate_checks"] = ["preflight", "rvs"]
        seen["second"] = _playbook(run_playbook, VALIDATE, plugin, extravars)
        seen["second_dir"] = _run_dirs(results)[-1]
        seen["after_second"] = {n: _node(n) for n in ("node1", "node2", "node3")}
        yield seen
    finally:
        if saved.strip():
            node_exec("node2", f"cat > {RVS_FAULT}", input=saved)
        else:
            node_exec("node2", f"rm -f {RVS_FAULT}", check=False)
        for name in ("node2", "node3"):
            if _drained(name):
                _host("scontrol", "update", f"NodeName={name}", "State=RESUME", check=False)


def _run_dirs(results: Path) -> list[Path]:
    return sorted((p.parent for p in results.glob("*/results.json")), key=lambda p: p.stat().st_mtime)


def test_a_failing_node_is_drained_with_the_cvs_reason_and_resumed_by_the_next_passing_run(
    runs: dict[str, Any],
) -> None:
    first, second = runs["first"], runs["second"]
    assert first.returncode != 0, first.stdout[-4000:]
    first_dir, second_dir = runs["first_dir"], runs["second_dir"]
    run_id = first_dir.name
    node2 = runs["after_first"]["node2"]
    assert "DRAIN" in node2["state"], (node2, first.stdout[-6000:])
    assert node2["reason"].startswith("cvs: rvs: ") and node2["reason"].endswith(f"(run {run_id})"), node2
    assert len(node2["reason"]) <= 128
    assert "DRAIN" not in runs["after_first"]["node1"]["state"]
    assert runs["after_first"]["node3"]["reason"] == "bad fan", "an admin's drain stays"
    decided = json.loads((first_dir / "quarantine.json").read_text())
    rows = {a["node"]: a for a in decided["actions"]}
    assert rows["node2"]["action"] == "drain" and rows["node2"]["done"] is True
    assert rows["node3"]["action"] == "none", rows["node3"]  # not run there (Slurm left it out): not judged
    assert not (first_dir / "baseline.json").exists(), "a failed run writes no baseline"

    assert second.returncode == 0, second.stdout[-6000:]
    assert "DRAIN" not in runs["after_second"]["node2"]["state"], runs["after_second"]
    assert runs["after_second"]["node3"] == {"state": "IDLE+DRAIN", "reason": "bad fan"}, "an admin's drain stays"
    rows = {a["node"]: a for a in json.loads((second_dir / "quarantine.json").read_text())["actions"]}
    assert rows["node2"]["action"] == "resume" and rows["node2"]["done"] is True
    assert rows["node3"]["action"] == "keep" and "by an admin (bad fan)" in rows["node3"]["why"]
    baseline = json.loads((second_dir / "baseline.json").read_text())
    assert baseline["schema"] == 1 and baseline["run_id"] == second_dir.name
    assert baseline["nodes"]["node2"]["facts"]["rvs_version"] == "1.3.0" and baseline["fleet"]["facts"]["gpus"] == 8


def test_slurm_unreachable_while_draining_fails_naming_the_node_not_drained(
    runs: dict[str, Any], run_playbook: Callable[..., Any]
) -> None:
    first_dir = runs["first_dir"]
    bad = Path("/var/tmp") / f"cvs-quarantine-test-{uuid.uuid4().hex[:8]}.conf"
    bad.write_text(re.sub(r"(?m)^SlurmctldPort=\d+", "SlurmctldPort=1", Path(SLURM_CONF).read_text()))
    try:
        proc = run_playbook(
            "playbooks/quarantine.yml",
            runs["plugin"],
            {"cvs_quarantine_run": str(first_dir), "cvs_quarantine": "drain", "cvs_slurm": {"conf": str(bad)}},
            check=False,
        )
    finally:
        bad.unlink()
    assert proc.returncode != 0
    assert f"run {first_dir.name}: Slurm could not be asked about node1, node2, node3:" in proc.stdout, proc.stdout[
        -4000:
    ]
    assert "; not drained: node2" in proc.stdout


def test_slurmd_runs_the_health_program_which_drains_and_resumes_its_node(
    runs: dict[str, Any], run_playbook: Callable[..., Any], node_exec: Callable[..., Any]
) -> None:
    second_dir = runs["second_dir"]
    base = f"/tmp/cvs-health-test-{uuid.uuid4().hex[:8]}"  # private to each node (and to slurmd there)
    install = {
        "cvs_health_baseline": str(second_dir / "baseline.json"),
        "health_program_dest": f"{base}/health",
        "health_program_env": {"LD_LIBRARY_PATH": "/opt/rocm/lib", "CVS_STAND_IN_DIR": f"{base}/faults"},
        "health_program_slurm_conf": SLURM_CONF,
        "health_program_paths": [{"path": "/var/tmp", "min_free_mb": 1}],
    }
    refused = run_playbook(
        "playbooks/health_program.yml",
        runs["plugin"],
        {**install, "cvs_cluster_name": "prod"},
        env=DEFAULT_CONSOLE,
        check=False,
    )
    assert refused.returncode != 0
    assert (
        f"{second_dir}/baseline.json: cluster.name: the baseline is of cluster None, this inventory's cluster is 'prod'"
        in refused.stdout
    )
    original = Path(SLURM_CONF).read_text()
    try:
        installed = run_playbook(
            "playbooks/health_program.yml", runs["plugin"], install, env=DEFAULT_CONSOLE, check=False
        )
        assert installed.returncode == 0, installed.stdout[-4000:]
        again = run_playbook("playbooks/health_program.yml", runs["plugin"], install, env=DEFAULT_CONSOLE, check=False)
        assert re.findall(r"changed=(\d+)", again.stdout) == ["0", "0", "0"], again.stdout[-3000:]
        Path(SLURM_CONF).write_text(
            original + f"HealthCheckProgram={base}/health/cvs-health\nHealthCheckInterval={INTERVAL}\n"
            "HealthCheckNodeState=ANY\n"
        )
        _host("scontrol", "reconfigure")
        node_exec("node2", f"mkdir -p {base}/faults && cat > {base}/faults/rvs.json", input='{"version": "1.1.0"}')
        took = _wait(
            "node2 drained by the health program",
            lambda: _node("node2")["reason"].startswith("cvs: health:"),
            2 * INTERVAL + 10,
        )
        node2 = _node("node2")
        assert "DRAIN" in node2["state"] and node2["reason"] == "cvs: health: rvs_version is 1.1.0, baseline 1.3.0"
        assert took <= INTERVAL + 10, f"drained {took:.1f} s after the change (interval {INTERVAL} s)"
        node_exec("node2", f"rm -f {base}/faults/rvs.json")
        took = _wait("node2 resumed by the health program", lambda: not _drained("node2"), 2 * INTERVAL + 10)
        assert took <= INTERVAL + 10, f"resumed {took:.1f} s after the fix (interval {INTERVAL} s)"
        assert _node("node3") == {"state": "IDLE+DRAIN", "reason": "bad fan"}, "the health program left it drained"
    finally:
        Path(SLURM_CONF).write_text(original)
        _host("scontrol", "reconfigure", check=False)
        if _node("node2")["reason"].startswith("cvs:"):
            _host("scontrol", "update", "NodeName=node2", "State=RESUME", check=False)
        removed = run_playbook(
            "playbooks/health_program.yml",
            runs["plugin"],
            {**install, "health_program_state": "absent"},
            env=DEFAULT_CONSOLE,
            check=False,
        )
        for name in ("node1", "node2", "node3"):
            node_exec(name, f"rm -rf {base}", check=False)
    assert removed.returncode == 0, removed.stdout[-3000:]
    assert re.findall(r"changed=(\d+)", removed.stdout) == ["1", "1", "1"], removed.stdout[-3000:]
