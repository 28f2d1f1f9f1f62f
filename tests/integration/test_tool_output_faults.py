"""A tool that prints garbage, a node lost mid-suite: the RVS suite names the node at once and goes on elsewhere.

* Finding 1 of issue 37: RVS printing NUL bytes or invalid UTF-8 (a 50 MB line without a newline) finished in 0.1 s,
  but its async result (300 MB of JSON) was never read back: the controller polled "0/3 hosts complete" until the
  test's own timeout, and the file stayed in the node's ~/.ansible_async.
* Finding 6: a node whose container engine stopped during the suite was noticed only at the async limit.

The faults are the RVS stand-in's (tests/cluster/image/stand-ins/opt/rocm/bin/rvs): ``noise`` in a per-run fault
file (``rvs.<run id>.json``, so that other runs on the cluster are untouched), ``hang`` in the test's own container.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CTL = REPO / "tests" / "cluster" / "ctl.sh"
PLAYBOOK = "playbooks/health_rvs.yml"
FAULT_DIR = "/root/.cvs-stand-in"


def _ctl(*argv: str) -> None:
    subprocess.run([str(CTL), *argv], capture_output=True, text=True, timeout=300, check=True)


def _records(results_dir: Path, run_id: str, output: str) -> dict[str, dict[str, Any]]:
    checks = results_dir / run_id / "checks"
    assert checks.is_dir(), output[-4000:]
    return {p.name: json.loads((p / "rvs.json").read_text()) for p in sorted(checks.iterdir())}


@pytest.mark.cluster
def test_garbage_output_is_judged_at_once_and_its_async_files_go(
    run_playbook: Callable[..., Any], node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    """node1's RVS prints 50 MB of NUL bytes without a newline, node2's 1 KB of invalid UTF-8, node3 is healthy.

    The run ends in the time of a healthy run (not at the 120 s test timeout); node1 is an ERROR saying how much of
    its output was cut (a failure may hide there), node2 passes (its garbage replaced, its results judged), node3
    passes; no async result file of the run is left on any node.
    """
    run_id = f"bytes-{uuid.uuid4().hex[:8]}"
    noise = {
        "node1": {"bytes": "nul", "size": 50_000_000, "newline": False},
        "node2": {"bytes": "invalid_utf8", "size": 1024, "newline": False},
    }
    for node, fault in noise.items():
        node_exec(
            node, f"mkdir -p {FAULT_DIR} && cat > {FAULT_DIR}/rvs.{run_id}.json", input=json.dumps({"noise": fault})
        )
    started = time.monotonic()
    try:
        proc = run_playbook(
            PLAYBOOK,
            "baremetal",
            {
                "cvs_run_id": run_id,
                "cvs_results_dir": str(tmp_path),
                "rvs_poll_interval": 1,
                "rvs_test_level": 0,
                "rvs_tests": [{"name": "gst_single", "timeout": 120}],
            },
            check=False,
            timeout=110,  # today's main polls until the test's timeout and past it
        )
    finally:
        for node in noise:
            node_exec(node, f"rm -f {FAULT_DIR}/rvs.{run_id}.json", check=False)
    elapsed = time.monotonic() - started
    assert elapsed < 110, elapsed
    assert proc.returncode != 0, proc.stdout[-3000:]
    records = _records(tmp_path, run_id, proc.stdout)
    assert records["node3"]["status"] == "PASS", records["node3"]["reason"]
    assert records["node2"]["status"] == "PASS", records["node2"]["reason"]
    lost = records["node1"]
    assert lost["status"] == "ERROR", lost["reason"]
    (test,) = lost["tests"]
    assert test["name"] == "gst_single" and test["rc"] == 0 and test["output_cut"] > 49_000_000
    assert "output too large to judge whole" in test["reason"] and "bytes of it were cut" in test["reason"]
    assert "node1: rvs test gst_single ERROR (output too large to judge whole" in proc.stdout
    for node in ("node1", "node2", "node3"):
        left = node_exec(node, f"ls -A /var/tmp/cvs/{run_id}/{node}/async", check=False)
        assert left.returncode != 0, f"{node}: async files left: {left.stdout}"


def _going(proc: subprocess.Popen, lines: list[tuple[float, str]], deadline: float, what: str) -> None:
    """Fail naming ``what`` (and the run's output) when the run ended or the deadline passed."""
    if proc.poll() is not None:
        time.sleep(1)  # the reader's last lines
        out = "".join(line for _, line in lines)
        pytest.fail(f"{what}: the run ended (rc {proc.returncode})\n{out[-4000:]}")
    assert time.monotonic() < deadline, what


def _container_settings(cluster: Any, name: str, port: int) -> dict[str, Any]:
    # own container name and port: other suites share the cluster and its default container
    settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
    return {**settings, "name": name, "ssh_port": port}


@pytest.mark.cluster
def test_a_node_lost_mid_suite_is_an_error_at_its_next_poll(
    cluster: Any, node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    """node2's RVS hangs in the test's container; its engine is stopped while the suite runs.

    node2 is an ERROR naming the lost transport within one poll interval and the ssh timeout (the test's timeout is
    300 s: today's main waits for it and its margin), nodes 1 and 3 pass.
    """
    run_id = f"lost-{uuid.uuid4().hex[:8]}"
    container = f"cvs-lost-{run_id[-8:]}"
    extravars = {
        "cvs_run_id": run_id,
        "cvs_results_dir": str(tmp_path),
        "cvs_container": _container_settings(cluster, container, 2235),
        "rvs_poll_interval": 1,
        "rvs_test_level": 0,
        "rvs_tests": [{"name": "gst_single", "timeout": 300}],
    }
    cmd = [str(REPO / ".venv/bin/ansible-playbook"), "-i", str(cluster.inventory("container")), PLAYBOOK]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [*cmd, "-e", json.dumps(extravars)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[tuple[float, str]] = []  # (when, line) of the run's output, as it comes
    reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), line) for line in proc.stdout or ()))
    reader.start()
    stopped = False
    try:
        hang = json.dumps({"hang": ["gst_single"]})
        write = f"docker exec -i {container} sh -c 'mkdir -p {FAULT_DIR} && cat > {FAULT_DIR}/rvs.json'"
        deadline = time.monotonic() + 300
        # the fault goes in as soon as prepare has started node2's container (RVS starts several tasks later)
        while node_exec("node2", write, input=hang, check=False).returncode != 0:
            _going(proc, lines, deadline, "node2's container never came up")
            time.sleep(0.2)
        running = f"docker exec {container} pgrep -f 'bin/rvs -c'"
        while node_exec("node2", running, check=False).returncode != 0:
            _going(proc, lines, deadline, "RVS never ran on node2")
            time.sleep(0.5)
        _ctl("engine-stop", "node2")
        stopped = True
        lost_at = time.monotonic()
        proc.wait(timeout=150)
        reader.join(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=30)
        if stopped:
            _ctl("engine-start", "node2")
        node_exec("node2", f"docker rm -f {container}", check=False)
    out = "".join(line for _, line in lines)
    named = [when for when, line in lines if "UNREACHABLE" in line and "node2" in line]
    assert named, out[-4000:]
    # one poll interval (1 s) and the ssh timeout (15 s), with room for a loaded machine; not the 300 s test timeout
    assert named[0] - lost_at < 45, named[0] - lost_at
    records = _records(tmp_path, run_id, out)
    assert records["node1"]["status"] == "PASS" and records["node3"]["status"] == "PASS"
    lost = records["node2"]
    assert lost["status"] == "ERROR", lost["reason"]
    assert "node2 stopped answering while the tests ran" in lost["reason"]
    assert [t["status"] for t in lost["tests"]] == ["ERROR"]
    assert proc.returncode != 0
    assert "node2" in out and "UNREACHABLE" in out
