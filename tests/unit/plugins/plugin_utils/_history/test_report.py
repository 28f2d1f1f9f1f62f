"""Unit tests: trends and regressions against a node's own history (plugin_utils/_history/trend.py, report.py), as
the report writes them (write_report), renders them (_report/history_view.py) and publishes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._history import report as _history
from ansible_collections.cvs.cluster.plugins.plugin_utils._history import trend as _trend
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.history_view import console_lines, section
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.record import write_report

NODES = {n: {"host": n, "facts": {}} for n in ("node1", "node2", "node3")}
METRIC = "pebb_single bandwidth_gbps"


def _rvs(node: str, bw: float, status: str = "PASS", seconds: float = 2.0) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "check": "rvs",
        "node": node,
        "status": status,
        "reason": f"{node}: rvs {status}",
        "metrics": [
            {"metric": "test pebb_single", "value": 1.0, "unit": "s", "status": status, "kind": "test"},
            {"metric": METRIC, "value": bw, "unit": "GB/s", "status": "RECORD", "kind": "rvs"},
            {"metric": "pebb_single transfer", "value": 8, "status": "RECORD", "kind": "rvs"},
            {"metric": "tst step_time", "value": seconds, "unit": "s", "status": "RECORD", "kind": "rvs"},
        ],
    }


def _run(results: Path, run_id: str, bws: dict[str, float], status: dict[str, str] | None = None, **kw: Any) -> dict:
    for node, bw in bws.items():
        d = results / run_id / "checks" / node
        d.mkdir(parents=True, exist_ok=True)
        (d / "rvs.json").write_text(json.dumps(_rvs(node, bw, (status or {}).get(node, "PASS"))))
    return write_report(str(results), run_id, ["rvs"], NODES, **kw)


def _three_runs(results: Path, **kw: Any) -> dict:
    _run(results, "20260101-000001-aaaaaa", {"node1": 57.7, "node2": 57.5, "node3": 57.6}, **kw)
    _run(results, "20260101-000002-bbbbbb", {"node1": 57.6, "node2": 57.7, "node3": 57.8}, **kw)
    return _run(results, "20260101-000003-cccccc", {"node1": 57.7, "node2": 57.6, "node3": 57.7 * 0.9}, **kw)


def test_a_node_is_flagged_against_its_own_history(tmp_path: Path) -> None:
    rec = _three_runs(tmp_path)
    hist = rec["history"]
    assert hist["status"] == "REGRESSED" and hist["regressed_nodes"] == ["node3"]
    (reg,) = hist["regressions"]
    assert (reg["node"], reg["check"], reg["metric"]) == ("node3", "rvs", METRIC)
    assert reg["baseline"] == pytest.approx(57.7) and reg["deviation"] == pytest.approx(-0.1, abs=0.002)
    assert reg["reason"].startswith("node3 rvs pebb_single bandwidth_gbps 51.93 GB/s is 10.0% below its own median")
    assert "of 2 earlier run(s) (tolerance 5%)" in reg["reason"]
    # the trend: the earlier values then this run's, per node and key metric (not the transfer count)
    rows = {r["metric"]: r for r in hist["nodes"]["node3"]}
    assert sorted(rows) == [METRIC, "tst step_time"]
    assert [p["value"] for p in rows[METRIC]["points"]] == [57.6, 57.8] and rows["tst step_time"]["status"] == "OK"
    assert rec["nodes"]["node3"]["checks"]["rvs"]["history"]["status"] == "REGRESSED"
    assert rec["nodes"]["node3"]["checks"]["rvs"]["status"] == "PASS"  # reported, not a failure
    # the fleet comparison says the same here; history alone catches a fleet-wide slow-down
    saved = json.loads((tmp_path / "20260101-000003-cccccc" / "results.json").read_text())
    assert saved["history"]["values"]["node3"]["rvs"][METRIC] == pytest.approx(51.93)
    assert saved["summary"]["regressed_nodes"] == ["node3"]
    page = (tmp_path / "20260101-000003-cccccc" / "report.html").read_text()
    assert '<section id="history">' in page and 'data-node="node3" data-status="REGRESSED"' in page
    assert '<svg class="spark"' in page


def test_every_node_slower_is_caught_by_history_not_by_the_fleet(tmp_path: Path) -> None:
    _run(tmp_path, "r1", {"node1": 57.7, "node2": 57.7, "node3": 57.7})
    _run(tmp_path, "r2", {"node1": 57.7, "node2": 57.7, "node3": 57.7})
    rec = _run(tmp_path, "r3", {"node1": 50.0, "node2": 50.0, "node3": 50.0})
    assert rec["fleet"]["outlier_nodes"] == []
    assert rec["history"]["regressed_nodes"] == ["node1", "node2", "node3"]


def test_first_runs_and_failed_references_are_not_judged(tmp_path: Path) -> None:
    rec = _run(tmp_path, "r1", {"node1": 57.7})
    assert rec["history"]["status"] == "NOT_COMPARED" and rec["history"]["notes"][0].startswith("no earlier run in")
    assert console_lines(rec) == []
    # a failing earlier run is no reference: node1 has only one passing run before r3
    _run(tmp_path, "r2", {"node1": 20.0}, {"node1": "FAIL"})
    rec = _run(tmp_path, "r3", {"node1": 51.0})
    assert rec["history"]["regressions"] == []
    assert any(
        "node1 rvs pebb_single bandwidth_gbps: 1 earlier passing run(s) with a value, 2 needed" in n
        for n in rec["history"]["notes"]
    )
    rec = _run(tmp_path, "r4", {"node1": 51.0}, history={"min_runs": 1})
    assert rec["history"]["regressed_nodes"] == ["node1"]


def test_the_report_of_a_run_rewritten_later_does_not_compare_with_itself(tmp_path: Path) -> None:
    _three_runs(tmp_path)
    again = write_report(str(tmp_path), "20260101-000003-cccccc", ["rvs"], NODES)
    assert again["history"]["regressed_nodes"] == ["node3"]
    assert "20260101-000003-cccccc" not in again["history"]["earlier_runs"]
    index = json.loads((tmp_path / "index.json").read_text())
    assert [r["run_id"] for r in index["runs"]].count("20260101-000003-cccccc") == 1


def test_options_runs_tolerance_and_time_metrics(tmp_path: Path) -> None:
    rec = _three_runs(tmp_path, history={"tolerance": "15%"})
    assert rec["history"]["regressions"] == [] and rec["history"]["status"] == "OK"
    rec = write_report(str(tmp_path), "x", ["rvs"], NODES, history={"runs": 0})
    assert rec["history"]["nodes"] == {} and rec["history"]["status"] == "NOT_COMPARED"
    assert write_report(str(tmp_path), "y", ["rvs"], NODES, history={"enabled": False}).get("history") is None
    # lower is better for time metrics
    trends, _notes = _trend.node_trends(
        {"n": {"tst": {"step_time": 1.2}}},
        [
            {"run_id": f"r{i}", "nodes": {"n": {"checks": {"tst": "PASS"}, "metrics": {"tst": {"step_time": 1.0}}}}}
            for i in range(3)
        ],
        _trend.parse_options({}),
    )
    assert trends["n"][0]["status"] == "REGRESSED" and "above its own median" in _trend.reason("n", trends["n"][0])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"runs": -1}, "cvs_history_runs: -1 must be a whole number >= 0"),
        ({"runs": "many"}, "cvs_history_runs: 'many' must be a whole number"),
        ({"min_runs": 0}, "cvs_history_min_runs: 0 must be a whole number >= 1"),
        ({"tolerance": "lots"}, "cvs_history_tolerance / metrics: tolerance: 'lots' is not a number or a percentage"),
        ({"window": 3}, "unknown history option(s) window"),
        ({"enabled": "yes"}, "enabled: 'yes' must be true or false"),
    ],
)
def test_bad_options_name_the_variable(options: dict[str, Any], message: str) -> None:
    with pytest.raises(_trend.HistoryOptionsError) as info:
        _trend.parse_options(options)
    assert message in str(info.value)


def test_options_from_the_play_variables() -> None:
    opts = _history.options_from_vars(
        {"cvs_history": {"runs": 3, "tolerance": "2%"}, "cvs_history_runs": 7, "cvs_burn_in_id": "b1"}
    )
    assert opts == {"runs": 7, "tolerance": "2%", "burn_in_id": "b1"}
    with pytest.raises(_trend.HistoryOptionsError, match="cvs_history: 'x' must be a mapping"):
        _history.options_from_vars({"cvs_history": "x"})


def test_the_published_summary_and_console_lines(tmp_path: Path) -> None:
    rec = _three_runs(tmp_path)
    summary = _history.summary(rec)
    assert summary["history_status"] == "REGRESSED" and summary["regressed_nodes"] == ["node3"]
    assert summary["regressions"][0]["metric"] == METRIC
    assert summary["trends"]["node3"][f"rvs {METRIC}"] == [57.6, 57.8, pytest.approx(51.93)]
    lines = console_lines(rec)
    assert lines[0].startswith("history: REGRESSED") and "node3 rvs pebb_single bandwidth_gbps" in lines[1]
    assert _history.summary({"nodes": {}}) == {} and section({"nodes": {}}) == ""


def test_an_index_that_cannot_be_written_is_a_note_not_a_failure(tmp_path: Path) -> None:
    from unittest.mock import patch

    target = "ansible_collections.cvs.cluster.plugins.plugin_utils._history.index.atomic_write"
    with patch(target, side_effect=OSError(28, "No space left on device")):
        rec = _run(tmp_path, "r1", {"node1": 57.7})
    (note,) = [n for n in rec["history"]["notes"] if "the run index" in n]
    assert "index.json could not be updated" in note and "No space left on device" in note
    assert (tmp_path / "r1" / "results.json").is_file()
