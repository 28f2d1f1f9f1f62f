# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One quarantine pass over a finished run (the logic of the action cvs.cluster.quarantine): read the verdicts,
write the baseline of a passing run, ask Slurm once, apply the plan, say what was done and what was not.

``execute(argv) -> (rc, stdout, stderr)`` runs a command where Slurm's clients are (the submit host); the caller
supplies it, so this module stays free of Ansible.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Callable, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import atomic_write, path_component
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine import baseline as baseline_rules
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.plan import (
    QuarantineError,
    inventory_plan,
    node_outcomes,
    settings,
    show_argv,
    slurm_plan,
    summary_lines,
    update_argv,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._slurm import slurm_message

Execute = Callable[[list[str]], "tuple[int, str, str]"]


def run_dir(results_dir: str, run_id: str) -> str:
    return os.path.join(results_dir, path_component(run_id))


def read_results(results_dir: str, run_id: str) -> dict[str, Any]:
    path = os.path.join(run_dir(results_dir, run_id), "results.json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise QuarantineError(f"cannot read run {run_id}'s results {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise QuarantineError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(data, Mapping) or data.get("run_id") not in (None, run_id):
        raise QuarantineError(f"{path}: run_id is {data.get('run_id')!r}, not {run_id!r}")
    return dict(data)


def write_baseline(
    results: Mapping[str, Any], results_dir: str, run_id: str, args: Mapping[str, Any], now: str, check_mode: bool
) -> tuple[Optional[str], str]:
    """(path written or None, why not)."""
    if not args.get("baseline", True):
        return None, "not asked (baseline: false)"
    try:
        data = baseline_rules.build(results, args.get("cluster_name"), args.get("nodes") or {}, now)
    except baseline_rules.BaselineError as exc:
        return None, str(exc)
    path = os.path.join(run_dir(results_dir, run_id), "baseline.json")
    if not check_mode:
        atomic_write(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path, ""


def quarantine(args: Mapping[str, Any], execute: Execute, check_mode: bool = False, now: str = "") -> dict[str, Any]:
    """The action's result: ``changed``, ``failed`` and ``msg`` with the plan and what was done."""
    conf = settings(
        {
            "mode": args.get("mode", "report"),
            "reason_max": args.get("reason_max", 128),
            "max_fraction": args.get("max_fraction", 0.5),
            "group": args.get("group") or "cvs_quarantined",
        }
    )
    results_dir, run_id = str(args["results_dir"]), str(args["run_id"]).rstrip("/")
    if "/" in run_id:  # the run's directory
        results_dir, run_id = os.path.split(run_id)
    if not run_id:
        raise QuarantineError("run_id: empty (name a finished run: its id under results_dir, or its directory)")
    results = read_results(results_dir, run_id)
    result: dict[str, Any] = {
        "changed": False,
        "mode": conf["mode"],
        "slurm": bool(args.get("slurm")),
        "lines": [],
        "not_done": [],
    }
    result["baseline"], result["baseline_note"] = write_baseline(results, results_dir, run_id, args, now, check_mode)
    if conf["mode"] == "off":
        result["msg"] = "cvs_quarantine is off: no node drained, resumed or named"
        return result
    outcomes = node_outcomes(results)
    names = {str(k): str(v) for k, v in (args.get("nodes") or {}).items() if v}
    acting = conf["mode"] == "drain" and not check_mode
    if not args.get("slurm"):
        plan = inventory_plan(outcomes, conf["group"], args.get("group_members") or [])
        result.update(take_out=plan["take_out"], bring_back=plan["bring_back"], group=plan["group"])
        result["lines"] = summary_lines(plan, conf["mode"], False)
    else:
        scontrol = str(args.get("scontrol") or "scontrol")
        slurm_nodes = [names.get(n, n) for n in sorted(outcomes)]
        rc, out, err = execute(show_argv(slurm_nodes, args.get("conf"), scontrol))
        if rc != 0:
            failing = [names.get(n, n) for n, o in sorted(outcomes.items()) if o["status"] == "FAIL"]
            words = slurm_message(err or out) or f"scontrol exited with {rc}"
            result["not_done"] = [f"{n}: not drained: Slurm could not be asked ({words})" for n in failing]
            result["msg"] = f"run {run_id}: Slurm could not be asked about {', '.join(slurm_nodes)}: {words}" + (
                f"; not drained: {', '.join(failing)}" if failing else ""
            )
            result["failed"] = conf["mode"] == "drain" and bool(failing)
            result["lines"] = [result["msg"]]
            return _write(result, results_dir, run_id, check_mode)
        plan = slurm_plan(outcomes, out, run_id, names, conf["reason_max"], conf["max_fraction"])
        for row in plan["actions"]:
            row["done"] = False
            if row["action"] not in ("drain", "resume"):
                continue
            result["changed"] = acting or (check_mode and conf["mode"] == "drain")
            if not acting:
                continue
            rc, out, err = execute(update_argv(row, args.get("conf"), scontrol))
            if rc == 0:
                row["done"] = True
            else:
                words = slurm_message(err or out) or f"scontrol exited with {rc}"
                verb = "drained" if row["action"] == "drain" else "resumed"
                result["not_done"].append(f"{row['slurm_node']}: not {verb}: {words}")
        result["actions"], result["held"] = plan["actions"], plan["held"]
        result["lines"] = summary_lines(plan, conf["mode"], acting)
        result["diff"] = _diff(plan["actions"])
        if acting and (result["not_done"] or plan["held"]):
            result["failed"] = True
    head = f"run {run_id}: quarantine ({conf['mode']}{', check mode' if check_mode else ''})"
    result["msg"] = head + ": " + ("; ".join(result["lines"] + result["not_done"]) or "nothing to do")
    return _write(result, results_dir, run_id, check_mode)


def _diff(actions: list[dict[str, Any]]) -> dict[str, str]:
    before, after = [], []
    for row in actions:
        if row["action"] not in ("drain", "resume"):
            continue
        before.append(f"{row['slurm_node']}: State={row['state']} Reason={row['reason'] or '(null)'}")
        new = f"State=DRAIN Reason={row['new_reason']}" if row["action"] == "drain" else "State=RESUME Reason=(null)"
        after.append(f"{row['slurm_node']}: {new}")
    return {"before": "\n".join(before) + ("\n" if before else ""), "after": "\n".join(after) + ("\n" if after else "")}


def _write(result: dict[str, Any], results_dir: str, run_id: str, check_mode: bool) -> dict[str, Any]:
    if not check_mode:
        keep = {k: v for k, v in result.items() if k not in ("changed", "diff")}
        path = os.path.join(run_dir(results_dir, run_id), "quarantine.json")
        atomic_write(path, json.dumps(keep, indent=1, sort_keys=True) + "\n")
        result["path"] = path
    return result
