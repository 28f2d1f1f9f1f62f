"""A node guard and its controller holder (cvs.cluster.run_guard), end to end on this machine.

The node side runs the bootstrap, marks and program the action sends; the holder is the real script; only the
ssh command line is replaced by ``/bin/sh -c`` (the integration tests run it over ssh on the simulated cluster)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from ansible_collections.cvs.cluster.plugins.action.run_guard import guard_command, guard_program, start_holder
from ansible_collections.cvs.cluster.plugins.module_utils import _run_guard as guard
from ansible_collections.cvs.cluster.plugins.plugin_utils._run.guard_holder import start_time


@pytest.fixture
def run() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def lease_dir(tmp_path: Path, run: str) -> Path:
    guard.acquire(str(tmp_path), "n1", run, 900, {"host": "c"})
    return tmp_path


@pytest.fixture
def workload(run: str) -> Iterator[dict[str, subprocess.Popen]]:
    """The run's process on n1, and one of the same run on n2 (another node sharing this process table)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CVS_")}
    procs = {
        n: subprocess.Popen(["sleep", "300"], env={**base, "CVS_RUN_ID": run, "CVS_NODE": n}) for n in ("n1", "n2")
    }
    yield procs
    for p in procs.values():
        p.kill()
        p.wait()


def arguments(run: str, lease_dir: Path) -> dict[str, Any]:
    return {"run_id": run, "node": "n1", "dir": str(lease_dir), "container": None, "grace": 1}


def node_argv(run: str) -> list[str]:
    return ["/bin/sh", "-c", guard_command(sys.executable, run, "n1")]


def start_guard(run: str, lease_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen(node_argv(run), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    program = guard_program(arguments(run, lease_dir)).encode()
    proc.stdin.write(str(len(program)).encode() + b"\n" + program)
    proc.stdin.flush()
    assert proc.stdout.readline().decode().startswith(guard.GUARD_ARMED + " ")
    return proc


def test_the_guard_cleans_up_the_run_when_its_session_ends(
    run: str, lease_dir: Path, workload: dict[str, subprocess.Popen]
) -> None:
    proc = start_guard(run, lease_dir)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    outcome = json.loads(proc.stdout.read().decode().splitlines()[-1])
    assert proc.wait(timeout=10) == 0
    assert outcome == {"node": "n1", "run_id": run, "stopped": ["sleep 300"], "survivors": [], "released": True}
    assert workload["n1"].wait(timeout=5) is not None
    assert workload["n2"].poll() is None  # the same run's process of another node is not this guard's
    assert guard.read_lease(guard.lease_path(str(lease_dir))) is None


def test_sigterm_disarms_the_guard_without_cleaning_up(
    run: str, lease_dir: Path, workload: dict[str, subprocess.Popen]
) -> None:
    proc = start_guard(run, lease_dir)
    assert guard.disarm_guards(run, "n2") == 0
    assert guard.disarm_guards(run, "n1") == 1
    assert proc.wait(timeout=5) == 0
    assert workload["n1"].poll() is None
    assert (guard.read_lease(guard.lease_path(str(lease_dir))) or {}).get("run_id") == run


def test_the_holder_keeps_the_guard_armed_while_the_playbook_lives_and_releases_it_when_gone(
    run: str, lease_dir: Path, workload: dict[str, subprocess.Popen]
) -> None:
    playbook = subprocess.Popen(["sleep", "300"])  # stands for the ansible-playbook process
    config = {"argv": node_argv(run), "program": guard_program(arguments(run, lease_dir)), "armed": guard.GUARD_ARMED,
              "watch_pid": playbook.pid, "watch_start": start_time(playbook.pid),
              "ready_timeout": 10, "cleanup_timeout": 30}  # fmt: skip
    answer = start_holder(config, 20)
    assert answer.startswith("armed "), answer
    time.sleep(1.5)
    assert workload["n1"].poll() is None
    playbook.kill()
    playbook.wait()
    assert workload["n1"].wait(timeout=15) is not None
    deadline = time.monotonic() + 10
    while guard.read_lease(guard.lease_path(str(lease_dir))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert guard.read_lease(guard.lease_path(str(lease_dir))) is None
    assert workload["n2"].poll() is None


def test_the_holder_names_why_no_guard_listens(run: str, lease_dir: Path) -> None:
    config = {"argv": ["/bin/sh", "-c", "echo 'ssh: connect to host n1 port 22: Connection refused' >&2; exit 255"],
              "program": guard_program(arguments(run, lease_dir)), "armed": guard.GUARD_ARMED, "watch_pid": os.getpid(),
              "watch_start": start_time(os.getpid()), "ready_timeout": 5}  # fmt: skip
    assert start_holder(config, 15) == "failed: ssh: connect to host n1 port 22: Connection refused"


def engine(labels: dict[str, str] | None, rm_rc: int = 0) -> tuple[list[list[str]], Any]:
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **_: Any) -> SimpleNamespace:
        calls.append(argv)
        if argv[1] == "container":
            return SimpleNamespace(returncode=1 if labels is None else 0, stdout=json.dumps(labels), stderr="")
        return SimpleNamespace(returncode=rm_rc, stdout="", stderr="Error: device busy")

    return calls, fake_run


def test_the_guard_removes_only_a_container_labelled_with_its_run() -> None:
    calls, fake = engine({"cvs.managed": "true", "cvs.run_id": "r1"})
    assert guard.remove_run_container("podman", "cvs-node", "r1", run=fake) == "removed container cvs-node"
    assert calls[-1] == ["podman", "rm", "--force", "cvs-node"]
    calls, fake = engine({"cvs.managed": "true", "cvs.run_id": "r2"})
    assert (
        guard.remove_run_container("docker", "cvs-node", "r1", run=fake) == "container cvs-node is not this run's: left"
    )
    assert len(calls) == 1
    _, fake = engine(None)
    assert guard.remove_run_container("docker", "cvs-node", "r1", run=fake) == "no container cvs-node"
    _, fake = engine({"cvs.managed": "true", "cvs.run_id": "r1"}, rm_rc=1)
    assert (
        guard.remove_run_container("docker", "x", "r1", run=fake)
        == "container x could not be removed: Error: device busy"
    )


def test_the_guard_command_quotes_what_it_is_given() -> None:
    command = guard_command("/usr/bin/python3", "r1$(touch /tmp/x)", "node 1")
    assert "'CVS_GUARD_RUN_ID=r1$(touch /tmp/x)'" in command and "'CVS_NODE=node 1'" in command


def test_the_guard_removes_the_runs_async_job_files_and_nothing_else(
    run: str, lease_dir: Path, workload: dict[str, subprocess.Popen], tmp_path: Path
) -> None:
    """The async result files of the run (``<scratch>/async``, where cvs.cluster.rvs keeps them) go with the run;
    a file that is no job file stays, and so does its directory."""
    jobs, other = tmp_path / "scratch" / "async", tmp_path / "scratch2" / "async"
    jobs.mkdir(parents=True)
    other.mkdir(parents=True)
    for name in ("j123456789.42", "j987.7.tmp"):
        (jobs / name).write_bytes(b"\0" * 1024)
    (other / "j1.2").write_text("{}")
    (other / "notes.txt").write_text("mine")
    program = guard_program({**arguments(run, lease_dir), "async_dir": str(jobs)}).encode()
    proc = subprocess.Popen(node_argv(run), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(str(len(program)).encode() + b"\n" + program)
    proc.stdin.close()
    outcome = json.loads(proc.stdout.read().decode().splitlines()[-1])
    assert proc.wait(timeout=10) == 0
    assert outcome["async_files"] == 2 and not jobs.exists()
    assert guard.remove_async_files(str(other)) == 1
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    assert guard.remove_async_files(str(tmp_path / "missing")) == 0
