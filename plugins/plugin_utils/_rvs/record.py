# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RVS results in the terms of the check record (_report/check_record.py): per test a row of its duration and one
per measurement with a unit (GFLOP/s, GB/s, MB/s, s, ms: the mean over the test's results, RVS's own target as the
row's threshold), and the failing lines.

Pure logic, no Ansible imports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._report.format import number

# a measurement's unit from its key in the parsed results (_rvs/parse.py); keys without one are ids, counts or
# properties and get no row
_UNITS = (
    (re.compile(r"(^|_)gflops$"), "GFLOP/s"),
    (re.compile(r"_gbps$"), "GB/s"),
    (re.compile(r"_mbytes_per_sec$"), "MB/s"),
    (re.compile(r"_ms$"), "ms"),
    (re.compile(r"_s$"), "s"),
)
TARGET_PREFIX = "target_"  # RVS's own target for the measurement of the same key (gst's target_gflops)


def _line_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        for key in ("line", "text", "message"):
            if isinstance(item.get(key), str):
                prefix = f"[{item['path']}] " if isinstance(item.get("path"), str) and key == "line" else ""
                return prefix + item[key]
    return json.dumps(item, sort_keys=True, default=str)


def _seconds(value: Any) -> float | None:
    """A test's duration: seconds, or Ansible's ``delta`` (``H:MM:SS.ffffff``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.count(":") == 2:
        try:
            hours, minutes, seconds = value.split(":")
            return int(hours) * 3600 + int(minutes) * 60 + float(seconds)
        except ValueError:
            return None
    return None


def measurement_unit(key: str) -> Optional[str]:
    """The unit of a measurement of the parsed results, None for ids, counts and properties."""
    for pattern, unit in _UNITS:
        if pattern.search(key):
            return unit
    return None


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def measurement_rows(test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per measurement of a test (``metrics`` of the judged test: ``{key: {min, max, mean, count}}``):
    ``<test> <key>``, the mean over the test's results, its unit; a target RVS printed with it (``target_<key>``)
    is the row's threshold, not a row: the row FAILs when a result was below it (the lowest, named in the
    message)."""
    metrics = test.get("metrics")
    if not isinstance(metrics, Mapping):
        return []
    rows = []
    for key, stats in metrics.items():
        key = str(key)
        unit = measurement_unit(key)
        if unit is None or key.startswith(TARGET_PREFIX) or not isinstance(stats, Mapping):
            continue
        mean, low, high = (_number(stats.get(k)) for k in ("mean", "min", "max"))
        count = stats.get("count")
        message = (
            f"mean of {count} result(s), lowest {number(low)} {unit}, highest {number(high)} {unit}"
            if low is not None and high is not None
            else ""
        )
        target_stats = metrics.get(f"{TARGET_PREFIX}{key}")
        target = _number(target_stats.get("min")) if isinstance(target_stats, Mapping) else None
        if target is None or low is None:
            status, threshold = "RECORD", None
        else:
            status, threshold = ("PASS" if low >= target else "FAIL"), {"min": target}
            message += f"; RVS's target {number(target)} {unit}" + (
                "" if status == "PASS" else f", not met by {number(low)}"
            )
        rows.append(
            {
                "metric": f"{test.get('name', '?')} {key}",
                "value": mean,
                "unit": unit,
                "status": status,
                "kind": "rvs",
                "threshold": threshold,
                "message": message,
            }
        )
    return rows


def check_rows(tests: Sequence[Any]) -> dict[str, list]:
    """``{metrics, lines}`` of a node's RVS tests (the role's per-test results): per test its duration row
    (``test <name>``, kind ``test``) and its measurement rows (:func:`measurement_rows`)."""
    metrics: list[dict[str, Any]] = []
    lines: list[str] = []
    for t in tests or []:
        if not isinstance(t, Mapping):
            continue
        status = str(t.get("status") or "ERROR")
        metrics.append(
            {
                "metric": f"test {t.get('name', '?')}",
                "value": _seconds(t.get("duration")),
                "unit": "s",
                "status": "PASS" if status == "PASS" else "FAIL",
                "kind": "test",
                "threshold": None,
                "message": str(t.get("reason") or status),
            }
        )
        metrics.extend(measurement_rows(t))
        for f in t.get("failures") or []:
            gpu = f.get("gpu") if isinstance(f, Mapping) else None
            where = f"GPU {gpu}: " if gpu is not None else ""
            lines.append(f"{t.get('name', '?')}: {where}{_line_text(f).strip()}")
    return {"metrics": metrics, "lines": lines}
