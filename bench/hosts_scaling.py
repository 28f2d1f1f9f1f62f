# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""log_poll round time versus number of hosts, controller CPU per host-round, and the largest fleet
whose every round fits inside a 10 s delay on this machine.

Hosts are aliases of the cluster's nodes (h000 -> node1, h001 -> node2, ...), each with its
own ssh ControlMaster (its own ``ansible_control_path``), as separate machines would have;
each polls its own log, and the cvs_bench callback appends 1 KiB to a host's log after
each of its rounds. ``forks`` = number of hosts (log_poll requires it). Masters are opened
before measuring.

Steady state: Ansible forks one worker per host when the task starts, so the first
rounds of a big fleet are spread over the fork ramp. Every measurement therefore uses
the window from "every host has finished its first round" to "the first host finished
its last one"; a run polls (with a huge ``retries``) until every host has done K rounds
inside that window, then the bench appends the completion marker to every log and the
poll ends by itself (policy all). CPU over the window is sampled from /proc:
controller = the ansible-playbook process tree (main process, workers, ssh clients) +
the ControlMasters; node = the node-side sshds serving those masters and what they ran.

1. Round time for 1, 3, 12 hosts (CVS_BENCH_HOSTS), polled as in use with ``delay: 1``
   (CVS_BENCH_ROUND_DELAY): a round = retry interval minus the delay, median over hosts of
   each host's median; target: 12 hosts <= 3x 1 host. The same sizes back-to-back
   (``delay: 0``) give the saturated round and the controller/node CPU per host-round.
2. Capacity (CVS_BENCH_SCALE, default 256; a list such as 256,128,64,32 is tried in that
   order until one fits):
   ``delay: 0``, every host polls back-to-back, so one cluster round (window x hosts /
   host-rounds) is what a round of the whole fleet costs when all of it polls at once;
   a size fits when that is <= CVS_BENCH_BUDGET (10 s).
3. Check (--verify or CVS_BENCH_VERIFY=1): the largest fitting size polls with the real
   ``delay: 10`` for 4 rounds; each round's duration (retry interval minus the delay) must
   be <= 10 s too.

Default run: about 4 minutes here (opening 256 ssh masters and forking 256 workers is
most of it); CVS_BENCH_SCALE=64 for a quick one, CVS_BENCH_SCALE=512,256,128,64,32
CVS_BENCH_VERIFY=1 for the full search.

On the simulated cluster the nodes' sshd and reader run on the same 2 cores as the
controller, so the node-side CPU is reported apart, and so is a controller-only capacity
(cores x budget / controller CPU per host-round): what the controller could drive if the
nodes were real machines.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import time
from pathlib import Path

from _cluster import (
    Host,
    Node,
    aliases,
    remote_python,
    shared_filesystem,
    ssh,
    stop_masters,
    wait_for_cluster,
    write_inventory,
)
from _env import REMOTE_DIR, env_float, env_int, env_list
from _log_writers import log_block
from _playbook import (
    EventTail,
    PlayRun,
    Runner,
    delivered_bytes,
    log_poll_task,
    round_intervals,
    steady_window,
    warm_masters,
)
from _results import Target, judge, med, ms, pct, say, write_results

TASK = "poll rounds"
MARKER_LINE = b"completed step: 99999999, seconds: 1.0, loss: 1.0\n"
MAKE_LOGS = r"""
import os, sys
block = sys.stdin.buffer.read()
for path in sys.argv[1:]:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(block)
"""


def log_path(name: str) -> str:
    return f"{REMOTE_DIR}/scale/{name}.log"


def by_node(hosts: list[Host]) -> list[list[Host]]:
    groups: dict[str, list[Host]] = {}
    for h in hosts:
        groups.setdefault(h.node.name, []).append(h)
    return list(groups.values())


class Fleet:
    def __init__(self, runner: Runner, nodes: list[Node], count: int) -> None:
        self.runner = runner
        self.hosts = aliases(nodes, count, prefix="hs")
        self.inv = write_inventory(runner.dir / f"inventory-{count}.yml", self.hosts)
        for group in by_node(self.hosts):  # a 64 KiB log per host, written on its node
            paths = " ".join(shlex.quote(log_path(h.name)) for h in group)
            py = remote_python(group[0])
            ssh(group[0], f"{py} -c {shlex.quote(MAKE_LOGS)} {paths}", stdin=log_block(65536))
        warm_masters(runner, self.inv, self.hosts)
        self.shared = shared_filesystem(self.hosts[0], log_path(self.hosts[0].name))
        self.env = {}
        if self.shared:
            self.env["CVS_BENCH_APPEND"] = json.dumps({"task": TASK, "path": log_path("{host}"), "bytes": 1024})

    def play(self, retries: int, delay: float) -> list[dict]:
        task = log_poll_task(
            TASK, log_path("{{ inventory_hostname }}"), retries=retries, delay=delay, state_dir=self.runner.state_dir
        )
        return [{"hosts": "bench", "gather_facts": False, "tasks": [task]}]

    def finish_all(self) -> None:
        """Append the completion marker to every host's log: the poll completes (policy all) and ends."""
        if self.shared:
            for h in self.hosts:
                with open(log_path(h.name), "ab") as fh:
                    fh.write(MARKER_LINE)
            return
        for group in by_node(self.hosts):
            paths = " ".join(shlex.quote(log_path(h.name)) for h in group)
            ssh(group[0], f'm=$(cat); for f in {paths}; do printf "%s\\n" "$m" >> "$f"; done', stdin=MARKER_LINE)

    def run_steady(self, window_rounds: int, delay: float = 0, sample: float = 0.25, limit: float = 900) -> PlayRun:
        """Poll until every host has done window_rounds rounds after all hosts finished their first one."""
        names = {h.name for h in self.hosts}

        def monitor(proc: subprocess.Popen, events_path: Path) -> None:
            tail = EventTail(events_path)
            counts: dict[str, int] = {}
            after: dict[str, int] = {}
            started = False
            deadline = time.time() + limit
            while proc.poll() is None and time.time() < deadline:
                for e in tail.poll():
                    if e["ev"] == "retry" and e.get("task") == TASK:
                        counts[e["host"]] = counts.get(e["host"], 0) + 1
                        if started:
                            after[e["host"]] = after.get(e["host"], 0) + 1
                if not started and set(counts) >= names:
                    started = True
                if started and len(after) == len(names) and min(after.values()) >= window_rounds:
                    break
                time.sleep(0.2)
            self.finish_all()

        run = self.runner.run(
            self.play(100000, delay), self.inv, forks=len(self.hosts), env=self.env, sample=sample, monitor=monitor
        )
        self.check(run)
        return run

    def run_fixed(self, rounds: int, delay: float, sample: float = 1.0) -> PlayRun:
        run = self.runner.run(
            self.play(rounds - 1, delay), self.inv, forks=len(self.hosts), env=self.env, sample=sample
        )
        self.check(run)
        return run

    def check(self, run: PlayRun) -> None:
        polled = run.by_host("retry", TASK)
        if len(polled) != len(self.hosts):
            raise RuntimeError(f"only {len(polled)} of {len(self.hosts)} hosts polled")
        # running out of retries fails the task too (run_fixed): only a finished poll's failure is one
        bad = [e for evs in run.by_host("failed", TASK).values() for e in evs if e["r"].get("finished")]
        if bad:
            raise RuntimeError(f"a host failed: {bad[0]}")

    def cleanup(self) -> None:
        for group in by_node(self.hosts):
            names = " ".join(shlex.quote(log_path(h.name)) for h in group)
            ssh(group[0], f"rm -f {names}")
        stop_masters(self.hosts)


def intervals(run: PlayRun, delay: float = 0, skip: int = 1) -> dict:
    per_host = round_intervals(run, TASK, skip=skip)
    medians = [med(g) - delay for g in per_host.values() if g]
    every = [x - delay for g in per_host.values() for x in g]
    return {
        "round_median_s": med(medians),
        "round_p90_s": pct(every, 0.9),
        "round_max_s": max(every) if every else float("nan"),
        "rounds_measured": len(every),
    }


def measure(fleet: Fleet, window_rounds: int, budget: float | None, delay: float = 0) -> dict:
    count = len(fleet.hosts)
    run = fleet.run_steady(window_rounds, delay=delay, sample=0.25 if count <= 16 else 1.0)
    win = steady_window(run, TASK)
    row = {
        "hosts": count,
        "delay": delay,
        **intervals(run, delay=delay),
        "cluster_round_s": win["cluster_round_s"],
        "controller_cpu_per_host_round_s": win["controller_cpu_per_host_round_s"],
        "node_cpu_per_host_round_s": win["node_cpu_per_host_round_s"],
        "window": win,
        "bytes_per_round": med(delivered_bytes(run, TASK).values()),
        "playbook_wall_s": run.cpu.wall,
    }
    text = (
        f"  {count:>4} hosts, delay {delay:g}: round {ms(row['round_median_s'])} (median), cluster round "
        f"{ms(row['cluster_round_s'])}; per host-round: controller CPU {ms(row['controller_cpu_per_host_round_s'])}"
        f", node CPU {ms(row['node_cpu_per_host_round_s'])}"
    )
    if budget is not None:
        row["fits"] = row["cluster_round_s"] <= budget
        text += (
            f" -> {'fits' if row['fits'] else 'does NOT fit'} in {budget:g}s (playbook {row['playbook_wall_s']:.0f}s)"
        )
    say(text)
    return row


def verify(fleet: Fleet, delay: float) -> dict:
    count = len(fleet.hosts)
    run = fleet.run_fixed(4, delay)
    row = {"hosts": count, "delay": delay, **intervals(run, delay=delay, skip=0), "playbook_wall_s": run.cpu.wall}
    row["fits"] = row["round_max_s"] <= delay
    say(
        f"  {count:>4} hosts, delay {delay:g}s: round median {row['round_median_s']:.2f}s, slowest "
        f"{row['round_max_s']:.2f}s over {row['rounds_measured']} rounds -> {'fits' if row['fits'] else 'does NOT fit'}"
    )
    return row


def scaling_targets(
    first: int, last: int, ratio: float, largest_fitting: int | None, tried: list[int], budget: float
) -> list[Target]:
    """12 hosts <= 3x 1 host; 256 hosts fit a 10 s delay (not measured with other sizes or another budget)."""
    fits_measured = budget == 10 and max(tried, default=0) >= 256
    return [
        Target("round of 12 hosts <= 3x the round of 1 host", ratio if (first, last) == (1, 12) else None, 3.0),
        Target(
            "the largest fleet in a 10 s delay >= 256 hosts",
            (largest_fitting or 0) if fits_measured else None,
            256,
            at_most=False,
        ),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default=",".join(env_list("CVS_BENCH_HOSTS", ["1", "3", "12"])))
    ap.add_argument("--scale", default=",".join(env_list("CVS_BENCH_SCALE", ["256"])))
    ap.add_argument("--budget", type=float, default=env_float("CVS_BENCH_BUDGET", 10.0))
    ap.add_argument("--rounds", type=int, default=env_int("CVS_BENCH_ROUNDS", 12), help="window rounds, 1-12 hosts")
    ap.add_argument("--scale-rounds", type=int, default=env_int("CVS_BENCH_SCALE_ROUNDS", 2))
    ap.add_argument("--delay", type=float, default=env_float("CVS_BENCH_ROUND_DELAY", 1.0), help="poll delay, part 1")
    ap.add_argument("--delay-rounds", type=int, default=env_int("CVS_BENCH_DELAY_ROUNDS", 8))
    ap.add_argument("--verify", action=argparse.BooleanOptionalAction, default=bool(env_int("CVS_BENCH_VERIFY", 0)))
    args = ap.parse_args()

    nodes = wait_for_cluster()
    runner = Runner("hosts_scaling")
    say(f"hosts_scaling: aliases over {', '.join(n.name for n in nodes)}")
    polled, sizes = [], []
    for n in [int(x) for x in args.hosts.split(",")]:
        fleet = Fleet(runner, nodes, n)
        try:
            polled.append(measure(fleet, args.delay_rounds, None, delay=args.delay))
            sizes.append(measure(fleet, args.rounds, None))
        finally:
            fleet.cleanup()
    first, last = polled[0], polled[-1]
    ratio = last["round_median_s"] / first["round_median_s"]
    ratio_delay0 = sizes[-1]["round_median_s"] / sizes[0]["round_median_s"]

    search = []
    largest = 0
    checked = None
    for n in [int(x) for x in args.scale.split(",") if x.strip().isdigit()]:  # --scale none: skip
        fleet = Fleet(runner, nodes, n)
        try:
            row = measure(fleet, args.scale_rounds, args.budget)
            search.append(row)
            if row["fits"]:
                largest = n
                if args.verify:
                    checked = verify(fleet, args.budget)
        finally:
            fleet.cleanup()
        if largest:
            break

    per_host_round = med(r["controller_cpu_per_host_round_s"] for r in sizes + search)
    summary = {
        "round_ratio_last_over_first": ratio,
        "round_ratio_delay0_last_over_first": ratio_delay0,
        "from_to": f"{first['hosts']} -> {last['hosts']} hosts",
        "round_delay": args.delay,
        "round_s": {r["hosts"]: r["round_median_s"] for r in polled},
        "round_delay0_s": {r["hosts"]: r["round_median_s"] for r in sizes},
        "controller_cpu_per_host_round_s": per_host_round,
        "controller_cpu_per_host_round_by_size_s": {
            r["hosts"]: r["controller_cpu_per_host_round_s"] for r in sizes + search
        },
        "node_cpu_per_host_round_s": med(r["node_cpu_per_host_round_s"] for r in sizes + search),
        "largest_fitting_hosts": (largest or None) if checked is None or checked["fits"] else None,
        "tried": [r["hosts"] for r in search],
        "largest_fitting_hosts_capacity_test": largest,
        "verified_with_real_delay": checked["fits"] if checked else None,
        "controller_only_capacity_hosts": int((os.cpu_count() or 1) * args.budget / per_host_round),
        "budget_s": args.budget,
    }
    tried = [r["hosts"] for r in search]
    summary.update(
        judge(
            scaling_targets(first["hosts"], last["hosts"], ratio, summary["largest_fitting_hosts"], tried, args.budget)
        )
    )
    out = write_results(
        "hosts_scaling",
        {"method": __doc__, "summary": summary, "polled": polled, "sizes": sizes, "search": search, "verify": checked},
    )
    say(
        f"hosts_scaling: round {first['hosts']}->{last['hosts']} hosts {ratio:.2f}x with delay {args.delay:g}s "
        f"(target <= 3x; back-to-back {ratio_delay0:.2f}x); controller CPU "
        f"{ms(per_host_round)}/host-round; largest fleet fitting {args.budget:g}s: "
        f"{summary['largest_fitting_hosts'] or 'none of ' + str(summary['tried'])} "
        f"(target 256; controller-only capacity "
        f"{summary['controller_only_capacity_hosts']}) -> {out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
