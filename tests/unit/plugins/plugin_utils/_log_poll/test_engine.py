"""The round engine of log_poll (plugin_utils/_log_poll/engine.py) with a fake reader and an injected clock.

Nothing here sleeps: time moves when a test says so. The fake reader answers the way module_utils/_log_reader.py
does (whole lines from the cursor, at most max_bytes a read, ``more`` when cut short, a partial last line held
back but counted in the size); the state store is the real one, in a temporary directory.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.cvs.cluster.plugins.module_utils._log_poll_spec import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll import engine as engine_mod
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.engine import (
    DECISION_CHECK_SECONDS,
    FINAL_DRAIN_READS,
    JOIN_GRACE,
    RoundEngine,
    arm,
    drain,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.settings import RunFacts, poll_settings
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.state import StateStore

HOSTS = ["n1", "n2", "n3"]
LOG = "/var/log/job.log"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class FakeNode:
    """One host's files as the reader sees them."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.files: dict[str, bytes] = {}
        self.exit_code: int | None = None
        self.down = 0  # the next reads that fail in transport
        self.reads = 0

    def write(self, data: bytes, path: str = LOG) -> None:
        self.files[path] = self.files.get(path, b"") + data

    def read(self, request: dict) -> tuple[dict | None, str | None]:
        self.reads += 1
        if self.down:
            self.down -= 1
            return None, f"{self.host}: connection failed: Connection refused"
        reply: dict[str, Any] = {"logs": [self._log(log, request) for log in request["logs"]]}
        if request.get("exit_code_file"):
            code = self.exit_code
            reply["exit_code"] = {"present": code is not None, "code": code}
        return reply, None

    def _log(self, cursor: dict, request: dict) -> dict:
        data = self.files.get(cursor["path"])
        if data is None:
            return {"path": cursor["path"], "state": "missing", "chunks": [], "events": []}
        offset = cursor.get("offset")
        # a partial last line waits for its newline, except in a read to the end (start=drain)
        whole = len(data) if request.get("to_end") else data.rfind(b"\n") + 1
        if offset is None:
            offset = whole if request["start"] in ("end", "arm") else 0
        piece = data[offset:whole][: request["max_bytes"]]
        if offset + len(piece) < whole or not request.get("to_end"):
            piece = piece[: piece.rfind(b"\n") + 1]
        end = offset + len(piece)
        return {
            "path": cursor["path"],
            "state": "ok",
            "chunks": [base64.b64encode(piece).decode()] if piece else [],
            "offset": end,
            "size": len(data),
            "more": end < whole,
            "events": [],
        }


class Group:
    """Hosts polling one task together, each round a new engine as each `until` retry is a new action run."""

    def __init__(self, tmp: Path, args: dict, hosts: list[str] | None = None, **run: Any) -> None:
        self.hosts = list(hosts or HOSTS)
        self.clock = Clock()
        self.nodes = {h: FakeNode(h) for h in self.hosts}
        params = {"logs": [LOG], "state_dir": str(tmp / "state"), "state_key": "task", "call_seconds": 0, **args}
        validated = ArgumentSpecValidator(ARGUMENT_SPEC).validate(params)
        assert not validated.error_messages, validated.error_messages
        self.args = validated.validated_parameters
        self.run_facts = {"batch": self.hosts, "play_hosts": self.hosts, **run}
        self.tmp = tmp
        self.results: dict[str, list[dict]] = {h: [] for h in self.hosts}

    def engine(self, host: str) -> RoundEngine:
        settings = poll_settings(self.args, RunFacts(host=host, **self.run_facts))
        store = StateStore(self.args["state_dir"], "run", self.args["state_key"])
        return RoundEngine(settings, store, self.nodes[host].read, clock=self.clock)

    def round(self, hosts: list[str] | None = None) -> None:
        for host in hosts or self.hosts:
            if not self.finished(host):
                self.results[host].append(self.engine(host).round({}))

    def finished(self, host: str) -> bool:
        return bool(self.results[host]) and self.results[host][-1]["finished"]

    def last(self, host: str) -> dict:
        return self.results[host][-1]

    def write(self, data: bytes, hosts: list[str] | None = None) -> None:
        for host in hosts or self.hosts:
            self.nodes[host].write(data)


# ---- completion policies --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "done_after", "completed"),
    [
        ("all", ["n1", "n3", "n2"], {"n1", "n2", "n3"}),
        ("any", ["n2"], {"n2"}),
        ("first", ["n2", "n3", "n1"], {"n1", "n2", "n3"}),
        ("node0", ["n3", "n1"], {"n1", "n3"}),
        ("last", ["n1", "n3"], {"n1", "n3"}),
    ],
)
def test_each_policy_decides_after_the_hosts_it_waits_for(
    tmp_path: Path, policy: str, done_after: list[str], completed: set[str]
) -> None:
    group = Group(tmp_path, {"complete": {"pattern": "^DONE$", "policy": policy}})
    group.write(b"step 1\n")
    group.round()
    for index, host in enumerate(done_after):
        assert not any(group.finished(h) for h in HOSTS), (policy, host)
        group.nodes[host].write(b"DONE\n")
        group.clock.advance(1)
        group.round()
        if index < len(done_after) - 1:
            continue
        group.round()  # the hosts that polled before the decision see it in their next round
    assert all(group.finished(h) and not group.last(h)["failed"] for h in HOSTS), {h: group.last(h) for h in HOSTS}
    assert {h for h in HOSTS if group.last(h)["completed"]} == completed
    for host in HOSTS:
        expected = "complete" if host in completed else f"done: completion group finished under policy {policy}"
        assert group.last(host)["msg"] == expected.replace("node0", "first")


def test_hosts_outside_complete_hosts_stop_when_the_group_decides(tmp_path: Path) -> None:
    group = Group(tmp_path, {"complete": {"pattern": "^DONE$", "hosts": ["n1"]}})
    group.write(b"busy\n")
    group.round()
    group.nodes["n1"].write(b"DONE\n")
    group.round()
    assert all(group.finished(h) for h in HOSTS)
    assert group.last("n1")["completed"] and not group.last("n2")["completed"]
    assert group.last("n2")["group"] == {
        "policy": "all", "hosts": ["n1"], "complete": 1, "total": 1, "failed": 0, "decided": True
    }  # fmt: skip


# ---- errors, and the hosts an error stops ---------------------------------------------------------------------


def test_an_error_on_one_host_fails_it_and_stops_the_others_after_their_own_drain(tmp_path: Path) -> None:
    group = Group(tmp_path, {"complete": {"pattern": "^DONE$"}, "error_patterns": {"crash": "Traceback"}})
    group.write(b"busy\n")
    group.round()
    group.nodes["n2"].write(b"more\nTraceback (most recent call last)\n")
    group.nodes["n3"].write(b"n3 line written meanwhile\n")
    group.round(["n2"])
    n2 = group.last("n2")
    assert n2["failed"] and n2["error"]["host"] == "n2" and n2["error"]["context"] == ["busy", "more"]
    assert n2["msg"] == f"error pattern 'crash' matched on n2 in {LOG}: Traceback (most recent call last)"
    group.round(["n1", "n3"])
    for host in ("n1", "n3"):
        result = group.last(host)
        assert result["failed"] and result["aborted_by"] == "n2", result
        assert result["msg"].startswith("stopped because n2 failed: error pattern 'crash'")
    # the stopped host read its logs to the end first
    assert group.last("n3")["new_lines"] == ["n3 line written meanwhile"]


def test_an_ignored_line_is_never_an_error_but_its_neighbours_are(tmp_path: Path) -> None:
    group = Group(
        tmp_path,
        {"error_patterns": {"oom": "RESOURCE_EXHAUSTED"}, "ignore_error_patterns": {"retry": "will retry"},
         "complete": {"pattern": "DONE"}},
        hosts=["n1"],
    )  # fmt: skip
    group.write(b"RESOURCE_EXHAUSTED, will retry\nok\n")
    group.round()
    assert not group.finished("n1")
    group.write(b"RESOURCE_EXHAUSTED for real\n")
    group.round()
    assert group.last("n1")["failed"] and group.last("n1")["error"]["line"] == "RESOURCE_EXHAUSTED for real"


# ---- deadlines --------------------------------------------------------------------------------------------------


def test_timeout_names_the_host_and_the_log_that_never_appeared(tmp_path: Path) -> None:
    group = Group(tmp_path, {"timeout": 60, "complete": {"pattern": "DONE"}}, hosts=["n1"])
    group.round()
    group.clock.advance(60)
    group.round()
    assert not group.finished("n1")  # exactly at the limit is not over it
    group.clock.advance(0.5)
    group.round()
    result = group.last("n1")
    assert result["failed"] and result["timed_out"] and not result["stalled"]
    assert result["msg"].startswith("timed out after 1m00s (timeout 60s) on n1"), result["msg"]
    assert LOG in result["msg"] and "never appeared" in result["msg"]


def test_stall_counts_a_growing_partial_line_as_progress_and_names_the_last_line(tmp_path: Path) -> None:
    group = Group(tmp_path, {"stall_timeout": 30, "complete": {"pattern": "DONE"}}, hosts=["n1"])
    group.write(b"step 1\nstep 2\n")
    group.round()
    for _ in range(3):
        group.clock.advance(20)
        group.write(b"3")  # no newline: nothing delivered, but the file grew
        group.round()
    assert not group.finished("n1")
    group.clock.advance(30)
    group.round()
    assert not group.finished("n1")
    group.clock.advance(1)
    group.round()
    result = group.last("n1")
    assert result["failed"] and result["stalled"]
    assert result["msg"] == "stalled: no new log output on n1 for 31s (stall_timeout 30s); last line: 'step 2'"


def test_a_completed_host_never_times_out_while_it_waits_for_the_group(tmp_path: Path) -> None:
    group = Group(tmp_path, {"timeout": 10, "stall_timeout": 5, "complete": {"pattern": "DONE"}}, hosts=["n1", "n2"])
    group.write(b"DONE\n", ["n1"])
    group.write(b"busy\n", ["n2"])
    group.round()
    for _ in range(3):
        group.clock.advance(4)
        group.write(b"busy\n", ["n2"])
        group.round()
    assert not group.finished("n1") and group.last("n1")["completed"]
    group.clock.advance(4)
    group.round()
    assert group.last("n2")["timed_out"] and group.last("n1")["aborted_by"] == "n2"


# ---- the final drain ------------------------------------------------------------------------------------------


def test_the_final_drain_reads_what_max_bytes_held_back_and_finds_a_late_error(tmp_path: Path) -> None:
    group = Group(
        tmp_path,
        {
            "max_bytes": 1024,
            "error_patterns": {"crash": "late crash"},
            "complete": {"pattern": "^DONE$", "policy": "any"},
        },
        hosts=["n1", "n2"],
    )
    group.write(b"DONE\n", ["n1"])
    group.round(["n1"])
    assert group.finished("n1") and group.last("n1")["msg"] == "complete"
    # 3.4 KiB written before the end: four reads of at most 1 KiB of whole lines, three of them in the drain
    group.write(b"".join(b"filler line %04d %s\n" % (i, b"x" * 40) for i in range(60)) + b"late crash\n", ["n2"])
    group.round(["n2"])
    n2 = group.last("n2")
    assert n2["failed"] and n2["error"]["line"] == "late crash", n2["msg"]
    assert group.nodes["n2"].reads == 4


def test_the_drain_after_the_decision_is_bounded(tmp_path: Path) -> None:
    group = Group(tmp_path, {"max_bytes": 1024, "complete": {"pattern": "^DONE$", "policy": "any"}}, hosts=["n1", "n2"])
    group.write(b"DONE\n", ["n1"])
    group.write(b"".join(b"%060d\n" % i for i in range(2000)), ["n2"])  # 122 KiB: 120 reads of 1 KiB
    group.round()
    group.round(["n2"])
    reads_before = group.nodes["n2"].reads
    group.round(["n2"])
    assert group.finished("n2") and not group.last("n2")["failed"]
    assert group.nodes["n2"].reads - reads_before <= 1 + FINAL_DRAIN_READS


def test_new_lines_stay_grouped_by_log_across_the_drain(tmp_path: Path) -> None:
    other = "/var/log/other.log"
    group = Group(tmp_path, {"logs": [LOG, other], "max_bytes": 1024, "complete": {"pattern": "^DONE$"}}, ["n1"])
    node = group.nodes["n1"]
    for i in range(40):
        node.write(b"a%02d %s\n" % (i, b"." * 40))
        node.write(b"b%02d %s\n" % (i, b"." * 40), other)
    node.write(b"DONE\n")
    group.round()
    group.round()
    lines = [line[:3] for line in group.last("n1")["new_lines"]]
    first_b = lines.index(next(x for x in lines if x.startswith("b")))
    assert all(x.startswith(("a", "D")) for x in lines[:first_b]) and all(x.startswith("b") for x in lines[first_b:])


# ---- transport ------------------------------------------------------------------------------------------------


def test_transport_failures_keep_the_cursor_and_lose_nothing(tmp_path: Path) -> None:
    group = Group(tmp_path, {"transport_retries": 3, "complete": {"pattern": "^DONE$"}}, hosts=["n1"])
    group.write(b"one\n")
    group.round()
    group.nodes["n1"].down = 3
    group.write(b"two\n")
    for attempt in range(1, 4):
        group.round()
        assert group.last("n1")["msg"].startswith(f"transport failure {attempt}/3: n1: connection failed")
    group.write(b"DONE\n")
    group.round()
    assert [ln for r in group.results["n1"] for ln in r["new_lines"]] == ["one", "two", "DONE"]
    assert group.last("n1")["msg"] == "complete"


def test_one_transport_failure_too_many_fails_the_host_by_name(tmp_path: Path) -> None:
    group = Group(tmp_path, {"transport_retries": 1, "complete": {"pattern": "^DONE$"}}, hosts=["n1", "n2"])
    group.nodes["n2"].down = 99
    group.round()
    group.round()
    n2 = group.last("n2")
    assert n2["failed"] and n2["msg"].startswith("2 consecutive transport failures on n2; last: n2: connection failed")
    group.round(["n1"])
    assert group.last("n1")["aborted_by"] == "n2"


# ---- probes ---------------------------------------------------------------------------------------------------


def test_exit_code_zero_before_the_marker_fails_once_caught_up(tmp_path: Path) -> None:
    group = Group(tmp_path, {"complete": {"pattern": "^DONE$", "exit_code_file": "/run/x/rc"}}, hosts=["n1"])
    group.write(b"step\n")
    group.nodes["n1"].exit_code = 0
    group.round()
    result = group.last("n1")
    assert result["failed"] and result["msg"] == "job exited with code 0 before the completion marker '^DONE$' appeared"


def test_exit_code_nonzero_fails_with_the_code(tmp_path: Path) -> None:
    group = Group(tmp_path, {"complete": {"pattern": "^DONE$", "exit_code_file": "/run/x/rc"}}, hosts=["n1"])
    group.write(b"DONE\n")
    group.nodes["n1"].exit_code = 3
    group.round()
    assert group.last("n1")["msg"] == "job exited with code 3 (exit code file /run/x/rc)"


# ---- the completion group's membership ------------------------------------------------------------------------


def test_a_host_that_never_polls_stops_holding_the_group_after_the_join_grace(tmp_path: Path) -> None:
    group = Group(tmp_path, {"complete": {"pattern": "^DONE$"}})
    group.write(b"DONE\n")
    group.round(["n1", "n2"])  # n3 was skipped by `when`
    group.clock.advance(JOIN_GRACE)
    group.round(["n1", "n2"])
    assert not group.finished("n1")
    group.clock.advance(0.1)
    group.round(["n1", "n2"])
    group.round(["n1", "n2"])
    assert group.finished("n1") and group.finished("n2")
    assert group.last("n1")["group"]["hosts"] == ["n1", "n2"]


def test_a_group_with_nothing_to_poll_is_a_config_error_found_once_every_host_joined(tmp_path: Path) -> None:
    group = Group(tmp_path, {"logs": [], "complete": {"pattern": "DONE"}}, hosts=["n1", "n2"])
    group.round()
    assert not group.finished("n1") and group.finished("n2")  # n2 joined last and saw the whole group
    group.round()
    for host in ("n1", "n2"):
        result = group.last(host)
        assert result["failed"] and "aborted_by" not in result
        assert result["msg"] == (
            "log_poll: logs is empty on every host (n1, n2) and no exit_code_file, http or artifact probe is set: "
            "nothing to poll"
        )
    assert not any(node.reads for node in group.nodes.values())


def test_the_same_state_key_twice_starts_a_fresh_generation(tmp_path: Path) -> None:
    first = Group(tmp_path, {"complete": {"pattern": "DONE"}})
    first.write(b"DONE\n")
    first.round()
    first.round()
    assert all(first.last(h)["completed"] for h in HOSTS)
    second = Group(tmp_path, {"complete": {"pattern": "NEVER"}, "timeout": 5})
    second.nodes = first.nodes
    second.round()
    assert not any(second.finished(h) for h in HOSTS)  # the earlier verdict does not leak in
    second.clock.advance(6)
    second.round()
    second.round()
    assert second.last("n1")["timed_out"] and "timed out after 6s (timeout 5s) on n1" in second.last("n1")["msg"]
    assert second.last("n2")["aborted_by"] == second.last("n3")["aborted_by"] == "n1"


# ---- calls of several rounds ----------------------------------------------------------------------------------


def test_a_call_polls_rounds_until_its_time_is_used_sleeping_the_delay_between(tmp_path: Path) -> None:
    group = Group(tmp_path, {"call_seconds": 10, "complete": {"pattern": "^DONE$"}}, hosts=["n1"], delay=3.0)
    group.write(b"a\n")

    class Spool:
        lines = 0

        def __init__(self) -> None:
            self.writes: list[tuple[list, bool]] = []

        def write(self, labeled: list, progress: dict, last: bool = False) -> None:
            self.writes.append((labeled, last))

    spool = Spool()
    result = group.engine("n1").call({}, spool, sleep=group.clock.sleep, monotonic=group.clock)
    # rounds at 0, 3, 6, 9 (a 5th, at 12, would overrun the call), the delays slept in slices that look for a decision
    assert sum(group.clock.slept) == 9.0 and set(group.clock.slept) == {DECISION_CHECK_SECONDS}
    assert not result["finished"] and result["new_lines"] == ["a"] and result["round"] == 4
    assert [last for _lines, last in spool.writes] == [False, False, False, True]
    assert spool.writes[0][0] == [("job", "a")]
    group.write(b"DONE\n")
    done = group.engine("n1").call({}, spool, sleep=group.clock.sleep, monotonic=group.clock)
    assert done["finished"] and done["msg"] == "complete" and sum(group.clock.slept) == 9.0


def test_a_call_waiting_between_rounds_wakes_when_another_host_fails(tmp_path: Path) -> None:
    group = Group(tmp_path, {"call_seconds": 60, "error_patterns": {"nan": "loss: nan"}}, delay=5.0)
    group.write(b"step 1\n")
    slept_before_error = 1.0

    def sleep(seconds: float) -> None:
        group.clock.sleep(seconds)
        if sum(group.clock.slept) == slept_before_error:  # n2 reads its error while n1 waits
            group.nodes["n2"].write(b"step 2, loss: nan\n")
            group.results["n2"].append(group.engine("n2").round({}))

    class Spool:
        lines = 0

        def write(self, labeled: list, progress: dict, last: bool = False) -> None:
            pass

    result = group.engine("n1").call({}, Spool(), sleep=sleep, monotonic=group.clock)
    assert group.last("n2")["failed"] and group.last("n2")["error"]["name"] == "nan"
    assert result["finished"] and result["aborted_by"] == "n2"
    # n1 stopped one look after n2's verdict (0.25 s), not at the end of its 5 s delay
    assert sum(group.clock.slept) == slept_before_error and result["round"] == 2


def test_rounds_that_come_late_are_warned_about_once_per_task(tmp_path: Path) -> None:
    group = Group(tmp_path, {"complete": {"pattern": "^DONE$"}}, delay=1.0)
    group.write(b"start\n")
    for _round in range(4):  # every host's rounds come 5 s apart at delay 1: 3 intervals late by 4 s
        group.round()
        group.clock.advance(5.0)
    warned = [w for h in HOSTS for r in group.results[h] for w in r.get("warnings", []) if "keep up" in w]
    assert len(warned) == 1 and "came every 5.0s instead of every 1s (the task's delay) with 3 host(s)" in warned[0]
    group.write(b"DONE\n")
    group.round()
    group.round()  # n1 and n2 completed before n3 did: the group decides in their next round
    finals = [group.last(h) for h in HOSTS]
    assert all(r["finished"] for r in finals)
    # the final result of the host that warned repeats it (Ansible shows a task's last result's warnings)
    assert sum(any("keep up" in w for w in r.get("warnings", [])) for r in finals) == 1


def test_rounds_on_time_or_late_from_a_transport_failure_are_not_warned_about(tmp_path: Path) -> None:
    group = Group(tmp_path, {"complete": {"pattern": "^DONE$"}}, hosts=["n1"], delay=1.0)
    group.write(b"start\n")
    group.round()
    group.clock.advance(1.1)
    group.nodes["n1"].down = 4  # sshd down: 4 rounds fail, 5 s apart (connect timeouts), then it answers again
    for _round in range(6):
        group.round()
        group.clock.advance(5.0 if group.nodes["n1"].down else 1.1)
    results = group.results["n1"]
    assert [bool(r["transport_error"]) for r in results] == [False, True, True, True, True, False, False]
    assert not [w for r in results for w in r.get("warnings", [])]


def test_arm_takes_the_cursor_of_each_log_where_it_ends(tmp_path: Path) -> None:
    group = Group(tmp_path, {"start": "arm", "logs": [LOG, "/var/log/later.log"]}, hosts=["n1"])
    group.write(b"old DONE\n")
    settings = poll_settings(group.args, RunFacts(host="n1", batch=["n1"], play_hosts=["n1"]))
    armed = arm(settings, group.nodes["n1"].read)
    assert armed["cursors"] == {LOG: {"offset": 9, "size": 9}}
    assert [s["state"] for s in armed["log_states"]] == ["ok", "missing"]
    group.nodes["n1"].down = 1
    assert arm(settings, group.nodes["n1"].read)["msg"].startswith("log_poll could not arm: n1: connection failed")


class SavedBytes:
    """save_dir as the engine sees it: reset, then appended to."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def reset(self) -> None:
        self.data = {}

    def append(self, label: str, raw: bytes) -> None:
        self.data[label] = self.data.get(label, b"") + raw


def test_drain_appends_what_came_after_the_watch_its_last_line_without_newline_included(tmp_path: Path) -> None:
    group = Group(tmp_path, {"max_bytes": 1024, "complete": {"pattern": "DONE"}}, hosts=["n1"])
    node = group.nodes["n1"]
    saved = SavedBytes()
    node.write(b"step 1\nstep 2\nDONE\n")
    settings = poll_settings(group.args, RunFacts(host="n1", batch=["n1"], play_hosts=["n1"]))
    watched = RoundEngine(settings, StateStore(group.args["state_dir"], "run", "task"), node.read, clock=group.clock,
                          sink=saved).round({})  # fmt: skip
    assert watched["finished"] and saved.data["job"] == node.files[LOG]
    node.write(b"".join(b"rank 1 echo %04d\n" % i for i in range(200)) + b"Terminated (no newline")
    args = dict(group.args, start="drain", cursors=watched["cursors"])
    drained = drain(poll_settings(args, RunFacts(host="n1", batch=["n1"], play_hosts=["n1"])), node.read, saved)
    assert saved.data["job"] == node.files[LOG]  # byte for byte, over several max_bytes windows
    assert drained["finished"] and not drained["failed"] and drained["drained"]
    assert drained["new_lines"][0] == "rank 1 echo 0000" and drained["new_lines"][-1] == "Terminated (no newline"
    assert drained["log_states"][0]["new_lines"] == 201 and drained["msg"] == "drained 201 line(s) from 1 log(s)"
    assert drained["cursors"][LOG]["offset"] == len(node.files[LOG])


def test_drain_reports_a_missing_log_cuts_to_the_budget_and_names_a_transport_failure(tmp_path: Path) -> None:
    group = Group(tmp_path, {}, hosts=["n1"])
    node = group.nodes["n1"]
    node.write(b"".join(b"x" * 100 + b" %05d\n" % i for i in range(3000)))
    args = dict(group.args, start="drain", logs=[LOG, "/var/log/never.log"], event_budget=50_000)
    settings = poll_settings(args, RunFacts(host="n1", batch=["n1"], play_hosts=["n1"]))
    saved = SavedBytes()
    drained = drain(settings, node.read, saved)
    assert saved.data["job"] == node.files[LOG] and "never" not in saved.data
    assert [s["state"] for s in drained["log_states"]] == ["ok", "missing"]
    assert 0 < len(drained["new_lines"]) < 3000 and drained["new_lines_truncated"] == 3000 - len(drained["new_lines"])
    long = poll_settings(
        dict(args, max_bytes=1024, event_budget=0), RunFacts(host="n1", batch=["n1"], play_hosts=["n1"])
    )
    partly = drain(long, node.read, SavedBytes())  # 16 reads of 1 KiB cannot reach the end of 321 KB
    assert partly["log_states"][0]["more"] and partly["msg"].endswith(
        f"not at the end after 16 reads: {LOG} (drain again from these cursors)"
    )
    node.down = 1
    failed = drain(settings, node.read, SavedBytes())
    assert failed["failed"] and failed["msg"] == "log_poll could not drain: n1: connection failed: Connection refused"


def test_the_engine_module_reads_no_clock_of_its_own() -> None:
    source = Path(engine_mod.__file__).read_text()
    assert "time.time()" not in source and "time.monotonic()" not in source and "time.sleep(" not in source
