# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the Slurm backend (docs: slurm_*.yml); the logic is plugins/plugin_utils/_slurm.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils import _slurm


def slurm_settings(raw: Any, head: Optional[str] = None) -> dict[str, Any]:
    try:
        return _slurm.settings(raw, head)
    except _slurm.SlurmSettingsError as exc:
        raise AnsibleFilterError(str(exc)) from None


def slurm_time_problem(config: Mapping[str, Any], budgets: Mapping[str, Any]) -> str:
    return _slurm.time_problem(config, budgets)


def slurm_salloc_argv(config: Mapping[str, Any], nodes: Sequence[str], job_name: str) -> list[str]:
    return _slurm.salloc_argv(config, list(nodes), job_name)


def slurm_step_argv(
    config: Mapping[str, Any], job_id: Any, nodes: Any, name: str, output: Optional[str] = None
) -> list[str]:
    if isinstance(nodes, str):
        return _slurm.node_step_argv(config, str(job_id), nodes, name)
    if not output:
        raise AnsibleFilterError("slurm_step_argv: a step over several nodes needs output (a path with %j and %t)")
    return _slurm.multi_node_step_argv(config, str(job_id), list(nodes), name, output)


def slurm_reply(output: Any) -> dict[str, Any]:
    if isinstance(output, Mapping):  # a registered command result: what the client printed on both streams
        output = f"{output.get('stderr') or ''}\n{output.get('stdout') or ''}"
    text = str(output or "")
    records = _slurm.parse_oneliner(text)
    for record in records:
        if "State" in record:
            record["available"] = not _slurm.unavailable(record["State"])
    return {
        "job_id": _slurm.granted_job(text),
        "message": _slurm.slurm_message(text),
        "records": records,
        "conf": _slurm.config_path(text),
    }


def slurm_split_step(stderr: Any) -> dict[str, Any]:
    return _slurm.split_step_marker(str(stderr or ""))


def slurm_step_state(exit_code: Any, srun_output: Any = "", stopped: bool = False) -> str:
    return _slurm.step_state(exit_code, str(srun_output or ""), bool(stopped))


class FilterModule:
    """Slurm backend filters."""

    def filters(self) -> dict:
        return {
            "slurm_settings": slurm_settings,
            "slurm_time_problem": slurm_time_problem,
            "slurm_salloc_argv": slurm_salloc_argv,
            "slurm_step_argv": slurm_step_argv,
            "slurm_reply": slurm_reply,
            "slurm_split_step": slurm_split_step,
            "slurm_step_state": slurm_step_state,
        }
