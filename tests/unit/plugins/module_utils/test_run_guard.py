"""Run ownership on a node (module_utils/_run_guard.py) and the controller's identity (plugin_utils/_run/owner.py).

Real processes and real files: the lease under tmp_path, processes started with the run's marks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from ansible_collections.cvs.cluster.plugins.module_utils import _run_guard as guard
from ansible_collections.cvs.cluster.plugins.plugin_utils._run.owner import controller_gone, controller_identity

NOW = 1_800_000_000.0


def _lease(run_id: str, expires: float) -> dict:
    return {"run_id": run_id, "node": "n1", "controller": {"user": "u", "host": "c", "pid": 7}, "taken": 0,
            "expires": expires}  # fmt: skip


def test_a_free_node_is_taken() -> None:
    assert guard.decide_acquire(None, "r2", "n1", NOW) == {"held_by": "", "stale_run": "", "renew": False}
    assert guard.decide_acquire({}, "r2", "n1", NOW)["held_by"] == ""


def test_a_live_lease_of_another_run_refuses_naming_run_expiry_controller_and_the_way_out() -> None:
    held = guard.decide_acquire(_lease("r1", NOW + 60), "r2", "n1", NOW)["held_by"]
    assert held.startswith("n1 is in use by run r1 (lease until 2027-01-15T08:01:00Z, taken by u@c pid 7)")
    assert held.endswith("-e cvs_finish_run=r1")


def test_an_expired_lease_or_a_run_known_to_be_over_is_stale() -> None:
    assert guard.decide_acquire(_lease("r1", NOW - 1), "r2", "n1", NOW)["stale_run"] == "r1"
    assert guard.decide_acquire(_lease("r1", NOW + 60), "r2", "n1", NOW, stale_run="r1")["stale_run"] == "r1"
    # naming another run as over does not free the node from this one
    assert guard.decide_acquire(_lease("r1", NOW + 60), "r2", "n1", NOW, stale_run="r9")["held_by"]


def test_the_runs_own_lease_is_renewed() -> None:
    assert guard.decide_acquire(_lease("r1", NOW - 100), "r1", "n1", NOW)["renew"] is True


def test_acquire_renew_refuse_release(tmp_path: Path) -> None:
    clock = iter([NOW, NOW + 10, NOW + 20, NOW + 5000]).__next__
    first = guard.acquire(str(tmp_path), "n1", "r1", 900, {"host": "c"}, now=clock)
    assert first["lease"]["expires"] == NOW + 900 and not first["renewed"]
    again = guard.acquire(str(tmp_path), "n1", "r1", 3600, {"host": "c"}, now=clock)
    assert again["renewed"] and again["lease"]["taken"] == NOW and again["lease"]["expires"] == NOW + 10 + 3600
    with pytest.raises(guard.LeaseHeld) as refused:
        guard.acquire(str(tmp_path), "n1", "r2", 900, {"host": "c"}, now=clock)
    assert refused.value.holder["run_id"] == "r1" and "in use by run r1" in str(refused.value)
    assert guard.release(str(tmp_path), "n1", "r2") == {"released": False, "held_by": "r1"}
    taken = guard.acquire(str(tmp_path), "n1", "r2", 900, {"host": "c"}, now=clock)  # r1's lease expired by now
    assert taken["stale_run"] == "r1"
    lease_file = Path(guard.lease_path(str(tmp_path)))  # this machine's
    assert json.loads(lease_file.read_text())["run_id"] == "r2"
    assert guard.release(str(tmp_path), "n1", "r2") == {"released": True, "held_by": ""}
    assert not lease_file.exists()
    assert guard.release(str(tmp_path), "n1", "r2") == {"released": False, "held_by": ""}


def test_a_torn_lease_file_has_no_owner(tmp_path: Path) -> None:
    Path(guard.lease_path(str(tmp_path))).write_text('{"run_id": "r1", "exp')
    assert guard.acquire(str(tmp_path), "n1", "r2", 900, {})["stale_run"] == ""


@pytest.mark.parametrize("node", ["gpu01$(touch${IFS}/tmp/pwned)", "x" * 253, "../../etc/passwd", ".hidden", "n\udcff"])
def test_lease_file_names_are_bounded_and_inert(node: str, tmp_path: Path) -> None:
    """The file is named by the machine, never by the inventory name: nothing of the name reaches the path."""
    guard.acquire(str(tmp_path), node, "r1", 60, {})
    (name,) = [p.name for p in tmp_path.iterdir() if p.suffix == ".lease"]
    assert name == guard.lease_file_name(guard.machine_identity()) and len(name) == len("machine-.lease") + 32
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    assert json.loads((tmp_path / name).read_text())["node"] == node


# --------------------------------------------------------------------------- machine identity (issue 37 finding 3)

M1 = {"machine_id": "m" * 32, "boot_id": "b1", "hostname": "node1", "key": "1" * 32}
M2 = {"machine_id": "m" * 32, "boot_id": "b1", "hostname": "node2", "key": "2" * 32}


def test_the_identity_reads_machine_id_boot_id_and_host_name(tmp_path: Path) -> None:
    (tmp_path / "machine-id").write_text("3d1219c7c4c5404aaa1f6d2a48adfda4\n")
    (tmp_path / "boot_id").write_text("462858a4-5db0-4868-8ab8-56a138bae239\n")
    files = (str(tmp_path / "missing"), str(tmp_path / "machine-id"))
    one = guard.machine_identity(files, str(tmp_path / "boot_id"), hostname="node1")
    assert one["machine_id"] == "3d1219c7c4c5404aaa1f6d2a48adfda4" and one["boot_id"].startswith("462858a4")
    assert len(one["key"]) == 32 and one == guard.machine_identity(files, str(tmp_path / "boot_id"), hostname="node1")
    # namespaces on one kernel (the simulated cluster): same machine-id and boot id, told apart by the host name
    assert guard.machine_identity(files, str(tmp_path / "boot_id"), hostname="node2")["key"] != one["key"]
    # clones of one image: same machine-id and host name, told apart by the boot id
    (tmp_path / "boot_id").write_text("another boot\n")
    assert guard.machine_identity(files, str(tmp_path / "boot_id"), hostname="node1")["key"] != one["key"]
    # nothing readable still gives an identity (the host name's)
    assert guard.machine_identity((), str(tmp_path / "missing"), hostname="h")["machine_id"] == ""
    here = guard.machine_identity()
    assert here["hostname"] == os.uname().nodename and here == guard.machine_identity()


def test_two_names_for_one_machine_find_one_lease(tmp_path: Path) -> None:
    clock = iter([NOW, NOW + 1, NOW + 2, NOW + 3]).__next__
    guard.acquire(str(tmp_path), "node1", "r1", 900, {"host": "c"}, now=clock, machine=M1)
    # the same run naming the machine again: refused naming both names
    with pytest.raises(guard.LeaseHeld) as twice:
        guard.acquire(str(tmp_path), "node1-again", "r1", 900, {"host": "c"}, now=clock, machine=M1)
    assert str(twice.value).startswith("node1-again and node1 are one machine (host node1, machine-id mmmmmmmmmmmm")
    assert "named twice in the inventory of run r1; give each machine one inventory name" in str(twice.value)
    # another run naming it differently: refused naming the holder's name for it
    with pytest.raises(guard.LeaseHeld) as other:
        guard.acquire(str(tmp_path), "gpu-a", "r2", 900, {"host": "c"}, now=clock, machine=M1)
    assert str(other.value).startswith("gpu-a is in use by run r1 (lease until")
    assert ", which calls this machine node1 (host node1, machine-id mmmm" in str(other.value)
    assert other.value.holder["node"] == "node1" and other.value.holder["machine"] == M1
    # another machine is free; the holder gives its machine back under any of its names
    assert guard.acquire(str(tmp_path), "node2", "r2", 900, {}, now=clock, machine=M2)["lease"]["machine"] == M2
    assert guard.release(str(tmp_path), "node1-again", "r1", M1) == {"released": True, "held_by": ""}
    assert sorted(p.name for p in tmp_path.glob("*.lease")) == [guard.lease_file_name(M2)]


@pytest.fixture
def run() -> str:
    return f"r-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def marked(run: str) -> Iterator[list[subprocess.Popen]]:
    """A run's processes on n1 (a setsid launcher with a child that ignores SIGTERM), and look-alikes that are not."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CVS_")}
    stubborn = "trap '' TERM; sleep 300 & wait"
    marks = [(run, "n1"), (run, "n1"), (run, "n2"), (run + "0", "n1")]  # another node, another run
    argvs = [["setsid", "sh", "-c", "sleep 300 & wait"], ["sh", "-c", stubborn], ["sleep", "300"], ["sleep", "300"]]
    procs = [subprocess.Popen(argv, env={**base, "CVS_RUN_ID": r, "CVS_NODE": n}) for argv, (r, n) in zip(argvs, marks)]
    time.sleep(0.3)
    yield procs
    for r, n in set(marks):
        guard.stop_marked(r, n, grace=0)
    for p in procs:
        p.wait(timeout=10)


def test_marked_processes_finds_the_run_on_its_node_only(marked: list[subprocess.Popen], run: str) -> None:
    found = guard.marked_processes(run, "n1")
    pids = {p["pid"] for p in found["processes"]}
    assert {marked[0].pid, marked[1].pid} <= pids
    assert marked[2].pid not in pids and marked[3].pid not in pids
    assert len(pids) == 4  # the two shells and their sleep children
    assert any(p["args"] == "sleep 300" for p in found["processes"])


def test_stop_marked_terms_then_kills_and_leaves_others(marked: list[subprocess.Popen], run: str) -> None:
    outcome = guard.stop_marked(run, "n1", grace=1)
    assert len(outcome["stopped"]) == 4 and outcome["survivors"] == []
    assert marked[1].pid in outcome["killed"]  # ignored SIGTERM
    assert marked[0].wait(timeout=5) is not None and marked[1].wait(timeout=5) == -signal.SIGKILL
    assert guard.marked_processes(run, "n1")["processes"] == []
    assert marked[2].poll() is None and marked[3].poll() is None
    again = guard.stop_marked(run, "n1", grace=1)
    assert (again["stopped"], again["killed"], again["survivors"]) == ([], [], [])


def test_the_controller_identity_tells_a_gone_process_from_a_live_one() -> None:
    me = controller_identity(os.getpid())
    assert me["pid"] == os.getpid() and isinstance(me["start"], int) and me["boot_id"]
    assert controller_gone(me) is False
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    theirs = controller_identity(child.pid)
    child.wait()
    assert controller_gone(theirs) is True
    assert controller_gone({**me, "start": me["start"] - 1}) is True  # the pid was reused
    assert controller_gone({**me, "boot_id": "another-boot"}) is False  # another machine or boot: unknown
    assert controller_gone({**me, "host": "elsewhere"}) is False
    assert controller_gone(None) is False and controller_gone({"host": "c"}) is False


def test_run_arguments_and_the_survivors_message() -> None:
    assert guard.run_arguments_problem({"node": "n1", "run_id": "r1"}) == ""
    assert guard.run_arguments_problem({"node": "n1", "run_id": "  "}) == "a non-empty node and run_id are needed"
    assert guard.run_arguments_problem({"node": "", "run_id": "r1"})
    survivors = [{"pid": 12, "args": "python3 train.py"}, {"pid": 13, "args": "sleep 9"}]
    assert guard.survivors_message("n1", "r1", survivors) == (
        "n1: processes of run r1 survive SIGKILL: 12 python3 train.py, 13 sleep 9"
    )


def test_the_lease_directory_is_shared_like_tmp(tmp_path: Path) -> None:
    directory = tmp_path / "leases"
    old = os.umask(0o022)
    try:
        guard.acquire(str(directory), "n1", "r1", 60, {})
    finally:
        os.umask(old)
    assert directory.stat().st_mode & 0o7777 == 0o1777
    assert guard.lease_path(str(directory), M1) == str(directory / f"machine-{M1['key']}.lease")


def test_the_guard_cancels_the_runs_slurm_job_by_name_and_says_what_went_wrong() -> None:
    calls: list[list[str]] = []

    def ok(argv: list[str], **_: object) -> subprocess.CompletedProcess:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    assert guard.cancel_slurm_job("cvs-run-1", run=ok) == "cancelled Slurm job cvs-run-1"
    assert calls == [["scancel", "--name=cvs-run-1"]]
    envs: list[object] = []

    def with_env(argv: list[str], env: object = None, **_: object) -> subprocess.CompletedProcess:
        envs.append(env)
        return subprocess.CompletedProcess(argv, 0, "", "")

    guard.cancel_slurm_job("cvs-run-1", "/etc/slurm-x/slurm.conf", run=with_env)
    guard.cancel_slurm_job("cvs-run-1", None, run=with_env)
    assert envs[0]["SLURM_CONF"] == "/etc/slurm-x/slurm.conf" and envs[1] is None  # type: ignore[index]

    def refused(argv: list[str], **_: object) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(argv, 1, "", "scancel: error: Unable to contact slurm controller\n")

    assert guard.cancel_slurm_job("cvs-run-1", run=refused) == (
        "Slurm job cvs-run-1 not cancelled: scancel: error: Unable to contact slurm controller"
    )

    def missing(argv: list[str], **_: object) -> subprocess.CompletedProcess:
        raise FileNotFoundError(2, "No such file or directory", "scancel")

    assert guard.cancel_slurm_job("cvs-run-1", run=missing).startswith("Slurm job cvs-run-1 not cancelled: ")
