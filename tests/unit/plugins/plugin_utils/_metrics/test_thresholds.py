"""Unit tests for plugin_utils/_metrics/thresholds.py and the check_thresholds filter."""

from __future__ import annotations

import math
from collections import OrderedDict

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.maxtext_metrics import check_thresholds
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import maxtext_metrics
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics.thresholds import evaluate_thresholds

METRICS = OrderedDict(
    [
        ("steps", 20),
        ("last_step", 19),
        ("tflops_per_device", 80.1),
        ("tokens_per_device", 8672.758),
        ("step_time_p95", 5.669),
        ("final_loss", 10.374),
        ("loss_decreased", True),
        ("nan_steps", []),
    ]
)


def by_metric(results: list) -> dict:
    return {r["metric"]: r for r in results}


def one(value: object, threshold: object, metric: str = "m") -> dict:
    results = evaluate_thresholds({metric: value}, {metric: threshold})
    assert len(results) == 1
    return results[0]


def test_min_fail_message_and_shape() -> None:
    result = one(80.1, {"min": 100.0}, "tflops_per_device")
    assert result == {
        "metric": "tflops_per_device",
        "value": 80.1,
        "status": "FAIL",
        "kind": "min",
        "threshold": {"min": 100.0},
        "message": "tflops_per_device 80.1 < min 100.0",
    }


def test_min_pass_inclusive() -> None:
    result = one(100, {"min": 100})
    assert result["status"] == "PASS"
    assert result["message"] == "m 100 >= min 100.0"


def test_max_pass_and_fail() -> None:
    assert one(5.669, {"max": 6.5}, "step_time_p95")["message"] == "step_time_p95 5.669 <= max 6.5"
    result = one(7.25, {"max": 6.5}, "step_time_p95")
    assert (result["status"], result["kind"], result["message"]) == ("FAIL", "max", "step_time_p95 7.25 > max 6.5")


def test_range() -> None:
    assert one(5.0, {"min": 1, "max": 10})["message"] == "m 5.0 within range [1.0, 10.0]"
    assert one(5.0, {"min": 1, "max": 10})["kind"] == "range"
    low = one(0.5, {"min": 1, "max": 10})
    assert (low["status"], low["message"]) == ("FAIL", "m 0.5 < min 1.0 (range [1.0, 10.0])")
    high = one(11, {"min": 1, "max": 10})
    assert (high["status"], high["message"]) == ("FAIL", "m 11 > max 10.0 (range [1.0, 10.0])")
    assert one(10.0, {"min": 10, "max": 10})["status"] == "PASS"


def test_target_fractional_tolerance() -> None:
    result = one(104.0, {"target": 100, "tolerance": 0.05})
    assert result["status"] == "PASS"
    assert result["kind"] == "target"
    assert result["message"] == "m 104.0 within target 100.0 +/-5% (off by 4.0, +4.00%)"
    result = one(94.0, {"target": 100, "tolerance": 0.05})
    assert result["status"] == "FAIL"
    assert result["message"] == "m 94.0 outside target 100.0 +/-5% (off by -6.0, -6.00%)"


@pytest.mark.parametrize("value", [95.0, 105.0])
def test_target_tolerance_band_edges_are_inclusive(value: float) -> None:
    assert one(value, {"target": 100.0, "tolerance": 0.05})["status"] == "PASS"
    assert one(value * 0.001, {"target": 0.1, "tolerance": 0.05})["status"] == "PASS"


def test_target_percent_string_tolerance() -> None:
    result = one(8672.758, {"target": 8600, "tolerance": "5%"}, "tokens_per_device")
    assert result["status"] == "PASS"
    assert result["message"] == "tokens_per_device 8672.758 within target 8600.0 +/-5% (off by 72.758, +0.85%)"
    assert result["threshold"] == {"target": 8600, "tolerance": "5%"}
    assert one(9100, {"target": 8600, "tolerance": " 5 % "})["status"] == "FAIL"


def test_target_negative_value_uses_absolute_target_for_band() -> None:
    assert one(-10.4, {"target": -10.0, "tolerance": 0.05})["status"] == "PASS"
    assert one(-10.6, {"target": -10.0, "tolerance": 0.05})["status"] == "FAIL"


def test_target_abs_tolerance_and_exact() -> None:
    result = one(0.3, {"target": 0, "abs_tolerance": 0.5})
    assert (result["status"], result["message"]) == ("PASS", "m 0.3 within target 0.0 +/-0.5 (off by 0.3)")
    assert one(0.6, {"target": 0, "abs_tolerance": 0.5})["status"] == "FAIL"
    exact = one(3, {"target": 3})
    assert (exact["status"], exact["message"]) == ("PASS", "m 3 within target 3.0 (exact) (off by 0.0, +0.00%)")
    assert one(3.001, {"target": 3})["status"] == "FAIL"


def test_target_boolean() -> None:
    result = one(True, {"target": True}, "loss_decreased")
    assert (result["status"], result["message"]) == ("PASS", "loss_decreased True == target True")
    result = one(False, {"target": True}, "loss_decreased")
    assert (result["status"], result["message"]) == ("FAIL", "loss_decreased False != target True")
    assert one(None, {"target": True}, "loss_decreased")["message"] == (
        "loss_decreased has no data (None); required target True"
    )
    assert one(1, {"target": True})["status"] == "FAIL"  # 1 is not True


def test_infinite_value_outside_target_band() -> None:
    assert one(math.inf, {"target": 100, "tolerance": 0.5})["status"] == "FAIL"
    assert one(math.inf, {"min": 100})["status"] == "PASS"
    assert one(-math.inf, {"min": 100})["message"] == "m -inf < min 100.0"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "final_loss has no data (None); required max 3.0"),
        (float("nan"), "final_loss is NaN; required max 3.0"),
        ("abc", "final_loss value 'abc' is not a number; required max 3.0"),
        ([1.0], "final_loss value [1.0] is not a number; required max 3.0"),
        (True, "final_loss value True is not a number; required max 3.0"),
    ],
)
def test_missing_none_nan_non_numeric_values_fail(value: object, message: str) -> None:
    result = one(value, {"max": 3}, "final_loss")
    assert result["status"] == "FAIL"
    assert result["message"] == message


def test_numeric_string_value_is_compared() -> None:
    result = one("120.5", {"min": 100})
    assert (result["status"], result["message"]) == ("PASS", "m 120.5 >= min 100.0")


def test_threshold_for_absent_metric_fails_after_metrics() -> None:
    results = evaluate_thresholds({"steps": 3}, {"tflops_per_device": {"min": 100}, "last_step": {"record": True}})
    assert [r["metric"] for r in results] == ["steps", "tflops_per_device", "last_step"]
    assert results[1]["status"] == "FAIL"
    assert results[1]["value"] is None
    assert results[1]["message"] == "tflops_per_device is missing; required min 100.0"
    assert results[2]["status"] == "RECORD"
    assert results[2]["message"] == "last_step None (recorded, missing)"


def test_record_forms_and_unthresholded_metrics() -> None:
    results = by_metric(evaluate_thresholds(METRICS, {"steps": {"record": True}, "last_step": None, "final_loss": {}}))
    assert len(results) == len(METRICS)
    for name in METRICS:
        assert results[name]["status"] == "RECORD"
        assert results[name]["kind"] == "record"
    assert results["steps"]["message"] == "steps 20 (recorded)"
    assert results["steps"]["threshold"] == {"record": True}
    assert results["last_step"]["threshold"] is None
    assert results["final_loss"]["threshold"] == {}
    assert results["tflops_per_device"]["message"] == "tflops_per_device 80.1 (recorded, no threshold)"
    assert results["tflops_per_device"]["threshold"] is None
    assert results["nan_steps"]["message"] == "nan_steps [] (recorded, no threshold)"
    assert evaluate_thresholds({"x": 1}, None)[0]["status"] == "RECORD"
    assert evaluate_thresholds({"x": 1}, {"x": {"record": False}})[0]["status"] == "RECORD"


def test_results_follow_metric_order() -> None:
    thresholds = {"final_loss": {"max": 11}, "tflops_per_device": {"min": 100}, "loss_decreased": {"target": True}}
    results = evaluate_thresholds(METRICS, thresholds)
    assert [r["metric"] for r in results] == list(METRICS)
    statuses = {r["metric"]: r["status"] for r in results}
    assert statuses == {
        "steps": "RECORD",
        "last_step": "RECORD",
        "tflops_per_device": "FAIL",
        "tokens_per_device": "RECORD",
        "step_time_p95": "RECORD",
        "final_loss": "PASS",
        "loss_decreased": "PASS",
        "nan_steps": "RECORD",
    }


def test_threshold_is_copied_not_shared() -> None:
    threshold = {"min": 1}
    result = evaluate_thresholds({"m": 2}, {"m": threshold})[0]
    result["threshold"]["min"] = 99
    assert threshold == {"min": 1}


@pytest.mark.parametrize(
    ("threshold", "message"),
    [
        ({"minimum": 1}, r"unknown threshold kind 'minimum' for metric 'm'; allowed kinds: min, max .*record"),
        ({"min": 1, "equals": 2}, r"unknown threshold kind 'equals' for metric 'm'; allowed kinds"),
        (5, r"threshold for metric 'm' must be a mapping, got int 5; allowed kinds: min, max"),
        ("min 5", r"threshold for metric 'm' must be a mapping, got str"),
        ({"min": "abc"}, r"threshold 'min' for metric 'm' must be a number, got 'abc'"),
        ({"max": None}, r"threshold 'max' for metric 'm' must be a number, got None"),
        ({"min": True}, r"threshold 'min' for metric 'm' must be a number, got True"),
        ({"min": 5, "max": 1}, r"threshold for metric 'm' has min 5.0 > max 1.0"),
        (
            {"target": 100, "tolerance": 5},
            r"is a fraction of the target .* got 5; write 0.05",
        ),
        ({"target": 100, "tolerance": -0.1}, r"must be a finite number >= 0"),
        ({"target": 100, "tolerance": "x%"}, r"threshold 'tolerance' for metric 'm' must be a number, got 'x'"),
        ({"target": 100, "tolerance": 0.1, "abs_tolerance": 1}, r"sets both tolerance and abs_tolerance"),
        ({"target": 100, "abs_tolerance": -1}, r"abs_tolerance' for metric 'm' must be a finite number >= 0"),
        ({"target": 100, "min": 1}, r"mixes target with min"),
        ({"tolerance": 0.1}, r"tolerance needs a target"),
        ({"target": True, "tolerance": 0.1}, r"a boolean target takes no tolerance"),
        ({"target": float("inf")}, r"target' for metric 'm' must be finite"),
        ({"min": float("nan")}, r"threshold 'min' for metric 'm' must not be NaN"),
        ({"record": True, "min": 1}, r"sets record: true together with bounds min"),
        ({"record": "yes"}, r"threshold 'record' for metric 'm' must be true or false"),
    ],
)
def test_invalid_thresholds_raise(threshold: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        evaluate_thresholds({"m": 1.0}, {"m": threshold})


def test_invalid_threshold_raises_even_if_metric_absent() -> None:
    with pytest.raises(ValueError, match="unknown threshold kind 'above' for metric 'other'"):
        evaluate_thresholds({"m": 1.0}, {"m": {"min": 0}, "other": {"above": 1}})


def test_invalid_containers() -> None:
    with pytest.raises(ValueError, match="metrics must be a mapping"):
        evaluate_thresholds([1, 2], {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="thresholds must be a mapping"):
        evaluate_thresholds({}, [1])  # type: ignore[arg-type]


def test_end_to_end_with_maxtext_metrics() -> None:
    log = "\n".join(
        f"I1202 10:00:5{i}.000000 139 metric_logger.py:180] completed step: {i}, seconds: {s}, "
        f"TFLOP/s/device: {t}, Tokens/s/device: {k}, total_weights: 196608, loss: {loss}"
        for i, (s, t, k, loss) in enumerate(
            [(44.9, 17.0, 1094.1, 12.0), (5.6, 130.0, 8600.0, 11.0), (5.8, 120.0, 8400.0, 10.0)]
        )
    )
    metrics = maxtext_metrics(log)
    results = by_metric(
        evaluate_thresholds(
            metrics,
            {
                "tflops_per_device": {"min": 130.0},
                "tokens_per_device": {"target": 8500, "tolerance": 0.02},
                "step_time_p95": {"max": 6.0},
                "loss_decreased": {"target": True},
                "nan_steps": {"record": True},
            },
        )
    )
    assert results["tflops_per_device"]["status"] == "FAIL"
    assert results["tflops_per_device"]["message"] == "tflops_per_device 125.0 < min 130.0"
    assert results["tokens_per_device"]["status"] == "PASS"
    assert results["step_time_p95"]["message"] == "step_time_p95 5.79 <= max 6.0"
    assert results["loss_decreased"]["status"] == "PASS"
    assert results["nan_steps"]["status"] == "RECORD"
    assert results["step_time_mean"]["status"] == "RECORD"


def test_filter_wraps_errors() -> None:
    assert check_thresholds({"m": 1}, {"m": {"min": 0}})[0]["status"] == "PASS"
    assert check_thresholds({"m": 1})[0]["status"] == "RECORD"
    with pytest.raises(AnsibleFilterError, match=r"cvs.cluster.check_thresholds: unknown threshold kind 'mn'"):
        check_thresholds({"m": 1}, {"m": {"mn": 0}})
    with pytest.raises(AnsibleFilterError, match="expects a mapping of metric name to value as input, got list"):
        check_thresholds([1])
    with pytest.raises(AnsibleFilterError, match=r"thresholds must be a mapping .* got str"):
        check_thresholds({"m": 1}, "min: 1")
