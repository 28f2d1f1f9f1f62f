"""Targets and verdicts of the benches (bench/_results.py): a bench says whether it met its target only when it
has one, "not measured" when its run did not reach it, and "no target" otherwise (issue 37, finding 9)."""

from __future__ import annotations

import pytest
from _results import Target, check_summary, judge, target_line, verdict


def test_target_at_most_and_at_least():
    assert Target("x", 10.0, 10.0).met is True
    assert Target("x", 10.01, 10.0).met is False
    assert Target("x", 256, 256, at_most=False).met is True
    assert Target("x", 128, 256, at_most=False).met is False
    assert Target("x", None, 10.0).met is None


def test_judge_is_false_on_any_miss_and_none_when_something_was_not_measured():
    met, missed, unmeasured = Target("a", 1, 2), Target("b", 3, 2), Target("c", None, 2)
    assert judge([met])["meets_target"] is True
    assert judge([met, missed, unmeasured])["meets_target"] is False
    assert judge([met, unmeasured])["meets_target"] is None
    assert judge([met, missed])["targets"] == [
        {"target": "a", "measured": 1, "limit": 2, "met": True},
        {"target": "b", "measured": 3, "limit": 2, "met": False},
    ]


def test_judge_refuses_no_target():
    with pytest.raises(ValueError, match="leaves meets_target out"):
        judge([])


def test_verdict_says_no_target_without_one_whatever_meets_target_says():
    assert verdict({"tax_s": {3: 40.0}}) == "no target"
    assert verdict({"tax_s": {3: 40.0}, "meets_target": True}) == "no target"
    assert verdict({"target": "<= 5x", "meets_target": True}) == "meets target"
    assert verdict({"target": "<= 5x", "meets_target": False}) == "MISSES target"
    assert verdict(judge([Target("a", None, 2)])) == "target not measured"
    assert verdict(judge([Target("a", 1, 2)])) == "meets target"


def test_check_summary_refuses_a_verdict_without_a_target_and_a_target_without_a_verdict():
    with pytest.raises(ValueError, match="target missing, meets_target set"):
        check_summary({"tax_s": {}, "meets_target": True})
    with pytest.raises(ValueError, match="target set, meets_target missing"):
        check_summary({"target": "<= 5x"})
    with pytest.raises(ValueError, match="true, false or null"):
        check_summary({"target": "<= 5x", "meets_target": "yes"})
    check_summary({"tax_s": {}})
    check_summary({"target": "<= 5x", "meets_target": None})
    check_summary(judge([Target("a", 1, 2)]))


def test_target_line():
    rows = judge([Target("tax <= 10x ping at 64 hosts", 12.345, 10), Target("b", None, 1), Target("c", 0.5, 1)])
    assert [target_line(r) for r in rows["targets"]] == [
        "tax <= 10x ping at 64 hosts: MISSED (measured 12.35)",
        "b: not measured",
        "c: met (measured 0.5)",
    ]


def test_scaling_benches_do_not_judge_sizes_they_did_not_run():
    from fleet_scaling import fleet_targets
    from hosts_scaling import scaling_targets

    assert judge(fleet_targets({256: 0.001}, 1024, [256, 1024], 10.0))["meets_target"] is True
    assert judge(fleet_targets({256: 0.002}, 1024, [256, 1024], 10.0))["meets_target"] is False
    # 1,024 hosts not tried: the capacity target is not measured, not missed
    assert [r["met"] for r in judge(fleet_targets({256: 0.001}, 256, [256], 10.0))["targets"]] == [True, None]
    assert [r["met"] for r in judge(fleet_targets({64: 0.001}, 64, [64], 10.0))["targets"]] == [None, None]
    assert [r["met"] for r in judge(fleet_targets({256: 0.001}, 256, [256, 1024], 10.0))["targets"]] == [True, False]

    assert judge(scaling_targets(1, 12, 2.5, 256, [256], 10.0))["meets_target"] is True
    assert [r["met"] for r in judge(scaling_targets(1, 12, 2.5, 128, [256, 128], 10.0))["targets"]] == [True, False]
    assert [r["met"] for r in judge(scaling_targets(1, 3, 2.5, 64, [64], 10.0))["targets"]] == [None, None]
    assert [r["met"] for r in judge(scaling_targets(1, 12, 3.5, 256, [256], 5.0))["targets"]] == [False, None]
