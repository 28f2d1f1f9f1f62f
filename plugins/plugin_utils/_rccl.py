# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rccl-tests output (``all_reduce_perf`` and its siblings) read and judged (filters rccl_parse, rccl_judge).

The table rank 0 prints, one row per message size::

    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
               8             2     float     sum      -1    34.64    0.00    0.00      0    33.91    0.00    0.00      0

out-of-place then in-place ``time`` (us), ``algbw`` and ``busbw`` (GB/s) and ``#wrong`` (``N/A`` without
validation); ``alltoall`` and others print ``redop`` ``none`` and ``root`` ``-1``. Then
``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : 45.1``.

A size with ``#wrong`` above 0 fails, and so does a bus bandwidth below its threshold (``{size: min GB/s}``,
the out-of-place value unless ``in_place`` is asked); a table with no row is an ERROR.

Pure logic, no Ansible imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

_NUM = r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_WRONG = r"(\d+|N/A)"
_ROW = re.compile(
    rf"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+{_WRONG}\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+{_WRONG}\s*$"
)
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*" + _NUM)
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)?")
_SUFFIX = {"K": 1024, "M": 1024**2, "G": 1024**3}


def size_bytes(value: Any) -> int:
    """8, "8", "1K", "128M", "1G" -> bytes (binary suffixes, as rccl-tests reads -b/-e)."""
    text = str(value).strip().upper().removesuffix("B")
    if text and text[-1] in _SUFFIX:
        return int(float(text[:-1]) * _SUFFIX[text[-1]])
    if not re.fullmatch(r"\d+", text):
        raise ValueError(f"{value!r} is not a message size (bytes, or a number with K, M or G)")
    return int(text)


def _wrong(text: str) -> Optional[int]:
    return None if text == "N/A" else int(text)


def parse(text: str) -> dict[str, Any]:
    """``{rows: [{size, count, type, redop, root, oop: {time_us, algbw, busbw, wrong}, ip: {...}}], avg_busbw,
    out_of_bounds}``."""
    rows: list[dict[str, Any]] = []
    avg: Optional[float] = None
    oob: Optional[int] = None
    for line in str(text or "").splitlines():
        m = _ROW.match(line)
        if m:
            g = m.groups()
            rows.append(
                {
                    "size": int(g[0]),
                    "count": int(g[1]),
                    "type": g[2],
                    "redop": g[3],
                    "root": int(g[4]),
                    "oop": {"time_us": float(g[5]), "algbw": float(g[6]), "busbw": float(g[7]), "wrong": _wrong(g[8])},
                    "ip": {
                        "time_us": float(g[9]),
                        "algbw": float(g[10]),
                        "busbw": float(g[11]),
                        "wrong": _wrong(g[12]),
                    },
                }
            )
            continue
        m = _AVG.search(line)
        if m:
            avg = float(m.group(1))
            continue
        m = _OOB.search(line)
        if m:
            oob = int(m.group(1))
    return {"rows": rows, "avg_busbw": avg, "out_of_bounds": oob}


def thresholds(value: Any) -> dict[int, float]:
    """``{size: min busbw GB/s}`` with sizes as bytes or "1M"; a bad one names itself."""
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"thresholds must map message size to the minimum bus bandwidth (GB/s), got {value!r}")
    out: dict[int, float] = {}
    for size, floor in value.items():
        try:
            out[size_bytes(size)] = float(floor)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"threshold {size}: {floor!r}: {exc}") from exc
    return out


def _gbps(value: float) -> str:
    return f"{value:.2f} GB/s"


def judge(text: str, test: str, limits: Any = None, in_place: bool = False) -> dict[str, Any]:
    """``{status, reason, rows, avg_busbw, metrics, lines}`` for one test's output."""
    table = parse(text)
    floors = thresholds(limits)
    side = "ip" if in_place else "oop"
    rows = table["rows"]
    metrics: list[dict[str, Any]] = []
    problems: list[str] = []
    if not rows:
        return {
            "status": "ERROR",
            "reason": f"{test}: no result table in the output",
            "rows": [],
            "avg_busbw": table["avg_busbw"],
            "metrics": [],
            "lines": [],
        }
    by_size = {r["size"]: r for r in rows}
    for size, floor in sorted(floors.items()):
        row = by_size.get(size)
        if row is None:
            problems.append(f"size {size} B has a threshold but was not measured")
            metrics.append(_metric(f"{test} busbw {size}B", None, floor, False))
            continue
        value = row[side]["busbw"]
        ok = value >= floor
        metrics.append(_metric(f"{test} busbw {size}B", value, floor, ok))
        if not ok:
            problems.append(f"bus bandwidth {_gbps(value)} at {size} B is below {_gbps(floor)}")
    for row in rows:
        for where, label in (("oop", "out-of-place"), ("ip", "in-place")):
            wrong = row[where]["wrong"]
            if wrong:
                problems.append(f"{wrong} wrong value(s) at {row['size']} B ({label})")
                break
    if table["out_of_bounds"]:
        problems.append(f"{table['out_of_bounds']} out-of-bounds value(s)")
    if table["avg_busbw"] is not None:
        metrics.append(
            {
                "metric": f"{test} avg busbw",
                "value": table["avg_busbw"],
                "unit": "GB/s",
                "threshold": None,
                "status": "RECORD",
                "kind": "rccl",
                "message": None,
            }
        )
    return {
        "status": "FAIL" if problems else "PASS",
        "reason": f"{test}: " + "; ".join(problems)
        if problems
        else (f"{test}: {len(rows)} sizes, largest {rows[-1]['size']} B at {_gbps(rows[-1][side]['busbw'])}"),
        "rows": rows,
        "avg_busbw": table["avg_busbw"],
        "metrics": metrics,
        "lines": list(problems),
    }


def _metric(name: str, value: Optional[float], floor: float, ok: bool) -> dict[str, Any]:
    return {
        "metric": name,
        "value": value,
        "unit": "GB/s",
        "threshold": {"min": floor},
        "status": "PASS" if ok else "FAIL",
        "kind": "rccl",
        "message": None,
    }


def summary_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The table in a compact form for the check record: size, out-of-place and in-place busbw, #wrong."""
    return [
        {
            "size": r["size"],
            "busbw": r["oop"]["busbw"],
            "busbw_in_place": r["ip"]["busbw"],
            "wrong": r["oop"]["wrong"],
            "time_us": r["oop"]["time_us"],
        }
        for r in rows
    ]


# ---- the suite: its tests, each test's verdict from its mpirun job, the node's record ------------------------

_TEST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class RcclSettingsError(ValueError):
    """A test of rccl_tests that cannot run (the message names it)."""


def check_tests(tests: Any) -> list[dict[str, Any]]:
    """``rccl_tests`` checked: each a mapping with a binary ``name``, ``args`` (as text), ``thresholds`` (checked
    here, judged later) and an optional ``timeout``."""
    if isinstance(tests, (str, bytes, Mapping)) or not isinstance(tests, Sequence):
        raise RcclSettingsError(f"rccl_tests must be a list of tests, got {tests!r}")
    out = []
    for test in tests:
        name = test.get("name", "") if isinstance(test, Mapping) else ""
        if not isinstance(name, str) or not _TEST_NAME.fullmatch(name):
            shown = name if isinstance(test, Mapping) and "name" in test else "?"
            raise RcclSettingsError(
                f"rccl_tests: '{shown}' must name an rccl-tests binary (letters, digits, '.', '_', '-')"
            )
        args = test.get("args") or []
        if isinstance(args, (str, bytes, Mapping)) or not isinstance(args, Sequence):
            raise RcclSettingsError(f"rccl_tests: {name}: args must be a list, got {args!r}")
        try:
            thresholds(test.get("thresholds"))
        except ValueError as exc:
            raise RcclSettingsError(f"rccl_tests: {name}: {exc}") from exc
        entry: dict[str, Any] = {
            "name": name,
            "args": [str(a) for a in args],
            "thresholds": test.get("thresholds") or {},
        }
        if test.get("timeout") not in (None, ""):
            entry["timeout"] = test["timeout"]
        out.append(entry)
    return out


def judge_test(test: Mapping[str, Any], job: Mapping[str, Any], rank0: str, in_place: bool) -> dict[str, Any]:
    """One test's entry of the record: rank 0's table judged when its mpirun job passed, else the job's reason."""
    name = str(test["name"])
    table = judge(rank0, name, test.get("thresholds"), in_place)
    passed = job.get("status") == "PASS"
    return {
        "name": name,
        "status": table["status"] if passed else "FAIL",
        "reason": table["reason"] if passed else f"{name}: {job.get('reason')}",
        "metrics": table["metrics"],
        "lines": table["lines"] if passed else ([job["error_line"]] if job.get("error_line") else []),
        "table": summary_rows(table["rows"]),
        "avg_busbw": table["avg_busbw"],
        "failed_node": job.get("failed_node"),
        "mpi": dict(job),
    }


def suite_record(results: Sequence[Mapping[str, Any]], error: Optional[str], started: Any) -> dict[str, Any]:
    """The node's rccl check record (the same on every node: a collective passes or fails as a whole).

    ``error`` is why the suite stopped (a test that could not start, a failed task), None when every test ran."""
    bad = [r for r in results if r["status"] != "PASS"]
    if error is not None:
        status, reason = "ERROR", error
    else:
        status, reason = (
            ("FAIL", "; ".join(r["reason"] for r in bad)) if bad else ("PASS", "; ".join(r["reason"] for r in results))
        )
    return {
        "status": status,
        "reason": reason,
        "metrics": [m for r in results for m in r["metrics"]],
        "lines": [line for r in results for line in r["lines"]],
        "failed_node": next((r["failed_node"] for r in results if r.get("failed_node")), None),
        "tests": [dict(r) for r in results],
        "started": started,
    }
