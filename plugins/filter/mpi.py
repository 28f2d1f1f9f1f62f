# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the cvs.cluster.mpi role (docs: their .yml files): mpi_settings, mpi_plan, mpi_blocker,
mpi_reach_blocker, mpi_job_verdict, and the building blocks mpi_probe_commands, mpi_launch_problems and
mpi_first_failure."""

from __future__ import annotations

import glob
import os
import secrets
import string
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._mpi import (
    MpiSettingsError,
    check_mca,
    check_settings,
    first_failure,
    job_hosts,
    job_verdict,
    launch_blocker,
    launch_plan,
    launch_problems,
    probe_commands,
    rank_nodes,
    reach_blocker,
)


def _utc(fmt: str) -> str:
    return time.strftime(fmt, time.gmtime())


def mpi_settings(settings: Any) -> dict:
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError(
            f"mpi_settings: expected the role's settings as a mapping, got {type(settings).__name__}"
        )
    try:
        return check_settings(settings)
    except MpiSettingsError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def mpi_plan(hosts: Any, settings: Any) -> dict:
    """The job's plan, or ``{problem}`` naming the setting at fault (the role fails every host with it)."""
    if isinstance(hosts, (str, Mapping)) or not isinstance(hosts, Sequence):
        raise AnsibleFilterError("mpi_plan: expected the variables of the play's hosts (a list of hostvars)")
    try:
        checked = check_settings(settings if isinstance(settings, Mapping) else {})
        tag = "{}-{}-{}".format(
            checked["name"],
            _utc("%Y%m%dT%H%M%S"),
            "".join(secrets.choice(string.ascii_lowercase + string.digits) for _letter in range(4)),
        )
        plan = launch_plan(job_hosts(hosts, checked["ssh_port"]), checked, tag, _utc("%Y-%m-%dT%H:%M:%SZ"))
    except MpiSettingsError as exc:
        return {"problem": str(exc), "hosts": [], "settings": {}}
    return {**plan, "problem": "", "settings": checked}


def mpi_blocker(hosts: Any, plan: Any) -> str:
    """What keeps the job from starting after the probe (hosts: the hostvars of the plan's hosts, with
    ``_mpi_probe``); '' when nothing does."""
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("mpi_blocker: expected the job's plan (cvs.cluster.mpi_plan)")
    if plan.get("problem"):
        return str(plan["problem"])
    probes = {str(hv.get("cvs_node") or hv.get("inventory_hostname")): hv.get("_mpi_probe") for hv in hosts}
    try:
        return launch_blocker(plan, probes, plan["settings"])
    except MpiSettingsError as exc:
        return str(exc)


def mpi_reach_blocker(reach: Any, plan: Any, prepared: Any) -> str:
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("mpi_reach_blocker: expected the job's plan (cvs.cluster.mpi_plan)")
    return reach_blocker(plan, prepared if isinstance(prepared, Mapping) else {}, reach)


def mpi_job_verdict(plan: Any, launched: Any, watch: Any, stopped: Any) -> dict:
    """``mpi_job``, reading the ranks' and mpirun's output from the controller copies in the plan's ``logs_dir``."""
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("mpi_job_verdict: expected the job's plan (cvs.cluster.mpi_plan)")
    texts = []
    for path in sorted(glob.glob(os.path.join(glob.escape(str(plan["logs_dir"])), "*.log"))):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                texts.append(fh.read())
        except OSError:
            continue
    mapping = [x if isinstance(x, Mapping) else {} for x in (launched, watch, stopped)]
    return job_verdict(plan, *mapping, texts, _utc("%Y-%m-%dT%H:%M:%SZ"))


def mpi_probe_commands(mca: Any, ompi_info: str = "ompi_info") -> dict:
    try:
        return probe_commands(check_mca(mca), str(ompi_info))
    except MpiSettingsError as exc:
        raise AnsibleFilterError(f"mpi_probe_commands: {exc}") from exc


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
            "mpi_settings": mpi_settings,
            "mpi_plan": mpi_plan,
            "mpi_blocker": mpi_blocker,
            "mpi_reach_blocker": mpi_reach_blocker,
            "mpi_job_verdict": mpi_job_verdict,
            "mpi_probe_commands": mpi_probe_commands,
            "mpi_launch_problems": mpi_launch_problems,
            "mpi_first_failure": mpi_first_failure,
        }
