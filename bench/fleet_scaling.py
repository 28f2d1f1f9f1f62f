# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""log_poll's fleet form (``fleet: true``, one task polls every host) against the per-host form: controller CPU
per host-round at 256 and 1,024 alias hosts, and the largest fleet whose round fits a 10 s delay.

Hosts, logs and the 1 KiB appended to each host's log after each of its rounds are those of hosts_scaling.py
(aliases of the cluster's nodes, each with its own ssh ControlMaster, opened before measuring).

* Baseline, in the same run: the per-host form at the first size (CVS_BENCH_FLEET_BASELINE, default 256), polled
  back-to-back (``delay: 0``, forks = hosts) and measured over hosts_scaling's steady window.
* Fleet: one ``run_once`` task with ``fleet: true``, ``delay: 0`` and ``call_seconds: 0``, so each retry event is
  one round of every host. Its window runs from the end of the second round (the first one starts every host's
  kept reader) to the last round before the bench writes the completion marker; host-rounds are the hosts each
  event names. Controller CPU = the ansible-playbook process tree and the ssh ControlMasters (/proc sampling).
* A size fits when its fleet round (window / rounds) is at most CVS_BENCH_BUDGET (10 s).

Sizes: CVS_BENCH_FLEET_SIZES (default 256,1024). CVS_BENCH_FLEET_ROUNDS rounds per window (default 6). The nodes'
sshd and readers share the controller's 2 cores here; their CPU is reported apart.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

from _cluster import wait_for_cluster
from _env import env_float, env_int, env_list
from _playbook import EventTail, PlayRun, Runner, log_poll_task
from _results import Target, judge, med, ms, say, write_results
from hosts_scaling import TASK, Fleet, log_path, measure


def fleet_play(fleet: Fleet, retries: int, delay: float) -> list[dict]:
    task = log_poll_task(
        TASK,
        log_path("{{ inventory_hostname }}"),
        retries=retries,
        delay=delay,
        state_dir=fleet.runner.state_dir,
        fleet=True,
        call_seconds=0,
    )
    task["run_once"] = True
    return [{"hosts": "bench", "gather_facts": False, "tasks": [task]}]


def run_fleet(fleet: Fleet, rounds: int, limit: float = 1800) -> PlayRun:
    """Poll as a fleet until ``rounds`` rounds after the first two, then complete every host."""

    def monitor(proc: subprocess.Popen, events_path: Path) -> None:
        tail = EventTail(events_path)
        seen = 0
        deadline = time.time() + limit
        while proc.poll() is None and time.time() < deadline and seen < rounds + 2:
            seen += sum(1 for e in tail.poll() if e["ev"] == "retry" and e.get("task") == TASK)
            time.sleep(0.2)
        fleet.finish_all()

    sample = 1.0 if len(fleet.hosts) > 16 else 0.25
    run = fleet.runner.run(fleet_play(fleet, 100000, 0), fleet.inv, forks=5, env=fleet.env, sample=sample,
                           monitor=monitor, timeout=limit)  # fmt: skip
    done = [e for e in run.events if e["ev"] in ("ok", "failed") and e.get("task") == TASK]
    if not done or done[-1]["r"].get("failed_hosts"):
        raise RuntimeError(f"the fleet did not finish cleanly: {done[-1]['r'] if done else run.stdout[-2000:]}")
    return run


def fleet_window(run: PlayRun, hosts: int) -> dict:
    rounds = [e for e in run.events if e["ev"] == "retry" and e.get("task") == TASK]
    if len(rounds) < 4 or run.sampler is None:
        raise RuntimeError(f"too few fleet rounds to measure ({len(rounds)})")
    first, last = rounds[1], rounds[-1]
    inside = rounds[2:]
    host_rounds = sum(int(e["r"].get("fleet_hosts", 0)) * int(e["r"].get("rounds_in_call", 1)) for e in inside)
    a, b = run.sampler.at(first["t"]), run.sampler.at(last["t"])
    tree, masters, nodes, main = (y - x for x, y in zip(a, b))
    window = last["t"] - first["t"]
    mem = run.sampler.mem_available
    return {
        "hosts": hosts,
        "rounds": len(inside),
        "host_rounds": host_rounds,
        "window_s": window,
        "fleet_round_s": window / len(inside),
        "controller_cpu_per_host_round_s": (tree + masters) / host_rounds,
        "main_process_cpu_per_host_round_s": main / host_rounds,
        "node_cpu_per_host_round_s": nodes / host_rounds,
        "first_round_s": rounds[0]["t"] - (run.task_start(TASK) or rounds[0]["t"]),
        "memory_used_peak_mib": (mem[0] - min(mem)) / 1024 if mem else None,
        "playbook_wall_s": run.cpu.wall,
    }


def fleet_targets(
    cpu_at: dict[int, float], largest_fitting: int | None, sizes: list[int], budget: float
) -> list[Target]:
    """<= 1.5 ms controller CPU per host-round at 256 hosts; 1,024 hosts fit a 10 s round (not measured when the
    run had no 256-host fleet, or no fleet of 1,024 hosts or more, or another budget)."""
    fits_measured = budget == 10 and max(sizes, default=0) >= 1024
    return [
        Target("controller CPU per host-round at 256 hosts <= 0.0015 s (1.5 ms)", cpu_at.get(256), 0.0015),
        Target(
            "the largest fleet in a 10 s round >= 1,024 hosts",
            (largest_fitting or 0) if fits_measured else None,
            1024,
            at_most=False,
        ),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(env_list("CVS_BENCH_FLEET_SIZES", ["256", "1024"])))
    ap.add_argument("--baseline", type=int, default=env_int("CVS_BENCH_FLEET_BASELINE", 256))
    ap.add_argument("--rounds", type=int, default=env_int("CVS_BENCH_FLEET_ROUNDS", 6))
    ap.add_argument("--budget", type=float, default=env_float("CVS_BENCH_BUDGET", 10.0))
    args = ap.parse_args()

    nodes = wait_for_cluster()
    runner = Runner("fleet_scaling")
    say(f"fleet_scaling: aliases over {', '.join(n.name for n in nodes)}")
    baseline = None
    rows = []
    for count in [int(x) for x in args.sizes.split(",") if x.strip()]:
        hosts = Fleet(runner, nodes, count)
        try:
            if count == args.baseline:
                baseline = measure(hosts, 2, args.budget)
            row = fleet_window(run_fleet(hosts, args.rounds), count)
        finally:
            hosts.cleanup()
        row["fits"] = row["fleet_round_s"] <= args.budget
        rows.append(row)
        text = (
            f"  {count:>5} hosts, fleet: round {ms(row['fleet_round_s'])}, controller CPU "
            f"{ms(row['controller_cpu_per_host_round_s'])}/host-round (main process "
            f"{ms(row['main_process_cpu_per_host_round_s'])}), node CPU {ms(row['node_cpu_per_host_round_s'])}"
            f"/host-round, first round {row['first_round_s']:.1f}s -> "
            f"{'fits' if row['fits'] else 'does NOT fit'} in {args.budget:g}s"
        )
        if baseline is not None and count == args.baseline:
            ratio = row["controller_cpu_per_host_round_s"] / baseline["controller_cpu_per_host_round_s"]
            row["ratio_to_per_host_form"] = ratio
            text += (
                f"; per-host form {ms(baseline['controller_cpu_per_host_round_s'])}/host-round -> fleet {ratio:.2f}x"
            )
        say(text)
    fitting = [r["hosts"] for r in rows if r["fits"]]
    at = {r["hosts"]: r["controller_cpu_per_host_round_s"] for r in rows}
    summary = {
        "controller_cpu_per_host_round_s": at,
        "per_host_form_cpu_per_host_round_s": baseline["controller_cpu_per_host_round_s"] if baseline else None,
        "fleet_round_s": {r["hosts"]: r["fleet_round_s"] for r in rows},
        "largest_fitting_hosts": max(fitting) if fitting else None,
    }
    summary.update(judge(fleet_targets(at, summary["largest_fitting_hosts"], [r["hosts"] for r in rows], args.budget)))
    out = write_results("fleet_scaling", {"method": __doc__, "summary": summary, "rows": rows, "baseline": baseline})
    say(
        "fleet_scaling: controller CPU per host-round "
        + ", ".join(f"{h} hosts {ms(v)}" for h, v in at.items())
        + (
            f" (per-host form at {args.baseline}: {ms(summary['per_host_form_cpu_per_host_round_s'])})"
            if baseline
            else ""
        )
        + f"; largest fleet fitting {args.budget:g}s: {summary['largest_fitting_hosts']} (median round "
        + f"{ms(med(summary['fleet_round_s'].values()))}) -> {out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
