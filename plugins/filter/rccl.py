# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters cvs.cluster.rccl_judge, rccl_tests and rccl_record (docs: their .yml files)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._rccl import (
    RcclSettingsError,
    check_tests,
    judge,
    judge_test,
    suite_record,
    summary_rows,
)


def rccl_judge(text: Any, test: str = "all_reduce_perf", thresholds: Any = None, in_place: bool = False) -> dict:
    if isinstance(text, list):
        text = "\n".join(str(x) for x in text)
    if not isinstance(text, str):
        raise AnsibleFilterError(f"rccl_judge: expected the test's output as text, got {type(text).__name__}")
    try:
        out = judge(text, str(test), thresholds, bool(in_place))
    except ValueError as exc:
        raise AnsibleFilterError(f"rccl_judge: {test}: {exc}") from exc
    out["table"] = summary_rows(out.pop("rows"))
    return out


def rccl_tests(tests: Any) -> list:
    try:
        return check_tests(tests)
    except RcclSettingsError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _rank0(job: Mapping[str, Any]) -> str:
    try:
        with open(os.path.join(str(job.get("logs") or ""), "rank.0.log"), encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def rccl_record(tests: Any, jobs: Any, in_place: Any = False, error: Any = None, started: Any = None) -> dict:
    """The node's record: test i judged from jobs[i] (its mpirun job, cvs.cluster.mpi's mpi_job) and rank 0's
    output in the job's controller log folder; ``error`` set (why the suite stopped) makes it an ERROR."""
    if not isinstance(jobs, Sequence) or isinstance(jobs, str):
        raise AnsibleFilterError("rccl_record: expected the tests' mpi jobs (a list)")
    if not isinstance(tests, Sequence) or isinstance(tests, str):
        tests = []  # rccl_tests that are not a list ran nothing: the error says why
    results = [judge_test(t, j, _rank0(j), bool(in_place)) for t, j in zip(tests, jobs)]
    return suite_record(results, None if error in (None, "") else str(error), started)


class FilterModule:
    """rccl-tests filters."""

    def filters(self) -> dict:
        return {"rccl_judge": rccl_judge, "rccl_tests": rccl_tests, "rccl_record": rccl_record}
