"""Real MaxText 0.2.5 (CPU JAX, Gloo) trained by cvs.cluster.maxtext across the simulated cluster's 3 nodes.

The runtime is tests/cluster/maxtext (Python 3.13 of Debian 13 with MaxText's pinned packages): bind-mounted on
/opt/cvs-maxtext in every baremetal node, and inside the image cvs-sim-maxtext:latest for the container backend.
Settings come from tests/cluster/maxtext/cpu.yml (a tiny model). Faults are made the way they happen: a learning
rate that overflows, a config key MaxText does not have, a rank killed with SIGKILL, a rank frozen (SIGSTOP)
before it joins. Nothing here tells the role that MaxText is real.
"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from ansible_collections.cvs.cluster.tests.support.maxtext import CPU_VARS, trainer_processes, wait_for, watched_lines

PLAYBOOK = "playbooks/train_maxtext.yml"
NODES = ["node1", "node2", "node3"]
BACKENDS = ["baremetal", "container"]
CONTAINER = "cvs-maxtext-real"


def _vars(cluster: Any, backend: str, results_dir: Path, **extra: Any) -> dict[str, Any]:
    extravars: dict[str, Any] = {
        **CPU_VARS,
        "cvs_results_dir": str(results_dir),
        "maxtext_poll_interval": 0.5,
        "maxtext_stall_timeout": 180,
        "maxtext_stop_grace": 5,
        "maxtext_timeout": 600,
    }
    if backend == "container":
        settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
        extravars["cvs_container"] = {**settings, "name": CONTAINER, "ssh_port": 2243, "image": cluster.maxtext_image}
    overrides = extra.pop("overrides", {})
    extravars["maxtext_config_overrides"] = {**CPU_VARS["maxtext_config_overrides"], **overrides}
    extravars.update(extra)
    return extravars


def _run(run_playbook: Callable[..., Any], backend: str, extravars: dict[str, Any], out: Path) -> Any:
    proc = run_playbook(PLAYBOOK, backend, extravars, check=False)
    out.write_text(proc.stdout + proc.stderr)
    return proc


def _records(results_dir: Path, out: Path) -> dict[str, dict[str, Any]]:
    tail = out.read_text()[-6000:] if out.is_file() else ""
    runs = sorted((p for p in results_dir.iterdir() if (p / "checks").is_dir()), key=lambda p: p.stat().st_mtime)
    assert runs, f"no run under {results_dir}\n{tail}"
    checks = runs[-1] / "checks"
    records = {p.name: json.loads((p / "maxtext.json").read_text()) for p in sorted(checks.iterdir())}
    assert sorted(records) == NODES, f"records of {sorted(records)}\n{tail}"
    return records


def _assert_nothing_left(node_exec: Callable[..., Any], records: dict[str, dict[str, Any]]) -> None:
    for node, rec in records.items():
        left = [pid for pid, run in trainer_processes(node_exec, node) if run == rec["run"]]
        assert left == [], f"{node}: trainer processes of run {rec['run']} left: {left}"


def _in_background(target: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        box["proc"] = target()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


@pytest.fixture(name="cpu_cluster")
def cpu_cluster_fixture(cluster: Any, node_exec: Callable[..., Any]) -> Any:
    for node in NODES:  # an interrupted run may have left its container behind
        node_exec(node, f"docker rm -f {CONTAINER} >/dev/null 2>&1 || true")
    return cluster


# --------------------------------------------------------------------------- healthy


@pytest.mark.parametrize("backend", BACKENDS)
def test_real_maxtext_trains_on_three_nodes_and_passes_with_its_metrics(
    run_playbook: Callable[..., Any], cpu_cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    results_dir = tmp_path / "results"
    out = tmp_path / "output.txt"
    thresholds = {
        "tokens_per_device": {"min": 1},
        "step_time_p95": {"max": 30.0},
        "loss_decreased": {"target": True},
        "last_step": {"target": 19},
        "final_loss": {"record": True},
    }
    extravars = _vars(cpu_cluster, backend, results_dir, maxtext_thresholds=thresholds)
    proc = _run(run_playbook, backend, extravars, out)
    records = _records(results_dir, out)
    assert proc.returncode == 0, out.read_text()[-6000:]
    assert len({rec["run"] for rec in records.values()}) == 1
    losses = set()
    for index, (node, rec) in enumerate(records.items()):
        assert rec["status"] == "PASS", f"{node}: {rec['reason']}"
        assert rec["node_index"] == index and rec["backend"] == backend and rec["nodes"] == 3, rec
        assert rec["coordinator"] == f"{cpu_cluster.head.ip}:12346" and rec["lines"] == []
        assert rec["run_dir"].startswith("/var/tmp/cvs/") and rec["run"] in rec["run_dir"]
        by_metric = {m["metric"]: m for m in rec["metrics"]}
        for metric in thresholds:
            assert by_metric[metric]["status"] == ("RECORD" if metric == "final_loss" else "PASS"), by_metric[metric]
        summary = rec["summary"]
        assert summary["steps"] == 20 and summary["last_step"] == 19, summary
        assert summary["tokens_per_device"] > 0 and summary["step_time_mean"] > 0 and summary["loss_decreased"], summary
        losses.add(summary["final_loss"])
        text = Path(rec["log"]).read_text()
        # MaxText's own lines: the step line carries lm_loss and perplexity, and 3 ranks of 64 tokens each
        last = [line for line in text.splitlines() if "completed step: 19," in line]
        assert last and "lm_loss:" in last[0] and "perplexity:" in last[0] and "total_weights: 192," in last[0], last
        assert "Jax distributed system initialized on GPU!" in text
        assert rec["train_script"].endswith("/maxtext/trainers/pre_train/train.py"), rec["train_script"]
    assert len(losses) == 1, f"the ranks disagree on the loss: {losses}"
    _assert_nothing_left(node_exec, records)

    # the run's report (results.json, junit.xml, report.html) carries MaxText's real metrics per node
    run_id = next(iter(records.values()))["run_id"]
    report = f"""
- hosts: localhost
  gather_facts: false
  tasks:
    - cvs.cluster.report: {{results_dir: "{results_dir}", run_id: "{run_id}", checks: [maxtext]}}
"""
    assert run_playbook(report, backend, check=False).returncode == 0
    data = json.loads((results_dir / run_id / "results.json").read_text())
    assert data["summary"]["status"] == "PASS" and list(data["nodes"]) == NODES
    (loss,) = losses
    for node in NODES:
        check = data["nodes"][node]["checks"]["maxtext"]
        metrics = {m["metric"]: m for m in check["metrics"]}
        assert check["status"] == "PASS" and metrics["tokens_per_device"]["value"] > 0, check
        assert metrics["final_loss"]["value"] == loss, metrics["final_loss"]
    assert (results_dir / run_id / "report.html").is_file() and (results_dir / run_id / "junit.xml").is_file()


# --------------------------------------------------------------------------- NaN


# How MaxText meets a NaN does not depend on the backend, and every backend path is run by the other tests here:
# each setting of abort_on_nan_loss runs on one backend.
@pytest.mark.parametrize(("backend", "abort"), [("baremetal", True), ("container", False)])
def test_a_nan_loss_fails_the_run_whether_maxtext_aborts_or_goes_on(
    run_playbook: Callable[..., Any],
    cpu_cluster: Any,
    node_exec: Callable[..., Any],
    tmp_path: Path,
    backend: str,
    abort: bool,
) -> None:
    """learning_rate 1e30 overflows at once. With abort_on_nan_loss false MaxText trains on and exits 0: only the
    watch's nan signature fails it, and it stops the run at the first nan line, long before the last step."""
    results_dir = tmp_path / "results"
    out = tmp_path / "output.txt"
    overrides = {"learning_rate": 1e30, "abort_on_nan_loss": abort}
    extravars = _vars(cpu_cluster, backend, results_dir, overrides=overrides, maxtext_steps=5000)
    proc = _run(run_playbook, backend, extravars, out)
    records = _records(results_dir, out)
    assert proc.returncode != 0
    culprits = {rec["failed_node"] for rec in records.values()}
    assert len(culprits) == 1 and culprits <= set(NODES), culprits
    for node, rec in records.items():
        assert rec["status"] == "FAIL", f"{node}: {rec['reason']}"
        if rec["node"] in culprits:
            assert rec["error"]["name"] in ("nan_or_inf", "nan_loss_abort"), rec["error"]
            assert re.search(r"loss: nan|Aborting training due to NaN loss", rec["error"]["line"]), rec["error"]
        assert rec["summary"]["last_step"] < 4999, rec["summary"]
    _assert_nothing_left(node_exec, records)


# --------------------------------------------------------------------------- bad settings


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unknown_key_a_missing_dataset_and_a_busy_port_stop_before_launch(
    run_playbook: Callable[..., Any],
    cpu_cluster: Any,
    node_exec: Callable[..., Any],
    tmp_path: Path,
    backend: str,
) -> None:
    results_dir = tmp_path / "results"
    out = tmp_path / "output.txt"
    extravars = _vars(
        cpu_cluster,
        backend,
        results_dir,
        overrides={"per_device_batch_sise": 1, "hf_path": ""},
        maxtext_extra_args=["no_such_key=1"],
        maxtext_dataset_type="hf",
    )
    port = 12346  # the coordinator's, held on the head node by another program
    holder = node_exec(
        "node1",
        "setsid python3 -c 'import socket,time; s=socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f's.bind(("0.0.0.0", {port})); s.listen(); time.sleep(600)\' '
        ">/dev/null 2>&1 </dev/null & echo $!",
    ).stdout.strip()
    try:
        node_exec("node1", f"for i in $(seq 50); do ss -Htln 'sport = :{port}' | grep -q . && exit 0; sleep 0.1; done")
        proc = _run(run_playbook, backend, extravars, out)
    finally:
        node_exec("node1", f"kill {holder}", check=False)
    text = out.read_text()
    assert proc.returncode != 0
    records = _records(results_dir, out)
    for node, rec in records.items():
        assert rec["status"] == "FAIL"
        reason = rec["reason"]
        assert "not launched" in reason, reason
        for other in NODES:  # every node is named with each of its problems
            assert f"{other}: maxtext_config_overrides: MaxText config key 'per_device_batch_sise'" in reason, reason
            assert f"{other}: maxtext_extra_args: MaxText config key 'no_such_key'" in reason, reason
            assert f"{other}: maxtext_dataset_type: dataset_type hf needs hf_path" in reason, reason
        assert "did you mean 'per_device_batch_size'?" in reason, reason
        assert f"node1: maxtext_coordinator_port: port {port} is already in use on the coordinator node" in reason
        assert rec["run"] and not rec["log"] and rec["stop"] is None, rec
        if backend == "baremetal":  # nothing was written, let alone started (a container goes with its run)
            node_exec(node, f"test ! -e {rec['run_dir']}")
    assert "Traceback" not in text
    _assert_nothing_left(node_exec, records)


# --------------------------------------------------------------------------- a rank that dies


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rank_killed_mid_training_is_named_and_every_rank_stops_within_ten_seconds(
    run_playbook: Callable[..., Any],
    cpu_cluster: Any,
    node_exec: Callable[..., Any],
    tmp_path: Path,
    backend: str,
) -> None:
    results_dir = tmp_path / "results"
    out = tmp_path / "output.txt"
    # long enough never to end by itself; the time limit ends it should the kill not happen
    extravars = _vars(cpu_cluster, backend, results_dir, maxtext_steps=100000, maxtext_timeout=150)
    thread, box = _in_background(lambda: _run(run_playbook, backend, extravars, out))
    wait_for("step 5 on node2", lambda: "completed step: 5," in watched_lines(results_dir, 1), 120, 0.2)
    pids = trainer_processes(node_exec, "node2")
    assert len(pids) == 1, pids
    node_exec("node2", f"kill -9 {pids[0][0]}")
    killed_at = time.time()
    thread.join(300)
    assert not thread.is_alive(), "the playbook did not end"
    records = _records(results_dir, out)
    assert box["proc"].returncode != 0
    for node, rec in records.items():
        assert rec["status"] == "FAIL", f"{node}: {rec['reason']}"
        assert rec["failed_node"] == "node2", f"{node}: {rec['failed_node']}: {rec['reason']}"
        assert "status 137 (killed by SIGKILL)" in rec["reason"], rec["reason"]
        if node != "node2":
            assert rec["reason"].startswith("run stopped because node2 failed:"), rec["reason"]
            # the survivors were gone within 10 s of the kill: stop.sh's last line says when (JAX catches SIGTERM,
            # so SIGKILL follows the grace)
            match = re.search(r" at (\S+Z)$", rec["stop"])
            assert rec["stop"].startswith("stopped ") and match, rec["stop"]
            gone = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
            assert gone.timestamp() - killed_at < 10, f"{node}: gone {gone.timestamp() - killed_at:.1f}s after the kill"
    _assert_nothing_left(node_exec, records)


# --------------------------------------------------------------------------- a rank that never joins


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rank_that_never_joins_is_named_when_the_others_give_up(
    run_playbook: Callable[..., Any],
    cpu_cluster: Any,
    node_exec: Callable[..., Any],
    tmp_path: Path,
    backend: str,
) -> None:
    """node3's trainer is frozen (SIGSTOP) as soon as it exists, long before JAX starts; the other ranks give up
    at JAX's initialization timeout (RegisterTask DEADLINE_EXCEEDED), and node3 is blamed, not them."""
    results_dir = tmp_path / "results"
    out = tmp_path / "output.txt"
    timeout = 10
    extravars = _vars(cpu_cluster, backend, results_dir, overrides={"jax_distributed_initialization_timeout": timeout})
    started = time.monotonic()
    thread, box = _in_background(lambda: _run(run_playbook, backend, extravars, out))
    pids = wait_for("node3's trainer", lambda: trainer_processes(node_exec, "node3"), 300, 0.05)
    node_exec("node3", f"kill -STOP {pids[0][0]}")
    frozen_at = time.monotonic()
    thread.join(300)
    assert not thread.is_alive(), "the playbook did not end"
    records = _records(results_dir, out)
    assert box["proc"].returncode != 0
    assert "Attempting to initialize the jax distributed system" not in Path(records["node3"]["log"]).read_text()
    for node, rec in records.items():
        assert rec["status"] == "FAIL", f"{node}: {rec['reason']}"
        assert rec["failed_node"] == "node3", f"{node}: {rec['failed_node']}: {rec['reason']}"
        assert "node3 never joined the run" in rec["reason"], rec["reason"]
    # the survivors gave up at JAX's timeout; the watch read the line on one of them at least (it stops the others)
    seen = [rec["error"]["name"] for node, rec in records.items() if node != "node3" and rec["error"]]
    assert seen and set(seen) == {"jax_coordination"}, seen
    detected = max(
        datetime.strptime(rec["detected"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
        for rec in records.values()
    )
    assert detected - (time.time() - (time.monotonic() - frozen_at)) < timeout + 30, "named long after the timeout"
    assert frozen_at - started < 300
    _assert_nothing_left(node_exec, records)
