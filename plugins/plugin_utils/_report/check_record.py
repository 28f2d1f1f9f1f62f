# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check record: what one check says about one node, ``<results>/<run id>/checks/<node>/<check>.json``.

Written by ``cvs.cluster.check_result`` (rvs, maxtext and every suite of docs/extending.md), read by
``cvs.cluster.report``; this module is the one statement of its schema (docs/results.md describes it):

=============  ========================================================================================
``schema``     ``cvs.cluster/check/v1``
``check``      the check's name (letters, digits, ``_.-``); the file's name
``node``       the node; the file's directory
``status``     ``PASS``, ``FAIL`` or ``ERROR``
``reason``     one line saying why
``metrics``    rows ``{metric, value, unit, threshold, status, kind, message, aliases}``; ``status`` one
               of ``PASS``, ``FAIL``, ``RECORD``; ``value`` a number, a boolean, a list of numbers (the
               steps where the loss was NaN) or null; ``unit`` what the value is in, declared by the check
               that made the row (``s``, ``ms``, ``TFLOP/s``, ``tokens/s``, ``GB/s``, ``%``; ``""`` for a
               count, a loss or yes/no); ``threshold`` the bounds the value was judged against (a target
               the tool printed goes there, not in a row of its own); ``aliases`` other names of the
               metric (upstream CVS's), which thresholds may use: one row per metric
``lines``      the offending log lines, most telling first
``error``      the error pattern that matched: ``{name, pattern, line, ...}`` or null
``started``    ``finished``: UTC ``%Y-%m-%dT%H:%M:%SZ`` or null
``backend``    ``failed_node``, ``log``: a string or null
``facts``      node facts the check learned (``rvs_version``, ``gpu_model``, ...): name to scalar
``scheduler``  the workload manager's view, or null: ``{type, job_id, job_name, steps}``, each step
               ``{id, name, state, exit_code, nodes}`` (the Slurm backend)
``series``     a training's step series for the report's plots, or null: ``{step: [int ...], loss: [...],
               seconds: [...]}``, parallel lists, the values numbers or null (MaxText; at most 60 points)
=============  ========================================================================================

Only ``schema``, ``check``, ``node``, ``status`` and ``reason`` are required. Any other key is the check's own
(RVS keeps its ``tests``, MaxText its ``summary``) and is kept in the file, not read by the report.

Pure logic, no Ansible imports.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.cvs.cluster.plugins.plugin_utils._report.format import parse_time

SCHEMA = "cvs.cluster/check/v1"
STATUSES = ("PASS", "FAIL", "ERROR")
METRIC_STATUSES = ("PASS", "FAIL", "RECORD")
CHECK_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
OPTIONAL_TEXT = ("backend", "failed_node", "log")
TIMES = ("started", "finished")
_METRIC_KEYS = ("metric", "value", "unit", "threshold", "status", "kind", "message")


class CheckRecordError(ValueError):
    """A record that does not match the schema; ``field`` is the key path at fault."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _text(record: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = record.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise CheckRecordError(key, f"must be {'a non-empty' if required else 'a'} string, got {value!r}"[:300])
    return value


def _metric(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, Mapping):
        raise CheckRecordError(where, f"must be a mapping, got {type(row).__name__}")
    if not isinstance(row.get("metric"), str) or not row["metric"]:
        raise CheckRecordError(f"{where}.metric", "must be a non-empty string")
    value = row.get("value")
    if isinstance(value, list):
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            raise CheckRecordError(f"{where}.value", f"a list value must hold numbers only, got {value!r}"[:300])
    elif value is not None and not isinstance(value, (int, float)):
        raise CheckRecordError(
            f"{where}.value", f"must be a number, a boolean, a list of numbers or null, got {value!r}"[:300]
        )
    elif isinstance(value, float) and not math.isfinite(value):
        value = None  # JSON has no spelling for it; the message says what it was
    status = str(row.get("status") or "RECORD").upper()
    if status not in METRIC_STATUSES:
        raise CheckRecordError(f"{where}.status", f"{row.get('status')!r} is not one of {', '.join(METRIC_STATUSES)}")
    for key in ("unit", "kind", "message"):
        if row.get(key) is not None and not isinstance(row[key], str):
            raise CheckRecordError(f"{where}.{key}", f"must be a string or null, got {row[key]!r}"[:300])
    aliases = row.get("aliases")
    if aliases is not None and (not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases)):
        raise CheckRecordError(f"{where}.aliases", f"must be a list of names, got {aliases!r}"[:300])
    out = {k: row.get(k) for k in _METRIC_KEYS}
    out.update(value=value, status=status, message=row.get("message") or "")
    if aliases:
        out["aliases"] = list(aliases)
    return out


def _scheduler(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping) or not isinstance(value.get("job_id"), str):
        raise CheckRecordError("scheduler", "must be null or a mapping with a string 'job_id'")
    steps = value.get("steps", [])
    if not isinstance(steps, list):
        raise CheckRecordError("scheduler.steps", "must be a list")
    for index, step in enumerate(steps):
        if (
            not isinstance(step, Mapping)
            or not isinstance(step.get("id"), str)
            or not isinstance(step.get("state"), str)
        ):
            raise CheckRecordError(f"scheduler.steps[{index}]", "must be a mapping with string 'id' and 'state'")


def _number_or_null(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def series_problem(value: Any) -> str | None:
    """Why ``value`` is not a step series (see ``series`` above); None when it is one."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        return "must be null or a mapping of names to lists"
    steps = value.get("step")
    if not isinstance(steps, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in steps):
        return "step must be a list of integers"
    for key, values in value.items():
        if not isinstance(values, list) or not all(_number_or_null(x) for x in values):
            return f"{key} must be a list of numbers or nulls"
        if len(values) != len(steps):
            return f"{key} has {len(values)} values for {len(steps)} steps"
    return None


def is_series(value: Any) -> bool:
    """Whether ``value`` is a step series the report can plot."""
    return value is not None and series_problem(value) is None


def validate(record: Any, *, check: str | None = None, node: str | None = None) -> dict[str, Any]:
    """The record, checked against the schema (a copy; metric rows completed with their optional keys).

    ``check``/``node``: what the file's name and directory say; the record must agree.
    :raises CheckRecordError: naming the first field at fault.
    """
    if not isinstance(record, Mapping):
        raise CheckRecordError("(record)", f"must be a JSON object, got {type(record).__name__}")
    if record.get("schema") != SCHEMA:
        raise CheckRecordError("schema", f"must be {SCHEMA!r}, got {record.get('schema')!r}")
    out = dict(record)
    for key, expected in (("check", check), ("node", node)):
        value = _text(record, key, required=True)
        if expected is not None and value != expected:
            raise CheckRecordError(key, f"is {value!r} but the file is for {expected!r}")
    if not CHECK_NAME.match(out["check"]):
        raise CheckRecordError("check", f"{out['check']!r} is not a check name (letters, digits, '_', '.', '-')")
    status = record.get("status")
    if status not in STATUSES:
        raise CheckRecordError("status", f"{status!r} is not one of {', '.join(STATUSES)}")
    _text(record, "reason", required=True)
    metrics = record.get("metrics", [])
    if not isinstance(metrics, list):
        raise CheckRecordError("metrics", "must be a list of rows")
    out["metrics"] = [_metric(row, f"metrics[{i}]") for i, row in enumerate(metrics)]
    lines = record.get("lines", [])
    if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
        raise CheckRecordError("lines", "must be a list of strings")
    error = record.get("error")
    if error is not None and not (isinstance(error, Mapping) and isinstance(error.get("line", ""), str)):
        raise CheckRecordError("error", "must be null or a mapping whose 'line' is a string")
    for key in OPTIONAL_TEXT:
        _text(record, key)
    for key in TIMES:
        if _text(record, key) is not None and parse_time(record[key]) is None:
            raise CheckRecordError(key, f"{record[key]!r} is not a UTC time like 2026-01-31T12:00:00Z")
    facts = record.get("facts", {})
    if not isinstance(facts, Mapping) or not all(
        isinstance(k, str) and (v is None or isinstance(v, (str, int, float, bool))) for k, v in facts.items()
    ):
        raise CheckRecordError("facts", "must map fact names to strings, numbers, booleans or null")
    _scheduler(record.get("scheduler"))
    if record.get("series") is not None:
        problem = series_problem(record["series"])
        if problem:
            raise CheckRecordError("series", problem)
    return out
