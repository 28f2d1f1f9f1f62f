"""Unit tests: units declared where metrics are made, one name per metric, targets as thresholds, and the folding
of what every node agrees on (plugin_utils/_maxtext/metrics.py metric_rows, _rvs/record.py, _metrics/thresholds.py
and fleet.py, _report/view.py, html.py, junit.py, console.py)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.cvs_thresholds import upstream_metrics
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import ALIASES, UNITS, metric_rows
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics.thresholds import evaluate_thresholds
from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import validate
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.console import fleet_table
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.html import to_html
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.junit import to_junit
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.record import aggregate
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.view import fleet_rows, threshold_text
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.record import check_rows
from ansible_collections.cvs.cluster.tests.support.report_synth import synth_found

SUMMARY = {
    "steps": 20, "last_step": 19, "tflops_per_device": 150.0, "tokens_per_device": 9000.0, "step_time_mean": 0.05,
    "step_time_p50": 0.05, "step_time_p95": 0.0505, "final_loss": 1.25, "loss_decreased": True, "nan_steps": [],
    "measured_steps": 19, "eval_steps": 0, "final_eval_loss": None,
}  # fmt: skip
UPSTREAM = {**upstream_metrics(SUMMARY, 2, 8, None), **SUMMARY}  # what a MaxText record's summary holds


# --------------------------------------------------------------------------- units and names where metrics are made


def test_maxtext_rows_have_one_name_per_metric_and_a_unit_each() -> None:
    rows = metric_rows(UPSTREAM, {})
    names = [r["metric"] for r in rows]
    assert len(names) == len(set(names)) and not set(names) & set(ALIASES), names
    assert all(isinstance(r["unit"], str) for r in rows), rows
    by = {r["metric"]: r for r in rows}
    assert (by["tflops_per_device"]["unit"], by["tokens_per_device"]["unit"]) == ("TFLOP/s", "tokens/s")
    assert by["step_time_mean"]["unit"] == "s" and by["tokens_per_sec_total"]["unit"] == "tokens/s"
    assert by["tflops_per_device"]["aliases"] == ["tflops_per_sec_per_gpu"]
    assert by["step_time_mean"]["aliases"] == ["step_time_mean_ms", "step_time_seconds"]
    # nothing to say about a metric without a value and without a threshold
    assert "final_eval_loss" not in by and "scaling_efficiency_pct" not in by and "steps_to_target" not in by
    assert set(UNITS) >= set(UPSTREAM) - set(ALIASES)  # every metric a record can hold has a declared unit


def test_a_threshold_under_an_upstream_name_judges_the_metric_in_its_own_unit() -> None:
    rows = {r["metric"]: r for r in metric_rows(UPSTREAM, {"step_time_p95_ms": {"max": 50}, "eval_loss": {"max": 9}})}
    p95 = rows["step_time_p95"]  # 50 ms = 0.05 s < 0.0505 s
    assert p95["status"] == "FAIL" and p95["threshold"] == {"max": 0.05} and p95["unit"] == "s"
    assert p95["message"] == "step_time_p95 0.0505 s > max 0.05 s (threshold given as step_time_p95_ms: max 50)"
    assert rows["final_eval_loss"]["status"] == "FAIL" and "is missing" not in rows["final_eval_loss"]["message"]
    assert "step_time_p95_ms" not in rows and "eval_loss" not in rows


@pytest.mark.parametrize(
    "thresholds",
    [
        {"step_time_mean": {"max": 1}, "step_time_mean_ms": {"max": 900}},
        {"step_time_seconds": {"max": 1}, "step_time_mean_ms": {"max": 900}},
    ],
)
def test_two_thresholds_for_one_metric_are_refused_naming_both(thresholds: dict[str, Any]) -> None:
    first, second = thresholds
    with pytest.raises(ValueError, match=f"thresholds '{first}' and '{second}' name the same metric 'step_time_mean'"):
        metric_rows(UPSTREAM, thresholds)


def test_a_bad_threshold_is_named_as_written() -> None:
    with pytest.raises(ValueError, match="metric 'step_time_p95_ms'"):
        evaluate_thresholds({"step_time_p95": 1.0}, {"step_time_p95_ms": {"max": "x"}}, aliases=ALIASES)


def test_rvs_target_is_the_threshold_of_its_measurement_not_a_row() -> None:
    stats = {"min": 1000.0, "max": 1263700.0, "mean": 1105575.0, "count": 8}
    target = {"min": 1215000.0, "max": 1215000.0, "mean": 1215000.0, "count": 8}
    tests = [
        {"name": "gst_single", "status": "FAIL", "duration": "0:00:02", "gpus": [1, 2],
         "metrics": {"gflops": stats, "target_gflops": target}},
        {"name": "mem", "status": "PASS", "duration": 1.5,
         "metrics": {"bandwidth_gbps": {"min": 6443.4, "max": 6443.4, "mean": 6443.4, "count": 1},
                     "elapsed_ms": {"min": 1986.5, "max": 1986.5, "mean": 1986.5, "count": 1},
                     "errors": {"min": 0, "max": 0, "mean": 0, "count": 1}}},
    ]  # fmt: skip
    rows = {m["metric"]: m for m in check_rows(tests)["metrics"]}
    assert sorted(rows) == ["gst_single gflops", "mem bandwidth_gbps", "mem elapsed_ms", "test gst_single", "test mem"]
    gflops = rows["gst_single gflops"]
    assert (gflops["value"], gflops["unit"], gflops["threshold"], gflops["status"]) == (
        1105575.0, "GFLOP/s", {"min": 1215000.0}, "FAIL"
    )  # fmt: skip
    assert "lowest 1000 GFLOP/s" in gflops["message"] and "RVS's target 1,215,000 GFLOP/s" in gflops["message"]
    assert (rows["mem bandwidth_gbps"]["unit"], rows["mem elapsed_ms"]["unit"]) == ("GB/s", "ms")
    assert rows["mem elapsed_ms"]["status"] == "RECORD" and rows["test mem"]["unit"] == "s"
    for row in rows.values():
        validate({"schema": "cvs.cluster/check/v1", "check": "rvs", "node": "n", "status": "PASS", "reason": "r",
                  "metrics": [row]})  # fmt: skip


# --------------------------------------------------------------------------- rendering in the declared unit


def test_the_declared_unit_wins_over_the_name() -> None:
    # the finding: step_time_mean_ms 50.0 was shown as "50 s"
    assert fmt.value(50.0, "step_time_mean_ms", "ms") == "50 ms"
    assert fmt.value(50.0, "step_time_mean_ms") == "50 ms"  # a row without a unit: the name, read right
    assert fmt.value(0.05, "anything", "s") == "0.05 s" and fmt.value(97.5, "eff", "%") == "97.5%"
    assert fmt.value(8, "gpus", "") == "8" and fmt.value(8, "gpus", "GPUs") == "8 GPUs"
    row = {"metric": "step_time_p95", "value": 0.07, "unit": "s", "threshold": {"max": 0.05}}
    assert threshold_text(row) == "max 0.05 s"
    row = {"metric": "tokens_per_device", "unit": "tokens/s", "threshold": {"target": 8600, "tolerance": 0.05}}
    assert threshold_text(row) == "target 8600 tokens/s, \u00b15%"
    assert threshold_text({"metric": "final_loss", "unit": "", "threshold": {"record": True}}) == ""


def test_fleet_rows_carry_the_unit_and_a_rate_unit_is_higher_is_better() -> None:
    assert _fleet.direction_of("all_reduce_perf busbw 1048576B", None, "GB/s") == "higher"
    assert _fleet.direction_of("clock_skew", None, "s") is None  # a time by unit alone is not a fleet metric
    rec = _run(3, slow={2: 1.15})
    rows = {r["metric"]: r for r in rec["fleet"]["metrics"]}
    assert rows["tflops_per_device"]["unit"] == "TFLOP/s" and rows["step_time_p95"]["unit"] == "s"
    assert rows["gst_single gflops"]["unit"] == "GFLOP/s"
    assert not any("target" in name for name in rows) and not set(rows) & set(ALIASES), sorted(rows)
    outlier = next(o for o in rec["fleet"]["outliers"] if o["metric"] == "step_time_p95")
    assert re.search(r"step_time_p95 0\.058 s is 1[45]\.\d% above the fleet median 0\.05\d* s", outlier["reason"])


# --------------------------------------------------------------------------- folding


def _run(n: int, **kw: Any) -> dict[str, Any]:
    found = synth_found(n, **kw)
    rec = aggregate("run1", ["rvs", "maxtext"], {}, found)
    _fleet.annotate(rec, found)
    rec["plots"] = {"series": {}, "rvs_gpus": _fleet.rvs_gpus(found)}
    return rec


def test_metrics_every_node_agrees_on_are_folded_in_html_and_console() -> None:
    healthy = _run(4)
    shown, folded = fleet_rows(healthy["fleet"])
    assert shown == [] and len(folded) == len(healthy["fleet"]["metrics"]) > 5
    assert all(r["spread"] == 0 for r in folded)
    page = to_html(healthy)
    fleet = page[page.index('<section id="fleet">') : page.index("</section>", page.index('<section id="fleet">'))]
    assert 'id="fleet-metrics"' not in fleet  # nothing differs: no table on the first screen
    assert re.search(rf"<summary>{len(folded)} more metric\(s\) agree on every node \(values within 1% of the ", fleet)
    lines = fleet_table(healthy)
    assert len(lines) == 2 and lines[1].startswith(f"  {len(folded)} more metric(s) agree on every node"), lines

    slow = _run(4, slow={3: 1.15})
    shown, folded = fleet_rows(slow["fleet"])
    names = {r["metric"] for r in shown}
    assert {"tflops_per_device", "tokens_per_device", "step_time_mean"} <= names and "gst_single gflops" not in names
    table = re.search(r'<table class="fleet" id="fleet-metrics">.*?</table>', to_html(slow), re.S).group(0)
    assert table.count("<tr data-tone") == len(shown) and "150 TFLOP/s" in table
    assert any("tflops_per_device" in line and "node004 -13.0%" in line for line in fleet_table(slow))


def test_recorded_metrics_are_folded_per_node_in_html_and_junit() -> None:
    rec = _run(2)
    page = to_html(rec)
    start = page.index('<td class="cell PASS" data-node="node001" data-check="maxtext"')
    cell = page[start : page.index("</details></td>", start)]
    checked, recorded = cell.split('<details class="recorded">')
    assert "tflops_per_device" in checked and "[RECORD]" not in checked and 'class="RECORD"' not in checked
    assert re.match(r"<summary>\d+ recorded metric\(s\)</summary>", recorded)
    assert '<td>step_time_mean<span class="aka">also step_time_mean_ms, step_time_seconds</span></td>' in recorded
    assert "<td>0.05 s</td>" in recorded
    out = ET.fromstring(to_junit(rec)).find("./testsuite[@name='maxtext']/testcase[@name='node001']/system-out").text
    metric_lines = [line for line in (out or "").splitlines() if " = " in line]
    assert metric_lines == ["tflops_per_device = 150 TFLOP/s [PASS] (min 100 TFLOP/s)"], out
    assert re.search(r"^recorded: steps 20; .*step_time_mean 0\.05 s;", out or "", re.M), out
