# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The peer baseline of orchestration_tax: the RVS suite's node commands issued the way upstream CVS issues them.

Upstream CVS (ROCm/cvs, ``cvs/lib/parallel_ssh_lib.py``) drives a suite with the PyPI ``parallel-ssh`` library:
one ``ParallelSSHClient(hosts, user=, pkey=, keepalive_seconds=30)`` and, per step of the suite, one
``run_command(cmd, read_timeout=timeout, stop_on_errors=...)`` over every host, then each host's stdout and
stderr read line by line. The steps replayed here are those of the RVS play, for the tests the role ran in the
same bench run (read from its check records, so a rewritten role is followed):

* probe: ``rvs --version`` and ``amd-smi static -a -g 0 --json`` (two calls, as upstream);
* write the config: the run's test plan (JSON) into a run directory per host;
* run: each test as the role runs it, ``timeout -k GRACE TIMEOUT rvs ARGS`` with the role's ``LD_LIBRARY_PATH``,
  its output and exit status written in the run directory, one call per test;
* read the outputs: the exit statuses and outputs of every test, one call;
* clean up: the run directory, one call.

The pure parts (plan, commands, parsing) are unit-tested in tests/unit/bench/; ``run_suite`` needs the hosts.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

# where a host's run directory goes in a step's command
RUN_DIR = "@RUN_DIR@"
PROBE_TIMEOUT = 30  # upstream's timeout for rvs --version and amd-smi
FILE_TIMEOUT = 60
# the role's defaults the commands need (roles/rvs/defaults/main.yml)
DEFAULT_KEYS = ("rvs_rocm_runtime_lib_path", "rvs_amd_smi_path", "rvs_kill_grace")


@dataclass(frozen=True)
class RvsTest:
    """One rvs run of the role: its name, the binary and arguments it ran, its timeout in seconds."""

    name: str
    argv: tuple[str, ...]
    timeout: int


@dataclass(frozen=True)
class RvsSettings:
    lib: str
    amd_smi: str
    kill_grace: int


@dataclass(frozen=True)
class Step:
    """One ``run_command`` over every host; ``command`` holds RUN_DIR where each host's run directory goes."""

    name: str
    phase: str
    command: str
    read_timeout: float


def role_settings(defaults: dict[str, Any]) -> RvsSettings:
    """The library path, amd-smi path and kill grace the RVS role uses, from its defaults."""
    missing = [k for k in DEFAULT_KEYS if k not in defaults]
    if missing:
        raise KeyError(f"roles/rvs/defaults/main.yml has no {', '.join(missing)}: update bench/_peer_baseline.py")
    return RvsSettings(
        str(defaults["rvs_rocm_runtime_lib_path"]), str(defaults["rvs_amd_smi_path"]), int(defaults["rvs_kill_grace"])
    )


def load_role_settings(repo: Path) -> RvsSettings:
    return role_settings(yaml.safe_load((repo / "roles" / "rvs" / "defaults" / "main.yml").read_text()))


def plan_from_records(records: Iterable[dict[str, Any]]) -> list[RvsTest]:
    """The RVS tests the role ran, from its check records; every host must have run the same plan (one command
    per step serves every host)."""
    plans: dict[tuple[RvsTest, ...], list[str]] = {}
    for record in records:
        tests = tuple(
            RvsTest(str(t["name"]), tuple(shlex.split(str(t["command"]))), int(t["timeout"]))
            for t in record.get("tests") or []
        )
        plans.setdefault(tests, []).append(str(record.get("node") or record.get("host") or "?"))
    if len(plans) > 1:
        shown = "; ".join(
            f"{', '.join(t.name for t in plan) or 'none'} on {len(nodes)} host(s)" for plan, nodes in plans.items()
        )
        raise ValueError(f"the hosts ran different RVS plans ({shown}): one command per step cannot replay them")
    plan = next(iter(plans), ())
    if not plan:
        raise ValueError("no RVS test in the run's check records: nothing to replay")
    return list(plan)


def _out(index: int, ext: str) -> str:
    return f"{RUN_DIR}/test-{index}.{ext}"


def suite_steps(tests: Sequence[RvsTest], settings: RvsSettings) -> list[Step]:
    """The steps of the RVS suite, one parallel-ssh call each."""
    q = shlex.quote
    rvs = tests[0].argv[0]
    env = f"LD_LIBRARY_PATH={q(settings.lib)}"
    plan = json.dumps([{"name": t.name, "argv": list(t.argv), "timeout": t.timeout} for t in tests])
    steps = [
        Step("rvs --version", "probe", f"{env} {q(rvs)} --version", PROBE_TIMEOUT),
        Step("amd-smi static", "probe", f"{q(settings.amd_smi)} static -a -g 0 --json", PROBE_TIMEOUT),
        Step(
            "write the config",
            "write_config",
            f"mkdir -p {RUN_DIR} && printf '%s\\n' {q(plan)} > {RUN_DIR}/rvs-plan.json",
            FILE_TIMEOUT,
        ),
    ]
    for i, test in enumerate(tests):
        run = f"timeout -k {settings.kill_grace} {test.timeout} {shlex.join(test.argv)}"
        steps.append(
            Step(
                f"run {test.name}",
                "run",
                f"s=$(date +%s.%N); {env} {run} > {_out(i, 'out')} 2> {_out(i, 'err')}; "
                f'echo "$? $s $(date +%s.%N)" > {_out(i, "rc")}',
                test.timeout + settings.kill_grace + 60,
            )
        )
    outputs = [_out(i, ext) for i in range(len(tests)) for ext in ("out", "err")]
    statuses = [_out(i, "rc") for i in range(len(tests))]
    steps.append(Step("read the outputs", "read_outputs", "cat " + " ".join(statuses + outputs), FILE_TIMEOUT))
    steps.append(Step("clean up", "cleanup", f"rm -rf {RUN_DIR}", FILE_TIMEOUT))
    return steps


def host_command(step: Step, run_dir: str) -> str:
    return step.command.replace(RUN_DIR, shlex.quote(run_dir))


def run_statuses(stdout: str, tests: int) -> list[tuple[int, float]]:
    """Each test's exit status and seconds on the node, from the first lines the read step prints."""
    lines = stdout.splitlines()[:tests]
    out = []
    for line in lines:
        match = re.fullmatch(r"(\d+) (\d+(?:\.\d+)?) (\d+(?:\.\d+)?)", line.strip())
        if not match:
            raise ValueError(f"not an exit status line of a test: {line!r}")
        out.append((int(match[1]), float(match[3]) - float(match[2])))
    if len(out) != tests:
        raise ValueError(f"{tests} exit status line(s) expected, got {len(out)}")
    return out


@dataclass
class HostResult:
    host: str
    stdout: str
    exit_code: int | None
    error: str | None


def step_failures(results: Sequence[HostResult]) -> list[str]:
    """The hosts where a step did not finish with exit status 0, each with why."""
    return [f"{r.host}: {r.error or f'exit status {r.exit_code}'}" for r in results if r.error or r.exit_code != 0]


@dataclass
class Suite:
    """What one replay measured: seconds per step, the connection set-up, and the workload's own seconds."""

    connect_s: float
    steps_s: dict[str, float]
    phases_s: dict[str, float]
    own_s: float

    @property
    def wall_s(self) -> float:
        return sum(self.steps_s.values())

    @property
    def tax_s(self) -> float:
        return self.wall_s - self.own_s


def run_suite(
    hosts: Sequence[tuple[str, str, int, str, str | None]],
    tests: Sequence[RvsTest],
    settings: RvsSettings,
    remote_dir: str,
) -> Suite:
    """Replays the suite on hosts given as (name, address, port, user, private key); each gets its own connection
    and its own run directory under remote_dir. The connections are opened (and timed) before the steps, as the
    Ansible side's ControlMasters are opened by its ping baseline."""
    from pssh.clients import ParallelSSHClient
    from pssh.config import HostConfig

    client = ParallelSSHClient(
        [address for _name, address, _port, _user, _key in hosts],
        host_config=[
            HostConfig(user=user, port=port, private_key=key, alias=name) for name, _address, port, user, key in hosts
        ],
        keepalive_seconds=30,
    )
    dirs = [f"{remote_dir}/{name}" for name, *_rest in hosts]

    def call(command_for: list[str], read_timeout: float) -> list[HostResult]:
        output = client.run_command("%s", host_args=command_for, read_timeout=read_timeout, stop_on_errors=False)
        results = []
        for item in output:
            text, error = "", None
            try:
                text = "".join(line + "\n" for line in item.stdout or []) + "".join(
                    line + "\n" for line in item.stderr or []
                )
            except Exception as exc:  # pssh's Timeout and connection errors: the host's failure, as upstream
                error = f"{type(exc).__name__}: {exc}"
            if item.exception is not None:
                error = f"{type(item.exception).__name__}: {item.exception}"
            results.append(HostResult(item.alias or item.host, text, item.exit_code, error))
        return results

    def checked(name: str, results: list[HostResult]) -> list[HostResult]:
        failures = step_failures(results)
        if failures:
            raise RuntimeError(
                f"parallel-ssh step {name!r} failed on {len(failures)} host(s): {'; '.join(failures[:5])}"
            )
        return results

    try:
        start = time.monotonic()
        checked("connect", call(["true"] * len(hosts), FILE_TIMEOUT))
        connect_s = time.monotonic() - start
        steps_s: dict[str, float] = {}
        phases_s: dict[str, float] = {}
        own = 0.0
        for step in suite_steps(tests, settings):
            start = time.monotonic()
            results = checked(step.name, call([host_command(step, d) for d in dirs], step.read_timeout))
            took = time.monotonic() - start
            steps_s[step.name] = took
            phases_s[step.phase] = phases_s.get(step.phase, 0.0) + took
            if step.phase == "read_outputs":
                per_host = [run_statuses(r.stdout, len(tests)) for r in results]
                bad = [
                    f"{r.host}: {[rc for rc, _s in s]}" for r, s in zip(results, per_host) if any(rc for rc, _s in s)
                ]
                if bad:
                    raise RuntimeError(
                        f"rvs did not exit 0 under parallel-ssh on {len(bad)} host(s): {'; '.join(bad[:5])}"
                    )
                own = max(sum(seconds for _rc, seconds in s) for s in per_host)
    finally:  # upstream drops its client; the next size must not find these connections still open
        for host_client in getattr(client, "_host_clients", {}).values():
            host_client.disconnect()
    return Suite(connect_s, steps_s, phases_s, own)
