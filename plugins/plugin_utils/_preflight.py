# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight verdict: each node's probe (``cvs.cluster.node_probe``) read into facts, then judged against the
inventory's expectations and against the other nodes (filter ``cvs.cluster.preflight_judge``).

A node FAILs preflight when a fact that must be the same everywhere (kernel, ROCm, driver, firmware, RVS, GPU
model and count) differs from what most nodes have, when it does not have the GPUs the inventory expects, when its
clock is off, a run directory lacks space, a required binary is missing, the kernel log holds GPU/RAS/PCIe errors
or an RDMA port is not active. Each problem is one sentence naming the node, the fact and both values.

The fact ``gpu_model`` (a key of the check record and of results.json) is the GPUs' market name as amd-smi
prints it ("AMD Instinct MI300X"); the expectation against it is ``gpu_market_name`` (text it must contain). RVS's
configuration folder ("MI300X") is another thing, named in plugin_utils/_rvs/detect.py.

Pure logic, no Ansible imports.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._amd_smi import gpu_field, gpu_items
from ansible_collections.cvs.cluster.plugins.plugin_utils._node_probe import probe_failure
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.detect import rvs_version_text

#: facts that must be equal on every node, in the order problems are listed
UNIFORM_FACTS = (
    "kernel",
    "rocm_version",
    "amd_smi_version",
    "driver_version",
    "vbios_version",
    "rvs_version",
    "gpu_model",
    "gpus",
)
EXPECT_KEYS = {
    "gpu_count",
    "gpu_market_name",
    "max_clock_skew",
    "min_free_mb",
    "uniform",
    "require_kernel_log",
}
_ROCM = re.compile(r"ROCm version:\s*([^\s|]+)", re.IGNORECASE)
_TOOL = re.compile(r"AMDSMI Tool:\s*([^\s|]+)", re.IGNORECASE)


class PreflightError(ValueError):
    """Settings the judge cannot use (the message names the key)."""


def _one(values: Sequence[Any]) -> Any:
    """The single value all GPUs share, a sorted ``a / b`` when they differ, None when there is none."""
    seen = sorted({str(v) for v in values if v not in (None, "", "N/A")})
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else " / ".join(seen)


def _first_line(text: Any) -> Optional[str]:
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()
    return None


def node_facts(probe: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What a probe says, as flat facts, and the problems met reading it (a command that did not answer)."""
    commands = probe.get("commands") or {}
    problems: list[str] = []
    facts: dict[str, Any] = {"kernel": probe.get("kernel"), "hostname": probe.get("hostname")}

    def output(name: str, what: str) -> Optional[str]:
        run = commands.get(name)
        if run is None:
            return None
        if run.get("rc") != 0:
            why = run.get("problem") or f"exit {run.get('rc')}: {_first_line(run.get('stderr')) or 'no message'}"
            problems.append(f"{what} could not be read ({why})")
            return None
        return str(run.get("stdout") or "")

    version = output("amd_smi_version", "the amd-smi/ROCm version")
    if version is not None:
        rocm, tool = _ROCM.search(version), _TOOL.search(version)
        facts["rocm_version"] = rocm.group(1) if rocm else None
        facts["amd_smi_version"] = tool.group(1) if tool else None
    static = output("amd_smi_static", "the GPU list (amd-smi static)")
    if static is not None:
        gpus = gpu_items(static)
        if gpus is None:
            problems.append("the GPU list (amd-smi static) is not the JSON amd-smi prints")
        else:
            facts["gpus"] = len(gpus)
            facts["gpu_model"] = _one([gpu_field(g, "asic", "market_name") for g in gpus])
            facts["driver_version"] = _one([gpu_field(g, "driver", "version") for g in gpus])
            facts["vbios_version"] = _one([gpu_field(g, "vbios", "version") for g in gpus])
    rvs = output("rvs_version", "the RVS version")
    if rvs is not None:
        facts["rvs_version"] = rvs_version_text(rvs) or _first_line(rvs)
    return facts, problems


def check_expect(expect: Any) -> dict[str, Any]:
    if not isinstance(expect, Mapping):
        raise PreflightError(f"the expectations must be a mapping, got {type(expect).__name__}")
    unknown = sorted(set(expect) - EXPECT_KEYS)
    if unknown:
        raise PreflightError(f"unknown expectation(s) {', '.join(unknown)}; known: {', '.join(sorted(EXPECT_KEYS))}")
    out = dict(expect)
    for key in ("gpu_count", "min_free_mb"):
        value = out.get(key)
        if value in (None, ""):
            out[key] = None
            continue
        try:
            out[key] = int(value)
        except (TypeError, ValueError) as exc:
            raise PreflightError(f"{key} must be a whole number, got {value!r}") from exc
        if out[key] < 0:
            raise PreflightError(f"{key} must not be negative, got {value!r}")
    skew = out.get("max_clock_skew")
    try:
        out["max_clock_skew"] = None if skew in (None, "") else float(skew)
    except (TypeError, ValueError) as exc:
        raise PreflightError(f"max_clock_skew must be a number of seconds, got {skew!r}") from exc
    uniform = out.get("uniform", list(UNIFORM_FACTS))
    if isinstance(uniform, str) or not isinstance(uniform, Sequence):
        raise PreflightError(f"uniform must be a list of facts, got {uniform!r}")
    bad = sorted(set(map(str, uniform)) - set(UNIFORM_FACTS))
    if bad:
        raise PreflightError(f"uniform: unknown fact(s) {', '.join(bad)}; known: {', '.join(UNIFORM_FACTS)}")
    out["uniform"] = [f for f in UNIFORM_FACTS if f in set(map(str, uniform))]
    out["gpu_market_name"] = str(out["gpu_market_name"]) if out.get("gpu_market_name") else None
    out["require_kernel_log"] = bool(out.get("require_kernel_log", False))
    return out


def clock_skew(node_time: Any, sent: Any, returned: Any) -> Optional[float]:
    """Seconds the node's clock lies outside the controller's window [sent, returned] (0 inside), or None."""
    try:
        t, a, b = float(node_time), float(sent), float(returned)
    except (TypeError, ValueError):
        return None
    if t < a:
        return t - a
    if t > b:
        return t - b
    return 0.0


def _nodes_text(nodes: Sequence[str]) -> str:
    return ", ".join(sorted(nodes))


def uniformity_problems(facts: Mapping[str, Mapping[str, Any]], keys: Sequence[str]) -> dict[str, list[str]]:
    """Per node, the facts where it differs from the value most nodes have.

    With no strict majority (two nodes, two values; or three values on three nodes) every node is named with its
    value, since nothing says which one is right."""
    problems: dict[str, list[str]] = {node: [] for node in facts}
    for key in keys:
        values = {node: f.get(key) for node, f in facts.items() if f.get(key) is not None}
        counts = Counter(str(v) for v in values.values())
        if len(counts) < 2:
            continue
        (top, top_n), (_second, second_n) = counts.most_common(2)
        if top_n > second_n:
            same = [n for n, v in values.items() if str(v) == top]
            for node, value in values.items():
                if str(value) != top:
                    problems[node].append(f"{key} is {value}, not {top} as on {_nodes_text(same)}")
        else:
            listing = "; ".join(f"{n}: {values[n]}" for n in sorted(values))
            for node in values:
                problems[node].append(f"{key} differs across nodes with no majority ({listing})")
    return problems


def judge(probes: Mapping[str, Any], expect: Any) -> dict[str, dict[str, Any]]:
    """Per node: ``{status, reason, problems, notes, lines, facts, metrics}`` (``lines``: the problems, then the
    notes as ``note: ...``, as the check record shows them).

    ``probes`` maps node to ``{probe, sent, returned}`` (the module's result and the controller's clock around
    the call); a node whose probe failed is an ERROR naming the module's message."""
    settings = check_expect(expect)
    facts: dict[str, dict[str, Any]] = {}
    problems: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    metrics: dict[str, list[dict[str, Any]]] = {}
    errors: dict[str, str] = {}
    for node, entry in probes.items():
        entry = entry if isinstance(entry, Mapping) else {}
        probe = entry.get("probe")
        failure = probe_failure(probe, "commands")
        if failure is not None:
            errors[node] = failure
            continue
        node_f, read_problems = node_facts(probe)
        facts[node], problems[node], notes[node], metrics[node] = node_f, read_problems, [], []
        _node_checks(node_f, probe, entry, settings, problems[node], notes[node], metrics[node])
    for node, extra in uniformity_problems(facts, settings["uniform"]).items():
        problems[node].extend(extra)
    verdicts: dict[str, dict[str, Any]] = {}
    for node in probes:
        if node in errors:
            verdicts[node] = {
                "status": "ERROR",
                "reason": f"{node}: preflight could not probe the node: {errors[node]}",
                "problems": [errors[node]],
                "notes": [],
                "lines": [errors[node]],
                "facts": {},
                "metrics": [],
            }
            continue
        bad = problems[node]
        verdicts[node] = {
            "status": "FAIL" if bad else "PASS",
            "reason": f"{node}: " + "; ".join(bad) if bad else f"all preflight checks passed on {node}",
            "problems": bad,
            "notes": notes[node],
            "lines": bad + [f"note: {note}" for note in notes[node]],
            "facts": {k: v for k, v in facts[node].items() if v is not None},
            "metrics": metrics[node],
        }
    return verdicts


def _node_checks(
    facts: Mapping[str, Any],
    probe: Mapping[str, Any],
    entry: Mapping[str, Any],
    settings: Mapping[str, Any],
    problems: list[str],
    notes: list[str],
    metrics: list[dict[str, Any]],
) -> None:
    want_count, want_market_name = settings["gpu_count"], settings["gpu_market_name"]
    if want_count is not None:
        have = facts.get("gpus")
        metrics.append(_metric("gpus", have, "GPUs", {"equals": want_count}, have == want_count))
        if have is not None and have != want_count:
            problems.append(f"{have} GPU(s) found, the inventory expects {want_count}")
        elif have is None:
            problems.append(f"the GPU count could not be read (the inventory expects {want_count})")
    market_name = facts.get("gpu_model")
    if want_market_name and market_name and want_market_name.lower() not in str(market_name).lower():
        problems.append(f"GPU model is {market_name}, the inventory expects {want_market_name}")
    skew = clock_skew(probe.get("time"), entry.get("sent"), entry.get("returned"))
    limit = settings["max_clock_skew"]
    if skew is not None and limit is not None:
        metrics.append(_metric("clock_skew", round(skew, 3), "s", {"max": limit}, abs(skew) <= limit))
        if abs(skew) > limit:
            problems.append(f"clock is {skew:+.1f} s off the controller's (limit {limit:g} s)")
    for disk in probe.get("disk") or []:
        free, floor = disk.get("free_mb"), settings["min_free_mb"]
        if disk.get("problem"):
            problems.append(f"free space under {disk.get('path')} could not be read: {disk['problem']}")
        elif floor is not None and free is not None:
            metrics.append(_metric(f"free_mb {disk.get('path')}", free, "MiB", {"min": floor}, free >= floor))
            if free < floor:
                problems.append(f"{free} MiB free under {disk.get('path')} ({disk.get('probed')}), needs {floor} MiB")
    missing = sorted(name for name, where in (probe.get("binaries") or {}).items() if not where)
    if missing:
        problems.append(f"required binaries not found: {', '.join(missing)}")
    log = probe.get("kernel_log") or {}
    if log.get("readable") is False:
        (problems if settings["require_kernel_log"] else notes).append(f"kernel log not checked: {log.get('problem')}")
    for match in (log.get("matches") or [])[:3]:
        problems.append(f"kernel log ({match.get('name')}): {match.get('line')}")
    if int(log.get("matched") or 0) > 3:
        problems.append(f"{int(log['matched']) - 3} more kernel-log error line(s)")
    for port in probe.get("rdma") or []:
        if str(port.get("state", "")).upper() != "ACTIVE":
            problems.append(
                f"RDMA port {port.get('device')}/{port.get('port')} is {port.get('state') or '?'}"
                f" ({port.get('phys_state') or '?'})"
            )


def _metric(name: str, value: Any, unit: str, threshold: dict[str, Any], ok: bool) -> dict[str, Any]:
    return {
        "metric": name,
        "value": value,
        "unit": unit,
        "threshold": threshold,
        "status": "PASS" if ok else "FAIL",
        "kind": "preflight",
        "message": None,
    }
