"""cvs.cluster.log_poll's contract on the simulated cluster (issues 14 and 15): stale markers with the default
start, two rotations within one delay, losses, late failures after the marker, long host names, orphaned workers,
state retention, a log that never appears.

Same driver as test_log_poll.py (tests/support/log_poll.py), both backends unless a test says why not.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.tests.support.log_poll import (
    REMOTE_ROOT,
    Scenario,
    Target,
    alias_target,
    both_forms,
    lp_target,
    numbers,
)
from ansible_collections.cvs.cluster.tests.support.lp_writer import expected_bytes, numbered

__all__ = ["lp_target"]

# the kept reader's bootstrap on a node (see SERVE_BOOTSTRAP); the bracket keeps pgrep from matching itself
READERS = (
    "me=$(readlink /proc/self/ns/net); for p in $(pgrep -f 'b[.]readline'); do "
    '[ "$(readlink /proc/$p/ns/net 2>/dev/null)" = "$me" ] && echo $p; done | wc -l'
)


def reader_count(target: Target, host: str) -> int:
    return int(target.node_exec(host, READERS).stdout.strip() or 0)


def test_default_start_never_completes_on_an_earlier_runs_marker(lp_target: Target, tmp_path: Path) -> None:
    """The log holds an earlier run's marker before this playbook starts; the poll uses the default start."""
    sc = Scenario(lp_target, tmp_path, "stale-default")
    logs = {h: f"{REMOTE_ROOT}/stale-default-logs/{h}/job.log" for h in lp_target.hosts}
    for host, log in logs.items():  # an earlier run, before this playbook (outside the per-run directory)
        folder = os.path.dirname(log)
        written = f"rm -rf {folder} && mkdir -p {folder} && printf 'old step 9\\nJOB DONE\\n' > {log}"
        lp_target.node_exec(host, f"{written} && touch -d @$(($(date +%s) - 5)) {log}")  # it ran 5 s ago
    specs = {
        h: {
            "path": logs[h],
            "host": h,
            "steps": [
                {"wait_for": f"{sc.dir(h)}/go"},
                {"ticks": 4, "every": 0.1, "marker_at": 4, "marker": "JOB DONE"},
            ],
        }
        for h in lp_target.hosts
    }
    sc.writer("job", specs)
    sc.poll("watch", {"logs": ["{{ lp_stale_log }}"], "complete": {"pattern": "^JOB DONE$"}}, delay=0.2)
    sc.tasks[-1]["vars"] = {"lp_stale_log": f"{REMOTE_ROOT}/stale-default-logs/{{{{ inventory_hostname }}}}/job.log"}

    out = sc.run(during=sc.go_after_rounds("watch", 2, "go"))
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["completed"] and not result["failed"], result["msg"]
        assert out.lines("watch", host) == ["tick 1", "tick 2", "tick 3", "JOB DONE"]
        first, second = out.task_rounds("watch", host)[:2]
        assert first["new_lines"] == second["new_lines"] == [] and not second["finished"]
        assert [e["event"] for e in result["events"]] == ["stale"]


def test_two_rotations_within_one_delay_read_the_middle_file(lp_target: Target, tmp_path: Path) -> None:
    """logrotate twice between two rounds (job.log.1 -> .2, job.log -> .1, twice): the middle file, still there
    as job.log.1, is read by identity; every line once, in order, no loss reported."""
    sc = Scenario(lp_target, tmp_path, "rotate-twice")
    specs = {}
    for i, host in enumerate(lp_target.hosts):
        log = f"{sc.dir(host)}/job.log"
        specs[host] = {
            "path": log,
            "host": host,
            "seed": 900 + i,
            "steps": [
                {"lines": [1, 1000], "chunk": [4000, 4000], "seconds": 0},
                {"wait_for": f"{sc.dir(host)}/go"},  # right after a round: the rest happens within one delay
                {"lines": [1001, 2000], "chunk": [100000, 100000], "seconds": 0},
                {"rotate": "rename", "to": log + ".1"},
                {"lines": [2001, 3000], "chunk": [100000, 100000], "seconds": 0},
                {"move": log + ".1", "to": log + ".2"},
                {"rotate": "rename", "to": log + ".1"},
                {"lines": [3001, 4000], "chunk": [100000, 100000], "seconds": 0},
                {"write": "WRITER DONE\n"},
            ],
        }
    sc.writer("job", specs)
    sc.poll("watch", {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^WRITER DONE$"}}, delay=3, save=True)

    def rotate_after_the_first_lines(scenario: Scenario) -> None:
        for host in lp_target.hosts:
            scenario.wait_for(f"line 1000 on {host}", lambda h=host: len(numbers(out_lines(scenario, h))) >= 1000)
            scenario.go(host, "go")

    out = sc.run(during=rotate_after_the_first_lines)
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["completed"] and not result["failed"], result["msg"]
        assert numbers(out.lines("watch", host)) == list(range(1, 4001))
        assert out.saved("watch", host, "job") == expected_bytes(specs[host])
        assert [e["event"] for e in result["events"]] == ["rotated"], result["events"]
        assert not any(s.get("lost_bytes") for r in out.task_rounds("watch", host) for s in r["log_states"])


def out_lines(scenario: Scenario, host: str, task: str = "watch") -> list[str]:
    return [line for r in scenario.load_rounds() if r["task"] == task and r["host"] == host for line in r["new_lines"]]


def test_a_rotated_file_gone_before_it_was_read_is_reported_lost_with_bytes(lp_target: Target, tmp_path: Path) -> None:
    sc = Scenario(lp_target, tmp_path, "rotate-lost")
    specs = {}
    for host in lp_target.hosts:
        log = f"{sc.dir(host)}/job.log"
        specs[host] = {
            "path": log,
            "host": host,
            "steps": [
                {"lines": [1, 3000], "chunk": [300000, 300000], "seconds": 0},
                {"wait_for": f"{sc.dir(host)}/go"},
                {"rotate": "rename", "to": log + ".1"},
                {"remove": log + ".1"},
                {"lines": [3001, 3100], "chunk": [100000, 100000], "seconds": 0},
                {"write": "WRITER DONE\n"},
            ],
        }
    sc.writer("job", specs)
    # 4 KiB a round: the poll is far behind when the rotated file goes
    sc.poll(
        "watch",
        {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^WRITER DONE$"}, "max_bytes": 4096},
        delay=0.5,
        save=True,
    )

    def rotate_and_delete(scenario: Scenario) -> None:
        for host in lp_target.hosts:
            scenario.wait_rounds("watch", host, 2)
            scenario.go(host, "go")

    out = sc.run(during=rotate_and_delete)
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["completed"] and not result["failed"], result["msg"]
        first = numbered(host, 1, 3000)
        rest = numbered(host, 3001, 3100) + b"WRITER DONE\n"
        saved = out.saved("watch", host, "job")
        assert saved.endswith(rest) and first.startswith(saved[: len(saved) - len(rest)])
        lost = len(first) - (len(saved) - len(rest))
        assert lost > 0
        states = [s for r in out.task_rounds("watch", host) for s in r["log_states"] if s.get("lost_bytes")]
        assert [s["lost_bytes"] for s in states] == [lost], states
        assert "lost" in states[0]["events"]
        path = f"{sc.dir(host)}/job.log"
        warning = f"{host}: {path}: at least {lost} bytes were never read and are lost (the rotated file is gone)"
        assert warning in out.result("watch", host).get("warnings", []) or warning in " ".join(
            (out.proc.stdout + out.proc.stderr).split()
        ), out.tail()


def test_a_late_traceback_gets_the_same_verdict_and_full_copies_on_every_host(
    lp_target: Target, tmp_path: Path
) -> None:
    """Identical logs: the marker, 600 KB more, then a traceback. The first host reads it all in one round and
    fails; the others, still reading (64 KiB a round), must read to the end too and fail on their own traceback,
    with a saved copy equal to the remote file."""
    sc = Scenario(lp_target, tmp_path, "late-traceback")
    quick = lp_target.hosts[0]
    trace = 'Traceback (most recent call last):\n  File "train.py", line 1\nRuntimeError: boom\n'
    specs = {
        h: {
            "path": f"{sc.dir(h)}/job.log",
            "host": h,
            "steps": [
                {"write": "JOB DONE\n"},
                {"lines": [1, 9000], "chunk": [1000000, 1000000], "seconds": 0},
                {"write": trace},
            ],
        }
        for h in lp_target.hosts
    }
    sc.writer("job", specs)
    # the whole log is there before the first round (else the group could complete on the marker alone)
    sc.shell("wait for the writer", "until grep -q '^RuntimeError: boom$' {{ lp_dir }}/job.log; do sleep 0.1; done")
    sc.poll(
        "watch",
        {
            "logs": ["{{ lp_dir }}/job.log"],
            "error_patterns": {"crash": "^Traceback"},
            "complete": {"pattern": "^JOB DONE$"},
            "max_bytes": "{{ 4194304 if inventory_hostname == lp_quick else 65536 }}",
        },
        delay=0.5,
        save=True,
    )
    sc.tasks[-1]["vars"] = {"lp_quick": quick}
    sc.fetch("job.log")
    out = sc.run()
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["failed"] and not result.get("aborted_by"), result["msg"]
        assert result["msg"] == (
            f"error pattern 'crash' matched on {host} in {sc.dir(host)}/job.log: Traceback (most recent call last):"
        )
        assert result["error"]["name"] == "crash" and result["error"]["host"] == host
        assert out.saved("watch", host, "job") == out.fetched(host, "job.log") == expected_bytes(specs[host])


def test_a_drain_after_the_watch_completes_its_saved_copy_byte_for_byte(lp_target: Target, tmp_path: Path) -> None:
    """start=drain after the watch ended: what the job wrote since, its last line without a newline included,
    joins the watch's save_dir copy (the maxtext role's log copy after the stop)."""
    sc = Scenario(lp_target, tmp_path, "drain")
    specs = {
        h: {
            "path": f"{sc.dir(h)}/job.log",
            "host": h,
            "steps": [
                {"ticks": 4, "every": 0.05, "marker_at": 4, "marker": "JOB DONE"},
                {"wait_for": f"{sc.dir(h)}/watched", "timeout": 60},
                {"write": "rank 1 stopped\nTerminated\nlast words without a newl"},
                {"file": f"{sc.dir(h)}/written", "write": "1"},
            ],
        }
        for h in lp_target.hosts
    }
    sc.writer("job", specs)
    sc.poll("watch", {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^JOB DONE$"}}, delay=0.2, save=True)
    sc.shell(
        "the job writes after the watch",
        "touch {{ lp_dir }}/watched && timeout 60 sh -c 'until [ -e {{ lp_dir }}/written ]; do sleep 0.05; done'",
    )
    drain = {"logs": ["{{ lp_dir }}/job.log"], "cursors": "{{ lp_result_1.cursors }}", "start": "drain"}
    sc.poll("drain", {**drain, "save_dir": str(sc.out / "saved" / "watch")})
    sc.fetch("job.log")

    out = sc.run()
    assert out.proc.returncode == 0, out.tail()
    for host in lp_target.hosts:
        assert out.result("watch", host)["completed"], out.result("watch", host)["msg"]
        drained = out.result("drain", host)
        assert drained["drained"] and drained["finished"] and not drained["failed"], drained["msg"]
        assert drained["new_lines"][-3:] == ["rank 1 stopped", "Terminated", "last words without a newl"]
        assert "JOB DONE" not in drained["new_lines"]  # the watch's lines are not read again
        assert out.saved("watch", host, "job") == out.fetched(host, "job.log") == expected_bytes(specs[host])


SLOW_PYTHON = "printf '#!/bin/sh\\nsleep 2.5\\nexec %s \"$@\"\\n' {{ lp_python }} > {{ lp_dir }}/slowpy"
LAG = re.compile(r"rounds on (\S+) came every ([0-9.]+)s instead of every 0.2s .* Set delay to (\d+)s")


@pytest.mark.parametrize("lp_target", ["baremetal"], indirect=True)
def test_rounds_that_cannot_keep_up_with_the_delay_are_warned_about_once(lp_target: Target, tmp_path: Path) -> None:
    """Every read takes 2.5 s on the nodes (a slow interpreter start) at delay 0.2: the poll still finishes, and
    one warning names a host, the interval its rounds really came at, and the delay to set instead. Baremetal only:
    the intervals are measured on the controller, whatever transport the rounds take."""
    sc = Scenario(lp_target, tmp_path, "lag")
    sc.shell("a slow interpreter", f"{SLOW_PYTHON} && chmod +x {{{{ lp_dir }}}}/slowpy")
    steps = [{"write": "started\n"}, {"wait_for": "go"}, {"write": "JOB DONE\n"}]
    specs = {h: {"path": f"{sc.dir(h)}/job.log", "host": h, "steps": steps} for h in lp_target.hosts}
    for host, spec in specs.items():
        spec["steps"] = [dict(s, wait_for=f"{sc.dir(host)}/go") if "wait_for" in s else s for s in steps]
    sc.writer("job", specs)
    args = {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^JOB DONE$"}, "keep_reader": False}
    sc.poll("watch", args, delay=0.2)
    sc.tasks[-1]["vars"] = {"ansible_python_interpreter": "{{ lp_dir }}/slowpy"}

    out = sc.run(during=sc.go_after_rounds("watch", 4, "go"))
    assert out.proc.returncode == 0, out.tail()
    warnings = [w for h in lp_target.hosts for w in out.result("watch", h).get("warnings", [])]
    assert len(warnings) == 1, warnings
    match = LAG.search(warnings[0])
    assert match and match.group(1) in lp_target.hosts, warnings[0]
    assert float(match.group(2)) >= 2.5 and int(match.group(3)) >= 3, warnings[0]
    assert (out.proc.stdout + out.proc.stderr).count("log_poll does not keep up") == 1


@pytest.mark.parametrize("lp_target", ["baremetal"], indirect=True)
def test_a_call_waiting_out_its_delay_stops_as_soon_as_another_host_fails(lp_target: Target, tmp_path: Path) -> None:
    """call_seconds (the default under AWX): hosts waiting between two rounds of a call wake on the group's verdict.
    The culprit polls every second, the others every 20 s; they stop within seconds of its error, not 20 s later.
    Baremetal only: the wait and the verdict are the controller's, whatever transport the rounds take."""
    sc = Scenario(lp_target, tmp_path, "wake")
    culprit = lp_target.hosts[1]
    steps = {h: [{"write": "step 1, loss: 2.0\n"}] for h in lp_target.hosts}
    steps[culprit] += [{"sleep": 3}, {"write": "step 2, loss: nan\n"}]
    sc.writer("job", {h: {"path": f"{sc.dir(h)}/job.log", "host": h, "steps": steps[h]} for h in lp_target.hosts})
    args = {"logs": ["{{ lp_dir }}/job.log"], "error_patterns": {"nan": "loss: nan"}, "call_seconds": 60,
            "complete": {"pattern": "^JOB DONE$"}}  # fmt: skip
    sc.poll("watch", args, delay=f"{{{{ 1 if inventory_hostname == {culprit!r} else 20 }}}}")

    out = sc.run()
    failed = out.result("watch", culprit)
    assert failed["failed"] and failed["error"]["name"] == "nan", failed["msg"]
    for host in lp_target.hosts:
        if host == culprit:
            continue
        result = out.result("watch", host)
        assert result["aborted_by"] == culprit, result["msg"]
        # its first round came before the error and its next one was 20 s away: it woke on the verdict instead
        assert result["round"] == 2 and result["elapsed"] < 12, (host, result["elapsed"], result["round"])


def test_a_253_character_fqdn_polls(lp_target: Target, tmp_path: Path) -> None:
    """A valid 253-character FQDN as the inventory name (an alias of the first host): its state files fit."""
    fqdn = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 57 + "-lp"])
    fqdn = fqdn + "x" * (253 - len(fqdn))
    assert len(fqdn) == 253 and all(len(label) <= 63 for label in fqdn.split("."))
    target = alias_target(lp_target, tmp_path, {fqdn: lp_target.hosts[0], "short": lp_target.hosts[1]})
    sc = Scenario(target, tmp_path, "fqdn")
    specs = {
        h: {"path": f"{sc.dir(h)}/job.log", "host": h, "steps": [{"ticks": 5, "every": 0.1, "marker_at": 5}]}
        for h in target.hosts
    }
    sc.writer("job", specs)
    sc.poll("watch", {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^MARK$"}}, save=True)
    out = sc.run()
    for host in target.hosts:
        result = out.result("watch", host)
        assert result["completed"] and not result["failed"], result["msg"]
        assert out.lines("watch", host) == ["tick 1", "tick 2", "tick 3", "tick 4", "MARK"]
        assert out.saved("watch", host, "job") == expected_bytes(specs[host])
        assert result["group"]["hosts"] == [fqdn, "short"]


def processes() -> list[str]:
    # -ww: without it ps cuts args at $COLUMNS (80 under some parents), and the playbook path is past that.
    proc = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=True)
    return [row.strip() for row in proc.stdout.splitlines() if " -eo pid=,args=" not in row]


@both_forms
def test_workers_and_kept_readers_end_when_the_playbook_is_killed(
    lp_target: Target, tmp_path: Path, fleet: bool
) -> None:
    """ansible-runner's cancel: SIGKILL of ansible-playbook's whole process group while log_poll polls. Workers
    call setsid(), so the kill does not reach them: they and their kept readers must end on their own."""
    if lp_target.local:
        pytest.fail("needs the simulated cluster (the kept reader runs over ssh)")
    sc = Scenario(lp_target, tmp_path, "orphans", fleet=fleet)
    specs = {
        h: {"path": f"{sc.dir(h)}/job.log", "host": h, "steps": [{"ticks": 3000, "every": 0.1}]}
        for h in lp_target.hosts
    }
    sc.writer("job", specs)
    sc.poll("watch", {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "never"}}, delay=1)
    playbook = str(sc.out / "playbook.yml")
    readers_before = {row for row in processes() if "b.readline" in row}
    seen: dict[str, object] = {}

    def ours() -> list[str]:
        """This run's processes on the controller: its ansible-playbook processes (the main one and the workers
        name the playbook) and the kept readers' ssh clients started since."""
        return [r for r in processes() if playbook in r or ("b.readline" in r and r not in readers_before)]

    def kill_the_group(scenario: Scenario) -> None:
        for host in lp_target.hosts:
            scenario.wait_rounds("watch", host, 3)
        seen["nodes"] = {h: reader_count(lp_target, h) for h in lp_target.hosts}
        seen["controller"] = ours()
        assert scenario._proc is not None
        os.killpg(scenario._proc.pid, signal.SIGKILL)

    out = sc.run(during=kill_the_group)
    assert out.proc.returncode == -signal.SIGKILL
    assert seen["nodes"] == dict.fromkeys(lp_target.hosts, 1), seen  # the poll ran, with its kept readers
    workers = [r for r in seen["controller"] if playbook in r]
    # the main process and a worker per host, or one worker for the whole fleet
    assert len(workers) > (1 if fleet else len(lp_target.hosts)), seen["controller"]
    deadline = time.monotonic() + 20
    while True:
        left = ours()
        on_nodes = {h: reader_count(lp_target, h) for h in lp_target.hosts}
        if not left and not any(on_nodes.values()):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"20 s after the kill: on the controller {left}, readers on the nodes {on_nodes}")
        time.sleep(0.2)


@pytest.mark.parametrize("lp_target", ["baremetal"], indirect=True)
def test_state_of_old_runs_is_removed_after_the_retention(lp_target: Target, tmp_path: Path) -> None:
    """Controller state: a run unused for longer than state_retention (default one day) is removed by the next
    poll; one still written to (a long poll of another playbook) and a recent one stay. Controller-only: one
    backend."""
    state = tmp_path / "state"
    old, live, recent = state / "1-old" / "t", state / "2-live" / "t", state / "3-recent" / "t"
    for task in (old, live, recent):
        (task / "hosts").mkdir(parents=True)
        (task / "hosts" / "h-node1.json").write_text("{}")

    def age(path: Path, seconds: float) -> None:
        when = time.time() - seconds
        os.utime(path, (when, when))

    for path in (old / "hosts", old, old.parent):
        age(path, 2 * 24 * 3600)  # two days: within today's three-day prune, past the documented one day
    for path in (live, live.parent):
        age(path, 30 * 24 * 3600)  # its hosts/ was written just now
    for path in (recent / "hosts", recent, recent.parent):
        age(path, 3600)
    sc = Scenario(lp_target, tmp_path, "retention")
    sc.writer("job", {h: {"path": f"{sc.dir(h)}/job.log", "host": h, "steps": [{"ticks": 3, "every": 0.1,
                                                                               "marker_at": 3}]}
                      for h in lp_target.hosts})  # fmt: skip
    sc.poll("watch", {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^MARK$"}, "state_dir": str(state)})
    out = sc.run()
    for host in lp_target.hosts:
        assert out.result("watch", host)["completed"], out.result("watch", host)["msg"]
    runs = sorted(p.name for p in state.iterdir())
    assert "1-old" not in runs and {"2-live", "3-recent"} <= set(runs), runs
    assert len(runs) == 3  # and this run's own state


def test_a_log_that_never_appears_is_named_when_the_poll_times_out(lp_target: Target, tmp_path: Path) -> None:
    sc = Scenario(lp_target, tmp_path, "never")
    sc.shell("a log that exists", "echo started > {{ lp_dir }}/here.log")
    sc.poll(
        "watch",
        {"logs": ["{{ lp_dir }}/here.log", "{{ lp_dir }}/never.log"], "complete": {"pattern": "^DONE$"}, "timeout": 2},
    )
    out = sc.run()
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert (result["failed"] and result["timed_out"]) or result.get("aborted_by"), result["msg"]
        if result["timed_out"]:
            assert re.fullmatch(
                rf"timed out after \d+s \(timeout 2s\) on {re.escape(host)}; {re.escape(sc.dir(host))}/never\.log "
                r"never appeared",
                result["msg"],
            ), result["msg"]
    assert any(out.result("watch", h)["timed_out"] for h in lp_target.hosts)


@pytest.mark.parametrize("lp_target", ["baremetal"], indirect=True)
def test_a_full_disk_on_a_node_fails_as_no_space_left_not_stalled(lp_target: Target, tmp_path: Path) -> None:
    """The job's directory on one node is a 64 KiB file system that the job fills: its log stops growing and its
    exit code file is left empty (ENOSPC). The poll must fail that host at once as "no space left", naming the
    host, the log and the file system's numbers, not wait for stall_timeout (900 s, as the maxtext role sets
    it) and say "stalled". Baremetal only: the node's file system is the point (in a container the log lives on
    the container's file system, read by the same code)."""
    if lp_target.local:
        pytest.fail("needs the simulated cluster (a file system mounted in one node's namespace)")
    full = lp_target.hosts[1]
    disk = "/tmp/cvs-lp-full"
    sc = Scenario(lp_target, tmp_path, "disk-full")
    lp_target.node_exec(full, f"umount {disk} 2>/dev/null; mkdir -p {disk} && mount -t tmpfs -o size=64k tmpfs {disk}")
    try:
        others = [h for h in lp_target.hosts if h != full]
        for host in others:
            lp_target.node_exec(host, f"rm -rf {disk} && mkdir -p {disk}")
        sc.writer(
            "job",
            {h: {"path": f"{disk}/job.log", "host": h, "steps": [{"ticks": 600, "every": 0.1}]} for h in others},
        )
        job = (
            f"d={disk}; echo 'step 1' >> $d/job.log; head -c 1048576 /dev/zero > $d/checkpoint; "
            "echo 'step 2' >> $d/job.log; echo 1 > $d/exit_code; df -k $d; exit 0"
        )
        sc.shell("a job that fills its disk", job, when=f"inventory_hostname == {full!r}")
        sc.poll(
            "watch",
            {
                "logs": [f"{disk}/job.log"],
                "complete": {"pattern": "^DONE$", "exit_code_file": f"{disk}/exit_code"},
                "stall_timeout": 900,
                "timeout": 60,
            },
            delay=0.5,
        )
        out = sc.run()
        df = lp_target.node_exec(full, f"stat -f -c '%a %b %S' {disk}; cat {disk}/exit_code | wc -c").stdout.split()
    finally:
        lp_target.node_exec(full, f"umount {disk}; rmdir {disk}")
    assert df[0] == "0" and df[3] == "0", df  # the file system is full and the exit code file empty
    result = out.result("watch", full)
    assert result["failed"] and not result["stalled"] and not result["timed_out"], result["msg"]
    assert re.fullmatch(
        rf"no space left on device on {re.escape(full)}: the file system \(0 bytes free of {int(df[1]) * int(df[2])}, "
        rf"\d+ inodes free\) holds (?:{disk}/job\.log; the log cannot grow|the exit code file {disk}/exit_code "
        r"\(empty\); the job cannot record its exit status)",  # which one is seen first depends on the round
        result["msg"],
    ), result["msg"]
    assert out.lines("watch", full) in (["step 1"], ["step 1", "step 2"])  # as far as the page it began
    for host in others:
        assert out.result("watch", host)["aborted_by"] == full, out.result("watch", host)["msg"]
