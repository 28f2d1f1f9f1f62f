# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The orchestration tax: what validate.yml costs around the workloads, for 3 nodes and for 64 and 256 alias hosts.

Each size runs, in the same process: the baseline, a bare ``ansible -m ping`` over the same hosts (one ssh
round trip per host through the same inventory, forks as below), then ``playbooks/validate.yml`` on the baremetal
backend with the RVS check only (``cvs_validate_checks: [rvs]``; the test image's rvs stand-in runs its short
default tests on every host). The bench callback timestamps every play; the plays are grouped into phases:

* checks: the inventory, results-directory and settings checks before anything starts;
* prepare: reaching every node and ``cvs.cluster.prepare``;
* facts: the inventory of the workload hosts (GPU devices, the node table);
* workload: the RVS play, split into the workload's own time (the longest host's sum of its rvs runs' durations,
  from the run's check records) and the rest (the role's checks, planning, judging, recording);
* other_suites: the plays of the checks not asked for (preflight, RCCL, MaxText), skipped on every host;
* report: writing the run report (before, between and after the checks) and the final verdict play;
* dispose: ``cvs.cluster.dispose``;
* other: any play not named above (0 unless validate.yml gained one).

Then, in the same run and over the same hosts, the peer baseline: the RVS suite's node commands issued the way
upstream CVS issues them, one parallel-ssh ``run_command`` over every host per step (probe: ``rvs --version``
and ``amd-smi static``; write the config; each rvs test the role ran, with its timeout; read the outputs; clean
up; see _peer_baseline.py), with the inventory's addresses, user and key, one connection per host (opened before
the steps and timed apart, like the ControlMasters). Its tax is its wall time minus its own rvs runs' time.

The tax is the playbook's wall time minus the workload's own time; the total and each phase are printed in
seconds and as a ratio to the ``ansible -m ping`` baseline and to the parallel-ssh baseline's tax of the same
hosts. Targets (issue 32): tax <= 10x ``ansible -m ping`` at 64 and at 256 hosts, and <= 1.5x the parallel-ssh
baseline at 256 hosts; a target whose size was not run is "not measured". Hosts are aliases of the cluster's
nodes, each with its own ssh ControlMaster (opened by the baseline, as a real run's first task would).
``forks`` is CVS_BENCH_TAX_FORKS (default 64, capped at the hosts). Sizes: CVS_BENCH_TAX_SIZES (default
3,64,256).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

from _cluster import Host, Node, aliases, stop_masters, wait_for_cluster
from _env import REMOTE_DIR, REPO, VENV_BIN, WORK, ansible_env, env_int, env_list
from _peer_baseline import Suite, load_role_settings, plan_from_records, run_suite
from _results import Target, judge, say, target_line, write_results

PHASES = {
    "Check the inventory": "checks",
    "Check that the run's results can be written": "checks",
    "Check the settings of the requested checks": "checks",
    "Prepare the workload namespace": "prepare",
    "Inventory of the workload hosts": "facts",
    "Start the run report": "report",
    "Update the run report": "report",
    "Run the ROCm Validation Suite": "workload",
    # the plays of the checks this run did not ask for: skipped, but each still costs a play over the hosts
    "Check every node before the heavy suites": "other_suites",
    "Run the RCCL collective tests": "other_suites",
    "Train MaxText": "other_suites",
    "Dispose of what this run started": "dispose",
    "Write the run report": "report",
    "Fail the nodes where a check did not pass": "report",
}
ORDER = ("checks", "prepare", "facts", "workload", "other_suites", "report", "dispose", "other")
# the phases of the tax, as printed (workload_rest: the RVS play minus the workload's own time); they add up to it
TAX_PHASES = ("checks", "prepare", "facts", "workload_rest", "other_suites", "report", "dispose", "other")
# issue 32: tax <= 10x ansible -m ping at 64 and 256 hosts, <= 1.5x the parallel-ssh baseline at 256
PING_TARGET = {64: 10.0, 256: 10.0}
PSSH_TARGET = {256: 1.5}


def phase_of(play: str) -> str:
    return next((phase for start, phase in PHASES.items() if play.startswith(start)), "other")


def seconds(delta: str | None) -> float:
    """An Ansible command's ``delta`` (``H:MM:SS.ffffff``) in seconds."""
    match = re.fullmatch(r"(\d+):(\d+):(\d+(?:\.\d+)?)", str(delta or ""))
    return int(match[1]) * 3600 + int(match[2]) * 60 + float(match[3]) if match else 0.0


def write_inventory(path: Path, hosts: list[Host]) -> Path:
    entries = {h.name: h.inventory_vars() for h in hosts}
    data = {
        "all": {
            # each alias holds a lease of its own: the aliases of one node are one machine on purpose here
            "vars": {"cvs_orchestrator": "baremetal", "cvs_lease_machine_name": "{{ inventory_hostname }}"},
            "children": {"cvs_nodes": {"hosts": entries}, "cvs_head": {"hosts": {hosts[0].name: {}}}},
        }
    }
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def timed(argv: list[str], events: Path | None, cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    env = ansible_env({"CVS_BENCH_EVENTS": str(events)} if events else {})
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    return time.monotonic() - start, proc


def play_phases(events: list[dict]) -> dict[str, float]:
    marks = [(e["t"], e.get("play", "")) for e in events if e["ev"] == "play_start"]
    end = next((e["t"] for e in events if e["ev"] == "stats"), marks[-1][0] if marks else 0.0)
    out = dict.fromkeys(ORDER, 0.0)
    for (t, play), (t_next, _next) in zip(marks, [*marks[1:], (end, "")]):
        phase = phase_of(play)
        out[phase] = out.get(phase, 0.0) + (t_next - t)
    return out


def workload_own_time(records: list[dict]) -> float:
    """The longest host's sum of its rvs runs' durations (the hosts run at once)."""
    return max((sum(seconds(t.get("duration")) for t in r.get("tests") or []) for r in records), default=0.0)


def rvs_records(results_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(results_dir.glob("*/checks/*/rvs.json"))]


def tax_ratios(phases_s: dict[str, float], tax_s: float, ping_s: float, pssh_tax_s: float) -> dict[str, dict]:
    """The tax and each of its phases as a multiple of the ping baseline and of the parallel-ssh baseline's tax."""
    parts = {"total": tax_s, **{p: phases_s[p] for p in TAX_PHASES}}
    return {name: {"s": s, "over_ping": s / ping_s, "over_pssh": s / pssh_tax_s} for name, s in parts.items()}


def tax_targets(rows: list[dict]) -> list[Target]:
    by_hosts = {r["hosts"]: r for r in rows}

    def measured(hosts: int, key: str) -> float | None:
        return by_hosts[hosts][key] if hosts in by_hosts else None

    return [
        Target(f"tax <= {limit:g}x ansible -m ping at {hosts} hosts", measured(hosts, "tax_over_ping"), limit)
        for hosts, limit in PING_TARGET.items()
    ] + [
        Target(f"tax <= {limit:g}x the parallel-ssh baseline at {hosts} hosts", measured(hosts, "tax_over_pssh"), limit)
        for hosts, limit in PSSH_TARGET.items()
    ]


def measure(work: Path, nodes: list[Node], count: int, forks: int) -> dict:
    hosts = aliases(nodes, count, prefix="tx")
    inventory = write_inventory(work / f"inventory-{count}.yml", hosts)
    forks = min(forks, count)
    try:
        ping_s, ping = timed([str(VENV_BIN / "ansible"), "-i", str(inventory), "cvs_nodes", "-m", "ping",
                              "-f", str(forks), "-o"], None, work)  # fmt: skip
        if ping.returncode != 0:
            raise RuntimeError(f"ansible -m ping failed: {ping.stdout[-1500:]}{ping.stderr[-1500:]}")
        # again, masters open: the baseline a later task of a run pays
        ping_s, _ping = timed([str(VENV_BIN / "ansible"), "-i", str(inventory), "cvs_nodes", "-m", "ping",
                               "-f", str(forks), "-o"], None, work)  # fmt: skip
        results = work / f"results-{count}"
        shutil.rmtree(results, ignore_errors=True)  # only this run's records
        events = work / f"events-{count}.jsonl"
        events.unlink(missing_ok=True)
        extra = {"cvs_validate_checks": ["rvs"], "cvs_results_dir": str(results)}
        argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "validate.yml"),
                "-f", str(forks), "-e", json.dumps(extra)]  # fmt: skip
        wall, proc = timed(argv, events, work)
        if proc.returncode != 0:
            raise RuntimeError(f"validate.yml rc={proc.returncode}: {proc.stdout[-3000:]}{proc.stderr[-1500:]}")
        records = rvs_records(results)
        tests = plan_from_records(records)
        pssh = run_suite(
            [(h.name, h.node.address, h.node.port, h.node.user, h.node.key) for h in hosts],
            tests,
            load_role_settings(REPO),
            f"{REMOTE_DIR}/pssh-tax",
        )
    finally:
        stop_masters(hosts)
    phases = play_phases([json.loads(line) for line in events.read_text().splitlines() if line.strip()])
    own = workload_own_time(records)
    row = tax_row(count, forks, ping_s, wall, own, phases, pssh)
    r = row["ratios"]
    shown = ", ".join(
        f"{p} {r[p]['s']:.1f}s ({r[p]['over_ping']:.1f}x ping, {r[p]['over_pssh']:.1f}x pssh)" for p in TAX_PHASES
    )
    steps = ", ".join(f"{name} {s:.2f}s" for name, s in pssh.steps_s.items())
    say(
        f"  {count:>4} hosts (forks {forks}): validate.yml {wall:.1f}s, workload's own {own:.1f}s, tax "
        f"{row['tax_s']:.1f}s = {row['tax_over_ping']:.1f}x ansible -m ping ({ping_s:.2f}s) = "
        f"{row['tax_over_pssh']:.1f}x parallel-ssh ({pssh.tax_s:.2f}s: wall {pssh.wall_s:.2f}s minus its own "
        f"{pssh.own_s:.2f}s; connect {pssh.connect_s:.2f}s apart)\n"
        f"        phases: {shown}\n"
        f"        parallel-ssh steps ({len(tests)} rvs test(s): {', '.join(t.name for t in tests)}): {steps}"
    )
    return row


def tax_row(count: int, forks: int, ping_s: float, wall: float, own: float, phases: dict, pssh: Suite) -> dict:
    tax = wall - own
    phases_s = {**phases, "workload_rest": phases["workload"] - own}
    return {
        "hosts": count,
        "forks": forks,
        "ping_s": ping_s,
        "validate_wall_s": wall,
        "workload_own_s": own,
        "tax_s": tax,
        "phases_s": phases_s,
        "pssh": {
            "connect_s": pssh.connect_s,
            "steps_s": pssh.steps_s,
            "phases_s": pssh.phases_s,
            "wall_s": pssh.wall_s,
            "own_s": pssh.own_s,
            "tax_s": pssh.tax_s,
        },
        "tax_over_ping": tax / ping_s,
        "tax_over_pssh": tax / pssh.tax_s,
        "ratios": tax_ratios(phases_s, tax, ping_s, pssh.tax_s),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(env_list("CVS_BENCH_TAX_SIZES", ["3", "64", "256"])))
    ap.add_argument("--forks", type=int, default=env_int("CVS_BENCH_TAX_FORKS", 64))
    args = ap.parse_args()
    nodes = wait_for_cluster()
    work = WORK / "orchestration_tax"
    work.mkdir(parents=True, exist_ok=True)
    say(f"orchestration_tax: validate.yml (rvs) on aliases of {', '.join(n.name for n in nodes)}")
    rows = [measure(work, nodes, int(n), args.forks) for n in args.sizes.split(",") if n.strip()]
    summary = {
        "tax_s": {r["hosts"]: r["tax_s"] for r in rows},
        "tax_over_ping": {r["hosts"]: r["tax_over_ping"] for r in rows},
        "tax_over_pssh": {r["hosts"]: r["tax_over_pssh"] for r in rows},
        "phases_s": {r["hosts"]: r["phases_s"] for r in rows},
        "ping_s": {r["hosts"]: r["ping_s"] for r in rows},
        "pssh_tax_s": {r["hosts"]: r["pssh"]["tax_s"] for r in rows},
        **judge(tax_targets(rows)),
    }
    out = write_results("orchestration_tax", {"method": __doc__, "summary": summary, "rows": rows})
    say(
        "orchestration_tax: tax "
        + ", ".join(
            f"{r['hosts']} hosts {r['tax_s']:.0f}s ({r['tax_over_ping']:.1f}x ping, {r['tax_over_pssh']:.1f}x pssh)"
            for r in rows
        )
        + f" -> {out}"
    )
    for target in summary["targets"]:
        say(f"  target: {target_line(target)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
