# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An MPI launch across the workload hosts (role cvs.cluster.mpi): what must hold before ``mpirun`` starts, and
which rank (and node) failed first.

Every node is probed (``cvs.cluster.node_probe``: ``mpirun`` present, CPUs, and the lines of
``ompi_info --all --parsable`` about the requested ``--mca`` settings); :func:`launch_problems` names, per node,
a missing ``mpirun``, more slots than CPUs, and an ``--mca`` setting this Open MPI does not know or would reject,
so the suite fails before anything is launched.

Pure logic, no Ansible imports.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

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
        if not isinstance(probe, Mapping) or probe.get("failed") or probe.get("unreachable") or "binaries" not in probe:
            problems.append(f"could not be probed: {(probe or {}).get('msg') if isinstance(probe, Mapping) else probe}")
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
