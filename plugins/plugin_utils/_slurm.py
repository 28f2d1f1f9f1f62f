# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read Slurm's view of its nodes (pure Python, >= 3.9): ``scontrol --oneliner show node`` and partitions.

One line per node of ``Key=Value`` pairs; a value may hold ``=`` (``CfgTRES=cpu=2,mem=1000M``) and the
``Reason`` at the end of a line may hold spaces (``Reason=bad fan [root@2026-12-07T02:40:00]``), so a key is a
word that follows white space and precedes ``=``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["UNAVAILABLE_STATES", "inventory_hosts", "parse_oneliner", "unavailable"]

_KEY = re.compile(r"(?:^|\s)([A-Z][A-Za-z0-9_]*)=")

#: State flags (of ``State=IDLE+DRAIN``, ``DOWN*``) under which Slurm starts no job on a node.
UNAVAILABLE_STATES = ("DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "POWERED_DOWN",
                      "MAINTENANCE", "RESERVED_MAINT", "INVALID", "FUTURE", "UNKNOWN")  # fmt: skip


def parse_oneliner(text: str) -> list[dict[str, str]]:
    """Each non-empty line of ``scontrol --oneliner show ...`` as a mapping of key to value (values stripped)."""
    records = []
    for line in text.splitlines():
        matches = list(_KEY.finditer(line))
        if not matches:
            continue
        record = {}
        for index, match in enumerate(matches):
            end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
            record[match.group(1)] = line[match.end() : end].strip()
        records.append(record)
    return records


def _flags(state: str) -> list[str]:
    return [flag for flag in re.split(r"[+]", state.upper().rstrip("*~#!%$@^-")) if flag]


def unavailable(state: str) -> bool:
    """True when Slurm starts no job on a node in this state (``IDLE+DRAIN``, ``DOWN*``, a trailing ``*`` meaning
    not responding)."""
    return state.endswith("*") or any(flag in UNAVAILABLE_STATES for flag in _flags(state))


def inventory_hosts(nodes: Sequence[Mapping[str, str]], partition: str) -> list[dict[str, Any]]:
    """The nodes of ``partition`` in Slurm's order as ``{name, vars}``: ``ansible_host`` is the NodeAddr, the
    ``slurm_*`` variables say what Slurm knows (state, reason, CPUs, partitions, whether it can run a job)."""
    hosts = []
    for node in nodes:
        partitions = [p for p in node.get("Partitions", "").split(",") if p]
        if partition not in partitions:
            continue
        name = node["NodeName"]
        state = node.get("State", "")
        reason = node.get("Reason", "")
        host_vars: dict[str, Any] = {
            "ansible_host": node.get("NodeAddr") or node.get("NodeHostName") or name,
            "slurm_node": name,
            "slurm_state": state,
            "slurm_available": not unavailable(state),
            "slurm_partitions": partitions,
        }
        if reason and reason != "(null)":
            host_vars["slurm_reason"] = reason
        cpus = node.get("CPUTot", "")
        if cpus.isdigit():
            host_vars["slurm_cpus"] = int(cpus)
        hosts.append({"name": name, "vars": host_vars})
    return hosts
