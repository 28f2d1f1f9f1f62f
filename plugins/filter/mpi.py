# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters cvs.cluster.mpi_probe_commands, mpi_launch_problems and mpi_first_failure (docs: their .yml files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._mpi import (
    MpiSettingsError,
    check_mca,
    first_failure,
    launch_problems,
    ompi_keep_pattern,
    rank_nodes,
)


def mpi_probe_commands(mca: Any, ompi_info: str = "ompi_info") -> dict:
    try:
        names = list(check_mca(mca))
    except MpiSettingsError as exc:
        raise AnsibleFilterError(f"mpi_probe_commands: {exc}") from exc
    return {"ompi_info": {"argv": [str(ompi_info), "--all", "--parsable"], "keep": ompi_keep_pattern(names)}}


def mpi_launch_problems(probes: Any, slots: Any = 1, mca: Any = None, mpirun: str = "mpirun") -> dict:
    if not isinstance(probes, Mapping):
        raise AnsibleFilterError(
            f"mpi_launch_problems: expected node to node_probe result, got {type(probes).__name__}"
        )
    try:
        return launch_problems(probes, slots, mca, str(mpirun))
    except MpiSettingsError as exc:
        raise AnsibleFilterError(f"mpi_launch_problems: {exc}") from exc


def mpi_first_failure(lines: Any, nodes: Any, slots: Any = 1) -> Any:
    if isinstance(lines, str):
        lines = [lines]
    if not isinstance(lines, Sequence) or not isinstance(nodes, Sequence) or isinstance(nodes, str):
        raise AnsibleFilterError("mpi_first_failure: expected a list of texts and the list of nodes in rank order")
    split = [line for text in lines for line in str(text).splitlines()]
    return first_failure(split, rank_nodes([str(n) for n in nodes], int(slots)))


class FilterModule:
    """MPI launch filters."""

    def filters(self) -> dict:
        return {
            "mpi_probe_commands": mpi_probe_commands,
            "mpi_launch_problems": mpi_launch_problems,
            "mpi_first_failure": mpi_first_failure,
        }
