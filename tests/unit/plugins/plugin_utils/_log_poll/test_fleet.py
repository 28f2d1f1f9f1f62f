"""A fleet poll (plugin_utils/_log_poll/fleet.py): every host's rounds from one task, with fake readers and clock.

The engines are the real ones and the group state the real in-memory store; the nodes are the engine tests' fake
nodes. Nothing sleeps.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.cvs.cluster.plugins.module_utils._log_poll_spec import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.budget import measure
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.engine import RoundEngine
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.fleet import FleetPoll
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import LogPollError
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.settings import RunFacts, poll_settings
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.state import MemoryStore
from ansible_collections.cvs.cluster.tests.unit.plugins.plugin_utils._log_poll.test_engine import (
    LOG,
    Clock,
    FakeNode,
)


class Readers:
    """The fleet's reader: records which requests went out together."""

    def __init__(self, nodes: dict[str, FakeNode]) -> None:
        self.nodes = nodes
        self.batches: list[list[str]] = []

    def read_all(self, requests: dict[str, dict]) -> dict[str, tuple[dict | None, str | None]]:
        self.batches.append(sorted(requests))
        return {h: self.nodes[h].read(r) for h, r in requests.items()}

    def read(self, host: str, request: dict) -> tuple[dict | None, str | None]:
        return self.nodes[host].read(request)


class Saved:
    def __init__(self) -> None:
        self.data = b""

    def reset(self) -> None:
        self.data = b""

    def append(self, label: str, raw: bytes) -> None:
        self.data += raw


class Spool:
    lines = 0

    def __init__(self) -> None:
        self.labeled: list[tuple[str, str]] = []
        self.last = False

    def write(self, labeled: list, progress: dict, last: bool = False) -> None:
        self.labeled.extend(labeled)
        self.last = last


def fleet_settings(hosts: list[str], **args: Any) -> dict:
    params = {"logs": [LOG], "fleet": True, "call_seconds": 0, **args}
    validated = ArgumentSpecValidator(ARGUMENT_SPEC).validate(params)
    assert not validated.error_messages, validated.error_messages
    run = {"batch": hosts, "play_hosts": hosts, "fleet": True, "run_once": True, "delay": 2.0}
    return {h: poll_settings(validated.validated_parameters, RunFacts(host=h, **run)) for h in hosts}


class Fleet:
    def __init__(self, hosts: list[str], budget: int = 600_000, **args: Any) -> None:
        self.clock = Clock()
        self.nodes = {h: FakeNode(h) for h in hosts}
        self.readers = Readers(self.nodes)
        self.saved = {h: Saved() for h in hosts}
        self.spools = {h: Spool() for h in hosts}
        settings = fleet_settings(hosts, event_budget=budget, **args)
        store = MemoryStore()
        engines = {
            h: RoundEngine(s, store, lambda r, h=h: self.readers.read(h, r), clock=self.clock, sink=self.saved[h])
            for h, s in settings.items()
        }
        self.poll = FleetPoll(engines, self.readers, self.spools, budget=budget, delay=2.0,
                              call_seconds=settings[hosts[0]].call_seconds)  # fmt: skip

    def call(self) -> dict:
        return self.poll.call({}, sleep=self.clock.sleep, monotonic=self.clock)


def test_every_host_is_read_in_one_batch_a_round_and_each_line_reaches_the_result_once() -> None:
    fleet = Fleet(["n1", "n2", "n3"], complete={"pattern": "^DONE$"})
    sent: dict[str, bytes] = {h: b"" for h in fleet.nodes}
    results = []
    for step in range(4):
        for host, node in fleet.nodes.items():
            data = f"{host} step {step}\n".encode() + (b"DONE\n" if step == 3 else b"")
            node.write(data)
            sent[host] += data
        results.append(fleet.call())
    assert fleet.readers.batches[:4] == [["n1", "n2", "n3"]] * 4
    last = results[-1]
    assert last["fleet"] and last["finished"] and not last["failed"] and last["complete_hosts"] == 3
    assert last["msg"] == "fleet of 3 host(s) finished: 3 complete" and last["failed_hosts"] == []
    for host in fleet.nodes:
        delivered = [line for r in results for line in r["hosts"][host]["new_lines"]]
        assert "\n".join(delivered) + "\n" == sent[host].decode()
        assert fleet.saved[host].data == sent[host]
        assert [line for _label, line in fleet.spools[host].labeled] == delivered and fleet.spools[host].last
        assert last["hosts"][host]["completed"] and last["hosts"][host]["msg"] == "complete"


def test_an_error_on_one_host_stops_every_other_host_in_the_same_round() -> None:
    fleet = Fleet(["n1", "n2", "n3"], error_patterns={"nan": "loss: nan"}, complete={"pattern": "^DONE$"})
    for node in fleet.nodes.values():
        node.write(b"step 1\n")
    assert not fleet.call()["finished"]
    fleet.nodes["n2"].write(b"step 2, loss: nan\n")
    fleet.nodes["n3"].write(b"step 2\n")
    result = fleet.call()
    assert result["finished"] and not result["failed"]  # the hosts fail in a task of their own, not all at once
    # in the order they stopped: n3 was read after n2 in the round of the error, n1 before it, so n1 stopped in
    # one more round of the same call, with no delay slept
    assert result["failed_hosts"] == ["n2", "n3", "n1"] and result["error_hosts"] == ["n2"]
    assert result["aborted_by"] == "n2" and result["msg"].startswith("1 of 3 host(s) failed, first n2: error pattern")
    assert result["hosts"]["n2"]["error"]["line"] == "step 2, loss: nan"
    assert result["hosts"]["n1"]["aborted_by"] == "n2" and result["hosts"]["n3"]["aborted_by"] == "n2"
    assert result["rounds_in_call"] == 2 and fleet.clock.slept == []
    assert result["hosts"]["n3"]["new_lines"] == ["step 2"]


def test_the_last_result_holds_the_verdict_of_hosts_that_finished_in_an_earlier_call() -> None:
    fleet = Fleet(["n1", "n2"], complete={"pattern": "^DONE$", "policy": "any"}, error_patterns={"bad": "BAD"})
    fleet.nodes["n1"].write(b"DONE\n")
    first = fleet.call()
    assert first["finished"] and set(first["hosts"]) == {"n1", "n2"}
    assert first["hosts"]["n1"]["completed"] and first["hosts"]["n2"]["msg"].startswith("done: completion group")


def test_a_fleet_result_stays_under_the_event_budget_and_counts_the_lines_it_leaves_out() -> None:
    hosts = [f"n{i}" for i in range(40)]
    fleet = Fleet(hosts, budget=40_000)
    for index, node in enumerate(fleet.nodes.values()):
        node.write(b"".join(b"line %d of a busy host\n" % i for i in range(400 if index % 2 else 3)))
    result = fleet.call()
    assert measure(result) <= 40_000
    quiet, busy = result["hosts"]["n0"], result["hosts"]["n1"]
    assert len(quiet["new_lines"]) == 3 and "new_lines_truncated" not in quiet  # the quiet hosts keep every line
    assert busy["new_lines"] and busy["new_lines_truncated"] + len(busy["new_lines"]) == 400
    assert busy["new_lines"] == [f"line {i} of a busy host" for i in range(len(busy["new_lines"]))]
    assert len(fleet.saved["n1"].data.splitlines()) == 400  # save_dir has every line


def test_a_transport_failure_keeps_the_host_and_its_cursor() -> None:
    fleet = Fleet(["n1", "n2"], transport_retries=1, complete={"pattern": "^DONE$"})
    fleet.nodes["n1"].write(b"a\n")
    fleet.nodes["n1"].down = 1
    first = fleet.call()
    assert first["hosts"]["n1"]["transport_error"].endswith("Connection refused") and not first["finished"]
    second = fleet.call()
    assert second["hosts"]["n1"]["new_lines"] == ["a"] and "transport_error" not in second["hosts"]["n1"]


@pytest.mark.parametrize(
    ("args", "run", "message"),
    [
        ({}, {"run_once": False}, "fleet: true needs run_once: true"),
        ({"start": "arm"}, {}, "start=arm runs per host"),
        ({"cursors": {LOG: {"offset": 1}}}, {}, "fleet: true takes no cursors"),
        ({}, {"become": True}, "takes no become"),
    ],
)
def test_what_a_fleet_cannot_do_is_refused_by_name(args: dict, run: dict, message: str) -> None:
    params = ArgumentSpecValidator(ARGUMENT_SPEC).validate({"logs": [LOG], "fleet": True, **args})
    facts = {"host": "n1", "batch": ["n1"], "play_hosts": ["n1"], "fleet": True, "run_once": True, **run}
    with pytest.raises(LogPollError, match=message):
        poll_settings(params.validated_parameters, RunFacts(**facts))


def test_the_fleet_needs_no_forks_for_its_hosts() -> None:
    hosts = [f"n{i}" for i in range(64)]
    params = ArgumentSpecValidator(ARGUMENT_SPEC).validate({"logs": [LOG], "fleet": True})
    settings = poll_settings(
        params.validated_parameters,
        RunFacts(host="n0", batch=hosts, play_hosts=hosts, forks=None, fleet=True, run_once=True),
    )
    assert settings.participants == hosts
    # the per-host form with the same 64 hosts and 5 forks is refused
    with pytest.raises(LogPollError, match="forks"):
        poll_settings(
            {**params.validated_parameters, "fleet": False}, RunFacts(host="n0", batch=hosts, play_hosts=hosts, forks=5)
        )


def test_a_fleet_too_big_for_the_budget_leaves_out_entries_but_names_every_failed_host() -> None:
    hosts = [f"n{i:03d}" for i in range(300)]
    fleet = Fleet(hosts, budget=30_000, error_patterns={"nan": "loss: nan"}, complete={"pattern": "^DONE$"})
    for node in fleet.nodes.values():
        node.write(b"step 1\n")
    fleet.nodes["n150"].write(b"step 2, loss: nan " + b"x" * 5000 + b"\n")
    result = fleet.call()
    assert measure(result) <= 30_000 and result["finished"]
    assert len(result["failed_hosts"]) == 300 and result["error_hosts"] == ["n150"]
    assert result["hosts_left_out"] == 300 - len(result["hosts"]) > 0
    assert result["hosts"]["n150"]["error"]["name"] == "nan"  # the host that failed on its own is kept
    assert len(result["hosts"]["n150"]["error"]["line"]) < 300  # cut to FLEET_STATUS_CAP


def test_a_fleet_whose_rounds_come_late_is_warned_about_once_naming_the_fleet_size() -> None:
    hosts = [f"n{i}" for i in range(4)]
    fleet = Fleet(hosts, complete={"pattern": "^DONE$"})  # delay 2 s
    warnings = []
    for _call in range(6):
        result = fleet.call()
        warnings += result.get("warnings", [])
        fleet.clock.advance(9.0)  # a round of the whole fleet every 9 s
    assert len(warnings) == 1, warnings
    assert "came every 9.0s instead of every 2s" in warnings[0] and "with 4 host(s) polling" in warnings[0]
    assert "Set delay to 10s or more" in warnings[0]
