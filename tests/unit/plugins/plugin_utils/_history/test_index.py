"""Unit tests: the run index of a results directory (plugin_utils/_history/index.py)."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._history import index as _index


def _record(run_id: str, generated: str, bw: float = 57.7, status: str = "PASS") -> dict[str, Any]:
    return {
        "run_id": run_id,
        "generated": generated,
        "complete": True,
        "checks": ["rvs"],
        "summary": {"status": status},
        "nodes": {"node1": {"checks": {"rvs": {"status": status}}}},
        "history": {"values": {"node1": {"rvs": {"pebb_single bandwidth_gbps": bw}}}},
    }


def test_key_metrics_keeps_finite_values_of_metrics_with_a_better_side() -> None:
    values = {
        "rvs": {
            "pebb_single bandwidth_gbps": {"n1": 57.7, "n2": float("nan")},
            "pebb_single transfer": {"n1": 3},
            "gst_single gflops": {"n2": 1.0},
        }
    }
    assert _index.key_metrics(values) == {
        "n1": {"rvs": {"pebb_single bandwidth_gbps": 57.7}},
        "n2": {"rvs": {"gst_single gflops": 1.0}},
    }
    assert _index.key_metrics(values, {"gst_single gflops": "ignore"}) == {
        "n1": {"rvs": {"pebb_single bandwidth_gbps": 57.7}}
    }


def test_update_replaces_the_entry_of_the_same_run_and_keeps_time_order(tmp_path: Path) -> None:
    rec = _record("b", "2026-01-02T00:00:00Z")
    _index.update(str(tmp_path), _index.entry(rec, _index.recorded_values(rec)))
    rec_a = _record("a", "2026-01-01T00:00:00Z", 50.0)
    _index.update(str(tmp_path), _index.entry(rec_a, _index.recorded_values(rec_a), "burn"))
    rec2 = _record("b", "2026-01-02T00:00:00Z", 60.0, "FAIL")
    runs = _index.update(str(tmp_path), _index.entry(rec2, _index.recorded_values(rec2)))
    assert [r["run_id"] for r in runs] == ["a", "b"]
    assert runs[0]["burn_in_id"] == "burn"
    assert runs[1]["status"] == "FAIL" and runs[1]["nodes"]["node1"]["metrics"]["rvs"] == {
        "pebb_single bandwidth_gbps": 60.0
    }
    data = json.loads((tmp_path / "index.json").read_text())
    assert data["schema"] == _index.SCHEMA and len(data["runs"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.json"]  # no lock or temporary file left


def _add(args: tuple[str, int]) -> None:
    results_dir, i = args
    rec = _record(f"run{i:02d}", f"2026-01-01T00:00:{i:02d}Z", 50.0 + i)
    _index.update(results_dir, _index.entry(rec, _index.recorded_values(rec)))


def test_concurrent_updates_lose_no_run(tmp_path: Path) -> None:
    with multiprocessing.get_context("fork").Pool(6) as pool:
        pool.map(_add, [(str(tmp_path), i) for i in range(24)])
    assert [r["run_id"] for r in _index.read(str(tmp_path))] == [f"run{i:02d}" for i in range(24)]


@pytest.mark.parametrize(
    "text", ["{broken", '{"schema": "other/v9", "runs": []}', '{"schema": "cvs.cluster/history/v1"}']
)
def test_an_unreadable_index_is_rebuilt_from_the_run_directories(tmp_path: Path, text: str) -> None:
    for rid, when, bw in (("r1", "2026-01-01T00:00:00Z", 50.0), ("r2", "2026-01-02T00:00:00Z", 51.0)):
        (tmp_path / rid).mkdir()
        (tmp_path / rid / "results.json").write_text(json.dumps(_record(rid, when, bw)))
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "index.json").write_text(text)
    runs = _index.read(str(tmp_path))
    assert [r["run_id"] for r in runs] == ["r1", "r2"]
    assert runs[1]["nodes"]["node1"]["metrics"] == {"rvs": {"pebb_single bandwidth_gbps": 51.0}}
    assert _index.read(str(tmp_path / "missing")) == []


def test_recorded_values_fall_back_to_the_fleet_comparison() -> None:
    rec = {
        "nodes": {},
        "fleet": {
            "metrics": [
                {
                    "check": "maxtext",
                    "metric": "tflops_per_device",
                    "nodes": {"n1": {"value": 150.0}, "n2": {"value": "NaN"}},
                }
            ]
        },
    }
    assert _index.recorded_values(rec) == {"n1": {"maxtext": {"tflops_per_device": 150.0}}}


def test_load_run_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(_index.HistoryError, match=r"no run nope in .*nope/results.json does not exist"):
        _index.load_run(str(tmp_path), "nope")
    with pytest.raises(_index.HistoryError, match="invalid run id"):
        _index.load_run(str(tmp_path), "../x")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("[]")
    with pytest.raises(_index.HistoryError, match=r"bad/results.json is not a run record: no 'nodes' mapping"):
        _index.load_run(str(tmp_path), "bad")
