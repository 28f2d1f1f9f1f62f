"""Faults around a run's results and its dispose, on the simulated cluster (issue 37, findings 4 and 5).

* A results directory that cannot be written: every playbook checks it before touching a node; a check record that
  cannot be written mid-run does not drop the node (dispose still runs everywhere) and the verdict is printed in
  full at the end of the run, which fails.
* The Slurm controller down at dispose: every dispose step still runs (processes stopped, leases given back), the
  run fails naming Slurm's own error on every node, and the verdict line never reads PASS. Only slurmctld is
  stopped, by a callback at the start of the dispose play, and started again at the next task (and, whatever
  happens, when the test ends).
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
from typing import Any, Callable, Optional

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CTL = REPO / "tests/cluster/ctl.sh"
SLURM_SH = REPO / "tests/cluster/slurm.sh"
SLURM_CONF = "/run/cvs-sim/slurm/slurm.conf"
LEASES = Path("/var/tmp/cvs/leases")  # the simulated nodes share this directory
NODES = ["node1", "node2", "node3"]
RVS_VARS = {"rvs_poll_interval": 1, "rvs_test_level": 0, "rvs_default_timeout": 60, "rvs_tests": ["mem"]}
SCHEMA = '"schema": "cvs.cluster/check/v1"'


def lease_holder(node: str) -> Optional[str]:
    """The run holding ``node`` (any lease file of the shared directory that records the node's name)."""
    for path in LEASES.glob("*.lease"):
        try:
            lease = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(lease, dict) and lease.get("node") == node:
            return lease.get("run_id")
    return None


def task_section(out: str, task: str, last: bool = False) -> str:
    """The output of the (first, or ``last``) task whose banner names ``task``, up to the next banner."""
    start = out.rfind(task) if last else out.find(task)
    assert start >= 0, f"task {task!r} did not run:\n{out[-6000:]}"
    end = out.find("\nTASK [", start)
    play = out.find("\nPLAY [", start)
    ends = [e for e in (end, play) if e >= 0]
    return out[start : min(ends) if ends else len(out)]


class _ReadOnly:
    """``path`` bind-mounted read-only on itself (writes fail with EROFS, also for root); unmounted on exit."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", str(self.path), str(self.path)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(self.path)], check=True)
        except BaseException:
            subprocess.run(["umount", str(self.path)], check=False)
            raise
        return self.path

    def __exit__(self, *exc: Any) -> None:
        subprocess.run(["umount", str(self.path)], check=True)


def test_results_that_cannot_be_written_stop_the_run_first_or_are_printed_after_dispose(
    cluster: Any, run_playbook: Callable[..., Any], tmp_path: Path
) -> None:
    """Finding 4, on health_rvs.yml: a read-only results directory stops the run before any node is touched; a
    run whose check records cannot be written (its checks/ directory read-only) still disposes on every node and
    prints every verdict in full at the end, then fails naming the write errors."""
    inventory = cluster.inventory("baremetal")
    readonly = tmp_path / "readonly"
    with _ReadOnly(readonly):
        early = run_playbook("playbooks/health_rvs.yml", inventory, {**RVS_VARS, "cvs_results_dir": str(readonly)},
                             check=False)  # fmt: skip
    out = early.stdout + early.stderr
    assert early.returncode != 0, out[-4000:]
    assert f"cannot write run results to {readonly}" in out and "Read-only file system" in out, out[-4000:]
    assert "PLAY [Prepare the nodes]" not in out, "a node was touched before the results directory was checked"

    results = tmp_path / "results"
    run_id = f"faults-{uuid.uuid4().hex[:8]}"
    with _ReadOnly(results / run_id / "checks"):
        proc = run_playbook(
            "playbooks/health_rvs.yml",
            inventory,
            {**RVS_VARS, "cvs_results_dir": str(results), "cvs_run_id": run_id},
            check=False,
        )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-6000:]
    # dispose ran on every node: the lease went back, from the dispose play (not from a node guard after the run)
    released = task_section(out, "Give the node back")
    for node in NODES:
        assert f"[{node}]" in released, released
        assert lease_holder(node) != run_id, node
    # every verdict printed in full at the end, then the run failed naming each write error
    printed = task_section(out, "Print the verdicts that could not be written, each in full")
    assert printed.count(SCHEMA.replace('"', '\\"')) + printed.count(SCHEMA) == 3, printed
    for node in NODES:
        assert f'"node": "{node}"' in printed or f'\\"node\\": \\"{node}\\"' in printed, printed
    failed = task_section(out, "Fail the run naming the verdicts that could not be written", last=True)
    assert "3 verdict(s) could not be written and are printed in full above" in failed, failed
    for node in NODES:
        path = results / run_id / "checks" / node / "rvs.json"
        assert f"could not write into '{path}': [Errno 30] Read-only file system" in failed, failed


# ------------------------------------------------------------------ the Slurm controller down at dispose

# Run by the callback below inside ansible-playbook: the test's own callback (not the product's), enabled by
# environment for this one run.
CALLBACK = """
from __future__ import annotations

import os
import re
import subprocess

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "slurmctld_fault"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._stopped = False
        self._started = False

    def v2_playbook_on_play_start(self, play):
        if not self._stopped and play.get_name().startswith("Dispose of what this run started"):
            self._stopped = True
            subprocess.run(os.environ["CVS_TEST_STOP_CTLD"], shell=True, check=True)

    def v2_playbook_on_task_start(self, task, is_conditional):
        # the task after the Slurm cancel: the controller comes back, the outage lasts one task
        if self._stopped and not self._started and "Name the Slurm job that was cancelled" in task.get_name():
            self._started = True
            subprocess.run(os.environ["CVS_TEST_START_CTLD"], shell=True, check=True)
"""

STOP_CTLD = (
    f"{CTL} exec node1 sh -c 'pkill -x slurmctld; "
    "for i in $(seq 100); do pgrep -x slurmctld >/dev/null || exit 0; sleep 0.1; done; exit 1'"
)
START_CTLD = (
    f"{CTL} exec node1 sh -c 'pgrep -x slurmctld >/dev/null || "
    f'slurmctld -f "$SLURM_CONF" </dev/null >>{Path(SLURM_CONF).parent}/log/start.log 2>&1; '
    "for i in $(seq 300); do scontrol ping 2>/dev/null | grep -q UP && exit 0; sleep 0.2; done; exit 1'"
)


def _slurm_up() -> bool:
    return subprocess.run([str(SLURM_SH), "status"], capture_output=True, text=True, check=False).returncode == 0


def _host(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLURM_CONF": SLURM_CONF}
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env, check=False)


@pytest.fixture(name="slurm")
def slurm_fixture(cluster: Any) -> Iterator[Any]:
    """Slurm running for the test: the one already up (left up), else started here and stopped at the end."""
    started = False
    if not _slurm_up():
        up = subprocess.run([str(SLURM_SH), "start"], capture_output=True, text=True, timeout=300, check=False)
        assert up.returncode == 0, up.stdout + up.stderr
        started = True
    try:
        yield cluster
    finally:
        # whatever happened: the controller runs again (only it; the rest was never stopped)
        back = subprocess.run(START_CTLD, shell=True, capture_output=True, text=True, timeout=120, check=False)
        if started:
            subprocess.run([str(SLURM_SH), "stop"], capture_output=True, text=True, timeout=300, check=False)
        assert back.returncode == 0, back.stdout + back.stderr


def test_the_slurm_controller_down_at_dispose_fails_the_run_with_slurms_error_and_every_step_runs(
    slurm: Any, run_playbook: Callable[..., Any], tmp_path: Path
) -> None:
    """Finding 5: slurmctld stops as dispose starts. Every node still stops the run's processes and gives its lease
    back; the run exits 2 naming Slurm's own error once for all three nodes; no line says the run passed."""
    data = yaml.safe_load(slurm.inventory("baremetal").read_text())
    data["all"]["vars"]["cvs_orchestrator"] = "slurm"
    data["all"]["vars"]["cvs_slurm"] = {"partition": "cvs", "time_limit": "30"}
    inventory = tmp_path / "inventory-slurm.yml"
    inventory.write_text(yaml.safe_dump(data))
    plugins = tmp_path / "callbacks"
    plugins.mkdir()
    (plugins / "slurmctld_fault.py").write_text(CALLBACK)
    results = tmp_path / "results"
    run_id = f"faults-{uuid.uuid4().hex[:8]}"
    env = {
        "ANSIBLE_CALLBACK_PLUGINS": str(plugins),
        "ANSIBLE_CALLBACKS_ENABLED": "cvs.cluster.finish_on_interrupt,slurmctld_fault",
        "CVS_TEST_STOP_CTLD": STOP_CTLD,
        "CVS_TEST_START_CTLD": START_CTLD,
    }
    extravars = {**RVS_VARS, "cvs_results_dir": str(results), "cvs_validate_checks": ["rvs"], "cvs_run_id": run_id}
    started = time.monotonic()
    try:
        proc = run_playbook("playbooks/validate.yml", inventory, extravars, env=env, check=False)
    finally:
        # the job Slurm could not cancel while its controller was down
        _host("scancel", f"--name=cvs-{run_id}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-6000:]
    assert time.monotonic() - started < 900
    # every dispose step ran on every node after the Slurm step failed
    for task in ("Stop every process this run started", "Give the node back"):
        section = task_section(out, task)
        for node in NODES:
            assert f"[{node}]" in section, section
    for node in NODES:
        assert lease_holder(node) != run_id, node
    # the run's verdict: Slurm's own words, the three nodes named once together, right after the status, never PASS
    # (the checks' own status stays in results.json; a run whose checks passed reads ERROR)
    checks = json.loads((results / run_id / "results.json").read_text())["summary"]["status"]
    status = "ERROR" if checks == "PASS" else checks
    assert f"run {run_id}: PASS" not in out, out[-6000:]
    line = re.search(rf"run {run_id}: {status} - dispose failed on node1, node2, node3: (.*)", out)
    assert line, out[-6000:]
    assert line.group(1).startswith(f"cancel the Slurm job cvs-{run_id}: "), line.group(0)
    assert "Unable to contact slurm controller" in line.group(1), line.group(0)
    assert "?: failed" not in out
