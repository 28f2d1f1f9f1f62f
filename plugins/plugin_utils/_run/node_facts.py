# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the run says about each workload host: the one place that reads it from a host's variables.

validate.yml's facts play registers ``cvs.cluster.node_probe``'s description of each workload host as
``cvs_node_facts`` (one module call, no fact gathering: cheaper, and immune to facts shared between hosts by a
``run_once`` set_fact on ansible-core 2.21.0-2.21.5). :func:`node_facts` turns a host's variables into the facts the
report records; :func:`node_table` prints them one line per node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PROBE_VAR = "cvs_node_facts"
TABLE_COLUMNS = ("node", "idx", "hostname", "address", "kernel", "cpus", "memory", "gpus", "backend")


def node_facts(values: Mapping[str, Any]) -> dict[str, Any]:
    """The facts worth reporting from one host's variables (absent ones left out)."""
    probe = values.get(PROBE_VAR)
    probe = probe if isinstance(probe, Mapping) and not probe.get("failed") else {}
    hostname = probe.get("hostname")
    memory = probe.get("memory_mb")
    facts: dict[str, Any] = {
        "hostname": hostname.split(".")[0] if isinstance(hostname, str) and hostname else None,
        "address": probe.get("address"),
        "kernel": probe.get("kernel"),
        "cpus": probe.get("cpus"),
        "memory_gib": memory // 1024 if isinstance(memory, int) and not isinstance(memory, bool) else None,
        "gpus": probe.get("gpu_render_nodes"),
        "gpu_model": values.get("cvs_gpu_model"),
        "rocm_version": values.get("cvs_rocm_version"),
        "backend": values.get("cvs_backend"),
    }
    return {k: v for k, v in facts.items() if v is not None}


def _index(value: Any) -> tuple[int, str]:
    return (int(value), "") if isinstance(value, int) and not isinstance(value, bool) else (1 << 30, str(value))


def node_table(hosts: Iterable[Mapping[str, Any]]) -> list[str]:
    """One aligned line per host (header first), in node-index order; an unknown value shows as ``?``."""
    rows = []
    for values in hosts:
        facts = node_facts(values)
        index = values.get("cvs_node_index", "-")
        memory = facts.get("memory_gib")
        cells = [
            values.get("cvs_node") or values.get("inventory_hostname") or "?",
            index,
            facts.get("hostname", "?"),
            facts.get("address", "?"),
            facts.get("kernel", "?"),
            facts.get("cpus", "?"),
            f"{memory} GiB" if memory is not None else "?",
            facts.get("gpus", "?"),
            facts.get("backend", "?"),
        ]
        rows.append((_index(index), [str(c) for c in cells]))
    table = [list(TABLE_COLUMNS)] + [cells for _key, cells in sorted(rows, key=lambda row: row[0])]
    widths = [max(len(row[col]) for row in table) for col in range(len(TABLE_COLUMNS))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in table]
