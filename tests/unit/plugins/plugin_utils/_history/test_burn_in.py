"""Unit tests: burn-in settings, iterations and the ranking of the nodes (plugin_utils/_history/burn_in.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._history import burn_in as b


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("", None),
        (90, 90.0),
        ("90s", 90.0),
        ("30m", 1800.0),
        ("8h", 28800.0),
        ("2d", 172800.0),
        ("1.5 h", 5400.0),
    ],
)
def test_durations(value: Any, seconds: Any) -> None:
    assert b.parse_duration(value) == seconds


@pytest.mark.parametrize(
    ("repeat", "duration", "message"),
    [
        (None, None, "a burn-in needs cvs_repeat (iterations, e.g. 3) or cvs_duration (e.g. 8h), or both"),
        (0, None, "cvs_repeat: 0 must be a whole number of iterations from 1 to 10000"),
        ("three", None, "cvs_repeat: 'three' must be a whole number"),
        (2.5, None, "cvs_repeat: 2.5 must be a whole number"),
        (True, None, "cvs_repeat: True must be"),
        (None, "8 hours", "cvs_duration: '8 hours' is not a duration; use seconds or a number with s, m, h or d"),
        (None, -5, "cvs_duration: -5 is not a duration"),
    ],
)
def test_bad_settings_name_the_variable(repeat: Any, duration: Any, message: str) -> None:
    with pytest.raises(b.BurnInError) as info:
        b.plan(repeat, duration)
    assert message in str(info.value)


def test_plan() -> None:
    assert b.plan("2", None) == {"repeat": 2, "duration": None}
    assert b.plan(None, "1h") == {"repeat": b.MAX_ITERATIONS, "duration": 3600.0}
    assert b.plan(5, "10m") == {"repeat": 5, "duration": 600.0}


def test_child_argv_keeps_the_options_and_replaces_the_playbook() -> None:
    argv = [
        "-i",
        "inv.yml",
        "--limit",
        "node1,node2",
        "-e",
        "@vars.json",
        "playbooks/burn_in.yml",
        "-e",
        "cvs_repeat=2",
    ]
    out = b.child_argv(argv, ["playbooks/burn_in.yml"], "/c/playbooks/validate.yml", {"cvs_run_id": "B-i01"})
    assert out[:8] == ["-i", "inv.yml", "--limit", "node1,node2", "-e", "@vars.json", "-e", "cvs_repeat=2"]
    assert out[8:10] == ["/c/playbooks/validate.yml", "-e"] and json.loads(out[10]) == {"cvs_run_id": "B-i01"}


def test_drive_goes_on_past_failing_runs_and_stops_on_a_broken_one() -> None:
    seen = []

    def runner(rc_of: dict[int, int]) -> Any:
        def run(number: int, run_id: str) -> int:
            seen.append(run_id)
            return rc_of.get(number, 0)

        return run

    complete = {"complete": True}
    reports = {"B-i01": complete, "B-i02": complete, "B-i03": complete}

    def ended(run_id: str, rc: int) -> bool:
        return b.finished(rc, reports.get(run_id))

    # a failed node (2) or an unreachable one (4) goes on: the iteration wrote its final report
    done = b.drive("B", {"repeat": 3, "duration": None}, runner({1: 2, 2: 4}), ended)
    assert [d["rc"] for d in done] == [2, 4, 0] and seen == ["B-i01", "B-i02", "B-i03"]
    assert all(d["finished"] for d in done)
    done = b.drive("B", {"repeat": 5, "duration": None}, runner({2: 99}), ended)
    assert [(d["iteration"], d["finished"]) for d in done] == [(1, True), (2, False)]
    reports["B-i02"] = {"complete": False}  # interrupted, finished later: the report stays incomplete
    assert [d["finished"] for d in b.drive("B", {"repeat": 3, "duration": None}, runner({}), ended)] == [True, False]
    del reports["B-i01"]  # no report at all (a broken inventory)
    assert len(b.drive("B", {"repeat": 3, "duration": None}, runner({}), ended)) == 1
    # a duration: no iteration starts once it has passed (5 s per clock reading: the iterations start at 5 and 20 s,
    # the third would start at 35 s)
    ticks = iter(range(0, 1000, 5))
    done = b.drive(
        "B", {"repeat": b.MAX_ITERATIONS, "duration": 25}, runner({}), lambda r, rc: True, lambda: float(next(ticks))
    )
    assert len(done) == 2


def _rec(run_id: str, statuses: dict[str, str], bw: dict[str, float]) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "nodes": {n: {"checks": {"rvs": {"status": s}}} for n, s in statuses.items()},
        "history": {"values": {n: {"rvs": {"pebb_single bandwidth_gbps": v}} for n, v in bw.items()}},
    }


def test_rank_by_failures_then_spread() -> None:
    records = [
        _rec("B-i01", {"node1": "PASS", "node2": "FAIL", "node3": "PASS"}, {"node1": 57.7, "node3": 57.7}),
        _rec("B-i02", {"node1": "PASS", "node2": "FAIL", "node3": "PASS"}, {"node1": 57.6, "node3": 50.0}),
    ]
    out = b.rank(records, ["B-i03"])
    assert [n["node"] for n in out["nodes"]] == ["node2", "node3", "node1"]
    node2, node3, _node1 = out["nodes"]
    assert (
        node2["failures"] == 2
        and node2["failed_checks"] == {"rvs FAIL": 2}
        and node2["failed_runs"] == ["B-i01", "B-i02"]
    )
    assert (
        node3["max_spread"] == pytest.approx((57.7 - 50.0) / 53.85)
        and node3["max_spread_metric"] == "rvs pebb_single bandwidth_gbps"
    )
    assert (
        out["lines"][0] == "1. node2: failed 2 of 2 iteration(s) (rvs FAIL x2); no metric spread (fewer than 2 values)"
    )
    assert out["lines"][1].startswith("2. node3: failed 0 of 2 iteration(s); largest spread 14.3% (rvs pebb_single")
    assert out["notes"] == ["B-i03: no results.json (the iteration did not write its report)"]
