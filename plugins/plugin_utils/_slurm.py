# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm for cvs.cluster (pure Python, >= 3.9): reading Slurm's view of its nodes (``scontrol --oneliner show
node``, for the inventory plugin and prepare), and the Slurm backend's settings, commands, replies and step states.

One line per node of ``Key=Value`` pairs; a value may hold ``=`` (``CfgTRES=cpu=2,mem=1000M``) and the
``Reason`` at the end of a line may hold spaces (``Reason=bad fan [root@2026-12-07T02:40:00]``), so a key is a
word that follows white space and precedes ``=``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.messages import closest

__all__ = [
    "UNAVAILABLE_STATES",
    "SlurmSettingsError",
    "client_env",
    "config_path",
    "granted_job",
    "inventory_hosts",
    "multi_node_step_argv",
    "node_step_argv",
    "parse_oneliner",
    "salloc_argv",
    "settings",
    "slurm_message",
    "split_step_marker",
    "step_state",
    "time_limit_seconds",
    "time_problem",
    "unavailable",
]

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


# --------------------------------------------------------------------------- the Slurm backend's settings

#: Keys of ``cvs_slurm`` and their defaults (``submit_host`` defaults to the head node, filled in by the caller).
SETTINGS_DEFAULTS: dict[str, Any] = {
    "partition": None,
    "account": None,
    "reservation": None,
    "time_limit": "1:00:00",
    "salloc_options": [],
    "srun_options": [],
    "environment": "host",
    "submit_host": None,
    "allocation_wait": 60,
    "conf": None,
}
ENVIRONMENTS = ("host",)
#: The line a step started by :func:`node_step_argv` prints first on its stderr.
STEP_MARKER = "cvs.cluster.step: "
_GRANTED = re.compile(r"Granted job allocation (\d+)")
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_TASK_FAILED = re.compile(r"task \d+: Exited with exit code [1-9]")
_NAME = re.compile(r"^[A-Za-z0-9_.@+-]+$")


class SlurmSettingsError(ValueError):
    """A ``cvs_slurm`` setting that cannot be used; the message starts with its key path."""


def time_limit_seconds(value: Any) -> Optional[int]:
    """Seconds of a Slurm time limit (``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``, ``days-hours``,
    ``days-hours:minutes``, ``days-hours:minutes:seconds``); None for ``UNLIMITED``/``INFINITE``.

    :raises SlurmSettingsError: for anything else.
    """
    text = str(value).strip()
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    match = _TIME.match(text)
    if isinstance(value, bool) or not match:
        raise SlurmSettingsError(
            f"cvs_slurm.time_limit: {value!r} is not a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
            "D-HH:MM:SS or UNLIMITED)"
        )
    days, first, second, third = (int(g) if g is not None else None for g in match.groups())
    if days is not None:  # days-hours[:minutes[:seconds]]
        return ((days * 24 + first) * 60 + (second or 0)) * 60 + (third or 0)
    if third is not None:  # hours:minutes:seconds
        return (first * 60 + second) * 60 + third
    if second is not None:  # minutes:seconds
        return first * 60 + second
    return first * 60


def settings(raw: Any, head: Optional[str] = None) -> dict[str, Any]:
    """``cvs_slurm`` checked and completed with the defaults (``submit_host`` defaults to ``head``).

    :raises SlurmSettingsError: naming the key at fault (an unknown key with the closest valid one).
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise SlurmSettingsError(f"cvs_slurm: must be a mapping of settings, got {type(raw).__name__}")
    out = dict(SETTINGS_DEFAULTS)
    for key, value in raw.items():
        if key not in SETTINGS_DEFAULTS:
            raise SlurmSettingsError(f"cvs_slurm.{key}: is not a known key" + closest(key, SETTINGS_DEFAULTS))
        out[key] = value
    for key in ("partition", "account", "reservation", "submit_host"):
        value = out[key]
        if value in (None, ""):
            out[key] = None
        elif not isinstance(value, str) or not _NAME.match(value):
            raise SlurmSettingsError(f"cvs_slurm.{key}: {value!r} is not a Slurm name (letters, digits, _.@+-)")
    for key in ("salloc_options", "srun_options"):
        value = out[key]
        if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
            raise SlurmSettingsError(
                f"cvs_slurm.{key}: must be a list of options, one argument each (e.g. ['--exclusive']), got {value!r}"
            )
        out[key] = list(value)
    if out["environment"] not in ENVIRONMENTS:
        raise SlurmSettingsError(
            f"cvs_slurm.environment: {out['environment']!r} is not supported: the Slurm backend runs the workload "
            "as Slurm steps in the nodes' host environment (environment: host); a container per node is the "
            "container backend (cvs_orchestrator: container), which does not go through Slurm"
        )
    conf = out["conf"]
    if conf in (None, ""):
        out["conf"] = None
    elif not isinstance(conf, str) or not conf.startswith("/") or any(c.isspace() for c in conf):
        raise SlurmSettingsError(f"cvs_slurm.conf: must be the absolute path of slurm.conf on the nodes, got {conf!r}")
    wait = out["allocation_wait"]
    if isinstance(wait, bool) or not isinstance(wait, int) or wait < 1:
        raise SlurmSettingsError(f"cvs_slurm.allocation_wait: must be a whole number of seconds >= 1, got {wait!r}")
    out["time_limit"] = str(out["time_limit"]).strip()
    out["time_limit_seconds"] = time_limit_seconds(out["time_limit"])
    out["submit_host"] = out["submit_host"] or head
    return out


def time_problem(config: Mapping[str, Any], budgets: Mapping[str, Any]) -> str:
    """Why ``config``'s time limit cannot hold the run (``budgets``: check name to its longest time in seconds),
    or ``''``."""
    limit = config.get("time_limit_seconds")
    spent = {k: int(float(v)) for k, v in budgets.items() if v}
    total = sum(spent.values())
    if limit is None or total <= limit:
        return ""
    parts = " + ".join(f"{k} {v} s" for k, v in spent.items()) + (f" = {total} s" if len(spent) > 1 else "")
    return (
        f"cvs_slurm.time_limit {config.get('time_limit')} ({limit} s) is shorter than the run can take "
        f"({parts}): Slurm would end the job mid-run; raise cvs_slurm.time_limit or lower the timeouts"
    )


def salloc_argv(config: Mapping[str, Any], nodes: Sequence[str], job_name: str) -> list[str]:
    """``salloc`` that holds ``nodes`` for the run without a shell and gives up after ``allocation_wait``."""
    argv = [
        "salloc",
        "--no-shell",
        f"--nodes={len(nodes)}",
        f"--nodelist={','.join(nodes)}",
        f"--job-name={job_name}",
        f"--time={config['time_limit']}",
        f"--immediate={config['allocation_wait']}",
    ]
    for key in ("partition", "account", "reservation"):
        if config.get(key):
            argv.append(f"--{key}={config[key]}")
    return argv + list(config.get("salloc_options") or [])


def granted_job(text: str) -> Optional[str]:
    """The job id of ``salloc: Granted job allocation N`` in salloc's output, else None."""
    match = _GRANTED.search(text or "")
    return match.group(1) if match else None


def slurm_message(text: str) -> str:
    """Slurm's own words from a client's output, its lines joined with ``; ``."""
    return "; ".join(line.strip() for line in (text or "").splitlines() if line.strip())


def config_path(text: str) -> Optional[str]:
    """The ``SLURM_CONF`` line of ``scontrol show config``: the slurm.conf the Slurm clients read."""
    match = re.search(r"^SLURM_CONF\s*=\s*(\S+)\s*$", text or "", re.MULTILINE)
    return match.group(1) if match else None


def client_env(config: Mapping[str, Any]) -> list[str]:
    """``env SLURM_CONF=<conf>`` in front of a Slurm client when the settings name the configuration: privilege
    escalation (sudo) drops the variable from the environment."""
    return ["env", f"SLURM_CONF={config['conf']}"] if config.get("conf") else []


def node_step_argv(config: Mapping[str, Any], job_id: str, node: str, name: str) -> list[str]:
    """argv prefix that runs a command as a one-task step of ``job_id`` on ``node``; the step first prints
    ``cvs.cluster.step: <job>.<step>`` on its stderr (see :func:`split_step_marker`)."""
    return [
        *client_env(config),
        "srun",
        f"--jobid={job_id}",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={node}",
        f"--job-name={name}",
        *list(config.get("srun_options") or []),
        "/bin/sh",
        "-c",
        f'echo "{STEP_MARKER}$SLURM_JOB_ID.$SLURM_STEP_ID" >&2; exec "$@"',
        "cvs-step",
    ]


def multi_node_step_argv(
    config: Mapping[str, Any], job_id: str, nodes: Sequence[str], name: str, output: str
) -> list[str]:
    """argv prefix of one step with a task per node (rank = Slurm's task id, in the allocation's order) that ends
    when one task exits non-zero (``-K1``); each task's output goes to ``output`` (``%j``, ``%t`` expanded)."""
    return [
        *client_env(config),
        "srun",
        f"--jobid={job_id}",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={','.join(nodes)}",
        "--kill-on-bad-exit=1",
        f"--job-name={name}",
        f"--output={output}",
        "--open-mode=append",
        *list(config.get("srun_options") or []),
    ]


def split_step_marker(stderr: str) -> dict[str, Any]:
    """``{'step': '<job>.<step>' or None, 'stderr': stderr without the marker line}``."""
    step = None
    kept = []
    for line in (stderr or "").splitlines(keepends=True):
        if step is None and line.startswith(STEP_MARKER):
            step = line[len(STEP_MARKER) :].strip() or None
            continue
        kept.append(line)
    return {"step": step, "stderr": "".join(kept)}


def step_state(exit_code: Any, srun_output: str, stopped: bool) -> str:
    """A finished step's state from srun's exit status and output (Slurm keeps no record of a finished step
    without accounting): ``COMPLETED``, ``TIMEOUT`` (the job's time limit), ``FAILED`` (a task exited non-zero by
    itself: ``srun: error: node2: task 1: Exited with exit code 137``), ``CANCELLED`` (the run stopped it; its
    tasks died of the signal), ``UNKNOWN`` (srun's status was never written)."""
    text = srun_output or ""
    if "DUE TO TIME LIMIT" in text:
        return "TIMEOUT"
    if exit_code is None or str(exit_code).strip() == "":
        return "UNKNOWN"
    if int(exit_code) == 0:
        return "COMPLETED"
    if _TASK_FAILED.search(text):
        return "FAILED"
    return "CANCELLED" if stopped else "FAILED"
