"""Pure logic of log_poll's event budgets (plugins/plugin_utils/_log_poll/budget.py) and its spool
(plugins/plugin_utils/_log_poll/spool.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._console.model import capture_reason
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.budget import (
    ANSIBLE_OVERHEAD,
    CALL_SECONDS_ENV,
    RUNNER_CALL_SECONDS,
    RUNNER_MAX_EVENT_RES,
    STATUS_STRING_CAP,
    CallLines,
    budget_problem,
    default_call_seconds,
    fit,
    measure,
    merge_round,
    minimum_budget,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.spool import SpoolReader, SpoolWriter, spool_dir

LOGS = [("/var/log/a.log", "a"), ("/var/log/b.log", "b")]


def status(counts: list[int], **extra: object) -> dict:
    states = [{"path": p, "label": lb, "state": "ok", "new_lines": n, "events": []} for (p, lb), n in zip(LOGS, counts)]
    result = {"finished": False, "failed": False, "round": 7, "msg": "polling round 7", "cursors": {"x": {"offset": 1}}}
    result.update(log_states=states, group={"policy": "all", "hosts": ["n1"], "complete": 0, "total": 1}, **extra)
    return result


def call_lines(budget: int, per_log: list[list[str]]) -> CallLines:
    lines = CallLines(budget)
    for index, chunk in enumerate(per_log):
        lines.add(index, chunk)
    return lines


def test_measure_takes_the_larger_of_json_and_str() -> None:
    # str() spells a non-ASCII character as itself, JSON as \\uXXXX; quotes the other way round
    assert measure({"a": "é" * 10}) == len(json.dumps({"a": "é" * 10}))
    assert measure({"a": 'it\'s "x"'}) >= len(str({"a": 'it\'s "x"'}))
    assert measure({"a": None}) == len(str({"a": None}))  # None is longer than null


def test_a_result_under_budget_keeps_every_line() -> None:
    lines = call_lines(10_000, [["a1", "a2"], ["b1"]])
    result = fit(status([2, 1]), lines, 10_000)
    assert result["new_lines"] == ["a1", "a2", "b1"]
    assert "new_lines_truncated" not in result
    assert [s["new_lines"] for s in result["log_states"]] == [2, 1]


def test_over_budget_drops_the_newest_lines_and_counts_them() -> None:
    a = [f"a line {i:05d} " + "x" * 80 for i in range(3000)]
    b = [f"b line {i:05d} " + "y" * 80 for i in range(3000)]
    budget = 200_000
    lines = call_lines(budget, [a, b])
    result = fit(status([3000, 3000]), lines, budget)
    assert measure(result) <= budget - ANSIBLE_OVERHEAD
    kept = result["new_lines"]
    # arrival order: all of a before any of b, so the newest (b's end) goes first
    assert kept == (a + b)[: len(kept)]
    assert 0 < len(kept) < 6000
    assert result["new_lines_truncated"] == 6000 - len(kept)
    assert result["new_lines_truncated_bytes"] == sum(len(x) + 1 for x in (a + b)[len(kept) :])
    counts = [s["new_lines"] for s in result["log_states"]]
    assert sum(counts) == len(kept)
    assert [s.get("new_lines_truncated", 0) for s in result["log_states"]] == [3000 - counts[0], 3000 - counts[1]]
    # status fields untouched
    assert result["round"] == 7 and result["msg"] == "polling round 7" and result["cursors"] == {"x": {"offset": 1}}


def test_the_trim_is_deterministic_and_as_full_as_the_budget_allows() -> None:
    a = [("é" if i % 7 == 0 else "q") * (i % 300) + "'\"" for i in range(5000)]
    budget = 150_000
    first = fit(status([5000, 0]), call_lines(budget, [a, []]), budget)
    second = fit(status([5000, 0]), call_lines(budget, [a, []]), budget)
    assert first == second
    assert measure(first) <= budget - ANSIBLE_OVERHEAD
    more = dict(first, new_lines=a[: len(first["new_lines"]) + 1])
    assert measure(more) > budget - ANSIBLE_OVERHEAD - 400  # at most a line or so short of full


def test_budget_zero_keeps_everything() -> None:
    a = ["z" * 1000] * 2000
    result = fit(status([2000, 0]), call_lines(0, [a, []]), 0)
    assert len(result["new_lines"]) == 2000 and "new_lines_truncated" not in result
    assert measure(result) > RUNNER_MAX_EVENT_RES


def test_lines_past_the_budget_are_counted_not_held() -> None:
    lines = call_lines(1000, [["x" * 100] * 50])
    assert len(lines.kept) < 10 and lines.dropped == 50 - len(lines.kept)
    assert lines.dropped_bytes == 101 * lines.dropped


def test_long_status_strings_are_capped_when_they_alone_exceed_the_budget() -> None:
    huge = "E" * 900_000
    error = {"name": "boom", "pattern": "E+", "line": huge, "context": [huge, "short"], "label": "a"}
    result = status([1, 0], error=error, last_line=huge, msg=f"error pattern 'boom' matched: {huge}", finished=True)
    result["warnings"] = [f"warning {i}" for i in range(10)]
    budget = 100_000
    fitted = fit(result, call_lines(budget, [[huge], []]), budget)
    assert measure(fitted) <= budget
    assert fitted["new_lines"] == [] and fitted["new_lines_truncated"] == 1
    assert fitted["error"]["line"].startswith("E" * STATUS_STRING_CAP) and "more characters" in fitted["error"]["line"]
    assert fitted["error"]["context"][1] == "short" and fitted["error"]["name"] == "boom"
    assert fitted["finished"] is True
    assert fitted["warnings"][-1] == "warning 9" and "7 earlier warnings" in fitted["warnings"][0]


def test_minimum_holds_the_largest_status_of_the_task() -> None:
    hosts = [f"node{i:03d}.example.com" for i in range(64)]
    minimum = minimum_budget(LOGS, hosts, hosts[0])
    assert 20_000 < minimum < 200_000
    assert minimum_budget(LOGS, hosts + ["another-host.example.com"] * 100, hosts[0]) > minimum
    # a worst-case capped result fits the minimum
    huge = "E" * 100_000
    events = [{"round": 10**8, "label": "a", "event": "long_line_split"}] * 100
    error = {"name": "boom", "pattern": "E+", "line": huge, "context": [huge] * 10, "path": LOGS[0][0], "label": "a"}
    result = status([0, 0], error=error, msg=huge, last_line=huge, events=events, warnings=[huge] * 9)
    result["group"]["hosts"] = hosts
    assert measure(fit(result, call_lines(minimum, [[huge] * 3, []]), minimum)) <= minimum


@pytest.mark.parametrize(
    ("budget", "message"),
    [(5000, r"event_budget 5000 is too small .* at least (\d+) bytes.*raise event_budget to \1"),
     (-1, "must not be negative")],
)  # fmt: skip
def test_a_budget_too_small_is_a_clear_error(budget: int, message: str) -> None:
    import re

    problem = budget_problem(budget, minimum_budget(LOGS, ["n1"], "n1"))
    assert problem is not None and re.search(message, problem), problem


def test_budgets_that_fit_are_fine() -> None:
    minimum = minimum_budget(LOGS, ["n1"], "n1")
    assert budget_problem(0, minimum) is None
    assert budget_problem(minimum, minimum) is None
    assert budget_problem(600_000, minimum) is None


def test_call_seconds_default_on_under_runner_only() -> None:
    assert default_call_seconds(bool(capture_reason({"AWX_ISOLATED_DATA_DIR": "/runner/artifacts/1"}))) == (
        RUNNER_CALL_SECONDS
    )
    assert default_call_seconds(bool(capture_reason({"HOME": "/root"}))) == 0


def test_call_seconds_from_the_environment_wins_over_the_detected_default() -> None:
    runner = {"AWX_ISOLATED_DATA_DIR": "/runner/artifacts/1", CALL_SECONDS_ENV: "0"}
    assert default_call_seconds(bool(capture_reason(runner)), runner) == 0
    assert default_call_seconds(False, {CALL_SECONDS_ENV: " 30.5 "}) == 30.5
    assert default_call_seconds(True, {CALL_SECONDS_ENV: ""}) == RUNNER_CALL_SECONDS
    with pytest.raises(ValueError, match=r"CVS_LOG_POLL_CALL_SECONDS='soon' is not a number of seconds"):
        default_call_seconds(False, {CALL_SECONDS_ENV: "soon"})


def test_merge_round_sums_log_states_and_counts_rounds() -> None:
    total = merge_round(None, status([2, 1]))
    second = status([3, 0])
    second["log_states"][0]["events"] = ["rotated"]
    merged = merge_round(total, second)
    assert merged["rounds_in_call"] == 2
    assert [s["new_lines"] for s in merged["log_states"]] == [5, 1]
    assert merged["log_states"][0]["events"] == ["rotated"]
    assert merge_round(merged, status([0, 0]))["rounds_in_call"] == 3


def test_spool_round_trip_in_order_and_files_removed(tmp_path: Path) -> None:
    writer = SpoolWriter(str(tmp_path), "n1", "task-1", lines=True)
    reader = SpoolReader(str(tmp_path))
    writer.write([("a", "one"), ("a", "two")], {"round": 1}, last=False)
    first = reader.read()
    assert [r["lines"] for r in first] == [[["a", "one"], ["a", "two"]]]
    assert reader.read() == []  # each record once
    writer.write([("b", "three")], {"round": 2}, last=True)
    assert [r["lines"] for r in reader.read()] == [[["b", "three"]]]
    assert os.listdir(tmp_path) == []  # a call's file goes once its last record was read
    no_lines = SpoolWriter(str(tmp_path), "n1", "task-1", lines=False)
    no_lines.write([("a", "x")], {"round": 3}, last=True)
    assert [("lines" in r, r["progress"]) for r in reader.read()] == [(False, {"round": 3})]


def test_a_partial_record_waits_for_its_newline(tmp_path: Path) -> None:
    (tmp_path / "0001-1.jsonl").write_bytes(b'{"host": "n1", "task": "t", "last": false}\n{"host": "n1", "ta')
    reader = SpoolReader(str(tmp_path))
    assert len(reader.read()) == 1
    with open(tmp_path / "0001-1.jsonl", "ab") as fh:
        fh.write(b'sk": "t", "last": true}\n')
    assert [r["last"] for r in reader.read()] == [True]


def test_spool_only_for_the_console_that_started_the_worker(tmp_path: Path) -> None:
    env = {"CVS_LOG_POLL_SPOOL": f"1234:{tmp_path}"}
    assert spool_dir(env, 1234) == str(tmp_path)
    assert spool_dir(env, 999) is None
    assert spool_dir({}, 1234) is None
    assert spool_dir({"CVS_LOG_POLL_SPOOL": f"1234:{tmp_path}/gone"}, 1234) is None
    writer = SpoolWriter(None, "n1", "t", lines=True)
    writer.write([("a", "x")], {}, last=True)  # no spool: nothing written, nothing raised
    assert not writer.lines
