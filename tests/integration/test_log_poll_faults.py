"""cvs.cluster.log_poll on the simulated cluster: transport faults, hanging reads, bad input, odd files."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.tests.support.log_poll import Scenario, Target, both_forms, lp_target, numbers
from ansible_collections.cvs.cluster.tests.support.lp_writer import expected_bytes

__all__ = ["lp_target"]

MIB = 1024 * 1024


def needs_cluster(target: Target) -> None:
    """On baremetal the node's sshd is stopped; on the container backend the in-container sshd that serves
    the cvs_exec host (the node's own sshd is not in that path)."""
    if target.local or target.sshd_stop is None:
        pytest.skip("stopping a node's sshd needs the simulated cluster (LP_TARGET=local is developer mode)")


@both_forms
def test_sshd_down_for_several_rounds_loses_and_duplicates_nothing(
    lp_target: Target, tmp_path: Path, fleet: bool
) -> None:
    needs_cluster(lp_target)
    sshd_stop, sshd_start = lp_target.sshd_stop, lp_target.sshd_start
    sc = Scenario(lp_target, tmp_path, "sshd-blip", fleet=fleet)
    victim = lp_target.hosts[1]
    specs = {
        h: {
            "path": f"{sc.dir(h)}/job.log",
            "host": h,
            "seed": 300 + i,
            "steps": [{"lines": [1, 6000], "chunk": [1, 4000], "seconds": 6}, {"write": "WRITER DONE\n"}],
        }
        for i, h in enumerate(lp_target.hosts)
    }
    sc.writer("job", specs)
    sc.poll(
        "watch",
        {
            "logs": ["{{ lp_dir }}/job.log"],
            "complete": {"pattern": "^WRITER DONE$"},
            "transport_retries": 100,
            "cmd_timeout": 10,
        },
        delay=0.25,
        save=True,
    )
    sc.fetch("job.log")

    def blip(scenario: Scenario) -> None:
        scenario.wait_rounds("watch", victim, 3)
        sshd_stop(victim)
        time.sleep(2.5)
        sshd_start(victim)

    out = sc.run(during=blip)
    rounds = out.task_rounds("watch", victim)
    down = [i for i, r in enumerate(rounds) if r.get("transport_error")]
    assert len(down) >= 2, [r.get("msg") for r in rounds]
    before = rounds[down[0] - 1].get("cursors")
    for i in down:
        assert rounds[i]["new_lines"] == [] and not rounds[i]["finished"]
        assert rounds[i].get("cursors") == before  # frozen while down (a fleet's results carry none)
        assert rounds[i]["transport_error"].startswith(f"{victim}: ")
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["completed"] and not result["failed"], result["msg"]
        expected = expected_bytes(specs[host])
        assert out.fetched(host, "job.log") == expected
        assert out.saved("watch", host, "job") == expected
        assert numbers(out.lines("watch", host)) == list(range(1, 6001))


def test_sshd_down_past_transport_retries_fails_the_host_by_name(lp_target: Target, tmp_path: Path) -> None:
    needs_cluster(lp_target)
    sshd_stop = lp_target.sshd_stop
    sc = Scenario(lp_target, tmp_path, "sshd-down")
    victim = lp_target.hosts[2]
    sc.writer(
        "job",
        {
            h: {"path": f"{sc.dir(h)}/job.log", "host": h, "steps": [{"ticks": 80, "every": 0.1}]}
            for h in lp_target.hosts
        },
    )
    sc.poll("watch", {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "never"}, "transport_retries": 3})

    def outage(scenario: Scenario) -> None:
        scenario.wait_rounds("watch", victim, 2)
        sshd_stop(victim)

    out = sc.run(during=outage)
    result = out.result("watch", victim)
    assert result["failed"] and result["finished"]
    assert result["msg"].startswith(f"4 consecutive transport failures on {victim}; last: {victim}: "), result["msg"]
    for host in lp_target.hosts:
        if host != victim:
            other = out.result("watch", host)
            assert other["failed"] and other["aborted_by"] == victim, other["msg"]


def test_hanging_read_is_cut_off_by_cmd_timeout(lp_target: Target, tmp_path: Path) -> None:
    sc = Scenario(lp_target, tmp_path, "fifo")
    sc.shell("a FIFO as the log path", "mkfifo {{ lp_dir }}/job.log")
    sc.poll(
        "watch",
        {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "x"}, "cmd_timeout": 1, "transport_retries": 1},
    )
    started = time.monotonic()
    out = sc.run()
    assert time.monotonic() - started < 60
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["failed"], result["msg"]
        if not result.get("aborted_by"):
            assert result["msg"] == (
                f"2 consecutive transport failures on {host}; last: {host}: cmd_timeout (1s) expired while reading "
                f"{sc.dir(host)}/job.log"
            )
            assert all(r["elapsed"] < 10 for r in out.task_rounds("watch", host))


def test_bad_input_is_a_clear_error_before_any_read(lp_target: Target, tmp_path: Path) -> None:
    sc = Scenario(lp_target, tmp_path, "bad-input")
    log = ["{{ lp_dir }}/job.log"]
    sc.poll(
        "regex", {"logs": log, "error_patterns": {"ok": "fine", "broken": "loss: ([0-9"}, "complete": {"pattern": "x"}}
    )
    sc.poll("policy", {"logs": log, "complete": {"pattern": "x", "policy": "most"}})
    sc.poll("empty", {"logs": [], "error_patterns": {"e": "x"}, "complete": {"pattern": "DONE"}})
    sc.poll("ghost", {"logs": log, "complete": {"pattern": "x", "hosts": [lp_target.hosts[0], "node9"]}})
    out = sc.run()
    hosts = lp_target.hosts
    try:
        re.compile("loss: ([0-9")
    except re.error as exc:
        regex_error = str(exc)
    messages = {
        "regex": f"log_poll: error_patterns pattern 'broken': invalid regex 'loss: ([0-9': {regex_error}",
        "policy": "log_poll: value of policy must be one of: all, any, first, node0, last, got: most found in complete",
        "empty": f"log_poll: logs is empty on every host ({', '.join(hosts)}) and no exit_code_file, http or "
        "artifact probe is set: nothing to poll",
        "ghost": "log_poll: complete.hosts names hosts that are not in the play: node9",
    }
    for task, message in messages.items():
        for host in hosts:
            result = out.result(task, host)
            assert result["failed"] and result["finished"]
            assert result["msg"] == message, (task, host, result["msg"])
            assert result.get("log_states", []) == []  # nothing was read
            assert result.get("attempts", 1) <= 2


def test_forks_below_the_hosts_polling_together(lp_target: Target, tmp_path: Path) -> None:
    sc = Scenario(lp_target, tmp_path, "forks")
    sc.poll("watch", {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "x"}})
    out = sc.run(args=("-f", "2"))
    n = len(lp_target.hosts)
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["failed"] and result.get("attempts", 1) == 1
        assert result["msg"] == (
            f"log_poll: forks (2) is smaller than the {n} hosts that must poll together; raise forks (-f {n}) or "
            "use serial batches no larger than forks"
        )


def test_odd_files_do_not_crash_the_poll(lp_target: Target, tmp_path: Path) -> None:
    """A 5 MiB line without newline, binary garbage, a file that appears later, a directory."""
    sc = Scenario(lp_target, tmp_path, "odd-files")
    big = 5 * MIB + 100
    sc.shell("a 5 MiB line, no newline yet", f"head -c {big} /dev/zero | tr '\\0' 'y' > {{{{ lp_dir }}}}/big.log")
    sc.shell("binary garbage", "head -c 262144 /dev/urandom > {{ lp_dir }}/garbage.log && mkdir {{ lp_dir }}/adir")
    sc.writer(
        "later",
        {
            h: {
                "path": f"{sc.dir(h)}/later.log",
                "host": h,
                "steps": [
                    {"wait_for": f"{sc.dir(h)}/go"},
                    {"write": "starting\n"},
                    {"sleep": 0.5},
                    # the long line's end is written before the marker, whatever the speed of a round: the
                    # final drain after DONE must deliver it
                    {"wait_for": f"{sc.dir(h)}/big-ended"},
                    {"write": "DONE\n"},
                ],
            }
            for h in lp_target.hosts
        },
    )
    sc.shell(
        "the long line ends after a while",
        "sleep 1; printf '\\nbig end\\n' >> {{ lp_dir }}/big.log && touch {{ lp_dir }}/big-ended",
        **{"async": 30, "poll": 0},
    )
    logs = ["{{ lp_dir }}/big.log", "{{ lp_dir }}/garbage.log", "{{ lp_dir }}/later.log", "{{ lp_dir }}/adir"]
    # event_budget 0: the results carry the 1 MiB pieces of the long line, so the per-round bound shows in them
    # (under the default budget they stay in save_dir only; test_log_poll_budget covers that)
    args = {"logs": logs, "complete": {"pattern": "^DONE$"}, "max_bytes": MIB, "event_budget": 0}
    sc.poll("watch", args, save=True)
    sc.fetch("big.log")
    sc.fetch("garbage.log")

    def create_later_log(scenario: Scenario) -> None:
        for host in lp_target.hosts:
            scenario.wait_rounds("watch", host, 1)
            scenario.go(host, "go")

    out = sc.run(during=create_later_log)
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["completed"] and not result["failed"], result["msg"]
        states = {s["label"]: s for s in result["log_states"]}
        assert states["adir"]["state"] == "directory" and states["adir"]["error"] == "path is a directory"
        assert states["later"]["state"] == "ok"
        events = {(e["label"], e["event"]) for e in result["events"]}
        assert ("big", "long_line_split") in events
        assert ("later", "appeared") in events
        rounds = out.task_rounds("watch", host)
        assert rounds[0]["log_states"][2]["state"] == "missing"
        assert max(len(line) for r in rounds for line in r["new_lines"]) <= MIB  # bounded per round
        assert out.saved("watch", host, "big") == out.fetched(host, "big.log")
        garbage = out.fetched(host, "garbage.log")
        assert out.saved("watch", host, "garbage") == garbage[: garbage.rfind(b"\n") + 1]  # its complete lines
        assert "DONE" in out.lines("watch", host)
