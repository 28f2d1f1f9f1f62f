# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""baseline.json: what a node looked like in the last run that passed (pure Python >= 3.9, stdlib only; shipped to
the nodes with the health program, which checks a node against it).

Schema 1::

    {"schema": 1, "kind": "cvs.cluster/baseline", "run_id": "...", "created": "2026-12-07T21:00:00Z",
     "cluster": {"name": "<cvs_cluster_name> or null", "nodes": ["node1", ...]},
     "facts": ["kernel", "rocm_version", ...],
     "fleet": {"facts": {"rvs_version": "1.3.0", ...}, "mixed": ["kernel"], "metrics": {"rvs": {"test mem": 1.2}}},
     "nodes": {"node1": {"slurm_node": "node1", "facts": {...}, "metrics": {"rvs": {"test mem": 1.1}}}}}

``fleet.facts`` holds a fact's value when every node has the same (``mixed`` lists the others); ``fleet.metrics``
the median over the nodes of each numeric metric. A reader refuses another schema or another cluster, naming the
file and the field.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._preflight import UNIFORM_FACTS

SCHEMA = 1
KIND = "cvs.cluster/baseline"
#: the node facts a baseline keeps: those preflight requires equal on every node (versions, GPU model and count)
FACTS = UNIFORM_FACTS


class BaselineError(ValueError):
    """A baseline that cannot be written or used; the message names the file (or run) and the field."""


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def build(
    results: Mapping[str, Any],
    cluster_name: Optional[str],
    node_names: Optional[Mapping[str, str]] = None,
    created: str = "",
) -> dict[str, Any]:
    """The baseline of a run that passed, from its results.json; the node facts are preflight's.

    :raises BaselineError: the run did not pass, or a node has no preflight facts (naming the node).
    """
    run = results.get("run_id")
    summary = results.get("summary") or {}
    if summary.get("status") != "PASS" or not results.get("complete", True):
        raise BaselineError(f"run {run}: no baseline from a run that did not pass (status {summary.get('status')})")
    names = dict(node_names or {})
    nodes: dict[str, Any] = {}
    for node, entry in sorted((results.get("nodes") or {}).items()):
        checks = (entry or {}).get("checks") or {}
        facts = ((checks.get("preflight") or {}).get("facts")) or {}
        kept = {k: facts[k] for k in FACTS if facts.get(k) is not None}
        if not kept:
            raise BaselineError(
                f"run {run}: nodes.{node}: no preflight facts (run preflight in the run that makes the baseline)"
            )
        metrics: dict[str, dict[str, float]] = {}
        for name, check in sorted(checks.items()):
            for row in (check or {}).get("metrics") or []:
                value = _number(row.get("value"))
                if value is not None and row.get("metric"):
                    metrics.setdefault(name, {})[str(row["metric"])] = value
        nodes[node] = {"slurm_node": str(names.get(node) or node), "facts": kept, "metrics": metrics}
    fleet_facts: dict[str, Any] = {}
    mixed: list[str] = []
    for fact in FACTS:
        values = {json.dumps(n["facts"].get(fact)) for n in nodes.values()}
        if len(values) == 1:
            fleet_facts[fact] = json.loads(values.pop())
        else:
            mixed.append(fact)
    medians: dict[str, dict[str, float]] = {}
    for node in nodes.values():
        for check, rows in node["metrics"].items():
            for metric in rows:
                medians.setdefault(check, {})[metric] = 0.0
    for check, rows in medians.items():
        for metric in rows:
            values = [n["metrics"][check][metric] for n in nodes.values() if metric in n["metrics"].get(check, {})]
            rows[metric] = statistics.median(values)
    return {
        "schema": SCHEMA,
        "kind": KIND,
        "run_id": run,
        "created": created,
        "cluster": {"name": cluster_name or None, "nodes": sorted(nodes)},
        "facts": list(FACTS),
        "fleet": {"facts": fleet_facts, "mixed": mixed, "metrics": medians},
        "nodes": nodes,
    }


def check(data: Any, path: str, cluster_name: Optional[str] = None, nodes: Any = ()) -> dict[str, Any]:
    """``data`` (baseline.json read from ``path``) when it is a schema-1 baseline of this cluster (``cluster_name``,
    ``cvs_cluster_name``) that holds ``nodes``.

    :raises BaselineError: naming ``path`` and the field.
    """
    if not isinstance(data, Mapping):
        raise BaselineError(f"{path}: not a baseline (a JSON object with schema: {SCHEMA} is expected)")
    if data.get("schema") != SCHEMA or isinstance(data.get("schema"), bool):
        raise BaselineError(
            f"{path}: schema: {data.get('schema')!r} is not a baseline schema this collection reads ({SCHEMA}); "
            "write a new baseline with a passing validate run"
        )
    if data.get("kind") != KIND:
        raise BaselineError(f"{path}: kind: {data.get('kind')!r} is not {KIND!r}")
    cluster = data.get("cluster")
    if not isinstance(cluster, Mapping):
        raise BaselineError(f"{path}: cluster: missing (a mapping with name and nodes is expected)")
    theirs, ours = cluster.get("name") or None, cluster_name or None
    if theirs != ours:
        raise BaselineError(
            f"{path}: cluster.name: the baseline is of cluster {theirs!r}, this inventory's cluster is {ours!r} "
            "(cvs_cluster_name): refusing another cluster's baseline"
        )
    table = data.get("nodes")
    if not isinstance(table, Mapping):
        raise BaselineError(f"{path}: nodes: missing (a mapping of node to its facts is expected)")
    for node in [nodes] if isinstance(nodes, str) else list(nodes or ()):
        entry = table.get(node)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("facts"), Mapping):
            raise BaselineError(
                f"{path}: nodes.{node}: missing: the baseline's cluster has {', '.join(sorted(table)) or 'no node'}"
            )
    return dict(data)


def find_node(data: Mapping[str, Any], candidates: Any) -> Optional[str]:
    """The baseline's node named by one of ``candidates`` (an inventory name, a Slurm node name, a host name)."""
    table = data.get("nodes") or {}
    for name in candidates:
        if not name:
            continue
        if name in table:
            return str(name)
        for node, entry in table.items():
            if isinstance(entry, Mapping) and entry.get("slurm_node") == name:
                return str(node)
    return None
