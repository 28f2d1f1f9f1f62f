# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An MPI launch across the workload hosts (role cvs.cluster.mpi): its settings, its plan, what must hold before
``mpirun`` starts, and the job's verdict (which rank, and node, failed first).

:func:`check_settings` checks the role's variables; :func:`launch_plan` turns them and the hosts into everything
the role's tasks need (head, hostfile, the job's key, mpirun's argv, the SSH commands, the logs to watch). Every
node is probed (``cvs.cluster.node_probe``: ``mpirun`` present, CPUs, and the lines of
``ompi_info --all --parsable`` about the requested ``--mca`` settings); :func:`launch_problems` names, per node,
a missing ``mpirun``, more slots than CPUs, and an ``--mca`` setting this Open MPI does not know or would reject,
and :func:`reach_problems` a node the head cannot reach over SSH, so the suite fails before anything is launched.
:func:`job_verdict` judges the job from mpirun's exit status, the watch and the ranks' output.

Pure logic, no Ansible imports.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import path_component
from ansible_collections.cvs.cluster.plugins.plugin_utils._common.shell import EnvNameError, quote_all, valid_env_names
from ansible_collections.cvs.cluster.plugins.plugin_utils._node_probe import probe_failure

BOOL_WORDS = {"0", "1", "true", "false", "yes", "no", "t", "f", "y", "n", "on", "off", "enabled", "disabled"}
_RANK_EXIT = re.compile(r"cvs-mpi: rank (\d+) on (\S+) exited with status (\d+)")
_PROCESS = re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]")
_EXIT_CODE = re.compile(r"Exit code:\s*(\d+)")
_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")


class MpiSettingsError(ValueError):
    """Launch settings that cannot work anywhere (the message names the setting)."""


def ompi_keep_pattern(names: Sequence[str]) -> str:
    """The ``ompi_info --all --parsable`` lines the checks need: every component, every parameter's type (for the
    closest name to a misspelt one), and the allowed values of the requested parameters."""
    wanted = "|".join(re.escape(str(n)) for n in sorted(set(names))) or "(?!)"
    return rf'^mca:[^:]+:[^:]+:(version:"component:|param:[^:]+:type:|param:({wanted}):enumerator:)'


def parse_ompi_info(text: str) -> dict[str, Any]:
    """``{components: {framework: [names]}, params: {name: {type, values}}}`` from ``ompi_info --parsable`` lines."""
    components: dict[str, set[str]] = {}
    params: dict[str, dict[str, Any]] = {}
    for line in str(text or "").splitlines():
        parts = line.split(":")
        if len(parts) < 5 or parts[0] != "mca":
            continue
        framework, component, kind = parts[1], parts[2], parts[3]
        if kind == "version" and component != "base":
            components.setdefault(framework, set()).add(component)
        elif kind == "param" and len(parts) >= 6:
            entry = params.setdefault(parts[4], {"type": None, "values": set()})
            if parts[5] == "type" and len(parts) > 6:
                entry["type"] = parts[6]
            elif parts[5] == "enumerator" and len(parts) > 8:
                entry["values"].update({parts[7], parts[8]})
    return {
        "components": {f: sorted(c) for f, c in components.items()},
        "params": {n: {"type": p["type"], "values": sorted(p["values"])} for n, p in params.items()},
    }


def check_mca(mca: Any) -> dict[str, str]:
    """The ``--mca`` settings as name to text; a name or value that cannot be one is an error naming it."""
    if mca in (None, ""):
        return {}
    if not isinstance(mca, Mapping):
        raise MpiSettingsError(f"mpi_mca must be a mapping of MCA parameter to value, got {type(mca).__name__}")
    out: dict[str, str] = {}
    for name, value in mca.items():
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", str(name)):
            raise MpiSettingsError(f"mpi_mca: {name!r} is not an MCA parameter name (letters, digits, '_')")
        if isinstance(value, (Mapping, list)) or value is None:
            raise MpiSettingsError(f"mpi_mca.{name}: the value must be text or a number, got {value!r}")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if not text.strip() or "\n" in text:
            raise MpiSettingsError(f"mpi_mca.{name}: the value must be one non-empty line, got {value!r}")
        out[str(name)] = text
    return out


def mca_problems(mca: Mapping[str, str], info: Mapping[str, Any]) -> list[str]:
    """What this Open MPI (its ``ompi_info``) says against each ``--mca`` setting."""
    components: Mapping[str, Sequence[str]] = info.get("components") or {}
    params: Mapping[str, Mapping[str, Any]] = info.get("params") or {}
    problems: list[str] = []
    for name, value in mca.items():
        if name in components:  # a framework's selection list: btl tcp,self / pml ^ucx
            known = list(components[name])
            for wanted in [v.strip() for v in value.lstrip("^").split(",") if v.strip()]:
                if wanted not in known:
                    problems.append(
                        f"--mca {name} {value}: no {name} component named {wanted!r} (this Open MPI has "
                        f"{', '.join(known) or 'none'})"
                    )
            continue
        param = params.get(name)
        if param is None:
            close = difflib.get_close_matches(name, list(params), n=1)
            problems.append(
                f"--mca {name} {value}: Open MPI knows no parameter {name!r}"
                + (f" (did you mean {close[0]}?)" if close else "")
            )
            continue
        kind, values = param.get("type"), list(param.get("values") or [])
        if values:
            if value not in values:
                problems.append(f"--mca {name} {value}: not one of {', '.join(values)}")
        elif kind in ("int", "unsigned_int", "long", "unsigned_long", "size_t") and not re.fullmatch(
            r"-?\d+", value.strip()
        ):
            problems.append(f"--mca {name} {value}: must be a whole number ({kind})")
        elif kind == "bool" and value.strip().lower() not in BOOL_WORDS:
            problems.append(f"--mca {name} {value}: must be true or false")
    return problems


def launch_problems(probes: Mapping[str, Any], slots: Any, mca: Any, mpirun: str = "mpirun") -> dict[str, list[str]]:
    """Per node, what keeps the launch from working there (empty lists when nothing does)."""
    try:
        slots_n = int(slots)
    except (TypeError, ValueError) as exc:
        raise MpiSettingsError(f"mpi_slots_per_node must be a whole number, got {slots!r}") from exc
    if slots_n < 1:
        raise MpiSettingsError(f"mpi_slots_per_node must be at least 1, got {slots!r}")
    settings = check_mca(mca)
    out: dict[str, list[str]] = {}
    for node, probe in probes.items():
        problems: list[str] = []
        out[node] = problems
        failure = probe_failure(probe, "binaries")
        if failure is not None:
            problems.append(f"could not be probed: {failure}")
            continue
        if not (probe.get("binaries") or {}).get(mpirun):
            problems.append(f"mpirun not found ({mpirun}, setting mpi_mpirun)")
            continue
        cpus = probe.get("cpus")
        if isinstance(cpus, int) and slots_n > cpus:
            problems.append(f"{slots_n} slots per node asked (mpi_slots_per_node) but the node has {cpus} CPU(s)")
        info_run = (probe.get("commands") or {}).get("ompi_info") or {}
        if settings and info_run.get("rc") != 0:
            problems.append(
                f"ompi_info could not be read to check mpi_mca: {info_run.get('problem') or info_run.get('stderr')}"
            )
        elif settings:
            problems.extend(
                f"{p} (setting mpi_mca)" for p in mca_problems(settings, parse_ompi_info(info_run.get("stdout", "")))
            )
    return out


def rank_nodes(nodes: Sequence[str], slots: int) -> dict[int, str]:
    """Rank to node under ``--map-by node`` (rank r on node r mod n)."""
    n = len(nodes)
    return {r: nodes[r % n] for r in range(n * int(slots))} if n else {}


def _match(line: str, nearby: Sequence[str], ranks: Mapping[int, str]) -> Optional[dict[str, Any]]:
    m = _RANK_EXIT.search(line)
    if m and int(m.group(3)) != 0:
        rank = int(m.group(1))
        return {"rank": rank, "node": ranks.get(rank, m.group(2)), "status": int(m.group(3)), "line": line.strip()}
    m = _SIGNAL.search(line)
    if m:
        rank = int(m.group(1))
        return {
            "rank": rank,
            "node": ranks.get(rank, m.group(2)),
            "status": 128 + int(m.group(3)),
            "line": line.strip(),
        }
    m = _PROCESS.search(line)
    if m:
        rank = int(m.group(1))
        code = next((int(c.group(1)) for c in map(_EXIT_CODE.search, nearby) if c), None)
        return {"rank": rank, "node": ranks.get(rank), "status": code, "line": line.strip()}
    return None


def first_failure(lines: Sequence[str], ranks: Mapping[int, str]) -> Optional[dict[str, Any]]:
    """The rank that failed first: ``{rank, node, status, line}``, or None.

    ``lines[0]`` is the line that stopped the job when there is one. Then, in order of trust: the rank wrapper's
    ``exited with status`` line (the rank's own exit status), mpirun's ``exited on signal`` report, and mpirun's
    ``Process name: [[j,1],N]`` block (its ``Exit code`` may be cut off when the job was stopped mid-report)."""
    if lines:
        found = _match(lines[0], lines[1:3], ranks)
        if found and found["status"] is not None:
            return found
    for pattern in (_RANK_EXIT, _SIGNAL, _PROCESS):
        for index, line in enumerate(lines):
            if pattern.search(line):
                found = _match(line, lines[index + 1 : index + 3], ranks)
                if found:
                    return found
    return None


# ---- settings and plan ---------------------------------------------------------------------------------------

#: SSH options of every connection the head opens to a node: mpirun's agent and the reach check before the launch
SSH_OPTIONS = (
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=10",
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "LogLevel=ERROR",
)
#: run by /bin/sh on every rank around the program: its exit status becomes a line of the rank's output, the line
#: _RANK_EXIT reads back
RANK_WRAPPER = (
    '"$@"; rc=$?; echo "cvs-mpi: rank ${OMPI_COMM_WORLD_RANK:-?} on $(hostname) exited with status $rc"; exit $rc'
)
#: lines that end the job at once: a rank that exited non-zero (RANK_WRAPPER's line), mpirun's reports of a dead
#: rank or daemon, MPI_Abort
BUILTIN_ERROR_PATTERNS = {
    "rank_exit": r"cvs-mpi: rank \d+ on \S+ exited with status [1-9]\d*",
    "rank_signal": r"process rank \d+ with PID \d+ on node \S+ exited on signal",
    "mpi_abort": r"MPI_ABORT was invoked",
    "daemon_lost": r"ORTE has lost communication|ORTE daemon has unexpectedly failed|ORTE was unable to reliably start",
    "mpirun_abort": r"mpirun (noticed|detected) that",
}
#: the keys of the role's ``_mpi_settings`` (roles/mpi/vars/main.yml), each from the mpi_<key> variable
SETTINGS_KEYS = frozenset(
    ("name", "program", "slots_per_node", "timeout", "stop_grace", "mca", "env", "extra_args", "mpirun", "ssh_port",
     "poll_interval", "stall_timeout", "error_patterns", "results_dir", "run_id")
)  # fmt: skip
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_EXIT_CODE_LINE = re.compile(r"^exit_code: *(\d*) *$", re.MULTILINE)


def _number(value: Any, kind: type) -> Optional[float]:
    try:
        return kind(float(value)) if kind is int else float(value)
    except (TypeError, ValueError):
        return None


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The role's variables (``_mpi_settings``: name, program, slots_per_node, timeout, stop_grace, mca, env,
    extra_args, mpirun, ssh_port, poll_interval, stall_timeout, error_patterns, results_dir, run_id), checked and
    normalised; a bad one raises MpiSettingsError naming it."""
    unknown = sorted(set(settings) - SETTINGS_KEYS)
    if unknown:
        raise MpiSettingsError(f"cvs.cluster.mpi: unknown setting(s) {', '.join(map(str, unknown))}")
    program = settings.get("program")
    name = settings.get("name")
    slots = _number(settings.get("slots_per_node"), int)
    timeout = _number(settings.get("timeout"), float)
    if (
        isinstance(program, (str, bytes))
        or not isinstance(program, Sequence)
        or not program
        or not isinstance(name, str)
        or not _NAME.fullmatch(name)
        or slots is None
        or slots < 1
        or timeout is None
        or timeout <= 0
    ):
        raise MpiSettingsError(
            "cvs.cluster.mpi: mpi_program must name the program of every rank, mpi_name must be letters, digits, "
            "'.', '_' or '-', mpi_slots_per_node at least 1 and mpi_timeout above 0 (got "
            f"mpi_program={program}, mpi_name={name}, mpi_slots_per_node={settings.get('slots_per_node')}, "
            f"mpi_timeout={settings.get('timeout')})"
        )
    extra = settings.get("extra_args") or []
    if isinstance(extra, (str, bytes)) or not isinstance(extra, Sequence):
        raise MpiSettingsError(f"cvs.cluster.mpi: mpi_extra_args must be a list of arguments, got {extra!r}")
    try:
        env = dict(valid_env_names(settings.get("env") or {}, "mpi_env"))
    except EnvNameError as exc:
        raise MpiSettingsError(f"cvs.cluster.mpi: {exc}") from exc
    try:
        mca = check_mca(settings.get("mca"))
    except MpiSettingsError as exc:
        raise MpiSettingsError(f"cvs.cluster.mpi: {exc}") from exc
    patterns = settings.get("error_patterns") or {}
    if not isinstance(patterns, Mapping):
        raise MpiSettingsError(f"cvs.cluster.mpi: mpi_error_patterns must map a name to a regex, got {patterns!r}")
    numbers = {}
    for key, var, kind, floor in (
        ("stop_grace", "mpi_stop_grace", int, 0),
        ("poll_interval", "mpi_poll_interval", float, 0),
        ("stall_timeout", "mpi_stall_timeout", float, 0),
    ):
        value = _number(settings.get(key, 0), kind)
        if value is None or value < floor:
            raise MpiSettingsError(f"cvs.cluster.mpi: {var} must be a number of seconds, got {settings.get(key)!r}")
        numbers[key] = value
    port = settings.get("ssh_port")
    if port not in (None, "") and not _valid_port(port):
        raise MpiSettingsError(f"cvs.cluster.mpi: mpi_ssh_port must be a TCP port, got {port!r}")
    return {
        "name": name,
        "program": [str(a) for a in program],
        "slots_per_node": int(slots),
        "timeout": timeout,
        "mca": mca,
        "env": {str(k): "" if v is None else str(v) for k, v in env.items()},
        "extra_args": [str(a) for a in extra],
        "mpirun": str(settings.get("mpirun") or "mpirun"),
        "ssh_port": None if port in (None, "") else int(port),
        "error_patterns": {**BUILTIN_ERROR_PATTERNS, **{str(k): str(v) for k, v in patterns.items()}},
        "results_dir": str(settings.get("results_dir") or ""),
        "run_id": str(settings.get("run_id") or ""),
        **numbers,
    }


def _valid_port(value: Any) -> bool:
    try:
        return 0 < int(value) < 65536 and not isinstance(value, bool)
    except (TypeError, ValueError):
        return False


def ompi_info_beside(mpirun: str) -> str:
    """``ompi_info`` from mpirun's folder (on PATH when mpirun is)."""
    return mpirun.rsplit("/", 1)[0] + "/ompi_info" if "/" in mpirun else "ompi_info"


def probe_commands(mca: Mapping[str, str], ompi_info: str) -> dict[str, Any]:
    """node_probe's commands: ``ompi_info``, only the lines the ``--mca`` checks need."""
    return {"ompi_info": {"argv": [ompi_info, "--all", "--parsable"], "keep": ompi_keep_pattern(list(mca))}}


def ssh_argv(key: str, port: int, user: str) -> list[str]:
    """``ssh`` as the head runs it to a node: the job's key, the node's port and user, :data:`SSH_OPTIONS`."""
    return ["ssh", "-i", key, "-p", str(port), "-l", user, *SSH_OPTIONS]


def _word(value: Any, what: str) -> str:
    """A value mpirun splits on blanks (the agent, the hostfile) must be one word."""
    text = str(value if value is not None else "")
    if not text or any(c.isspace() for c in text) or "#" in text:
        raise MpiSettingsError(f"cvs.cluster.mpi: {what} must be one word without blanks or '#', got {text!r}")
    return text


def job_hosts(hosts: Sequence[Mapping[str, Any]], ssh_port: Optional[int]) -> list[dict[str, Any]]:
    """The play's hosts (their variables) in rank order (``cvs_node_index``), with what the launch needs of each:
    ``host``, ``node``, ``scratch``, ``address`` (ansible_host), ``port`` (mpi_ssh_port, else ansible_port or 22),
    ``user`` (ansible_user or root)."""
    out = []
    for hv in hosts:
        host = str(hv.get("inventory_hostname"))
        index = hv.get("cvs_node_index")
        if index is None or hv.get("cvs_scratch") in (None, ""):
            raise MpiSettingsError(
                f"cvs.cluster.mpi: {host} has no cvs_node_index or cvs_scratch (run cvs.cluster.prepare first)"
            )
        port = ssh_port if ssh_port is not None else hv.get("ansible_port") or 22
        if not _valid_port(port):
            raise MpiSettingsError(f"cvs.cluster.mpi: {host}: ansible_port must be a TCP port, got {port!r}")
        out.append(
            {
                "host": host,
                "node": str(hv.get("cvs_node") or host),
                "index": int(index),
                "scratch": str(hv["cvs_scratch"]),
                "address": _word(hv.get("ansible_host") or host, f"{host}: ansible_host"),
                "port": int(port),
                "user": _word(hv.get("ansible_user") or "root", f"{host}: ansible_user"),
            }
        )
    return sorted(out, key=lambda h: h["index"])


def launch_plan(hosts: Sequence[Mapping[str, Any]], settings: Mapping[str, Any], tag: str, started: str) -> dict:
    """Everything the role's tasks need for one job, from the checked settings and :func:`job_hosts`.

    The head (rank order first) holds the job's directory ``<cvs_scratch>/mpi/<tag>``: the key, the hostfile (one
    line per node, the head first), this job's copy of mpi_job.sh, mpirun's output and exit status."""
    if not hosts:
        raise MpiSettingsError("cvs.cluster.mpi: no host to run the job on")
    head = hosts[0]
    slots = int(settings["slots_per_node"])
    ranks = len(hosts) * slots
    folder = _word(f"{head['scratch']}/mpi/{tag}", f"{head['host']}: the job's directory (cvs_scratch)")
    key = f"{folder}/id_ed25519"
    comment = f"cvs-mpi-{settings['run_id']}-{tag}"
    agent = " ".join(ssh_argv(key, head["port"], head["user"]))
    env = {**settings["env"], "CVS_RUN_ID": settings["run_id"]}
    mpirun = [settings["mpirun"]] + (["--allow-run-as-root"] if head["user"] == "root" else [])
    mpirun += ["--hostfile", f"{folder}/hostfile", "-np", str(ranks), "--map-by", "node"]
    mpirun += ["--output-filename", f"{folder}/out:nocopy", "--mca", "plm_rsh_agent", agent]
    for param, value in settings["mca"].items():
        mpirun += ["--mca", param, value]
    for variable in env:
        mpirun += ["-x", variable]
    mpirun += [*settings["extra_args"], "/bin/sh", "-c", RANK_WRAPPER, "sh", *settings["program"]]
    script = [f"{folder}/mpi_job.sh"]
    return {
        "name": settings["name"],
        "tag": tag,
        "started": started,
        "head": head["host"],
        "head_node": head["node"],
        "hosts": [h["host"] for h in hosts],
        "nodes": [h["node"] for h in hosts],
        "slots": slots,
        "ranks": ranks,
        "dir": folder,
        "prepare_cmd": "mpi_job.sh "
        + quote_all(["prepare", folder, comment, *(f"{h['address']} slots={slots}" for h in hosts)]),
        "key_comment": comment,
        "key_regexp": " " + re.escape(comment) + "$",
        "reach": {h["host"]: {"node": h["node"], "address": h["address"], "port": h["port"]} for h in hosts[1:]},
        "reach_commands": {h["host"]: [*ssh_argv(key, h["port"], h["user"]), h["address"], "true"] for h in hosts[1:]},
        "launch_argv": [
            "/bin/bash",
            *script,
            "launch",
            folder,
            _seconds(settings["timeout"]),
            str(settings["stop_grace"]),
            *mpirun,
        ],
        "launch_env": {**env, "CVS_NODE": head["node"]},
        "stop_argv": ["/bin/bash", *script, "stop", folder, str(settings["stop_grace"])],
        "probe_commands": probe_commands(settings["mca"], ompi_info_beside(settings["mpirun"])),
        "logs": [{"path": f"{folder}/mpirun.log", "label": "mpirun"}]
        + [{"path": f"{folder}/out/1/rank.{r}/stdout", "label": f"rank.{r}"} for r in range(ranks)],
        "watch_timeout": settings["timeout"] + settings["stop_grace"] + 30,
        "saved": f"{settings['results_dir']}/{settings['run_id']}/logs/{tag}",
        # log_poll's save_dir: one folder per host, named by the path rule
        "logs_dir": f"{settings['results_dir']}/{settings['run_id']}/logs/{tag}/{path_component(head['host'])}",
    }


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def blocked(name: str, problems: Sequence[str]) -> str:
    """The message of a job that cannot start."""
    return f"cvs.cluster.mpi {name} cannot start: " + "; ".join(problems)


def launch_blocker(plan: Mapping[str, Any], probes: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """What keeps the job from starting after the probe, every node and setting at fault ('' when nothing)."""
    found = launch_problems(probes, settings["slots_per_node"], settings["mca"], settings["mpirun"])
    problems = [f"{node}: {'; '.join(items)}" for node, items in found.items() if items]
    return blocked(plan["name"], problems) if problems else ""


def reach_blocker(plan: Mapping[str, Any], prepared: Mapping[str, Any], reach: Mapping[str, Any]) -> str:
    """What keeps the job from starting after the head tried every node over SSH ('' when nothing).

    ``prepared`` is the head's ``mpi_job.sh prepare`` result, ``reach`` its node_probe of the SSH commands."""
    if prepared.get("failed") or prepared.get("unreachable") or prepared.get("rc") not in (0, None):
        why = _first_text(prepared.get("stderr"), prepared.get("msg"), f"exit {prepared.get('rc')}")
        return blocked(plan["name"], [f"the job could not be prepared on {plan['head_node']}: {why}"])
    failure = probe_failure(reach, "commands")
    if failure is not None:
        return blocked(plan["name"], [f"{plan['head_node']} could not try the nodes over SSH: {failure}"])
    problems = []
    for host, target in plan["reach"].items():
        run = (reach.get("commands") or {}).get(host) or {}
        if run.get("rc") != 0:
            why = _first_text(run.get("stderr"), run.get("problem"), f"exit {run.get('rc')}")
            problems.append(
                f"{plan['head_node']} cannot reach {target['node']} at {target['address']} port {target['port']} "
                f"(mpi_ssh_port) over SSH: {why}"
            )
    return blocked(plan["name"], problems) if problems else ""


def _first_text(*values: Any) -> str:
    return next((str(v).strip() for v in values if v not in (None, "") and str(v).strip()), "")


def exit_code(stopped: Mapping[str, Any]) -> Optional[int]:
    """mpirun's exit status from ``mpi_job.sh stop``'s last line, None when it did not exit on its own."""
    found = _EXIT_CODE_LINE.findall(str(stopped.get("stdout") or ""))
    return int(found[-1]) if found and found[-1] else None


def job_verdict(
    plan: Mapping[str, Any],
    launched: Mapping[str, Any],
    watch: Mapping[str, Any],
    stopped: Mapping[str, Any],
    log_texts: Sequence[str],
    finished: str,
) -> dict[str, Any]:
    """``mpi_job``: PASS when mpirun exited 0 and the watch saw no error; FAIL naming the first rank that failed
    and its node, or the watch's reason; ERROR when mpirun could not be launched."""
    rc = exit_code(stopped)
    error = watch.get("error") if isinstance(watch.get("error"), Mapping) else {}
    fail = None
    if launched.get("failed") or launched.get("unreachable") or launched.get("rc") != 0:
        why = _first_text(launched.get("stderr"), launched.get("msg"), f"exit {launched.get('rc')}")
        status, reason = "ERROR", blocked(plan["name"], [f"mpirun could not be launched on {plan['head_node']}: {why}"])
    else:
        lines = ([str(error["line"])] if error.get("line") else []) + [
            line for text in log_texts for line in str(text).splitlines()
        ]
        fail = first_failure(lines, rank_nodes(plan["nodes"], plan["slots"]))
        ok = rc == 0 and not watch.get("failed")
        status = "PASS" if ok else "FAIL"
        if ok:
            reason = f"mpirun {plan['name']}: {plan['ranks']} ranks on {', '.join(plan['nodes'])} exited 0"
        elif fail:
            reason = (
                f"rank {fail['rank']} on {fail['node']} exited with status {fail['status']} (first to fail); "
                "every rank was stopped"
            )
        else:
            shown = rc if rc is not None else "unknown"
            reason = str(watch["msg"]) if "msg" in watch else f"mpirun exited with status {shown}"
    return {
        "name": plan["name"],
        "tag": plan["tag"],
        "status": status,
        "reason": reason,
        "rc": rc,
        "failed_rank": fail["rank"] if fail else None,
        "failed_node": fail["node"] if fail else None,
        "error_line": fail["line"] if fail else (error.get("line") or None),
        "timed_out": bool(watch.get("timed_out", False)),
        "nodes": list(plan["nodes"]),
        "ranks": plan["ranks"],
        "head": plan["head"],
        "dir": plan["dir"],
        "logs": plan["logs_dir"],
        "started": plan["started"],
        "finished": finished,
    }
