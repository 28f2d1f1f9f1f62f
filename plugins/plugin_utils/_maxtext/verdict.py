# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a MaxText run ended on each node, and its check record (pure logic; the finish phase of the role).

Three steps, because the blame needs every node's view first:

1. :func:`node_view` (per node): what the role gathered on this node - the watch's result, the stop's, the log
   copy's text, the Slurm step the head started - becomes the node's view: its own failure, the lines that show
   it, its metrics checked against the thresholds, and what the blame needs (``outcome``).
2. :func:`run_verdicts` (once, over every node's view): the node a stopped run is blamed on
   (:func:`~.failure.first_failure`) and, per node, the failure its record states.
3. :func:`check_record` (per node): the record ``cvs.cluster.check_result`` writes (it adds ``host``,
   ``backend``, ``finished`` and ``scheduler``; the Slurm step goes in its ``steps`` option: ``view["steps"]``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.cvs_thresholds import upstream_metrics
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.failure import first_error, first_failure
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import (
    JOINING_RE,
    maxtext_metrics,
    metric_rows,
    parse_steps,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics.fleet import series_from_steps
from ansible_collections.cvs.cluster.plugins.plugin_utils._slurm import step_state

__all__ = ["check_record", "node_view", "run_verdicts", "slurm_steps"]

_ENDED = re.compile(r"had ended with status (\d+)")
TAIL_LINES = 10


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _field(text: str, name: str) -> str:
    match = re.search(rf"(?m)^{name}=(.*)$", text)
    return match.group(1) if match else ""


def slurm_steps(srun: Any, tag: Any, job: Any) -> list[dict[str, Any]]:
    """The run's Slurm step from what the head node read of it (``exit=``, ``step=``, ``stopped=`` lines, then
    srun's output); [] when nothing was read (no Slurm, or the run never started its step)."""
    srun = _mapping(srun)
    if not isinstance(job, Mapping) or not isinstance(srun.get("stdout"), str):
        return []
    out = srun["stdout"]
    exit_code = _field(out, "exit")
    return [
        {
            "id": _field(out, "step") or None,
            "name": f"cvs-{tag}",
            "state": step_state(exit_code, out, _field(out, "stopped") == "yes"),
            "exit_code": int(exit_code) if exit_code else None,
            "nodes": job.get("nodes"),
            "srun": [line for line in out.splitlines() if line.startswith("srun: ")],
        }
    ]


def _watch(node: str, poll: Any, aborted_by_node: str) -> dict[str, Any]:
    """What the log watch says about this node: its own failure (none when it was stopped by another node),
    the node to blame, the error, the lines and their context."""
    poll = _mapping(poll)
    if not poll or poll.get("skipped"):
        return {}
    ok = not poll.get("failed", True) and bool(poll.get("finished", False))
    by = poll.get("aborted_by") or ""
    error = poll.get("error")
    last = poll.get("last_line")
    if isinstance(error, Mapping):
        lines = [error.get("line")]
    elif poll.get("stalled") and isinstance(last, str):
        lines = [last]
    else:
        lines = []
    if ok or by:
        failure = ""
    elif isinstance(error, Mapping):
        failure = f"error pattern '{error.get('name', '')}' matched on {node}: {error.get('line', '')}"
    else:
        failure = f"{node}: {poll.get('msg', 'the log watch failed')}"
    return {
        "error": dict(error) if isinstance(error, Mapping) else {},
        "lines": lines,
        "context": list(error.get("context") or []) if isinstance(error, Mapping) else [],
        "culprit": "" if ok else (aborted_by_node if by else node),
        "failure": failure,
        "aborted_by": by,
    }


def _stop_problem(node: str, stop: Any) -> str:
    stop = _mapping(stop)
    if stop.get("rc", 1) == 0:
        return ""
    said = stop.get("stdout", "") or stop.get("stderr", "") or stop.get("msg", "?")
    return f"{node}: could not stop the run: {str(said).strip()}"


def _int(value: Any) -> int:
    """As Jinja's ``int`` filter reads a number the settings check let through (``"5.5"`` -> 5)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return int(float(value))


def _metrics(text: str, facts: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary, threshold rows) of the node's log: cvs.cluster.maxtext_metrics with upstream CVS's names."""
    window = _int(facts.get("metrics_window") or 0) or None
    summary = maxtext_metrics(text, warmup_steps=_int(facts.get("warmup_steps", 1)), window=window)
    summary = {
        **upstream_metrics(
            summary, _int(facts["nodes"]), _int(facts.get("gpus_per_node") or 0), facts.get("baseline") or None
        ),
        **summary,
    }
    return summary, metric_rows(summary, facts.get("thresholds") or {})


def _record_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """What the record says about the run besides the verdict: ``facts["record"]`` as it is, and the stop's last
    line, the coordinator and the train script found."""
    stop_lines = _mapping(facts.get("stop")).get("stdout_lines") or []
    coordinator = facts.get("coordinator")
    found = facts.get("found")
    return {
        **_mapping(facts.get("record")),
        "coordinator": f"{coordinator}:{facts.get('coordinator_port')}"
        if coordinator is not None and _int(facts["nodes"]) > 1
        else None,
        "train_script": found.get("train_script") if isinstance(found, Mapping) else None,
        "stop": stop_lines[-1] if stop_lines else None,
    }


def node_view(facts: Mapping[str, Any]) -> dict[str, Any]:
    """This node's view of the run, from what the role gathered (keys of ``facts``):

    ``node``, ``host``, ``index``; ``failure``/``culprit``: what an earlier phase recorded (a settings or launch
    problem); ``launched``, ``files_ready``; ``poll`` (the watch's result), ``aborted_by_node`` (the node of the
    host that stopped the watch); ``stop`` (stop.sh's result); ``text`` (the log copy, "" when none);
    ``error_patterns``/``ignore_patterns``; ``nodes``, ``gpus_per_node``, ``baseline``, ``warmup_steps``,
    ``metrics_window``, ``thresholds`` (empty when they were not valid); ``srun``, ``tag``, ``slurm_job``;
    ``coordinator`` (address or None), ``coordinator_port``, ``found`` (the node checks' findings) and
    ``record`` (fields the record keeps as they are: check, node_index, started, run, run_dir, log ...).
    """
    node = str(facts["node"])
    text = str(facts.get("text") or "") if facts.get("launched") else ""
    watch = _watch(node, facts.get("poll"), str(facts.get("aborted_by_node") or ""))
    failure = watch["failure"] if watch else str(facts.get("failure") or "")
    culprit = watch["culprit"] if watch else str(facts.get("culprit") or "")
    error = watch.get("error", {})
    stop_problem = _stop_problem(node, facts.get("stop")) if facts.get("files_ready") else ""
    ended = _ENDED.search(str(_mapping(facts.get("stop")).get("stdout") or ""))
    summary, checks = _metrics(text, facts)
    by = watch.get("aborted_by", "")
    return {
        "node": node,
        "host": str(facts.get("host") or node),
        "launched": bool(facts.get("launched")),
        "failure": failure,
        "culprit": culprit,
        "aborted_by": by,
        "aborted_by_node": str(facts.get("aborted_by_node") or by) if by else "",
        "stop_problem": stop_problem,
        "error": error,
        "lines": watch.get("lines", []),
        "context": watch.get("context", []),
        # for the blame (failure.first_failure): a node stopped by another before its watch read its own error
        # line has that line in its log copy
        "outcome": {
            "node": node,
            "index": _int(facts.get("index") or 0),
            "error": error.get("name")
            if error.get("name") is not None
            else first_error(text, facts.get("error_patterns") or {}, facts.get("ignore_patterns") or {}),
            "ended": int(ended.group(1)) if ended else None,
            "joined": bool(JOINING_RE.search(text)),
        },
        "summary": summary,
        "checks": checks,
        "tail": text.splitlines()[-TAIL_LINES:],
        "series": series_from_steps(parse_steps(text)) if facts.get("launched") else None,
        "steps": slurm_steps(facts.get("srun"), facts.get("tag"), facts.get("slurm_job")),
        "record": _record_facts(facts),
    }


def run_verdicts(views: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """``{host: {failure, culprit}}``: each node's failure as its record states it, and the node it is blamed on.

    A node whose watch was stopped by another says so with that node's own failure; a node that could not be
    stopped says so after; then, when the run was launched and failed, the blame of failure.first_failure
    (unless it could only name the node the watch heard first) replaces both.
    """
    own = {v["host"]: v["failure"] for v in views}
    out: dict[str, dict[str, str]] = {}
    for view in views:
        failure, culprit = view["failure"], view["culprit"]
        if view["aborted_by"]:
            failure = f"run stopped because {culprit} failed: {own.get(view['aborted_by'], 'see ' + culprit)}"
        if view["stop_problem"]:
            failure = f"{failure}; {view['stop_problem']}" if failure else view["stop_problem"]
            culprit = culprit or view["node"]
        out[view["host"]] = {"failure": failure, "culprit": culprit}
    outcomes = []
    for view in views:
        if not view["launched"]:
            continue
        failure = out[view["host"]]["failure"]
        if not failure and view["aborted_by"]:
            failure = f"stopped because {view['aborted_by']} failed"
        outcomes.append({**view["outcome"], "failure": failure, "aborted_by": view["aborted_by_node"]})
    blame = first_failure(outcomes) if outcomes else None
    if blame and blame["rule"] != "heard_first":
        for view, outcome in zip([v for v in views if v["launched"]], outcomes):
            if not outcome["failure"]:
                continue
            node = blame["node"]
            reason = (
                blame["reason"] if node == view["node"] else f"run stopped because {node} failed: {blame['reason']}"
            )
            out[view["host"]] = {"failure": reason, "culprit": node}
    return out


def _reason(failure: str, summary: Mapping[str, Any], checks: Sequence[Mapping[str, Any]]) -> str:
    failed = [c for c in checks if c.get("status") == "FAIL"]
    if failure:
        return failure
    if failed:
        return "metric check failed: " + "; ".join(str(c.get("message")) for c in failed)
    met = sum(1 for c in checks if c.get("status") == "PASS")
    return f"completed {summary.get('steps')} steps; " + (f"{met} threshold(s) met" if met else "no thresholds")


def check_record(view: Mapping[str, Any], verdict: Optional[Mapping[str, str]]) -> dict[str, Any]:
    """The node's check record: its status, reason and blame, its metrics, lines and step series, and what the
    role recorded about the run (``view["record"]``: check, node_index, started, run, run_dir, log, ...)."""
    verdict = verdict or {"failure": view["failure"], "culprit": view["culprit"]}
    failure, culprit, node = verdict["failure"], verdict["culprit"], view["node"]
    checks = list(view["checks"])
    failed = any(c.get("status") == "FAIL" for c in checks)
    error = view["error"]
    return {
        **view["record"],
        "node": node,
        "status": "FAIL" if failure or failed else "PASS",
        "reason": _reason(failure, view["summary"], checks),
        "failed_node": culprit or (node if failed else None) or None,
        "error": {k: error.get(k) for k in ("name", "pattern", "line")} if "name" in error else None,
        "metrics": checks,
        "summary": dict(view["summary"]),
        "lines": list(view["lines"]) or (list(view["tail"]) if failure and culprit == node else []),
        "context": list(view["context"]),
        "series": view["series"],
    }
