# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run-level decisions of cvs.cluster.prepare and cvs.cluster.dispose, made once on the controller.

Pure functions over the inventory's groups and the nodes' registered results, exposed as the filters of
plugins/filter/run_plan.py. Each decision is taken once for the whole play (``run_once``) instead of one task per
host, and every message a user sees is built here:

* ``head_node``: the run's head node (the ``cvs_head`` host, else the first of ``cvs_nodes``); the one place that
  says so for prepare, dispose and the playbooks;
* ``run_plan``: the inventory model check, the run identity and, per node, its index (head = 0), scratch directory
  and workload host;
* ``plan_in_order``: the plan renumbered in an order a scheduler chose (Slurm: the allocation's node order);
* ``become_refusal``: the baremetal backend's privilege-escalation check over every node's probe;
* ``lease_refusals``: why each node stops when another run holds any node of the play;
* ``stopped_lines``: what dispose stopped on each node.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import component_problem, path_component

ORCHESTRATORS = ("baremetal", "container", "slurm")
CONTAINER_HOST_SUFFIX = "-ctr"
RUN_ID_ALPHABET = string.ascii_lowercase + string.digits


class RunPlanError(ValueError):
    """The inventory has no node to run on (an empty cvs_nodes group), or the run id cannot name a directory."""


def _names(group: Any) -> list[str]:
    return [str(h) for h in (group or [])]


def head_node(groups: Mapping[str, Any]) -> str:
    """The head node: the ``cvs_head`` host when there is one, else the first host of ``cvs_nodes``."""
    candidates = _names(groups.get("cvs_head")) + _names(groups.get("cvs_nodes"))
    if not candidates:
        raise RunPlanError("no head node: the inventory has no cvs_head host and an empty cvs_nodes group")
    return candidates[0]


def new_run_id(now: Optional[datetime] = None, token: Optional[Callable[[], str]] = None) -> str:
    """``YYYYmmdd-HHMMSS-xxxxxx``: the UTC time and 6 random lowercase letters or digits."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    suffix = token() if token else "".join(secrets.choice(RUN_ID_ALPHABET) for _position in range(6))
    return f"{stamp}-{suffix}"


def model_problem(host: str, orchestrator: Any, groups: Mapping[str, Any]) -> str:
    """Why ``host`` cannot be prepared with this inventory model, or ``""``."""
    nodes = _names(groups.get("cvs_nodes"))
    if orchestrator in ORCHESTRATORS and nodes and host in nodes and len(_names(groups.get("cvs_head"))) <= 1:
        return ""
    return (
        f"{host}: cvs.cluster.prepare needs cvs_orchestrator baremetal|container|slurm (got {orchestrator}), "
        "a non-empty cvs_nodes group containing this host and at most one cvs_head host"
    )


def _numbered(order: Sequence[str], scratch_root: str, run_id: str, orchestrator: Any) -> dict[str, dict[str, Any]]:
    suffix = CONTAINER_HOST_SUFFIX if orchestrator == "container" else ""
    return {
        host: {
            "index": index,
            "scratch": f"{scratch_root}/{run_id}/{path_component(host)}",
            "exec_name": f"{host}{suffix}",
        }
        for index, host in enumerate(order)
    }


def run_plan(
    groups: Mapping[str, Any],
    hosts: Iterable[str],
    orchestrator: Any,
    scratch_root: str,
    run_id: Optional[str] = None,
) -> dict[str, Any]:
    """The plan of one run over the play's ``hosts``.

    Returns ``{run_id, head, nodes, refused}``: ``nodes`` maps every node of ``cvs_nodes`` to its ``index`` (head =
    0, then the order of ``cvs_nodes``), its ``scratch`` directory (``<scratch_root>/<run_id>/<node>``, the node's
    name one path component: plugin_utils/_common/paths.py) and its
    workload host's name ``exec_name`` (the node itself, or ``<node>-ctr`` on the container backend); ``refused``
    maps every host of the play the inventory model refuses to why (the message names the host and the fix).
    """
    run_id = str(run_id) if run_id else new_run_id()
    problem = component_problem(run_id, "cvs_run_id")
    if problem:  # playbooks/check_inventory.yml refuses it first; a play without it stops here, before any node
        raise RunPlanError(problem)
    refused = {h: p for h in map(str, hosts) if (p := model_problem(h, orchestrator, groups))}
    nodes = _names(groups.get("cvs_nodes"))
    if not nodes:
        return {"run_id": run_id, "head": "", "nodes": {}, "refused": refused}
    head = head_node(groups)
    order = list(dict.fromkeys([head, *nodes]))
    root = str(scratch_root).rstrip("/") or "/"
    return {
        "run_id": run_id,
        "head": head,
        "nodes": _numbered(order, root, run_id, orchestrator),
        "refused": refused,
    }


def plan_in_order(plan: Mapping[str, Any], order: Sequence[str], orchestrator: Any, scratch_root: str) -> dict:
    """``plan`` with its nodes numbered in ``order`` (hosts; the first is the head) and only those kept."""
    unknown = [h for h in order if h not in plan["nodes"]]
    if unknown or not order:
        raise RunPlanError(f"cannot order the run's nodes as {list(order)}: not nodes of the plan: {unknown}")
    root = str(scratch_root).rstrip("/") or "/"
    return {**plan, "head": order[0], "nodes": _numbered(list(order), root, plan["run_id"], orchestrator)}


def become_refusal(probes: Mapping[str, Mapping[str, Any]], method: str = "sudo") -> str:
    """The baremetal backend's refusal naming every node where become does not give root, or ``""``.

    ``probes`` maps each node to its registered ``id -u`` run under become: a failed probe (Ansible's message) or an
    answer other than uid 0 is a node without working privilege escalation.
    """
    problems = []
    for host, probe in probes.items():
        probe = probe or {}
        if probe.get("failed"):
            problems.append(f"{host} ({str(probe.get('msg') or 'privilege escalation failed').strip()})")
        elif str(probe.get("stdout", "")).strip() != "0":
            problems.append(f"{host} (become gave uid {str(probe.get('stdout', '')).strip()}, not root (become_user?))")
    if not problems:
        return ""
    return (
        "the baremetal backend needs root on every node: connect as root, or give a working become "
        f"(become_method {method or 'sudo'}; a password with --ask-become-pass, ansible_become_password or a vault). "
        "It does not work on: " + "; ".join(problems)
    )


def same_machines(leases: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """The groups of nodes whose ``cvs.cluster.run_lease`` answers name one machine (its ``machine.key``)."""
    by_key: dict[str, list[str]] = {}
    for host, lease in leases.items():
        key = ((lease or {}).get("machine") or {}).get("key")
        if key:
            by_key.setdefault(str(key), []).append(host)
    return [hosts for hosts in by_key.values() if len(hosts) > 1]


def _machine_words(lease: Mapping[str, Any]) -> str:
    machine = lease.get("machine") or {}
    return (
        f"host name {machine.get('hostname') or '?'}, machine-id {machine.get('machine_id') or '?'}, "
        f"boot id {machine.get('boot_id') or '?'}"
    )


def lease_refusals(leases: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Why each node stops because the inventory names one machine twice, or another run holds a node of the play;
    ``{}`` when neither.

    ``leases`` maps each node of the play to its registered ``cvs.cluster.run_lease`` result (taken with
    ``failed_when: false``; only a refused lease carries ``msg``; every answer carries the node's ``machine``).
    Inventory names that reach one machine are refused naming each other (whichever took the lease first); else a
    refused node gives the module's own message (naming the run that holds it and how to stop it), the others name
    the nodes held.
    """
    twice = same_machines(leases)
    if twice:
        named = {host: group for group in twice for host in group}
        groups = "; ".join(" and ".join(group) for group in twice)
        return {
            host: f"{', '.join(named[host])}: one machine ({_machine_words(leases[host] or {})}) under "
            f"{len(named[host])} inventory names: nothing was started; give each machine one inventory name"
            if host in named
            else f"{host}: nothing was started: the inventory names one machine twice ({groups})"
            for host in leases
        }
    held = [h for h, lease in leases.items() if (lease or {}).get("msg") is not None]
    if not held:
        return {}
    return {
        host: str(lease["msg"])
        if (lease := leases[host] or {}).get("msg") is not None
        else f"{host}: nothing was started: another run holds {', '.join(held)}"
        for host in leases
    }


def stale_notice(host: str, lease: Mapping[str, Any]) -> str:
    """What prepare says when it took a node over from a dead run, or ``""``."""
    stale = lease.get("stale_run") or ""
    if not stale:
        return ""
    stopped = list(lease.get("stale_stopped") or [])
    return (
        f"{host}: run {stale} died holding this node (its controller is gone or its lease expired); "
        f"stopped {len(stopped)} of its processes {json.dumps([p.get('args') for p in stopped])}"
    )


def stopped_lines(stopped: Mapping[str, Mapping[str, Any]], run_id: str) -> list[str]:
    """One line per node where dispose stopped processes of ``run_id`` (the node, how many, their command lines)."""
    lines = []
    for host, result in stopped.items():
        processes = list((result or {}).get("processes") or [])
        if processes:
            args = json.dumps([p.get("args") for p in processes])
            lines.append(f"{host}: stopped {len(processes)} process(es) of run {run_id}: {args}")
    return lines
