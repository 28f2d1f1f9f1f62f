# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-local health program (``cvs-health``), run by slurmd as ``HealthCheckProgram`` or as a prolog.

This file runs on the nodes: the role ``cvs.cluster.health_program`` installs it with the files it imports
(:data:`SHIPPED`: preflight's probe and fact reader, the reason and baseline rules, Slurm's output reader), so
a node reads its facts exactly as preflight does and drains exactly as quarantine does. Python >= 3.9, standard
library only.

One check, a few seconds: the node's facts (kernel, ROCm, amd-smi, driver, firmware, RVS, GPU model and count)
against the baseline (baseline.json, from the last passing run), kernel-log error lines since the last check,
free space, optionally a short GPU test command. Then:

* problems: drain the node (``scontrol update State=DRAIN Reason=cvs: health: ...``) unless it is already drained
  or down for another reason (an admin's, or a validate run's ``cvs: <check>:``), print them, exit 1;
* healthy: resume the node when its reason starts with ``cvs: health:`` (what this program drained), exit 0;
* an error of the program itself (a broken configuration or baseline, a bug): print it, exit 2, and drain only when
  the configuration says ``drain_on_error``.

The kernel log is read from the last check's mark (kept per node in ``state_dir``); the first check on a node
only sets the mark (the run that made the baseline checked the log since boot), a new boot reads from boot.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import tempfile
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.cvs.cluster.plugins.module_utils import _node_probe as probe
from ansible_collections.cvs.cluster.plugins.module_utils import _process
from ansible_collections.cvs.cluster.plugins.plugin_utils._preflight import node_facts
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine import baseline as baseline_rules
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.reason import (
    HEALTH_CHECK,
    PREFIX,
    REASON_MAX,
    make_reason,
    owned,
    plain,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._slurm import parse_oneliner

#: the collection's files the program imports, relative to the collection root (the role ships exactly these)
SHIPPED = (
    "plugins/module_utils/_node_probe.py",
    "plugins/module_utils/_process.py",
    "plugins/plugin_utils/_amd_smi.py",
    "plugins/plugin_utils/_common/messages.py",
    "plugins/plugin_utils/_node_probe.py",
    "plugins/plugin_utils/_preflight.py",
    "plugins/plugin_utils/_quarantine/baseline.py",
    "plugins/plugin_utils/_quarantine/health.py",
    "plugins/plugin_utils/_quarantine/reason.py",
    "plugins/plugin_utils/_rvs/detect.py",
    "plugins/plugin_utils/_rvs/parse.py",
    "plugins/plugin_utils/_slurm.py",
)
HEALTH_PREFIX = f"{PREFIX} {HEALTH_CHECK}:"
SLURM_SEARCH = ("/usr/bin", "/usr/local/bin", "/opt/slurm/bin", "/usr/sbin")
_STAMP = re.compile(r"^\[\s*(\d+\.\d+)\]")
_OFF_FLAGS = ("DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING")
EXIT_OK, EXIT_UNHEALTHY, EXIT_ERROR = 0, 1, 2


class HealthError(Exception):
    """An error of the program or its configuration (never the node's fault)."""


def _load_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as exc:
        raise HealthError(f"{what} {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise HealthError(f"{what} {path}: not JSON ({exc})") from exc


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _stamp(line: str) -> Optional[float]:
    match = _STAMP.match(line)
    return float(match.group(1)) if match else None


def new_kernel_lines(lines: Sequence[str], state: Mapping[str, Any], boot: str) -> Tuple[List[str], float, bool]:
    """The kernel-log lines after the last check's mark, the new mark, and whether they were judged (False on the
    first check of a node: only the mark is set)."""
    last = max([s for s in map(_stamp, lines) if s is not None] or [float(state.get("kmsg_mark") or 0.0)])
    if "kmsg_mark" not in state:
        return [], last, False
    mark = float(state["kmsg_mark"]) if state.get("boot_id") == boot else -1.0
    return [line for line in lines if (_stamp(line) or 0.0) > mark], last, True


def check_node(config: Mapping[str, Any], expected: Mapping[str, Any], state: Dict[str, Any]) -> List[str]:
    """The problems of this node against ``expected`` (its baseline entry); updates ``state`` (the kernel-log mark)."""
    timeout = float(config.get("command_timeout") or 10)
    env = dict(os.environ, **{str(k): str(v) for k, v in (config.get("env") or {}).items()})
    commands = {}
    for name, spec in (config.get("commands") or {}).items():
        argv, _keep = probe.command_spec(name, spec)
        program = probe.find_binary(argv[0])
        if program is None:
            commands[name] = {"rc": None, "stdout": "", "stderr": "", "problem": f"{argv[0]} not found"}
            continue
        commands[name] = _process.run_command([program, *argv[1:]], timeout, env)
    facts, problems = node_facts({"kernel": os.uname().release, "hostname": socket.gethostname(), "commands": commands})
    base = expected.get("facts") or {}
    unread = bool(problems)  # node_facts says which command could not be read
    for fact in config.get("facts") or baseline_rules.FACTS:
        want, have = base.get(fact), facts.get(fact)
        if want is None:
            continue
        if have is None:
            if not unread:
                problems.append(f"{fact} could not be read (baseline {want})")
        elif str(have) != str(want):
            problems.append(f"{fact} is {have}, baseline {want}")
    for entry in config.get("paths") or []:
        disk = probe.disk_space(str(entry["path"]))
        floor = int(entry.get("min_free_mb") or 0)
        if disk["problem"]:
            problems.append(f"free space under {entry['path']} could not be read: {disk['problem']}")
        elif disk["free_mb"] is not None and disk["free_mb"] < floor:
            problems.append(f"{disk['free_mb']} MiB free under {entry['path']}, needs {floor} MiB")
    patterns = probe.compile_patterns(config.get("kernel_log_patterns") or {}, "kernel_log_patterns")
    if patterns:
        ignore = probe.compile_patterns(config.get("kernel_log_ignore") or {}, "kernel_log_ignore")
        try:
            lines = probe.read_kmsg()
        except OSError as exc:
            lines = None
            if config.get("require_kernel_log"):
                problems.append(f"kernel log could not be read: {exc.strerror or exc}")
        if lines is not None:
            boot = boot_id()
            fresh, mark, judged = new_kernel_lines(lines, state, boot)
            state.update({"kmsg_mark": mark, "boot_id": boot})
            if judged:
                found = probe.kernel_log(patterns, ignore, reader=lambda: fresh)
                for match in found["matches"][:2]:
                    problems.append(f"kernel log ({match['name']}): {match['line']}")
                if found["matched"] > 2:
                    problems.append(f"{found['matched'] - 2} more kernel-log error line(s)")
    test = config.get("gpu_test")
    if test:
        argv = [str(a) for a in test]
        done = probe.run_command(argv, float(config.get("gpu_test_timeout") or 60))
        if done["problem"] or done["rc"] != 0:
            why = done["problem"] or f"exit {done['rc']}: {(done['stderr'] or done['stdout']).strip()[:200]}"
            problems.append(f"GPU test {' '.join(argv)} failed ({why})")
    return problems


class Slurm:
    """``scontrol`` on this node, for its own Slurm node only."""

    def __init__(self, config: Mapping[str, Any], node: str) -> None:
        self.node = node
        slurm = config.get("slurm") or {}
        name = str(slurm.get("scontrol") or "scontrol")
        self.scontrol = probe.find_binary(name, SLURM_SEARCH)
        self.env = dict(os.environ)
        if slurm.get("conf"):
            self.env["SLURM_CONF"] = str(slurm["conf"])
        self.timeout = float(slurm.get("timeout") or 20)
        if self.scontrol is None:
            raise HealthError(f"scontrol not found ({name}; searched PATH and {', '.join(SLURM_SEARCH)})")

    def _run(self, *args: str) -> str:
        done = _process.run_command([self.scontrol, *args], self.timeout, self.env)
        if done["problem"] or done["rc"] != 0:
            raise HealthError(
                f"scontrol {' '.join(args)}: {done['problem'] or (done['stderr'] or done['stdout']).strip()}"
            )
        return str(done["stdout"])

    def show(self) -> Tuple[str, str]:
        records = parse_oneliner(self._run("--oneliner", "show", "node", self.node))
        if not records:
            raise HealthError(f"Slurm knows no node {self.node}")
        return records[0].get("State", ""), plain(records[0].get("Reason"))

    def drain(self, reason: str) -> str:
        state, current = self.show()
        flags = [f for f in re.split(r"[+]", state.upper().rstrip("*~#!%$@^-")) if f]
        off = any(f in _OFF_FLAGS for f in flags)
        if off and not owned(current, HEALTH_PREFIX):
            return f"{self.node} is already {state} ({current or 'no reason given'}): left as it is"
        if off and current == reason:
            return f"{self.node} stays drained ({reason})"
        self._run("update", f"NodeName={self.node}", "State=DRAIN", f"Reason={reason}")
        return f"drained {self.node}: {reason}"

    def resume(self) -> str:
        state, current = self.show()
        if owned(current, HEALTH_PREFIX):
            self._run("update", f"NodeName={self.node}", "State=RESUME")
            return f"resumed {self.node} (was {state}: {current})"
        return ""


def _state_path(config: Mapping[str, Any], node: str) -> str:
    return os.path.join(str(config.get("state_dir") or "/var/lib/cvs-health"), f"{node}.json")


def _save_state(path: str, state: Mapping[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".state-", dir=os.path.dirname(path))
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(dict(state), handle)
    os.replace(tmp, path)


def run(argv: Sequence[str], here: str) -> int:
    parser = argparse.ArgumentParser(prog="cvs-health", description="Check this node against the cvs.cluster baseline.")
    parser.add_argument("--config", default=os.path.join(here, "config.json"))
    parser.add_argument(
        "--node", help="this node's name in the baseline or in Slurm (default: SLURMD_NODENAME, host name)"
    )
    parser.add_argument("--no-drain", action="store_true", help="report only: never drain nor resume")
    args = parser.parse_args(list(argv))
    config: Mapping[str, Any] = {}
    node = ""
    try:
        config = _load_json(args.config, "configuration")
        path = os.path.join(os.path.dirname(args.config), str(config.get("baseline") or "baseline.json"))
        data = baseline_rules.check(_load_json(path, "baseline"), path, config.get("cluster_name"))
        host = socket.gethostname()
        candidates = [args.node, os.environ.get("SLURMD_NODENAME"), host, host.split(".")[0]]
        found = baseline_rules.find_node(data, candidates)
        if found is None:
            names = ", ".join(str(c) for c in candidates if c)
            raise HealthError(f"{path}: nodes: none of {names} is a node of the baseline")
        expected = data["nodes"][found]
        node = str(expected.get("slurm_node") or found)
        state_path = _state_path(config, node)
        state = _load_json(state_path, "state") if os.path.exists(state_path) else {}
        started = time.time()
        problems = check_node(config, expected, state)
        state["last_check"] = started
        _save_state(state_path, state)
        slurm = None if args.no_drain or not (config.get("slurm") or {}).get("enabled", True) else Slurm(config, node)
    except (HealthError, baseline_rules.BaselineError, probe.ProbeError) as exc:
        return _internal_error(config, node, str(exc))
    except Exception as exc:  # pylint: disable=broad-except  # a bug: said, never a drain unless drain_on_error
        return _internal_error(config, node, f"{type(exc).__name__}: {exc}")
    took = time.time() - started
    if problems:
        reason = make_reason(HEALTH_CHECK, "; ".join(problems), None, int(config.get("reason_max") or REASON_MAX))
        print(f"cvs-health: {node}: UNHEALTHY ({took:.1f} s): " + "; ".join(problems))
        if slurm is not None:
            try:
                print(f"cvs-health: {slurm.drain(reason)}")
            except HealthError as exc:
                print(f"cvs-health: {node}: could not drain: {exc}", file=sys.stderr)
        return EXIT_UNHEALTHY
    print(f"cvs-health: {node}: healthy ({took:.1f} s, baseline run {data.get('run_id')})")
    if slurm is not None:
        try:
            done = slurm.resume()
        except HealthError as exc:
            print(f"cvs-health: {node}: could not resume: {exc}", file=sys.stderr)
            return EXIT_ERROR
        if done:
            print(f"cvs-health: {done}")
    return EXIT_OK


def _internal_error(config: Mapping[str, Any], node: str, message: str) -> int:
    print(f"cvs-health: internal error: {message}", file=sys.stderr)
    if config.get("drain_on_error") and node:
        try:
            reason = make_reason(
                HEALTH_CHECK, f"internal error: {message}", None, int(config.get("reason_max") or REASON_MAX)
            )
            print(f"cvs-health: {Slurm(config, node).drain(reason)}", file=sys.stderr)
        except (HealthError, ValueError) as exc:
            print(f"cvs-health: could not drain {node}: {exc}", file=sys.stderr)
    return EXIT_ERROR


def main(here: str) -> None:
    """The launcher's entry point (``here``: the install directory, where config.json is)."""
    sys.exit(run(sys.argv[1:], here))
