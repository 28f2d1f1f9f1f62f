"""Unit tests: fleet comparison of a run (plugin_utils/_metrics/fleet.py) and its hook in write_report."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import parse_steps
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.record import aggregate, stats, write_report
from ansible_collections.cvs.cluster.tests.support.report_synth import maxtext_log, synth_found, write_run

CHECKS = ["rvs", "maxtext"]


def _record(found: dict[str, Any], options: Any = None) -> dict[str, Any]:
    rec = aggregate("r", CHECKS, {}, found)
    return _fleet.annotate(rec, found, options)


def test_direction_by_name_and_override() -> None:
    assert _fleet.direction_of("tflops_per_device") == "higher"
    assert _fleet.direction_of("tokens_per_device") == "higher"
    assert _fleet.direction_of("gst_single GFLOPS") == "higher"
    assert _fleet.direction_of("step_time_p95") == "lower"
    assert _fleet.direction_of("step_time_mean") == "lower"
    for name in ("final_loss", "loss", "steps", "last_step", "measured_steps", "nan_steps"):
        assert _fleet.direction_of(name) is None, name
    assert _fleet.direction_of("final_loss", {"final_loss": "lower"}) == "lower"
    assert _fleet.direction_of("tflops_per_device", {"tflops_per_device": "ignore"}) is None


def test_median_and_metric_comparison() -> None:
    assert _fleet.median([3, 1, 2]) == 2 and _fleet.median([1, 2, 3, 4]) == 2.5
    row, notes = _fleet.compare_metric("maxtext", "tflops", {"a": 150, "b": 147, "c": 127.5}, "higher", 0.05)
    assert row["median"] == 147 and notes == []
    assert {n: c["status"] for n, c in row["nodes"].items()} == {"a": "OK", "b": "OK", "c": "OUTLIER"}
    assert math.isclose(row["nodes"]["c"]["deviation"], (127.5 - 147) / 147)
    # time-type: above the median is bad, below is fine
    row, _ = _fleet.compare_metric("m", "step_time", {"a": 1.0, "b": 1.0, "c": 1.2, "d": 0.5}, "lower", 0.05)
    assert row["nodes"]["c"]["status"] == "OUTLIER" and row["nodes"]["d"]["status"] == "OK"


def test_slow_node_15_percent_flagged_2_percent_not() -> None:
    found = synth_found(4, slow={1: 1.02, 2: 1.15})
    rec = _record(found)
    fleet = rec["fleet"]
    assert fleet["outlier_nodes"] == ["node003"] and fleet["status"] == "OUTLIER"
    assert rec["summary"]["outlier_nodes"] == ["node003"]
    first = fleet["outliers"][0]  # throughput first, the largest deviation first
    assert first["metric"] == "tflops_per_device" and first["node"] == "node003"
    assert "below the fleet median" in first["reason"] and "tolerance 5%" in first["reason"]
    assert "TFLOP/s" in first["reason"]
    mt = rec["nodes"]["node003"]["checks"]["maxtext"]
    assert mt["status"] == "PASS" and mt["fleet"]["status"] == "OUTLIER"  # reported, not failing by default
    assert "fleet" not in rec["nodes"]["node002"]["checks"]["maxtext"]
    assert rec["summary"]["status"] == "PASS" and rec["summary"]["counts"] == {
        "PASS": 8,
        "FAIL": 0,
        "ERROR": 0,
        "MISSING": 0,
        "UNREACHABLE": 0,
    }


def test_fail_on_outlier_makes_it_a_status_that_fails_the_run() -> None:
    rec = _record(synth_found(3, slow={2: 1.15}), {"fail_on_outlier": True, "tolerance": "5%"})
    s = rec["summary"]
    assert rec["nodes"]["node003"]["checks"]["maxtext"]["status"] == "OUTLIER"
    assert s["status"] == "FAIL" and s["failing_nodes"] == ["node003"]
    assert s["counts"]["OUTLIER"] == 1 and s["counts"]["PASS"] == 5
    assert any(f["status"] == "OUTLIER" and f["node"] == "node003" for f in s["failures"])
    st = stats(rec, "/x")
    assert st["failing_nodes"] == ["node003"]


def test_tolerance_is_configurable() -> None:
    found = synth_found(3, slow={2: 1.15})
    assert _record(found, {"tolerance": 0.2})["fleet"]["outliers"] == []
    assert _record(found, {"tolerance": "20%"})["fleet"]["outliers"] == []
    assert _record(found, {"tolerance": 20})["fleet"]["outliers"] == []  # >= 1 is a percentage
    per_metric = _record(found, {"tolerance": 0.2, "metrics": {"tflops_per_device": {"tolerance": "5%"}}})
    assert [o["metric"] for o in per_metric["fleet"]["outliers"]] == ["tflops_per_device"]
    assert _record(found, {"enabled": False}).get("fleet") is None


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"tolerance": "lots"}, "tolerance"),
        ({"tolerance": -1}, "tolerance"),
        ({"fail_on_outlier": "yes"}, "fail_on_outlier"),
        ({"metrics": {"x": "sideways"}}, "metrics.x"),
        ({"bogus": 1}, "unknown fleet option"),
    ],
)
def test_bad_options_are_clear_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(_fleet.FleetOptionsError, match=match):
        _fleet.parse_options(options)


def test_inconsistent_facts_flagged() -> None:
    facts = {
        "a": {"rocm_version": "6.4.1", "rvs_version": "1.3.0", "gpus": 8, "gpu_model": "MI300X", "kernel": "6.1"},
        "b": {"rocm_version": "6.4.1", "rvs_version": "1.3.0", "gpus": 8, "gpu_model": "MI300X", "kernel": "6.1"},
        "c": {"rocm_version": "6.2.0", "rvs_version": "1.3.0", "gpus": 0, "gpu_model": "MI300X"},
    }
    issues = {i["fact"]: i for i in _fleet.compare_facts(facts)}
    assert issues["rocm_version"]["values"] == {"6.4.1": ["a", "b"], "6.2.0": ["c"]}
    assert issues["rocm_version"]["reason"] == "rocm_version differs: 6.4.1 on a, b; 6.2.0 on c"
    assert "kernel" in issues and issues["kernel"]["missing"] == ["c"]
    assert "rvs_version" not in issues
    zero = [i for i in _fleet.compare_facts(facts) if "0 GPUs" in i["reason"]]
    assert zero and zero[0]["values"] == {"0": ["c"]}


def test_single_node_says_it_could_not_compare() -> None:
    rec = _record(synth_found(1))
    fleet = rec["fleet"]
    assert fleet["status"] == "NOT_COMPARED" and fleet["outliers"] == [] and fleet["metrics"] == []
    assert any("single node" in n for n in fleet["not_compared"])


def test_missing_nan_inf_and_non_ascii_names_never_crash() -> None:
    names = ["nœud-1", "узел-2", "節点3", "node4"]
    found = synth_found(4, slow={3: 1.3}, names=names)

    def row(node: str, metric: str) -> dict[str, Any]:
        return next(m for m in found[node]["maxtext"]["metrics"] if m["metric"] == metric)

    # a check record cannot hold NaN or inf (JSON): its row says null, and the fleet "no value"
    row("узел-2", "tflops_per_device")["value"] = float("nan")
    row("節点3", "tokens_per_device")["value"] = float("inf")
    found["nœud-1"]["maxtext"]["metrics"] = [m for m in found["nœud-1"]["maxtext"]["metrics"] if m["kind"] != "min"]
    rec = _record(found)
    fleet = rec["fleet"]
    notes = "\n".join(fleet["not_compared"])
    assert "tflops_per_device: no value on nœud-1, узел-2" in notes
    assert "tokens_per_device: no value on 節点3" in notes
    assert "node4" in fleet["outlier_nodes"]
    json.dumps(fleet, allow_nan=False)  # the fleet section itself is strict JSON
    # values that are not finite (the fleet_compare filter's input) are named
    values = {"m": {"tflops": {"a": float("nan"), "b": 1.0, "c": float("inf"), "d": 1.0}}}
    direct = _fleet.compare(values, list("abcd"), {})
    notes = "\n".join(direct["not_compared"])
    assert "m tflops on a: value NaN is not a finite number" in notes and "m tflops on c: value +inf" in notes
    assert direct["metrics"][0]["nodes"]["a"] == {"value": "NaN", "deviation": None, "status": "NOT_COMPARED"}
    json.dumps(direct, allow_nan=False)


def test_only_one_node_with_a_metric_and_zero_median() -> None:
    values = {"m": {"tflops_a": {"n1": 5.0}, "tflops_z": {"n1": 0.0, "n2": 0.0, "n3": 0.0}}}
    fleet = _fleet.compare(values, ["n1", "n2", "n3"], {})
    notes = "\n".join(fleet["not_compared"])
    assert "m tflops_a: only 1 node(s) with a finite value" in notes
    assert "m tflops_z: the fleet median is 0" in notes
    assert fleet["outliers"] == []


def _with_series(found: dict[str, Any], slow: dict[str, float]) -> dict[str, Any]:
    """The MaxText records with the step series the maxtext role puts in them."""
    for node, per in found.items():
        per["maxtext"]["series"] = _fleet.series_from_steps(parse_steps(maxtext_log(node, slow.get(node, 1.0))))
    return found


def test_write_report_adds_fleet_and_plot_data(tmp_path: Path) -> None:
    found = _with_series(synth_found(3, slow={2: 1.15}, fail_rvs={1: 2}), {"node003": 1.15})
    write_run(tmp_path / "r1", found, slow={"node003": 1.15})
    rec = write_report(str(tmp_path), "r1", CHECKS, {})
    data = json.loads((tmp_path / "r1" / "results.json").read_text())
    assert data["fleet"]["outlier_nodes"] == ["node003"] and data["summary"]["outlier_nodes"] == ["node003"]
    assert data["summary"]["failing_nodes"] == ["node002"]  # existing fields keep their meaning
    series = data["plots"]["series"]["node001"]["maxtext"]
    assert series["step"] == list(range(20)) and len(series["loss"]) == 20 and series["loss"][0] > series["loss"][-1]
    assert data["plots"]["rvs_gpus"]["node002"]["gst_single"]["failed"] == [38479]
    assert rec["files"]["html"].endswith("report.html")
    with pytest.raises(ValueError, match="tolerance"):
        write_report(str(tmp_path), "r1", CHECKS, {}, fleet={"tolerance": "x"})


def test_plot_series_come_from_the_records_never_from_the_logs(tmp_path: Path) -> None:
    found = synth_found(2)
    found["node001"]["maxtext"]["series"] = {"step": [0, 1, 2], "loss": [3.0, 2.0, None], "seconds": [9.0, 1.0, 1.0]}
    write_run(tmp_path / "r1", found, with_series=False)  # a log for both nodes, named in ``log``
    write_report(str(tmp_path), "r1", CHECKS, {})
    data = json.loads((tmp_path / "r1" / "results.json").read_text())
    assert data["plots"]["series"] == {
        "node001": {"maxtext": {"step": [0, 1, 2], "loss": [3.0, 2.0, None], "seconds": [9.0, 1.0, 1.0]}}
    }  # node000 has a log but no series: nothing is drawn for it


def test_load_series_skips_empty_malformed_and_unknown_checks() -> None:
    found: dict[str, Any] = {
        "a": {"maxtext": {"series": {"step": [], "loss": [], "seconds": []}}},
        "b": {"maxtext": {"series": {"step": [0, 1], "loss": [1.0]}}},
        "c": {"maxtext": "not JSON"},
        "d": {"maxtext": {"series": {"step": [5], "loss": [1.5]}}, "other": {"series": {"step": [1]}}},
    }
    record = {"nodes": {n: {"checks": {"maxtext": {}}} for n in found}}
    assert _fleet.load_series(record, found) == {"d": {"maxtext": {"step": [5], "loss": [1.5]}}}


def test_series_compact_thinned_and_non_finite_as_none() -> None:
    steps = [{"step": s, "loss": float("nan") if s == 5 else 1 / (s + 1), "seconds": 0.0512345678} for s in range(500)]
    series = _fleet.series_from_steps(steps)
    assert len(series["step"]) == _fleet.MAX_POINTS and series["step"][0] == 0 and series["step"][-1] == 499
    assert series["seconds"][0] == 0.051235
    series = _fleet.series_from_steps(steps[:10])
    assert series["loss"][5] is None and _fleet.pairs(series, "loss")[5] == [5, None]
    json.dumps(series, allow_nan=False)


def test_thin_keeps_ends() -> None:
    pts = [[i, i] for i in range(1000)]
    out = _fleet.thin(pts, 10)
    assert len(out) == 10 and out[0] == [0, 0] and out[-1] == [999, 999]


def test_filter_fleet_compare() -> None:
    from ansible.errors import AnsibleFilterError

    from ansible_collections.cvs.cluster.plugins.filter.fleet_compare import FilterModule

    f = FilterModule().filters()["fleet_compare"]
    per_node = {
        "n1": {"tflops_per_device": 150.0, "final_loss": 2.0},
        "n2": {"tflops_per_device": 127.0, "final_loss": 2.5},
        "n3": {"tflops_per_device": 149.0, "final_loss": 2.0},
    }
    out = f(per_node, "5%")
    assert out["outlier_nodes"] == ["n2"] and [r["metric"] for r in out["metrics"]] == ["tflops_per_device"]
    out = f(per_node, 0.5, {"final_loss": {"direction": "lower", "tolerance": "10%"}})
    assert [(o["node"], o["metric"]) for o in out["outliers"]] == [("n2", "final_loss")]
    out = f(per_node, facts={"n1": {"kernel": "6.1"}, "n2": {"kernel": "6.1"}, "n3": {"kernel": "5.15"}})
    assert out["facts"][0]["fact"] == "kernel"
    with pytest.raises(AnsibleFilterError, match="mapping of node name"):
        f(["n1"])
    with pytest.raises(AnsibleFilterError, match="tolerance"):
        f(per_node, "much")


def test_console_table() -> None:
    from ansible_collections.cvs.cluster.plugins.plugin_utils._report.console import fleet_table

    rec = _record(synth_found(3, slow={2: 1.15}))
    lines = fleet_table(rec)
    assert lines[0] == "fleet comparison: OUTLIER (tolerance 5%, median of the fleet)"
    row = next(x for x in lines if "tflops_per_device" in x)
    assert "150 TFLOP/s" in row and "node003 -13.0%" in row
    assert all(len(x) <= 100 for x in lines)
    assert fleet_table({"nodes": {}}) == []
