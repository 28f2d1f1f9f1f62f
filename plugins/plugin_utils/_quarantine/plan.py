# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What quarantine does after a run: from the run's verdicts (results.json) and Slurm's view of the nodes
(``scontrol --oneliner show node``) to a list of drain and resume actions, or, without Slurm, the nodes to take out
of the inventory.

Rules (the ownership convention is NHC's, see reason.py):

* a node fails the run when one of its checks is FAIL, ERROR, UNREACHABLE or OUTLIER *of its own*: a check that
  says it did not run there (``... not run: ...``: preflight failed elsewhere, the allocation left it out) or that
  blames another node (``failed_node``) says nothing of this node, which is then neither drained nor resumed;
* a failing node that Slurm still runs jobs on is drained with ``cvs: <check>: <short reason> (run <id>)``; one
  already drained, down or failing keeps its state and reason, whoever set it;
* a node that passed every check is resumed only when it is drained or down with a reason that starts with
  ``cvs:``; a node an admin drained (another reason, or none) stays drained;
* when more than ``max_fraction`` of the run's nodes would be drained (a broken fabric, a bad image, Slurm itself),
  nothing is drained and the plan says why: that is a fleet problem, not a node's.

Pure logic, no Ansible imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.reason import (
    REASON_MAX,
    make_reason,
    owned,
    plain,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._slurm import client_env, parse_oneliner

FAILING = ("FAIL", "ERROR", "UNREACHABLE", "OUTLIER")
MODES = ("off", "report", "drain")
_NOT_RUN = re.compile(r"\bnot run\b")
#: state flags of a node Slurm already keeps jobs off
_OFF_FLAGS = ("DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING")


class QuarantineError(ValueError):
    """Settings or input quarantine cannot use (the message names it)."""


def _flags(state: str) -> list[str]:
    return [f for f in re.split(r"[+]", str(state or "").upper().rstrip("*~#!%$@^-")) if f]


def _short(node: str, check: str, text: Any) -> str:
    body = str(text or "").strip()
    for lead in (f"{node}: ", f"{check}: ", f"{check} "):
        if body.startswith(lead):
            body = body[len(lead) :].strip()
    return body


def node_outcomes(results: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per node of results.json: ``{status, check, why}``; ``status`` is ``FAIL`` (a failure of its own:
    ``check`` and ``why`` name the first), ``PASS`` (every check passed) or ``UNJUDGED`` (not every check ran
    there, ``why`` says which)."""
    if not isinstance(results, Mapping) or not isinstance(results.get("nodes"), Mapping):
        raise QuarantineError(
            "results.json has no 'nodes' mapping: not a run's results (schema cvs.cluster/results/v1)"
        )
    order = [str(c) for c in results.get("checks") or []]
    out: dict[str, dict[str, Any]] = {}
    for node, entry in results["nodes"].items():
        checks = (entry or {}).get("checks") or {}
        names = [c for c in order if c in checks] + sorted(c for c in checks if c not in order)
        failure: Optional[tuple[str, str]] = None
        unjudged: list[str] = []
        for name in names:
            check = checks[name] or {}
            status = str(check.get("status") or "MISSING")
            reason = str(check.get("reason") or "")
            blamed = check.get("failed_node")
            if status == "PASS":
                continue
            if status in FAILING and not _NOT_RUN.search(reason) and (not blamed or blamed == node):
                failure = failure or (name, _short(node, name, reason or status))
            else:
                unjudged.append(f"{name} {status}" + (f" ({_short(node, name, reason)})" if reason else ""))
        if failure:
            out[node] = {"status": "FAIL", "check": failure[0], "why": failure[1]}
        elif unjudged or not names:
            out[node] = {"status": "UNJUDGED", "check": None, "why": "; ".join(unjudged) or "no check ran"}
        else:
            out[node] = {"status": "PASS", "check": None, "why": "every check passed"}
    return out


def settings(raw: Any) -> dict[str, Any]:
    """``{mode, reason_max, max_fraction, group}`` checked (``cvs_quarantine`` and its companions)."""
    raw = dict(raw or {})
    mode = str(raw.get("mode", "report"))
    if mode not in MODES:
        raise QuarantineError(f"cvs_quarantine: {mode!r} is not one of {', '.join(MODES)}")
    try:
        limit = int(raw.get("reason_max", REASON_MAX))
        fraction = float(raw.get("max_fraction", 0.5))
    except (TypeError, ValueError) as exc:
        raise QuarantineError(f"cvs_quarantine_reason_max / cvs_quarantine_max_fraction: not a number ({exc})") from exc
    if not 0 < fraction <= 1:
        raise QuarantineError(f"cvs_quarantine_max_fraction: {fraction!r} must be above 0 and at most 1")
    make_reason("check", "x", "20260101-000000-abcdef", limit)  # raises naming the limit when it is too small
    return {"mode": mode, "reason_max": limit, "max_fraction": fraction, "group": str(raw.get("group") or "")}


def slurm_plan(
    outcomes: Mapping[str, Mapping[str, Any]],
    show_node: str,
    run_id: str,
    node_names: Optional[Mapping[str, str]] = None,
    reason_max: int = REASON_MAX,
    max_fraction: float = 0.5,
) -> dict[str, Any]:
    """Drain and resume actions from ``outcomes`` (:func:`node_outcomes`) and ``show_node`` (the output of
    ``scontrol --oneliner show node``). ``node_names`` maps an inventory node to its Slurm name (default the same).

    Returns ``{actions, drain, resume, held}``: ``actions`` one row per node ``{node, slurm_node, outcome, action,
    state, reason, new_reason, why}`` with ``action`` one of ``drain``, ``resume``, ``keep`` (Slurm's state stays,
    ``why`` says why), ``none``, ``unknown`` (Slurm does not know the node); ``drain``/``resume`` the Slurm names
    to act on; ``held`` why nothing is drained (too many nodes), or ''."""
    names = dict(node_names or {})
    records = {r.get("NodeName"): r for r in parse_oneliner(show_node or "") if r.get("NodeName")}
    actions: list[dict[str, Any]] = []
    for node in sorted(outcomes):
        outcome = outcomes[node]
        slurm = str(names.get(node) or node)
        record = records.get(slurm)
        row: dict[str, Any] = {
            "node": node,
            "slurm_node": slurm,
            "outcome": outcome["status"],
            "action": "none",
            "state": None,
            "reason": "",
            "new_reason": None,
            "why": outcome["why"],
        }
        if record is None:
            row["action"] = "unknown"
            row["why"] = f"Slurm knows no node {slurm}" + (
                f" ({outcome['why']})" if outcome["status"] == "FAIL" else ""
            )
            actions.append(row)
            continue
        state, reason = record.get("State", ""), plain(record.get("Reason"))
        row["state"], row["reason"] = state, reason
        off = any(flag in _OFF_FLAGS for flag in _flags(state))
        ours = owned(reason)
        if outcome["status"] == "FAIL":
            if off:
                who = "this collection" if ours else ("an admin" if reason else "an admin, no reason given")
                row["action"], row["why"] = "keep", f"already {state} (drained by {who}: {reason or '-'})"
            else:
                row["action"] = "drain"
                row["new_reason"] = make_reason(outcome["check"], outcome["why"], run_id, reason_max)
        elif outcome["status"] == "PASS" and off:
            if ours:
                row["action"], row["why"] = "resume", f"passed every check; {state} by this collection ({reason})"
            else:
                row["action"] = "keep"
                row["why"] = f"passed, but {state} by an admin ({reason or 'no reason given'}): left drained"
        actions.append(row)
    drain = [a["slurm_node"] for a in actions if a["action"] == "drain"]
    held = ""
    if drain and len(drain) > max_fraction * len(outcomes):
        held = (
            f"{len(drain)} of {len(outcomes)} nodes failed ({', '.join(drain)}): more than cvs_quarantine_max_fraction "
            f"{max_fraction:g} of the run, which points at the fleet (network, image, Slurm), not at the nodes; "
            "none was drained (raise cvs_quarantine_max_fraction to drain them anyway)"
        )
        for row in actions:
            if row["action"] == "drain":
                row["action"], row["why"] = "held", f"{row['why']} (not drained: too many failing nodes)"
        drain = []
    resume = [a["slurm_node"] for a in actions if a["action"] == "resume"]
    return {"actions": actions, "drain": drain, "resume": resume, "held": held}


def update_argv(row: Mapping[str, Any], conf: Optional[str] = None, scontrol: str = "scontrol") -> list[str]:
    """``scontrol update`` of one drain or resume action (each value one argument: quotes would be stored)."""
    prefix = [*client_env({"conf": conf}), scontrol, "update", f"NodeName={row['slurm_node']}"]
    if row["action"] == "drain":
        return [*prefix, "State=DRAIN", f"Reason={row['new_reason']}"]
    if row["action"] == "resume":
        return [*prefix, "State=RESUME"]
    raise QuarantineError(f"{row['node']}: no scontrol update for action {row['action']!r}")


def show_argv(slurm_nodes: Sequence[str], conf: Optional[str] = None, scontrol: str = "scontrol") -> list[str]:
    return [*client_env({"conf": conf}), scontrol, "--oneliner", "show", "node", ",".join(slurm_nodes)]


def inventory_plan(
    outcomes: Mapping[str, Mapping[str, Any]], group: str, in_group: Sequence[str] = ()
) -> dict[str, Any]:
    """Without Slurm: the nodes to take out (move to the inventory group ``group``) and those in ``group`` that
    passed and may come back (``{take_out: [{node, check, why}], bring_back: [node], group}``)."""
    take_out = [
        {"node": n, "check": o["check"], "why": o["why"]} for n, o in sorted(outcomes.items()) if o["status"] == "FAIL"
    ]
    back = [n for n in sorted(outcomes) if outcomes[n]["status"] == "PASS" and n in set(in_group)]
    return {"take_out": take_out, "bring_back": back, "group": group}


def summary_lines(plan: Mapping[str, Any], mode: str, applied: bool) -> list[str]:
    """One line per node that changes or is kept, for the console and quarantine.json."""
    lines: list[str] = []
    verb = {"drain": "drained" if applied else "would drain", "resume": "resumed" if applied else "would resume"}
    for row in plan.get("actions") or []:
        action = row["action"]
        if action in verb:
            text = f"{row['slurm_node']}: {verb[action]}"
            lines.append(text + (f" (Reason={row['new_reason']})" if action == "drain" else f" ({row['why']})"))
        elif action in ("keep", "held", "unknown"):
            lines.append(f"{row['slurm_node']}: {action}: {row['why']}")
    for row in plan.get("take_out") or []:
        lines.append(
            f"{row['node']}: take out of the run's inventory, into group {plan['group']} ({row['check']}: {row['why']})"
        )
    for node in plan.get("bring_back") or []:
        lines.append(f"{node}: passed; may leave group {plan['group']}")
    if plan.get("held"):
        lines.append(plan["held"])
    if mode == "report" and any(r["action"] in ("drain", "resume") for r in plan.get("actions") or []):
        lines.append("cvs_quarantine is report (a dry run): set cvs_quarantine=drain to act")
    return lines
