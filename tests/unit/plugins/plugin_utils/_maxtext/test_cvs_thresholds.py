"""Unit tests of plugin_utils/_maxtext/cvs_thresholds.py: upstream CVS training threshold files and metric names."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.cvs_thresholds import (
    CvsThresholdError,
    is_threshold_file,
    threshold_cell,
    upstream_metrics,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics.thresholds import evaluate_thresholds

BF16 = "NNODES=2,STEPS=30,PRECISION=BF16"
FILE = {
    "_comment": "placeholder numbers",
    BF16: {
        "training.tflops_per_sec_per_gpu": {"kind": "min", "value": 230.0},
        "training.tokens_per_sec_total": {"kind": "info", "value": 0},
        "training.step_time_p95_ms": {"kind": "max", "value": 3600000.0},
        "training.loss_decreased": {"kind": "min", "value": 1},
        "training.steps_to_target": {"kind": "info", "value": 1000000},
    },
    "NNODES=2,STEPS=30,PRECISION=FP8": {"training.final_loss": {"kind": "max", "value": 15.0}},
}
METRICS = {
    "tflops_per_device": 250.0,
    "tokens_per_device": 6000.0,
    "step_time_mean": 2.0,
    "step_time_p50": 1.9,
    "step_time_p95": 2.5,
    "final_loss": 7.5,
    "loss_decreased": True,
    "final_eval_loss": None,
}


def test_form_is_recognised_and_ours_is_not() -> None:
    assert is_threshold_file(FILE)
    assert not is_threshold_file({"tflops_per_device": {"min": 100}})
    assert not is_threshold_file({})
    assert not is_threshold_file({"_comment": "only"})


def test_a_cell_maps_onto_this_collections_form() -> None:
    assert threshold_cell(FILE, BF16) == {
        "tflops_per_sec_per_gpu": {"min": 230.0},
        "tokens_per_sec_total": {"record": True},
        "step_time_p95_ms": {"max": 3600000.0},
        "loss_decreased": {"target": True},
        "steps_to_target": {"record": True},
    }


def test_upstream_names_are_computed_from_the_metrics() -> None:
    out = upstream_metrics(
        METRICS, nodes=2, gpus_per_node=8, baseline={"tokens_per_sec_total": 40000.0, "num_nodes": 1}
    )
    assert out["tflops_per_sec_per_gpu"] == 250.0 and out["tokens_per_sec_per_gpu"] == 6000.0
    assert out["tokens_per_sec_total"] == 96000.0
    assert out["scaling_efficiency_pct"] == pytest.approx(120.0)
    assert out["step_time_seconds"] == 2.0 and out["step_time_mean_ms"] == 2000.0
    assert out["step_time_p50_ms"] == pytest.approx(1900.0) and out["step_time_p95_ms"] == 2500.0
    assert out["eval_loss"] is None and out["steps_to_target"] is None
    assert "final_loss" not in out and "loss_decreased" not in out


@pytest.mark.parametrize(
    ("gpus", "baseline", "total", "efficiency"),
    [
        (0, None, None, None),
        (8, None, 96000.0, None),
        (8, {"tokens_per_sec_total": 0.0, "num_nodes": 1}, 96000.0, None),
    ],
)
def test_missing_data_gives_null(gpus: int, baseline: Any, total: Any, efficiency: Any) -> None:
    out = upstream_metrics(METRICS, nodes=2, gpus_per_node=gpus, baseline=baseline)
    assert out["tokens_per_sec_total"] == total and out["scaling_efficiency_pct"] == efficiency


def test_the_mapped_cell_judges_the_metrics_end_to_end() -> None:
    metrics = {**upstream_metrics(METRICS, 2, 8), **METRICS}
    rows = {r["metric"]: r["status"] for r in evaluate_thresholds(metrics, threshold_cell(FILE, BF16))}
    assert rows["tflops_per_sec_per_gpu"] == "PASS" and rows["step_time_p95_ms"] == "PASS"
    assert rows["loss_decreased"] == "PASS" and rows["tokens_per_sec_total"] == "RECORD"
    slow = {**upstream_metrics({**METRICS, "tflops_per_device": 100.0}, 2, 8), **METRICS, "tflops_per_device": 100.0}
    rows = {r["metric"]: r["status"] for r in evaluate_thresholds(slow, threshold_cell(FILE, BF16))}
    assert rows["tflops_per_sec_per_gpu"] == "FAIL"


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        ("min", 1, {"target": True}),
        ("min", 0, {"record": True}),
        ("max", 0, {"target": False}),
        ("max", 1, {"record": True}),
    ],
)
def test_loss_decreased_bounds_become_boolean_targets(kind: str, value: int, expected: dict) -> None:
    doc = {"c": {"training.loss_decreased": {"kind": kind, "value": value}}}
    assert threshold_cell(doc) == {"loss_decreased": expected}


@pytest.mark.parametrize(
    ("doc", "cell", "message"),
    [
        (
            FILE,
            None,
            "the threshold file has 2 cells; choose one with maxtext_threshold_cell: NNODES=2,STEPS=30,PRECISION=BF16;",
        ),
        (
            FILE,
            "NNODES=2,STEPS=30,PRECISION=BF61",
            "no cell 'NNODES=2,STEPS=30,PRECISION=BF61' in the threshold file; "
            "did you mean 'NNODES=2,STEPS=30,PRECISION=BF16'?",
        ),
        (
            {"c": {"training.tflops_per_gpu": {"kind": "min", "value": 1}}},
            None,
            "cell 'c', training.tflops_per_gpu: unknown upstream metric; did you mean 'tflops_per_sec_per_gpu'?",
        ),
        (
            {"c": {"inference.ttft_ms": {"kind": "max", "value": 1}}},
            None,
            "cell 'c', inference.ttft_ms: only training.<metric> thresholds apply",
        ),
        (
            {"c": {"training.final_loss": {"kind": "between", "value": 1}}},
            None,
            "cell 'c', training.final_loss.kind: got 'between'; upstream's kinds are min, max, info",
        ),
        (
            {"c": {"training.final_loss": {"kind": "max", "value": "high"}}},
            None,
            "cell 'c', training.final_loss.value: expected a finite number",
        ),
        (
            {"c": {"training.final_loss": {"kind": "max", "valeu": 1}}},
            None,
            "cell 'c', training.final_loss.valeu: is not a key of a threshold; did you mean 'value'?",
        ),
        (
            {"c": {"training.final_loss": 15}},
            None,
            "cell 'c', training.final_loss: expected {kind: min|max|info, value: N}",
        ),
        ({"c": {"training.steps_to_target": {"kind": "max", "value": 100}}}, None, "needs upstream's convergence test"),
        ({"_comment": "x"}, None, "the threshold file has no cell"),
    ],
)
def test_bad_files_are_refused_naming_cell_and_metric(doc: Any, cell: Any, message: str) -> None:
    with pytest.raises(CvsThresholdError) as err:
        threshold_cell(doc, cell)
    assert message in str(err.value)
