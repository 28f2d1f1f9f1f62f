"""Slurm on the simulated cluster (tests/cluster/slurm.sh) and the cvs.cluster.slurm inventory plugin.

A real Slurm 22.05: munged on the host, slurmctld in node1, one slurmd in every node on the node's own address.
Every Slurm command here gets SLURM_CONF: without one, Slurm looks its controller up in DNS.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from ansible_collections.cvs.cluster.tests.support.maxtext import CPU_VARS, trainer_processes, wait_for, watched_lines

REPO = Path(__file__).resolve().parents[2]
SLURM_SH = REPO / "tests/cluster/slurm.sh"
SLURM_CONF = "/run/cvs-sim/slurm/slurm.conf"
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd")


def _slurm_sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SLURM_SH), *args], capture_output=True, text=True, timeout=180, check=check)


def _host(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A Slurm client command on the controller (the host, a submit host of the simulated Slurm)."""
    env = {**os.environ, "SLURM_CONF": SLURM_CONF}
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env, check=check)


def _daemons() -> list[str]:
    """`pid comm` of every Slurm or munge process on the machine (the nodes' PID namespaces are children of the
    host's, so this sees them all)."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,comm="], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines()]
    return [f"{pid} {comm}" for pid, stat, comm in rows if comm in DAEMONS and not stat.startswith("Z")]


@pytest.fixture(name="slurm", scope="module")
def slurm_fixture(cluster: Any) -> Iterator[Any]:
    assert _daemons() == [], "Slurm daemons run before the test started them"
    started = _slurm_sh("start", check=False)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield cluster
    finally:
        stopped = _slurm_sh("stop", check=False)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert _daemons() == [], "slurm.sh stop left processes behind"
    assert not Path(SLURM_CONF).parent.exists()


def _inventory(tmp_path: Path, **options: Any) -> Path:
    source = tmp_path / "slurm.yml"
    lines = ["plugin: cvs.cluster.slurm", f"slurm_conf: {SLURM_CONF}"]
    lines += [f"{key}: {json.dumps(value)}" for key, value in {"partition": "cvs", **options}.items()]
    source.write_text("\n".join(lines) + "\n")
    return source


def _ansible_inventory(source: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    argv = [str(REPO / ".venv/bin/ansible-inventory"), "-i", str(source), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)


def test_every_node_runs_a_slurmd_on_its_own_address_and_a_step_spans_them(slurm: Any, node_exec: Callable) -> None:
    shown = _host("scontrol", "--oneliner", "show", "node").stdout
    for node in slurm.nodes:
        assert f"NodeName={node.name} " in shown and f"NodeAddr={node.ip} " in shown, shown
    # a step launched from the head node: one task per node, each in its own node (hostname = node name)
    out = node_exec("node1", "srun -N3 --ntasks-per-node=1 -l hostname").stdout
    assert sorted(line.split(": ", 1)[1] for line in out.splitlines()) == [n.name for n in slurm.nodes], out


def test_the_inventory_lists_the_partition_with_addresses_and_names_a_drained_node(slurm: Any, tmp_path: Path) -> None:
    source = _inventory(tmp_path)
    listed = _ansible_inventory(source, "--list")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    names = [n.name for n in slurm.nodes]
    assert data["cvs_nodes"]["hosts"] == names and data["cvs_head"]["hosts"] == ["node1"]
    for node in slurm.nodes:
        host = data["_meta"]["hostvars"][node.name]
        assert host["ansible_host"] == node.ip and host["slurm_state"] == "IDLE" and host["slurm_available"] is True
    _host("scontrol", "update", "nodename=node1", "state=drain", "reason=fan {{ lookup('pipe', 'id') }}")
    try:
        drained = json.loads(_ansible_inventory(source, "--list").stdout)
    finally:
        _host("scontrol", "update", "nodename=node1", "state=resume")
    node1 = drained["_meta"]["hostvars"]["node1"]
    assert node1["slurm_state"] == "IDLE+DRAIN" and node1["slurm_available"] is False
    # a reason holding template syntax stays untrusted: never rendered (--list shows the marker)
    assert node1["slurm_reason"]["__ansible_unsafe"].startswith("fan {{ lookup('pipe', 'id') }} [root@"), node1
    assert drained["slurm_unavailable"]["hosts"] == ["node1"]
    assert drained["cvs_head"]["hosts"] == ["node2"], "a drained node is not the head"


def test_an_unknown_partition_and_a_controller_down_fail_with_slurms_message(
    slurm: Any, tmp_path: Path, node_exec: Callable
) -> None:
    unknown = _ansible_inventory(_inventory(tmp_path, partition="nope"), "--list")
    assert "Slurm: partition 'nope': Partition nope not found" in unknown.stderr, unknown.stderr
    node_exec("node1", "pkill -x slurmctld; for i in $(seq 50); do pgrep -x slurmctld || exit 0; sleep 0.1; done")
    try:
        down = _ansible_inventory(_inventory(tmp_path, timeout=30), "--list")
    finally:
        restarted = _slurm_sh("start", check=False)
    assert "Unable to contact slurm controller" in down.stderr, down.stderr
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr


# ------------------------------------------------------------------ the Slurm backend (cvs_orchestrator: slurm)

VALIDATE = "playbooks/validate.yml"
NODES = ["node1", "node2", "node3"]
RVS_VARS = {"rvs_poll_interval": 1, "rvs_test_level": 0, "rvs_default_timeout": 60, "rvs_tests": ["mem", "gst_single"]}
MAXTEXT_VARS = {
    **CPU_VARS,
    "maxtext_poll_interval": 0.5,
    "maxtext_stall_timeout": 180,
    "maxtext_stop_grace": 5,
    "maxtext_timeout": 600,
}


def _slurm_inventory(cluster: Any, tmp_path: Path, **settings: Any) -> Path:
    """The baremetal inventory of the simulated cluster with cvs_orchestrator: slurm and cvs_slurm."""
    data = yaml.safe_load(cluster.inventory("baremetal").read_text())
    data["all"]["vars"]["cvs_orchestrator"] = "slurm"
    data["all"]["vars"]["cvs_slurm"] = {"partition": "cvs", "time_limit": "30", **settings}
    path = tmp_path / "inventory-slurm.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def _queue() -> str:
    """Every job and step Slurm has (the simulated cluster runs nothing else)."""
    jobs = _host("squeue", "--noheader", "--format=%i %j %T").stdout.strip()
    steps = _host("squeue", "--noheader", "--steps", "--format=%i %j").stdout.strip()
    return "\n".join(x for x in (jobs, steps) if x)


def _results(results_dir: Path) -> dict[str, Any]:
    runs = sorted(results_dir.glob("*/results.json"), key=lambda p: p.stat().st_mtime)
    assert runs, f"no results.json under {results_dir}"
    return json.loads(runs[-1].read_text())


class _Watcher:
    """Polls ``scontrol --oneliner show job`` and ``show step`` while a playbook runs; keeps every line seen."""

    def __init__(self) -> None:
        self.lines: set[str] = set()
        self.step_gone: dict[str, float] = {}
        self._seen_steps: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            steps = set()
            for what in ("job", "step"):
                out = _host("scontrol", "--oneliner", "show", what, check=False).stdout
                for line in out.splitlines():
                    self.lines.add(line)
                    if what == "step" and line.startswith("StepId="):
                        steps.add(line.split()[0].split("=", 1)[1])
            for gone in self._seen_steps - steps:
                self.step_gone.setdefault(gone, time.time())
            self._seen_steps |= steps
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def test_validate_on_slurm_runs_rvs_and_real_maxtext_as_steps_of_one_job(
    slurm: Any, run_playbook: Callable[..., Any], tmp_path: Path
) -> None:
    """RVS as a one-node step per test, MaxText as one step of a task per node; the allocation's and the steps'
    extra options reach Slurm (scontrol shows them); the report carries the job, the steps and their states; the
    job is gone when the run ends."""
    results = tmp_path / "results"
    inventory = _slurm_inventory(
        slurm,
        tmp_path,
        time_limit="1:00:00",
        salloc_options=["--comment=cvs e2e"],
        srun_options=["--distribution=block"],
    )
    extravars = {**RVS_VARS, **MAXTEXT_VARS, "cvs_results_dir": str(results), "cvs_validate_checks": ["rvs", "maxtext"]}
    watcher = _Watcher()
    try:
        proc = run_playbook(VALIDATE, inventory, extravars, check=False)
    finally:
        watcher.stop()
    assert proc.returncode == 0, proc.stdout[-6000:]
    data = _results(results)
    assert data["summary"]["status"] == "PASS"
    jobs = {check["scheduler"]["job_id"] for node in data["nodes"].values() for check in node["checks"].values()}
    assert len(jobs) == 1, jobs
    job = jobs.pop()
    job_lines = [line for line in watcher.lines if line.startswith(f"JobId={job} ")]
    assert job_lines and all("JobName=cvs-" + data["run_id"] in line for line in job_lines), job_lines
    assert any("Comment=cvs e2e" in line and "TimeLimit=01:00:00" in line for line in job_lines), job_lines
    steps = [line for line in watcher.lines if line.startswith(f"StepId={job}.")]
    maxtext_steps = [line for line in steps if "Name=cvs-maxtext-" in line]
    assert maxtext_steps and all("Dist=Block" in line and "Tasks=3" in line for line in maxtext_steps), steps
    for node in NODES:
        rvs = data["nodes"][node]["checks"]["rvs"]["scheduler"]
        assert [(s["name"], s["state"], s["nodes"]) for s in rvs["steps"]] == [
            ("rvs mem", "COMPLETED", [node]),
            ("rvs gst_single", "COMPLETED", [node]),
        ], rvs
        maxtext = data["nodes"][node]["checks"]["maxtext"]
        (step,) = maxtext["scheduler"]["steps"]
        assert step["state"] == "COMPLETED" and step["exit_code"] == 0 and step["nodes"] == NODES, step
        assert step["id"].startswith(f"{job}.") and maxtext["status"] == "PASS", maxtext["reason"]
    # each task's output file (%j.%t) is the log the role watched
    index = {n: i for i, n in enumerate(NODES)}
    for node in NODES:
        record = json.loads(Path(data["nodes"][node]["checks"]["maxtext"]["source"]).read_text())
        assert "completed step: 19," in Path(record["log"]).read_text()
    assert list(results.glob(f"*/watch/*/{index['node2']}/*/maxtext.log")), "the watch kept no copy"
    assert _queue() == "", "the run's job is still in squeue"


def test_a_rank_killed_on_slurm_ends_the_step_within_ten_seconds_and_is_named(
    slurm: Any, run_playbook: Callable[..., Any], node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    results = tmp_path / "results"
    inventory = _slurm_inventory(slurm, tmp_path)
    extravars = {
        **MAXTEXT_VARS,
        "cvs_results_dir": str(results),
        "cvs_validate_checks": ["maxtext"],
        "maxtext_steps": 100000,
        "maxtext_timeout": 150,
    }
    watcher = _Watcher()
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(proc=run_playbook(VALIDATE, inventory, extravars, check=False)))
    thread.start()
    try:
        wait_for("step 5 on node2", lambda: "completed step: 5," in watched_lines(results, 1), 180, 0.2)
        pids = trainer_processes(node_exec, "node2")
        assert len(pids) == 1, pids
        steps_before = {line.split()[0] for line in watcher.lines if "Name=cvs-maxtext-" in line}
        node_exec("node2", f"kill -9 {pids[0][0]}")
        killed_at = time.time()
        thread.join(300)
    finally:
        watcher.stop()
    assert not thread.is_alive(), "the playbook did not end"
    (step_key,) = steps_before
    step_id = step_key.split("=", 1)[1]
    assert step_id in watcher.step_gone, f"step {step_id} never left scontrol"
    assert watcher.step_gone[step_id] - killed_at < 10, (
        f"step ended {watcher.step_gone[step_id] - killed_at:.1f}s after"
    )
    data = _results(results)
    assert box["proc"].returncode != 0
    for node in NODES:
        check = data["nodes"][node]["checks"]["maxtext"]
        assert check["status"] == "FAIL" and check["failed_node"] == "node2", (node, check["reason"])
        assert "status 137 (killed by SIGKILL)" in check["reason"], check["reason"]
        (step,) = check["scheduler"]["steps"]
        assert step["id"] == step_id and step["state"] == "FAILED", step
        assert any("node2: task 1: Exited with exit code 137" in line for line in step["srun"]), step
    for node in NODES:
        assert trainer_processes(node_exec, node) == [], node
    assert _queue() == ""


def _interrupted_run(slurm: Any, tmp_path: Path, sig: int) -> tuple[int, str]:
    """validate.yml training on Slurm, sent ``sig`` (to its process group, as a terminal or a runner does) once
    training runs on node3; its exit status and output. The trainer is the node image's stand-in: what is
    tested is that the step and the job end, which needs no JAX."""
    results = tmp_path / "results"
    inventory = _slurm_inventory(slurm, tmp_path)
    extravars = {
        "cvs_results_dir": str(results),
        "cvs_validate_checks": ["maxtext"],
        "maxtext_steps": 100000,
        "maxtext_poll_interval": 0.5,
        "maxtext_stop_grace": 3,
        "maxtext_timeout": 600,
    }
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    argv = [str(REPO / ".venv/bin/ansible-playbook"), "-i", str(inventory), str(REPO / VALIDATE)]
    log = tmp_path / "output.txt"
    with log.open("w") as handle:
        proc = subprocess.Popen(
            [*argv, "-e", json.dumps(extravars)], stdout=handle, stderr=subprocess.STDOUT, env=env,
            start_new_session=True, cwd=REPO,
        )  # fmt: skip
        try:
            wait_for("training on node3", lambda: "completed step: 3," in watched_lines(results, 2), 180, 0.2)
            assert "cvs-maxtext-" in _queue()
            os.killpg(proc.pid, sig)
            rc = proc.wait(300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    return rc, log.read_text()


def _left_of_run(node_exec: Callable[..., Any], node: str, run_id: str) -> list[str]:
    """Processes on ``node`` still marked as the run's (``CVS_RUN_ID``, inherited by every process a step starts)."""
    script = (
        "for e in /proc/[0-9]*/environ; do "
        'tr "\\0" "\\n" <"$e" 2>/dev/null | grep -qxF "CVS_RUN_ID=$1" && echo "${e%/environ}"; done; true'
    )
    return node_exec(node, ["sh", "-c", script, "sh", run_id]).stdout.split()


def _run_id(tmp_path: Path) -> str:
    """The id of the one run whose results are under ``tmp_path/results``."""
    (run,) = [p.name for p in (tmp_path / "results").iterdir() if re.fullmatch(r"\d{8}-\d{6}-[a-z0-9]{6}", p.name)]
    return run


def test_ctrl_c_on_slurm_cancels_the_job(slurm: Any, node_exec: Callable[..., Any], tmp_path: Path) -> None:
    rc, text = _interrupted_run(slurm, tmp_path, signal.SIGINT)
    assert rc == 99, text[-4000:]
    assert "finished after the interrupt" in text and "cancelled Slurm job" in text, text[-4000:]
    assert _queue() == ""
    run_id = _run_id(tmp_path)
    for node in NODES:
        assert _left_of_run(node_exec, node, run_id) == [], node


def test_a_cancelled_run_on_slurm_has_its_job_cancelled_by_the_node_guards(
    slurm: Any, node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    """An ansible-runner or AWX cancel SIGKILLs the playbook: nothing on the controller can dispose of the run; the
    guards on the nodes scancel its job."""
    rc, text = _interrupted_run(slurm, tmp_path, signal.SIGKILL)
    assert rc == -signal.SIGKILL, text[-4000:]
    wait_for("the job to leave squeue", lambda: _queue() == "", 60, 0.5)
    run_id = _run_id(tmp_path)
    for node in NODES:
        wait_for(
            f"{node}: the run's processes to end", lambda n=node: _left_of_run(node_exec, n, run_id) == [], 30, 0.5
        )


def test_a_node_drained_in_slurm_is_not_run(slurm: Any, run_playbook: Callable[..., Any], tmp_path: Path) -> None:
    results = tmp_path / "results"
    inventory = _slurm_inventory(slurm, tmp_path)
    _host("scontrol", "update", "nodename=node3", "state=drain", "reason=bad fan")
    try:
        proc = run_playbook(
            VALIDATE,
            inventory,
            {**RVS_VARS, "cvs_results_dir": str(results), "cvs_validate_checks": ["rvs"]},
            check=False,
        )
    finally:
        _host("scontrol", "update", "nodename=node3", "state=resume")
    assert proc.returncode != 0
    data = _results(results)
    assert data["summary"]["status"] != "PASS"
    node3 = data["nodes"]["node3"]["checks"]["rvs"]
    assert node3["status"] == "ERROR", node3
    assert node3["reason"].startswith("node3: rvs not run: Slurm node node3 is IDLE+DRAIN (Reason=bad fan"), node3
    for node in ("node1", "node2"):
        check = data["nodes"][node]["checks"]["rvs"]
        assert check["status"] == "PASS" and [s["nodes"] for s in check["scheduler"]["steps"]] == [[node], [node]]
    assert _queue() == ""


@pytest.mark.parametrize(
    ("settings", "extra", "message"),
    [
        ({"partition": "nope"}, {}, "salloc: error: invalid partition specified: nope"),
        ({"time_limit": "2"}, {"maxtext_timeout": 600}, "cvs_slurm.time_limit 2 (120 s) is shorter than the run"),
        ({"partiton": "cvs"}, {}, "cvs_slurm.partiton: is not a known key; did you mean 'partition'?"),
        ({"environment": "container"}, {}, "cvs_slurm.environment: 'container' is not supported"),
        ({"salloc_options": "--exclusive"}, {}, "cvs_slurm.salloc_options: must be a list of options"),
    ],
    ids=["partition", "time-limit", "unknown-key", "container", "options-string"],
)
def test_bad_slurm_settings_fail_with_a_clear_message_before_any_node_is_touched(
    slurm: Any, run_playbook: Callable[..., Any], node_exec: Callable[..., Any], tmp_path: Path,
    settings: dict[str, Any], extra: dict[str, Any], message: str,
) -> None:  # fmt: skip
    inventory = _slurm_inventory(slurm, tmp_path, **settings)
    extravars = {**MAXTEXT_VARS, "cvs_results_dir": str(tmp_path / "r"), "cvs_validate_checks": ["maxtext"], **extra}
    proc = run_playbook(VALIDATE, inventory, extravars, check=False)
    assert proc.returncode != 0
    assert message in proc.stdout, proc.stdout[-5000:]
    _assert_untouched(node_exec, proc.stdout)


def _assert_untouched(node_exec: Callable[..., Any], output: str) -> None:
    """No job queued, and no node got a scratch directory, a lease or a process of the run."""
    assert _queue() == ""
    run_ids = set(re.findall(r"run (\d{8}-\d{6}-[a-z0-9]{6})", output))
    for node in NODES:
        for run_id in run_ids:
            listed = node_exec(node, f"ls -d /var/tmp/cvs/{run_id} /var/tmp/cvs/leases/*{run_id}* 2>/dev/null; true")
            assert listed.stdout.strip() == "", (node, listed.stdout)


def test_an_account_the_partition_refuses_and_a_controller_down_fail_naming_slurms_message(
    slurm: Any, run_playbook: Callable[..., Any], node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    extravars = {**RVS_VARS, "cvs_results_dir": str(tmp_path / "r"), "cvs_validate_checks": ["rvs"]}
    # without accounting, Slurm checks an account only against the partition's AllowAccounts
    _host("scontrol", "update", "partitionname=cvs", "allowaccounts=research")
    try:
        refused = run_playbook(
            VALIDATE, _slurm_inventory(slurm, tmp_path, account="nope", allocation_wait=2), extravars, check=False
        )
    finally:
        _host("scontrol", "update", "partitionname=cvs", "allowaccounts=ALL")
    assert refused.returncode != 0
    assert "Slurm did not allocate node1, node2, node3" in refused.stdout, refused.stdout[-5000:]
    assert "--account=nope" in refused.stdout and "Unable to allocate resources" in refused.stdout
    _assert_untouched(node_exec, refused.stdout)
    node_exec("node1", "pkill -x slurmctld; for i in $(seq 50); do pgrep -x slurmctld || exit 0; sleep 0.1; done")
    try:
        down = run_playbook(VALIDATE, _slurm_inventory(slurm, tmp_path), extravars, check=False)
    finally:
        restarted = _slurm_sh("start", check=False)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert down.returncode != 0
    assert "Slurm, asked from node1 about node1, node2, node3:" in down.stdout, down.stdout[-5000:]
    assert "Unable to contact slurm controller" in down.stdout
    _assert_untouched(node_exec, down.stdout)
