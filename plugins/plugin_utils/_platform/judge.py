# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform verdict of every node: its ``cvs.cluster.platform_probe`` result against the settings
(``settings.py``) and, for the facts of ``uniform``, against the other nodes.

Versions (kernel, ROCm, amd-smi, driver, VBIOS) are read the way preflight reads them (``_preflight.node_facts``)
and compared across nodes with preflight's majority rule (``_preflight.uniformity_problems``). Every problem is one
sentence naming the device or setting, what was expected and what was found; the reason names the node. Pure
logic, no Ansible imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._amd_smi import decode_json, gpu_items
from ansible_collections.cvs.cluster.plugins.plugin_utils._node_probe import probe_failure
from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.pci import pci_problems
from ansible_collections.cvs.cluster.plugins.plugin_utils._platform.settings import (
    check_settings,
    cmdline_item,
    human_size,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._preflight import node_facts, uniformity_problems

TOOL_FIX = {
    "lspci": "install pciutils or set platform_lspci_path",
    "amd-smi": "install amd-smi (ROCm) or set platform_amd_smi_path; null skips the ROCm and firmware checks",
}


def cmdline_problems(cmdline: str, wanted: list[str]) -> list[str]:
    """Each wanted kernel parameter against the command line: ``key=value`` must be set to that value (for a
    comma-separated option such as ``pci=noaer,realloc=off``, among its values), ``key`` present, ``!key[=value]``
    absent. The found value names every setting of that key."""
    tokens = cmdline.split()
    problems = []
    for item in wanted:
        absent, key, value = cmdline_item(item, "platform_kernel_cmdline")
        same_key = [t for t in tokens if t.partition("=")[0] == key]
        hits = [t for t in same_key if _sets(t, value)]
        found = " ".join(same_key) if same_key else "not set"
        if absent and hits:
            problems.append(f"kernel command line: {item[1:].strip()} must not be set, found {' '.join(hits)}")
        elif not absent and not hits:
            problems.append(f"kernel command line: expected {item}, found {found}")
    return problems


def _sets(token: str, value: Optional[str]) -> bool:
    """Whether a command-line token of the wanted key sets ``value`` (any value for a bare key)."""
    if value is None:
        return True
    token_value = token.partition("=")[2]
    return token_value == value or value in token_value.split(",")


def firmware_versions(output: Any) -> Optional[dict[str, list[tuple[Any, str]]]]:
    """``{fw_id: [(gpu, version), ...]}`` from ``amd-smi firmware --json`` (a list of ``{gpu, fw_list}``, also
    wrapped in ``gpu_data``), None when it is not that JSON."""
    items = gpu_items(output)
    if items is None:
        data = decode_json(output)
        items = data if isinstance(data, list) else None
    if items is None:
        return None
    out: dict[str, list[tuple[Any, str]]] = {}
    for gpu in items:
        entries = gpu.get("fw_list") or gpu.get("FW_LIST") or []
        if isinstance(entries, Mapping):
            entries = [{"fw_id": k, "fw_version": v} for k, v in entries.items()]
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, Mapping):
                continue
            name = entry.get("fw_id") or entry.get("fw_name")
            if name is not None:
                out.setdefault(str(name), []).append((gpu.get("gpu"), str(entry.get("fw_version"))))
    return out


def _fix(missing: Mapping[str, Any]) -> str:
    return TOOL_FIX.get(str(missing.get("tool")), "install it")


def _contains(found: Any, want: Optional[str]) -> bool:
    return want is None or (found is not None and want.lower() in str(found).lower())


def _value(read: Any) -> Any:
    return read.get("value") if isinstance(read, Mapping) else None


def _read_problem(read: Any, what: str) -> Optional[str]:
    if isinstance(read, Mapping) and read.get("problem"):
        return f"{what} could not be read ({read['problem']})"
    return None


def node_verdict(probe: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[list[str], list[str], dict[str, Any]]:
    """``(problems, notes, facts)`` of one node's probe (tools present)."""
    facts, problems = node_facts(probe)
    facts.pop("hostname", None)
    notes: list[str] = []
    cmdline = probe.get("cmdline") or {}
    if cmdline.get("value") is None:
        problems.append(_read_problem(cmdline, "the kernel command line") or "the kernel command line was not read")
    else:
        problems.extend(cmdline_problems(str(cmdline["value"]), settings["kernel_cmdline"]))
    numa = _value(probe.get("numa_balancing"))
    if numa is not None:
        facts["numa_balancing"] = int(numa) if str(numa).strip().isdigit() else numa
        want = settings["numa_balancing"]
        if want is not None and str(facts["numa_balancing"]) != str(want):
            problems.append(f"NUMA balancing (kernel.numa_balancing) is {numa}, expected {want}")
    elif settings["numa_balancing"] is not None:
        notes.append(_read_problem(probe.get("numa_balancing"), "NUMA balancing") or "NUMA balancing not read")
    thp = _value((probe.get("thp") or {}).get("enabled"))
    if thp is not None:
        facts["thp_enabled"] = thp
        if settings["thp_enabled"] is not None and thp not in settings["thp_enabled"]:
            problems.append(
                f"transparent huge pages (transparent_hugepage/enabled) is {thp}, expected "
                f"{' or '.join(settings['thp_enabled'])}"
            )
    elif settings["thp_enabled"] is not None:
        notes.append("transparent huge pages not checked: the kernel has no transparent_hugepage/enabled")
    memory = (probe.get("memory") or {}).get("bytes")
    if memory is not None:
        facts["online_memory"] = human_size(memory)
        want = settings["online_memory"]
        if want is not None and human_size(want) != facts["online_memory"]:
            problems.append(f"online memory is {facts['online_memory']}, expected {human_size(want)}")
    elif settings["online_memory"] is not None:
        problems.append(f"online memory could not be read ({(probe.get('memory') or {}).get('problem')})")
    release = _value(probe.get("os_release")) or {}
    if release:
        facts["os"] = release.get("PRETTY_NAME") or " ".join(
            v for v in (release.get("NAME"), release.get("VERSION")) if v
        )
    bios = _value(probe.get("bios_version"))
    if bios:
        facts["bios_version"] = bios
    for key, fact, what in (
        ("os_version", "os", "OS release"),
        ("kernel_version", "kernel", "kernel"),
        ("rocm_version", "rocm_version", "ROCm version"),
        ("bios_version", "bios_version", "BIOS version"),
    ):
        want = settings[key]
        if want is not None and not _contains(facts.get(fact), want):
            unread = _read_problem(probe.get(key), what) if key == "bios_version" else None
            problems.append(
                f"{unread}, expected {want}" if unread else f"{what} is {facts.get(fact) or 'unknown'}, expected {want}"
            )
    firmware = settings["gpu_firmware"]
    if firmware:
        run = (probe.get("commands") or {}).get("amd_smi_firmware")
        versions = firmware_versions(run.get("stdout")) if run and run.get("rc") == 0 else None
        if versions is None:
            why = (run or {}).get("problem") or (run or {}).get("stderr") or "not the JSON amd-smi prints"
            problems.append(
                f"the GPU firmware versions (amd-smi firmware --json) could not be read ({str(why).strip()})"
            )
        else:
            for fw_id, want in firmware.items():
                seen = versions.get(fw_id)
                if not seen:
                    problems.append(f"GPU firmware {fw_id}: expected {want}, not reported by amd-smi")
                    continue
                for gpu, version in seen:
                    if version != want:
                        problems.append(f"GPU {gpu} firmware {fw_id}: expected {want}, found {version}")
    pci_bad, pci_notes, pci_facts = pci_problems(probe.get("pci"), settings)
    problems.extend(pci_bad)
    notes.extend(pci_notes)
    facts.update(pci_facts)
    return problems, notes, facts


def judge(probes: Mapping[str, Any], settings: Any) -> dict[str, dict[str, Any]]:
    """Per node: ``{status, reason, problems, notes, lines, facts, metrics}``; ``probes`` maps node to its
    registered ``cvs.cluster.platform_probe`` result."""
    checked = check_settings(settings)
    verdicts: dict[str, dict[str, Any]] = {}
    facts: dict[str, dict[str, Any]] = {}
    found: dict[str, tuple[list[str], list[str]]] = {}
    for node, probe in probes.items():
        failure = probe_failure(probe, "missing")
        if failure is None and probe.get("missing"):
            failure = "; ".join(
                f"{m.get('tool')} not found on {node} ({m.get('path')}): {_fix(m)}" for m in probe["missing"]
            )
            failure = f"nothing checked: {failure}"
        if failure is not None:
            verdicts[node] = {
                "status": "ERROR",
                "reason": f"{node}: platform could not be checked: {failure}",
                "problems": [failure],
                "notes": [],
                "lines": [failure],
                "facts": {},
                "metrics": [],
            }
            continue
        problems, notes, node_f = node_verdict(probe, checked)
        facts[node], found[node] = node_f, (problems, notes)
    for node, extra in uniformity_problems(facts, checked["uniform"]).items():
        found[node][0].extend(extra)
    for node, (problems, notes) in found.items():
        links = facts[node].pop("pci_links", {})
        metrics = []
        if checked["gpu_count"] is not None and "gpus_on_pci" in facts[node]:
            have = facts[node]["gpus_on_pci"]
            metrics.append(
                _metric("gpus_on_pci", have, "GPUs", {"equals": checked["gpu_count"]}, have == checked["gpu_count"])
            )
        verdicts[node] = {
            "status": "FAIL" if problems else "PASS",
            "reason": (f"{node}: " + "; ".join(problems))
            if problems
            else f"platform configuration as expected on {node}",
            "problems": problems,
            "notes": notes,
            "lines": problems + [f"note: {n}" for n in notes],
            "facts": {k: v for k, v in facts[node].items() if v is not None},
            "metrics": metrics,
            "pci_links": links,
        }
    return {node: verdicts[node] for node in probes}


def _metric(name: str, value: Any, unit: str, threshold: dict[str, Any], ok: bool) -> dict[str, Any]:
    return {
        "metric": name,
        "value": value,
        "unit": unit,
        "threshold": threshold,
        "status": "PASS" if ok else "FAIL",
        "kind": "platform",
        "message": None,
    }
