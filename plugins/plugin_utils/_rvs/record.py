# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RVS results in the terms of the check record (_report/check_record.py): one metrics row per test, the failing lines.

Pure logic, no Ansible imports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


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


def check_rows(tests: Sequence[Any]) -> dict[str, list]:
    """``{metrics, lines}`` of a node's RVS tests (the role's per-test results)."""
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
        for f in t.get("failures") or []:
            gpu = f.get("gpu") if isinstance(f, Mapping) else None
            where = f"GPU {gpu}: " if gpu is not None else ""
            lines.append(f"{t.get('name', '?')}: {where}{_line_text(f).strip()}")
    return {"metrics": metrics, "lines": lines}
