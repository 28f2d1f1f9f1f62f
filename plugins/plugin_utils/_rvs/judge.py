# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One verdict per RVS test from the records of _rvs/parse.py (and the exit status of rvs).

Pure Python (>= 3.9), no Ansible import; runs on the controller (filter rvs_judge).
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.parse import parse_rvs_output

__all__ = ["judge_rvs", "summarize_rvs"]

# Metric keys that identify things rather than measure them (not aggregated).
_ID_METRICS = frozenset(
    ("test", "io_link", "gpu_node", "cpu_node", "peer_gpu", "peer_gpu_node", "transfer", "transfers", "gpus")
)


def _aggregate(records: Iterable[dict]) -> dict:
    values: dict[str, list[float]] = {}
    for record in records:
        for key, value in (record.get("metrics") or {}).items():
            if key in _ID_METRICS or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            values.setdefault(key, []).append(float(value))
    return {
        key: {
            "min": min(vals),
            "max": max(vals),
            "mean": round(sum(vals) / len(vals), 6),
            "count": len(vals),
        }
        for key, vals in sorted(values.items())
    }


def summarize_rvs(records: Sequence[dict], test_name: str = "") -> dict:
    """One verdict for a test from its records.

    Returns ``{test, passed, status, reason, failures: [{action, module, gpu,
    line, reason}], gpus, metrics: {name: {min, max, mean, count}}, actions:
    {name: {module, status}}, counts: {passed, failed, info}, parsed}``.
    status is FAIL when any record failed, ERROR when nothing was recognised
    ("unparseable output"), PASS otherwise.
    """
    records = list(records or [])
    failures = [
        {
            "action": r.get("action"),
            "module": r.get("module"),
            "gpu": r.get("gpu"),
            "line": r.get("line", ""),
            "reason": r.get("reason") or "failed",
        }
        for r in records
        if r.get("passed") is False
    ]
    counts = {
        "passed": sum(1 for r in records if r.get("passed") is True),
        "failed": len(failures),
        "info": sum(1 for r in records if r.get("passed") is None),
    }
    gpus = sorted({r["gpu"] for r in records if isinstance(r.get("gpu"), int) and not isinstance(r.get("gpu"), bool)})
    actions: dict[str, dict] = {}
    for r in records:
        name = r.get("action")
        if not name:
            continue
        entry = actions.setdefault(name, {"module": r.get("module"), "status": "INFO"})
        if entry["module"] is None and r.get("module"):
            entry["module"] = r.get("module")
        if r.get("passed") is False:
            entry["status"] = "FAIL"
        elif r.get("passed") is True and entry["status"] == "INFO":
            entry["status"] = "PASS"

    if not records:
        status, reason = "ERROR", "unparseable output: no RVS result line found"
    elif failures:
        first = failures[0]
        status = "FAIL"
        reason = f"{len(failures)} failing result(s); first: {first['reason']}"
    else:
        status = "PASS"
        reason = f"{len(records)} result(s), {counts['passed']} passed, none failed"
    return {
        "test": test_name or "",
        "passed": status == "PASS",
        "status": status,
        "reason": reason,
        "failures": failures,
        "gpus": gpus,
        "metrics": _aggregate(records),
        "actions": actions,
        "counts": counts,
        "parsed": len(records),
    }


def judge_rvs(
    text: Any,
    rc: Optional[int] = 0,
    test_name: str = "",
    extra_fail_patterns: Any = None,
) -> dict:
    """Verdict for one RVS run from its output and exit status.

    The output decides: any failing record or fail-pattern match is FAIL, no
    recognisable result is ERROR. A non-zero rc never passes: with no results
    it is ERROR naming rc, with only passing results it is ERROR too (RVS
    stopped abnormally), with failures it stays FAIL. rc 0 decides nothing.
    The summary gets an ``rc`` key.
    """
    if rc is not None:
        try:
            if isinstance(rc, bool):
                raise TypeError("a bool is no exit status")
            rc = int(rc)
        except (TypeError, ValueError):
            raise ValueError(f"rc must be an integer, got {rc!r}") from None
    summary = summarize_rvs(parse_rvs_output(text, extra_fail_patterns), test_name)
    summary["rc"] = rc
    if rc not in (None, 0):
        if summary["parsed"] == 0:
            summary["status"] = "ERROR"
            summary["reason"] = f"rvs exited with rc {rc} and printed no recognisable result (unparseable output)"
        elif summary["status"] == "PASS":
            summary["status"] = "ERROR"
            summary["reason"] = f"rvs exited with rc {rc} although no failing result was parsed"
        else:
            summary["reason"] = f"{summary['reason']}; rvs exited with rc {rc}"
        summary["passed"] = False
    return summary
