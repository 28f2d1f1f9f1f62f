"""The check record schema (plugin_utils/_report/check_record.py) and the report reading it (_report/record.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA, CheckRecordError, validate
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.record import write_report


def record(**extra: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "check": "mx", "node": "n1", "status": "PASS", "reason": "fine", **extra}


def test_a_minimal_record_is_valid_and_metric_rows_get_their_optional_keys() -> None:
    out = validate(record(metrics=[{"metric": "tflops", "value": 12.5, "status": "pass"}], own={"kept": True}))
    assert validate(record(metrics=[{"metric": "nan_steps", "value": [3, 7]}]))["metrics"][0]["value"] == [3, 7]
    assert out["metrics"] == [
        {"metric": "tflops", "value": 12.5, "unit": None, "threshold": None, "status": "PASS", "kind": None,
         "message": ""}
    ]  # fmt: skip
    assert out["own"] == {"kept": True}  # a check's own keys are kept
    step = {"id": "7.0", "name": "cvs-x", "state": "COMPLETED", "exit_code": 0, "nodes": ["n1"]}
    assert validate(record(scheduler={"type": "slurm", "job_id": "7", "steps": [step]}))["scheduler"]["steps"] == [step]
    series = {"step": [0, 1], "loss": [2.5, None], "seconds": [1, 0.5]}
    assert validate(record(series=series))["series"] == series and validate(record(series=None))["series"] is None


@pytest.mark.parametrize(
    ("changes", "field", "problem"),
    [
        ({"schema": "cvs.cluster/check/v0"}, "schema", "must be 'cvs.cluster/check/v1'"),
        ({"status": "OK"}, "status", "'OK' is not one of PASS, FAIL, ERROR"),
        ({"reason": ""}, "reason", "must be a non-empty string"),
        ({"check": "a/b"}, "check", "is not a check name"),
        ({"metrics": {"a": 1}}, "metrics", "must be a list of rows"),
        ({"metrics": [{"metric": "x", "value": "fast"}]}, "metrics[0].value", "must be a number"),
        ({"metrics": [{"metric": "x", "value": [1, "two"]}]}, "metrics[0].value", "must hold numbers only"),
        ({"metrics": [{"metric": "x"}, {"metric": "y", "status": "GOOD"}]}, "metrics[1].status",
         "'GOOD' is not one of PASS, FAIL, RECORD"),
        ({"metrics": [{"value": 1}]}, "metrics[0].metric", "must be a non-empty string"),
        ({"lines": ["a", 3]}, "lines", "must be a list of strings"),
        ({"error": "boom"}, "error", "must be null or a mapping"),
        ({"started": "yesterday"}, "started", "is not a UTC time"),
        ({"backend": 3}, "backend", "must be a string"),
        ({"facts": {"gpus": [1, 2]}}, "facts", "must map fact names"),
        ({"scheduler": {"job_id": 7}}, "scheduler", "a string 'job_id'"),
        ({"scheduler": {"job_id": "7", "steps": {}}}, "scheduler.steps", "must be a list"),
        ({"scheduler": {"job_id": "7", "steps": [{"id": "7.0"}]}}, "scheduler.steps[0]", "string 'id' and 'state'"),
        ({"series": [1, 2]}, "series", "must be null or a mapping of names to lists"),
        ({"series": {"loss": [1.0]}}, "series", "step must be a list of integers"),
        ({"series": {"step": [0, True]}}, "series", "step must be a list of integers"),
        ({"series": {"step": [0, 1], "loss": [1.0, "x"]}}, "series", "loss must be a list of numbers or nulls"),
        ({"series": {"step": [0, 1], "loss": [1.0]}}, "series", "loss has 1 values for 2 steps"),
    ],
)  # fmt: skip
def test_each_field_that_does_not_match_is_named(changes: dict, field: str, problem: str) -> None:
    with pytest.raises(CheckRecordError) as caught:
        validate(record(**changes))
    assert caught.value.field == field and problem in str(caught.value), str(caught.value)


def test_the_record_must_be_for_the_file_it_is_in() -> None:
    with pytest.raises(CheckRecordError, match="node: is 'n1' but the file is for 'n2'"):
        validate(record(), check="mx", node="n2")


def test_the_report_names_the_file_and_field_of_a_bad_record_and_still_writes_the_other_nodes(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run1"
    for node, data in (("n1", record()), ("n2", record(node="n2", metrics=[{"metric": "x", "status": "GOOD"}]))):
        (run / "checks" / node).mkdir(parents=True)
        (run / "checks" / node / "mx.json").write_text(json.dumps(data))
    nodes = {n: {"host": n} for n in ("n1", "n2")}
    written = write_report(str(tmp_path), "run1", ["mx"], nodes)
    results = json.loads((run / "results.json").read_text())
    assert results["nodes"]["n1"]["checks"]["mx"]["status"] == "PASS"
    bad = results["nodes"]["n2"]["checks"]["mx"]
    assert bad["status"] == "ERROR"
    assert bad["reason"] == (
        f"invalid check record {run / 'checks' / 'n2' / 'mx.json'}: "
        "metrics[0].status: 'GOOD' is not one of PASS, FAIL, RECORD"
    )
    assert written["summary"]["status"] == "FAIL" and (run / "junit.xml").is_file() and (run / "report.html").is_file()
