"""Runs own what they start, and stop means stopped (issue 15 items 3 and 4), on the simulated cluster.

Process listings come from the nodes themselves (``ctl.sh exec``): every process whose environment carries the run's
marks ``CVS_RUN_ID=<run id>`` and ``CVS_NODE=<node>``, the launcher and train.py included.

* Ctrl-C (SIGINT to the process group, what a terminal does) and SIGTERM (to ansible-playbook only, what ``kill``
  does) during baremetal MaxText training, two runs at once on disjoint nodes: afterwards nothing of either run
  runs on any node and their leases are gone.
* ansible-runner's cancel (it SIGKILLs the playbook's process group, as AWX's cancel does): the guards on the nodes
  stop the training and give the nodes back within seconds; on a node without a guard the training survives the
  controller, and the next run from the same controller stops it and takes the node; that run also removes the
  scratch directories of runs older than the retention (only those prepare made).
* Container backend, a playbook that arms a guard and ends without disposing: the guard removes the run's
  container and stops its processes, and leaves another run's container alone.
* Container backend, two runs at once: the second is refused naming the live run and touches nothing; finishing an
  old run id touches nothing either; the first run passes in its own containers, then removes them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

import ansible_runner
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"
VALIDATE = REPO / "playbooks" / "validate.yml"
NODES = ["node1", "node2", "node3"]
LEASES = Path("/var/tmp/cvs/leases")  # the simulated nodes share this directory; one lease file per machine

# long enough that the training is still running while the test looks at it
STAND_IN_DIR = "/tmp/cvs-ownership-no-faults"
TRAINING: dict[str, Any] = {
    "cvs_validate_checks": ["maxtext"],
    "maxtext_steps": 100000,
    "maxtext_poll_interval": 1,
    "maxtext_stall_timeout": 120,
    "maxtext_stop_grace": 3,
    "maxtext_timeout": 900,
    "maxtext_env": {"CVS_STAND_IN_DIR": STAND_IN_DIR},
}

MARKED = r"""
for e in /proc/[0-9]*/environ; do
    env=$(tr '\0' '\n' <"$e" 2>/dev/null) || continue
    printf '%s\n' "$env" | grep -qxF "CVS_RUN_ID=$1" || continue
    printf '%s\n' "$env" | grep -qxF "CVS_NODE=$2" || continue
    p=${e%/environ}
    printf '%s %s\n' "${p#/proc/}" "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)"
done
"""


def marked(node_exec: Callable[..., Any], node: str, run_id: str) -> list[str]:
    """``pid args`` of every process of ``run_id`` on ``node``, listed on the node."""
    out = node_exec(node, ["sh", "-c", MARKED, "sh", run_id, node]).stdout
    return [line for line in out.splitlines() if line.strip()]


def lease_holder(node: str) -> Optional[str]:
    """The run holding the machine ``node`` names (lease files are named by the machine; the lease records the name)."""
    for path in LEASES.glob("*.lease"):
        try:
            lease = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if lease.get("node") == node:
            return lease["run_id"]
    return None


def wait_for(
    what: str, check: Callable[[], Any], timeout: float, log: Callable[[], str], alive: Callable[[], bool]
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if not alive():
            raise AssertionError(f"the run ended while waiting for {what}\n{log()[-4000:]}")
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{log()[-4000:]}")


class Playbook:
    """ansible-playbook validate.yml in its own session, its output collected by a thread."""

    def __init__(self, inventory: Path, extravars: dict[str, Any]) -> None:
        env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
        cmd = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(VALIDATE), "-e", json.dumps(extravars)]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float = 600) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self._reader.join(timeout=30)
        return rc


def inventory_of(cluster: Any, nodes: list[str], path: Path) -> Path:
    """The baremetal inventory narrowed to ``nodes``, the first of them the head node."""
    inventory = yaml.safe_load(cluster.inventory("baremetal").read_text())
    groups = inventory["all"]["children"]
    groups["cvs_nodes"]["hosts"] = {n: groups["cvs_nodes"]["hosts"][n] for n in nodes}
    groups["cvs_head"]["hosts"] = {nodes[0]: None}
    path.write_text(yaml.safe_dump(inventory))
    return path


def run_id_of(results: Path) -> str:
    runs = [p.name for p in results.iterdir() if p.is_dir()] if results.is_dir() else []
    return runs[0] if len(runs) == 1 else ""


def training_everywhere(node_exec: Callable[..., Any], nodes: list[str], run_id: str) -> dict[str, list[str]]:
    """The run's processes per node once train.py runs on every node, else {}."""
    found = {n: marked(node_exec, n, run_id) for n in nodes}
    return found if all(any("train.py" in p for p in procs) for procs in found.values()) else {}


# --------------------------------------------------------------------------- item 3: stop means stopped


def test_ctrl_c_and_sigterm_stop_baremetal_training_on_every_node(
    cluster: Any, node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    """Two runs at once on disjoint nodes (disjoint runs do not block each other), one Ctrl-C'd, one SIGTERMed: the
    finishing run (cvs_finish_run=<run id>) stops the launcher and train.py on every node and gives the nodes back."""
    plan = {"SIGINT": (["node1", "node2"], 12381), "SIGTERM": (["node3"], 12382)}
    runs: dict[str, Playbook] = {}
    for sig, (nodes, port) in plan.items():
        extra = {**TRAINING, "cvs_results_dir": str(tmp_path / sig), "maxtext_coordinator_port": port}
        runs[sig] = Playbook(inventory_of(cluster, nodes, tmp_path / f"{sig}.yml"), extra)
    ids: dict[str, str] = {}
    try:
        for sig, (nodes, _) in plan.items():
            ids[sig] = wait_for(
                f"the {sig} run's id", lambda s=sig: run_id_of(tmp_path / s), 300, runs[sig].text, runs[sig].alive
            )
            before = wait_for(
                f"training of the {sig} run on {nodes}",
                lambda n=nodes, s=sig: training_everywhere(node_exec, n, ids[s]),
                300,
                runs[sig].text,
                runs[sig].alive,
            )
            assert all(any("launch.sh" in p for p in procs) for procs in before.values()), before
            assert all(lease_holder(n) == ids[sig] for n in nodes)
        os.killpg(runs["SIGINT"].proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal does
        runs["SIGTERM"].proc.send_signal(signal.SIGTERM)  # what kill <pid> does
        rcs = {sig: run.wait(600) for sig, run in runs.items()}
    finally:
        for run in runs.values():
            if run.proc.poll() is None:
                os.killpg(run.proc.pid, signal.SIGKILL)
    for sig, (nodes, _) in plan.items():
        text = runs[sig].text()
        assert rcs[sig] == 99, (sig, text[-4000:])  # ansible-core's exit code for a user interrupt
        assert f"[cvs] run {ids[sig]} was interrupted: disposing of what it started" in text, text[-4000:]
        assert f"[cvs] run {ids[sig]} finished after the interrupt" in text, text[-4000:]
        for n in nodes:
            assert f"{n}: stopped " in text and f"process(es) of run {ids[sig]}" in text, text[-4000:]
        for n in NODES:
            assert marked(node_exec, n, ids[sig]) == [], (sig, n)
            assert lease_holder(n) != ids[sig], (sig, n)
        data = json.loads((tmp_path / sig / ids[sig] / "results.json").read_text())
        assert data["summary"]["status"] == "INCOMPLETE" and sorted(data["nodes"]) == nodes


GUARDED = ["node1", "node2"]  # node3 runs without a guard (cvs_node_guard false): the next run must clean it


def guards(node_exec: Callable[..., Any], node: str, run_id: str) -> str:
    """The guard processes of ``run_id`` on ``node`` (its marks are CVS_GUARD_RUN_ID and CVS_NODE)."""
    script = MARKED.replace("CVS_RUN_ID=", "CVS_GUARD_RUN_ID=")
    return node_exec(node, ["sh", "-c", script, "sh", run_id, node]).stdout.strip()


def test_cancelled_run_is_disposed_of_by_the_guards_and_else_by_the_next_run(
    cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ansible-runner's cancel SIGKILLs the playbook: nothing on the controller can dispose of the run. Where a guard
    is armed (node1, node2) it stops the training and gives the node back within seconds; node3 (no guard) stays
    held with training running until the next run from this controller sees the holder is gone and stops it."""
    # runner finds ansible-playbook on this process's PATH; CI runs pytest without the venv on it
    monkeypatch.setenv("PATH", f"{ANSIBLE_PLAYBOOK.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    run_id = time.strftime("%Y%m%d-%H%M%S-") + "cancel" + uuid.uuid4().hex[:4]
    cancel = threading.Event()
    extra = {**TRAINING, "cvs_run_id": run_id, "cvs_results_dir": str(tmp_path / "results"),
             "maxtext_coordinator_port": 12383,
             "cvs_node_guard": "{{ inventory_hostname in " + json.dumps(GUARDED) + " }}"}  # fmt: skip
    (tmp_path / "runner").mkdir()
    thread, runner = ansible_runner.run_async(
        private_data_dir=str(tmp_path / "runner"),
        playbook=str(VALIDATE),
        inventory=[str(cluster.inventory("baremetal"))],
        extravars=extra,
        envvars={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
        cancel_callback=cancel.is_set,
        quiet=True,
    )
    try:
        wait_for("training on every node", lambda: training_everywhere(node_exec, NODES, run_id), 300,
                 lambda: "".join(p.read_text() for p in (tmp_path / "runner").glob("artifacts/*/stdout")),
                 thread.is_alive)  # fmt: skip
    finally:
        cancel.set()
        thread.join(timeout=120)
    assert runner.status == "canceled", runner.status
    log = "".join(p.read_text() for p in (tmp_path / "runner").glob("artifacts/*/stdout"))
    cancelled = time.monotonic()

    def guarded_nodes_clean() -> bool:
        return all(not marked(node_exec, n, run_id) and lease_holder(n) is None and not guards(node_exec, n, run_id)
                   for n in GUARDED)  # fmt: skip

    wait_for("the guards to dispose of the run", guarded_nodes_clean, 60, lambda: log, lambda: True)
    print(f"guards disposed of the cancelled run in {time.monotonic() - cancelled:.1f} s")
    assert any("train.py" in p for p in marked(node_exec, "node3", run_id)), marked(node_exec, "node3", run_id)
    assert lease_holder("node3") == run_id
    assert "no guard armed" not in log, log[-4000:]

    # scratch of earlier runs on the nodes: one past the retention (7 days), one recent, one not made by prepare
    scratch = Path("/var/tmp/cvs")  # cvs_scratch_root, shared by the simulated nodes
    old, recent, foreign = (scratch / f"20200101-000000-{k}{uuid.uuid4().hex[:4]}" for k in ("old", "new", "usr"))
    for path, days in ((old, 30), (recent, 1), (foreign, 30)):
        (path / "node1").mkdir(parents=True)
        if path != foreign:
            (path / ".cvs-scratch").write_text(path.name + "\n")
        stamp = time.time() - days * 86400
        for p in (path / ".cvs-scratch", path / "node1", path):
            if p.exists():
                os.utime(p, (stamp, stamp))

    nxt = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(cluster.inventory("baremetal")), str(VALIDATE), "-e",
         json.dumps({"cvs_results_dir": str(tmp_path / "next"), "cvs_validate_checks": ["rvs"],
                     "rvs": {"rvs_test_level": "0", "tests": ["gst_single"]}})],
        cwd=REPO, env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    text = nxt.stdout + nxt.stderr
    assert nxt.returncode == 0, text[-4000:]
    assert f"node3: run {run_id} died holding this node" in text, text[-4000:]
    for n in NODES:
        assert marked(node_exec, n, run_id) == [], n
        assert lease_holder(n) is None, n
    for n in GUARDED:
        assert f"{n}: run {run_id} died holding this node" not in text, text[-4000:]
    assert not old.exists() and recent.is_dir() and foreign.is_dir(), text[-4000:]
    shutil.rmtree(recent)
    shutil.rmtree(foreign)


# --------------------------------------------------------------------------- item 4: runs own what they start


def containers(node_exec: Callable[..., Any], node: str, name: str) -> str:
    return node_exec(node, ["docker", "ps", "-aq", "--no-trunc", "--filter", f"name=^{name}$"]).stdout.strip()


def test_concurrent_container_runs_do_not_clobber_each_other(
    cluster: Any, node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
    name = f"cvs-own-{uuid.uuid4().hex[:6]}"
    ctr = {**settings, "name": name, "ssh_port": 2261}
    first = Playbook(
        cluster.inventory("container"),
        {**TRAINING, "maxtext_steps": 2400, "cvs_container": ctr, "cvs_results_dir": str(tmp_path / "first"),
         "maxtext_coordinator_port": 12384},
    )  # fmt: skip
    try:
        run_id = wait_for("the first run's id", lambda: run_id_of(tmp_path / "first"), 300, first.text, first.alive)
        wait_for(
            "training in every container",
            lambda: training_everywhere(node_exec, NODES, run_id),
            300,
            first.text,
            first.alive,
        )
        ids = {n: containers(node_exec, n, name) for n in NODES}
        assert all(ids.values()), ids

        env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}

        def validate(extra: dict[str, Any]) -> subprocess.CompletedProcess[str]:
            cmd = [str(ANSIBLE_PLAYBOOK), "-i", str(cluster.inventory("container")), str(VALIDATE)]
            return subprocess.run([*cmd, "-e", json.dumps(extra)], cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=600, check=False)  # fmt: skip

        rvs = {"cvs_validate_checks": ["rvs"], "rvs": {"rvs_test_level": "0", "tests": ["gst_single"]}}
        second = validate({**rvs, "cvs_container": ctr, "cvs_results_dir": str(tmp_path / "second")})
        text = second.stdout + second.stderr
        assert second.returncode != 0, text[-4000:]
        for n in NODES:
            assert f"{n} is in use by run {run_id} (lease until " in text, text[-4000:]
            assert f"-e cvs_finish_run={run_id}" in text
        old = validate({"cvs_container": ctr, "cvs_results_dir": str(tmp_path / "old"),
                        "cvs_finish_run": "20200101-000000-old000"})  # fmt: skip
        assert "PLAY [Dispose of what this run started]" in old.stdout, old.stdout[-4000:]
        for n in NODES:
            assert containers(node_exec, n, name) == ids[n], n
            assert any("train.py" in p for p in marked(node_exec, n, run_id)), n
            assert lease_holder(n) == run_id, n
        assert first.proc.poll() is None, "the first run ended before the others were checked against it"
        # the first run was long only so that it outlasted the checks: its remaining steps take no time now
        finish = f"mkdir -p {STAND_IN_DIR} && touch {STAND_IN_DIR}/finish"
        for n in NODES:
            node_exec(n, ["docker", "exec", name, "sh", "-c", finish])
        rc = first.wait(900)
    finally:
        if first.proc.poll() is None:
            os.killpg(first.proc.pid, signal.SIGKILL)
    assert rc == 0, first.text()[-4000:]
    data = json.loads((tmp_path / "first" / run_id / "results.json").read_text())
    assert data["summary"]["status"] == "PASS", data["summary"]
    for n in NODES:
        record = json.loads((tmp_path / "first" / run_id / "checks" / n / "maxtext.json").read_text())
        assert record["status"] == "PASS" and record["run_id"] == run_id and record["steps"] == 2400
        assert containers(node_exec, n, name) == "", n
        assert lease_holder(n) is None, n


GUARD_PLAY = """
- name: Arm the guards and end without disposing of the run
  hosts: "{{ guarded }}"
  gather_facts: false
  tasks:
    - name: Guard the run
      cvs.cluster.run_guard:
        node: "{{ inventory_hostname }}"
        run_id: "{{ run }}"
        container: {engine: docker, name: "{{ container }}"}
        grace: 2
      register: guard
    - name: The guard must listen
      ansible.builtin.assert:
        that: guard.armed and guard.guard_pid > 0
"""


def test_guard_removes_only_its_runs_container_when_the_playbook_ends_without_dispose(
    cluster: Any, node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    """The guard's cleanup on the container backend, against the nodes' real engines: the container labelled with
    the run is removed, one of the same name labelled with another run is left, the run's processes are stopped on
    both nodes."""
    run_id, other = (f"guard{uuid.uuid4().hex[:6]}" for _ in range(2))
    name = f"cvs-guard-{uuid.uuid4().hex[:6]}"
    image = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]["image"]
    for node, owner in (("node1", run_id), ("node2", other)):
        node_exec(node, ["docker", "run", "-d", "--name", name, "--label", "cvs.managed=true",
                         "--label", f"cvs.run_id={owner}", "--entrypoint", "sleep", image, "600"])  # fmt: skip
        node_exec(node, ["sh", "-c", 'CVS_RUN_ID="$1" CVS_NODE="$2" setsid sleep 600 >/dev/null 2>&1 &',
                         "sh", run_id, node])  # fmt: skip
    try:
        assert all(marked(node_exec, n, run_id) for n in ("node1", "node2"))
        play = tmp_path / "guard.yml"
        play.write_text(GUARD_PLAY)
        done = subprocess.run(
            [str(ANSIBLE_PLAYBOOK), "-i", str(cluster.inventory("container")), str(play), "-e",
             json.dumps({"guarded": ["node1", "node2"], "run": run_id, "container": name})],
            cwd=REPO, env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

        def cleaned() -> bool:
            return not containers(node_exec, "node1", name) and not any(
                marked(node_exec, n, run_id) or guards(node_exec, n, run_id) for n in ("node1", "node2")
            )

        wait_for("the guards' cleanup", cleaned, 60, lambda: done.stdout[-4000:], lambda: True)
        assert containers(node_exec, "node2", name), "the guard removed another run's container"
    finally:
        for node in ("node1", "node2"):
            node_exec(node, ["docker", "rm", "-f", name], check=False)
            node_exec(node, ["sh", "-c", MARKED, "sh", run_id, node], check=False)
