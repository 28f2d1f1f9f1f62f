# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's RVS verdict from its whole run: every planned test judged from its output (_rvs/judge.py), the node's
status and the reason naming each test that did not pass, and the Slurm steps the tests ran as.

Pure logic, no Ansible import; runs on the controller (filter rvs_verdict).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.judge import judge_rvs
from ansible_collections.cvs.cluster.plugins.plugin_utils._slurm import split_step_marker, step_state

__all__ = ["TIMEOUT_RCS", "judge_run", "judge_test", "node_verdict", "run_problem"]

#: Exit statuses of ``timeout``: 124 the test overran and died of SIGTERM, 137 it needed the SIGKILL.
TIMEOUT_RCS = (124, 137)
#: Failing lines kept per test in the record.
MAX_FAILURES = 50
#: Failing lines per test in the node's reason.
REASON_LINES = 3


def judge_test(planned: Mapping[str, Any], ran: Optional[Mapping[str, Any]], why_not: str) -> dict[str, Any]:
    """One test's entry of the record from what the node ran (``ran``: ``{rc, stdout, stderr, delta, msg}`` of
    module rvs_run, None when the run left nothing); ``why_not`` is the reason a test without an exit status has
    when ``ran`` does not say."""
    ran = ran or {}
    rc = ran.get("rc")
    timed_out = rc is not None and int(rc) in TIMEOUT_RCS
    split = split_step_marker(str(ran.get("stderr") or ""))
    text = "\n".join(part for part in (str(ran.get("stdout") or ""), split["stderr"]) if part)
    judged = judge_rvs(text, 0 if rc is None or timed_out else rc, str(planned["name"]), planned.get("patterns"))
    cut = int(ran.get("stdout_cut") or 0) + int(ran.get("stderr_cut") or 0)
    if timed_out:
        status, reason = "FAIL", f"timed out after {planned['timeout']} s; rvs was killed"
    elif rc is None:
        status, reason = "ERROR", f"rvs did not finish: {ran.get('msg') or why_not}"
    elif cut and judged["status"] == "PASS":
        # a failing line may have been among the bytes not kept: what was kept passing does not make the test pass
        status = "ERROR"
        reason = (
            f"output too large to judge whole: {cut} bytes of it were cut (the node keeps the head and tail of each "
            "output and of each long line); what was kept passed"
        )
    else:
        status, reason = judged["status"], judged["reason"]
    return {
        "name": planned["name"],
        "mode": planned["mode"],
        "config_file": planned["config_file"],
        "command": planned["command"],
        "timeout": planned["timeout"],
        "rc": rc,
        "timed_out": timed_out,
        "status": status,
        "reason": reason,
        "failures": judged["failures"][:MAX_FAILURES],
        "gpus": judged["gpus"],
        "metrics": judged["metrics"],
        "duration": ran.get("delta"),
        "output_cut": cut,
        "step": split["step"],
    }


def _reason_line(test: Mapping[str, Any]) -> str:
    failures = list(test.get("failures") or [])
    ordered = [f for f in failures if f.get("gpu") is not None] + [f for f in failures if f.get("gpu") is None]
    lines = [
        (f"GPU {f['gpu']}: " if f.get("gpu") is not None else "") + str(f.get("line") or "").strip()
        for f in ordered[:REASON_LINES]
    ]
    line = f"rvs test {test['name']} {test['status']} ({test['reason']})"
    return line + (f" - {' | '.join(lines)}" if lines else "")


def node_verdict(tests: Sequence[Mapping[str, Any]], node: str) -> tuple[str, str]:
    """``(status, reason)`` of a node: FAIL when a test failed, else ERROR when one errored, else PASS; the reason
    names the node, each test that did not pass and its first failing lines (GPU lines first)."""
    statuses = [t["status"] for t in tests]
    status = "FAIL" if "FAIL" in statuses else "ERROR" if "ERROR" in statuses else "PASS"
    bad = [_reason_line(t) for t in tests if t["status"] != "PASS"]
    reason = f"{node}: {'; '.join(bad)}" if bad else f"all {len(tests)} test(s) passed"
    return status, reason


def run_problem(run: Mapping[str, Any], node: str) -> str:
    """Why the run (the last answer of the job's poll, ``async_status``) left a test without an exit status."""
    msg = str(run.get("msg") or "").strip()
    if run.get("unreachable"):
        return f"{node} stopped answering while the tests ran ({msg or 'unreachable'}); its tests were not judged"
    if run.get("started") and not run.get("finished") and not run.get("failed"):
        return "the tests were still running when the role stopped waiting (their timeouts and a margin)"
    return msg or "no exit status"


def judge_run(
    run: Mapping[str, Any], plan: Mapping[str, Any], node: str, slurm_node: Optional[str] = None
) -> dict[str, Any]:
    """The node's verdict from its run (the registered result of the poll of module rvs_run's job: async_status, also
    when the node was unreachable or the job still running) and its plan (_rvs/plan.py).

    Returns ``{status, reason, tests, steps}``; the run's results are in the plan's order. A test the run has no
    result for (the run failed, timed out or was skipped) is ERROR with the run's message; ``steps`` are the Slurm
    steps (``{id, name, state, exit_code, nodes}``) of the tests that ran as one.
    """
    results = [r if isinstance(r, Mapping) else None for r in run.get("results") or []]
    why_not = run_problem(run, node)
    tests = [
        judge_test(planned, results[index] if index < len(results) else None, why_not)
        for index, planned in enumerate(plan.get("tests") or [])
    ]
    status, reason = node_verdict(tests, node)
    steps = [
        {
            "id": t["step"],
            "name": f"rvs {t['name']}",
            "state": step_state(t["rc"], "", False),
            "exit_code": t["rc"],
            "nodes": [slurm_node],
        }
        for t in tests
        if t["step"]
    ]
    return {"status": status, "reason": reason, "tests": tests, "steps": steps}
