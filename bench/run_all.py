# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make bench`: run every bench (each is also runnable alone) and print the ratios they measured.

Usage: .venv/bin/python bench/run_all.py [NAME ...] [--strict]
Each bench writes bench/results/NAME.json; this writes bench/results/summary.json.
Benches are measurements, not tests: a missed target is printed, and fails the run
only with --strict. Each line ends with the bench's verdict: "meets target", "MISSES target",
"target not measured" (this run's sizes did not reach it) or "no target". Without NAME it runs the
default benches; ON_DEMAND ones (long, or needing no cluster) run when named. Environment knobs are
described at the top of each bench.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _cluster import wait_for_cluster
from _env import BENCH, RESULTS
from _results import say, verdict, write_results

BENCHES = ["round_vs_log_size", "round_vs_ssh", "error_latency", "hosts_scaling", "fleet_scaling", "events_budget"]
# run only when named: orchestration_tax takes about half an hour at 256 hosts
ON_DEMAND = ["orchestration_tax", "report_render"]


def line(name: str, s: dict) -> str:
    if name == "round_vs_log_size":
        return (
            f"round flat {s['flatness_ours_largest_over_smallest']:.2f}x over sizes; at {s['largest']}: "
            f"upstream tail+grep / log_poll round {s['ratio_upstream_over_ours_at_largest']:.1f}x, "
            f"wait_for / log_poll round {s['ratio_wait_for_over_ours_at_largest']:.1f}x (target >= 50x)"
        )
    if name == "round_vs_ssh":
        return (
            f"host-round / ssh true: wall {s['ratio_wall']:.2f}x, controller CPU {s['ratio_controller_cpu']:.2f}x "
            f"(target <= 5x)"
        )
    if name == "error_latency":
        return f"worst margin to delay+1s: {s['worst_margin_s']:+.2f}s"
    if name == "hosts_scaling":
        return (
            f"round {s['from_to']}: {s['round_ratio_last_over_first']:.2f}x at delay {s['round_delay']:g}s "
            f"(target <= 3x; back-to-back {s['round_ratio_delay0_last_over_first']:.2f}x); "
            f"controller CPU {s['controller_cpu_per_host_round_s'] * 1000:.1f} ms/host-round; "
            f"largest fleet in {s['budget_s']:g}s: {s['largest_fitting_hosts'] or 'none of ' + str(s.get('tried'))} "
            "(target 256)"
        )
    if name == "fleet_scaling":
        per = ", ".join(f"{h} hosts {v * 1000:.2f} ms" for h, v in s["controller_cpu_per_host_round_s"].items())
        base = s.get("per_host_form_cpu_per_host_round_s")
        return (
            f"fleet controller CPU per host-round {per} (target <= 1.5 ms at 256"
            + (f"; per-host form {base * 1000:.1f} ms" if base else "")
            + f"); largest fleet in a 10 s round: {s['largest_fitting_hosts']} (target 1024)"
        )
    if name == "events_budget":
        return (
            f"64 hosts x 1 h at delay 5: one round per call {s['per_round_job_events']} events "
            f"({s['per_round_ratio_to_limit']:.2f}x the 4,000-event limit), call_seconds {s['per_task_job_events']} "
            f"({s['per_task_ratio_to_limit']:.2f}x; target < 1x)"
        )
    if name == "orchestration_tax":
        return (
            "tax "
            + ", ".join(
                f"{h} hosts {tax:.0f}s = {s['tax_over_ping'][h]:.1f}x ping, {s['tax_over_pssh'][h]:.1f}x parallel-ssh"
                for h, tax in s["tax_s"].items()
            )
            + " (targets <= 10x ping at 64 and 256; <= 1.5x parallel-ssh at 256)"
        )
    if name == "report_render":
        return (
            f"{s['nodes']} nodes: report.html {s['html_s']:.2f}s, {s['html_bytes'] / 1048576:.2f} MiB "
            f"(target at 256 nodes: <= {s['html_budget_s']:g} s and <= {s['html_budget_bytes'] / 1048576:.1f} MiB)"
        )
    return json.dumps(s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "names",
        nargs="*",
        help=f"benches to run (default: {', '.join(BENCHES)}; by name only: {', '.join(ON_DEMAND)})",
    )
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    names = args.names or BENCHES
    unknown = sorted(set(names) - set(BENCHES) - set(ON_DEMAND))
    if unknown:
        ap.error(f"unknown bench(es): {', '.join(unknown)}; known: {', '.join(BENCHES + ON_DEMAND)}")
    strict = args.strict
    wait_for_cluster()
    summary: dict = {}
    crashed = []
    for name in names:
        say(f"=== {name}")
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(BENCH / f"{name}.py")])
        took = time.perf_counter() - t0
        tag = os.environ.get("CVS_BENCH_TAG")
        result = RESULTS / (f"{name}-{tag}.json" if tag else f"{name}.json")
        if rc != 0 or not result.exists() or result.stat().st_mtime < time.time() - took - 1:
            crashed.append(name)
            summary[name] = {"crashed": True, "rc": rc}
            continue
        data = json.loads(result.read_text())
        summary[name] = dict(data["summary"], took_s=round(took, 1))
    say("=== ratios")
    for name in names:
        s = summary[name]
        if s.get("crashed"):
            say(f"  {name:<18} CRASHED (rc={s['rc']})")
        else:
            say(f"  {name:<18} {line(name, s)} -- {verdict(s)} ({s['took_s']:.0f}s)")
    write_results("summary", {"benches": summary})
    missed = [n for n in names if not summary[n].get("crashed") and summary[n].get("meets_target") is False]
    return 1 if crashed or (strict and missed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
