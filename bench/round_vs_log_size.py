# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Round cost versus log size: log_poll against the upstream CVS approach and ansible.builtin.wait_for.

For each size (default 1 MiB, 64 MiB, 1 GiB; CVS_BENCH_SIZES=1M,64M,1G,4G or --sizes) a log of
real 128-byte MaxText-like lines is written on node 1 (under /var/tmp, on disk), then:

* log_poll: one ansible-playbook with one host polling that log, ``until: poll.finished``,
  ``delay: 0``, ``start: end``; the cvs_bench callback appends 1 KiB of lines after every
  round. One round = the time between two consecutive retry events of the host as the
  controller receives them (everything Ansible does per retry included: action run, ssh,
  remote reader, until templating, result IPC); the first interval is dropped.
* reader over raw ssh: the same reader program log_poll ships, piped into ``python3 -``
  over the same ControlMaster, cursor carried between calls (what the round costs
  without Ansible).
* upstream CVS: per round, 1 KiB appended, then over the same ControlMaster one ssh exec
  of ``tail -n +N FILE; grep -cE 'completed step:\\s*99999999,' FILE`` (upstream sends the
  two commands as two separate execs; one exec here is the cheaper, conservative variant).
* wait_for: an ``ansible.builtin.wait_for`` task (path + search_regex) whose regex is on
  the file's last line, timed task start -> result; beside it, for an equal footing,
  a one-round log_poll task timed the same way (both pay the per-task worker fork).

All timings are from the same process and the same minutes; results are ratios.
Files are written hot (page cache), which favours the whole-file approaches.
"""

from __future__ import annotations

import argparse
import shlex
import time

from _cluster import Host, aliases, ssh, wait_for_cluster, write_inventory
from _env import REMOTE_DIR, env_int, env_list
from _log_writers import Appender, make_remote_log, stop_background
from _playbook import NEVER_MARKER, Runner, delivered_bytes, log_poll_task, round_intervals, warm_masters
from _raw_reader import RawReader
from _results import human_size, med, ms, parse_size, pct, say, write_results

TASK = "poll rounds"
WAIT_MARKER = r"completed step:\s*88888888,"
WAIT_LINE = b"completed step: 88888888, seconds: 1.0, loss: 1.0\n"


def measure_ours(runner: Runner, inv, host: Host, path: str, rounds: int, appender: Appender) -> dict:
    task = log_poll_task(TASK, path, retries=rounds, delay=0, state_dir=runner.state_dir)
    play = {"hosts": "bench", "gather_facts": False, "tasks": [task]}
    bg = appender.start_background(0.1)
    try:
        run = runner.run([play], inv, forks=1, env=appender.callback_env(TASK))
    finally:
        stop_background(bg)
    gaps = round_intervals(run, TASK, skip=1)[host.name]
    return {
        "round_median_s": med(gaps),
        "round_p90_s": pct(gaps, 0.9),
        "round_mean_s": sum(gaps) / len(gaps),
        "rounds_timed": len(gaps),
        "bytes_per_round": delivered_bytes(run, TASK).get(host.name),
        "playbook_wall_s": run.cpu.wall,
    }


def measure_reader_raw(host: Host, path: str, rounds: int, appender: Appender) -> dict:
    reader = RawReader(host, path)
    times = []
    got = 0
    for _ in range(rounds):
        appender.append()
        t0 = time.perf_counter()
        got += reader.round()
        times.append(time.perf_counter() - t0)
    return {"round_median_s": med(times), "round_p90_s": pct(times, 0.9), "bytes_per_round": got / rounds}


def measure_upstream(host: Host, path: str, rounds: int, appender: Appender, alone_runs: int = 3) -> dict:
    q = shlex.quote(path)
    cursor = int(ssh(host, f"wc -l < {q}").strip())  # lines already seen, as upstream's cursor after catching up
    grep = f"grep -cE {shlex.quote(NEVER_MARKER)} {q} 2>/dev/null || true"
    times = []
    for _ in range(rounds):
        appender.append()
        t0 = time.perf_counter()
        out = ssh(host, f"tail -n +{cursor + 1} {q} 2>/dev/null || true; {grep}")
        times.append(time.perf_counter() - t0)
        lines = out.splitlines()
        cursor += len(lines) - 1  # last line is grep's count
    # where an upstream round goes: each command alone (3 runs each, median)
    alone = {}
    for label, cmd in (("tail_only", f"tail -n +{cursor + 1} {q} >/dev/null 2>&1 || true"), ("grep_only", grep)):
        runs = []
        for _ in range(alone_runs):
            t0 = time.perf_counter()
            ssh(host, cmd)
            runs.append(time.perf_counter() - t0)
        alone[f"{label}_median_s"] = med(runs)
    return {"round_median_s": med(times), "round_p90_s": pct(times, 0.9), "rounds": rounds, "all_s": times, **alone}


def measure_tasks(runner: Runner, inv, host: Host, path: str, reps: int, appender: Appender) -> dict:
    """wait_for (regex on the last line) vs a one-round log_poll task, alternating, each timed start -> result."""
    appender.append(WAIT_LINE)
    tasks = []
    for i in range(reps):
        one = log_poll_task(f"one round {i}", path, retries=0, delay=0, state_dir=runner.state_dir)
        for key in ("until", "retries", "delay", "register"):
            one.pop(key)
        tasks.append(one)
        tasks.append(
            {
                "name": f"wait_for {i}",
                "ansible.builtin.wait_for": {"path": path, "search_regex": WAIT_MARKER, "timeout": 1200},
            }
        )
    run = runner.run([{"hosts": "bench", "gather_facts": False, "tasks": tasks}], inv, forks=1)
    done = {e["task"]: e["t"] for e in run.events if e["ev"] in ("ok", "failed")}
    failed = [e for e in run.events if e["ev"] == "failed"]
    if failed:
        raise RuntimeError(f"task failed: {failed[0]}")
    wait = [done[f"wait_for {i}"] - run.task_start(f"wait_for {i}") for i in range(reps)]
    one = [done[f"one round {i}"] - run.task_start(f"one round {i}") for i in range(reps)]
    return {
        "wait_for_task_median_s": med(wait),
        "wait_for_task_all_s": wait,
        "log_poll_one_round_task_median_s": med(one),
        "log_poll_one_round_task_all_s": one,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(env_list("CVS_BENCH_SIZES", ["1M", "64M", "1G"])))
    ap.add_argument("--rounds", type=int, default=env_int("CVS_BENCH_ROUNDS", 40), help="log_poll rounds per size")
    ap.add_argument("--upstream-rounds", type=int, default=env_int("CVS_BENCH_UPSTREAM_ROUNDS", 8))
    ap.add_argument(
        "--upstream-big-rounds",
        type=int,
        default=env_int("CVS_BENCH_UPSTREAM_BIG_ROUNDS", 3),
        help="upstream rounds for logs over 64 MiB (each re-reads the whole file)",
    )
    ap.add_argument("--reps", type=int, default=env_int("CVS_BENCH_REPS", 3), help="wait_for / one-round tasks")
    ap.add_argument("--keep", action="store_true", help="keep the log files on the node")
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]

    nodes = wait_for_cluster()
    host = aliases(nodes, 1, prefix="ls")[0]
    runner = Runner("round_vs_log_size")
    inv = write_inventory(runner.dir / "inventory.yml", [host])
    warm_masters(runner, inv, [host])
    results = []
    say(f"round_vs_log_size: host {host.name} -> {host.node.name} ({host.node.address}), sizes {args.sizes}")
    for size in sizes:
        path = f"{REMOTE_DIR}/size/log-{size}.log"
        t0 = time.perf_counter()
        make_remote_log(host, path, size)
        made = time.perf_counter() - t0
        appender = Appender(host, path)
        row: dict = {"size": size, "size_h": human_size(size), "create_s": round(made, 2)}
        row["shared_fs"] = appender.local
        row["log_poll"] = measure_ours(runner, inv, host, path, args.rounds, appender)
        row["reader_raw_ssh"] = measure_reader_raw(host, path, max(10, args.rounds // 2), appender)
        big = size > 64 << 20
        rounds = args.upstream_big_rounds if big else args.upstream_rounds
        row["upstream"] = measure_upstream(host, path, rounds, appender, alone_runs=1 if big else 3)
        row.update(measure_tasks(runner, inv, host, path, args.reps, appender))
        ours = row["log_poll"]["round_median_s"]
        row["ratio_upstream_over_ours"] = row["upstream"]["round_median_s"] / ours
        row["ratio_wait_for_over_ours"] = row["wait_for_task_median_s"] / ours
        row["ratio_wait_for_over_one_round_task"] = (
            row["wait_for_task_median_s"] / row["log_poll_one_round_task_median_s"]
        )
        results.append(row)
        say(
            f"  {row['size_h']:>8}: log_poll round {ms(ours)} (reader over raw ssh "
            f"{ms(row['reader_raw_ssh']['round_median_s'])}), "
            f"upstream tail+grep {ms(row['upstream']['round_median_s'])}"
            f" ({row['ratio_upstream_over_ours']:.1f}x), wait_for task {ms(row['wait_for_task_median_s'])}"
            f" ({row['ratio_wait_for_over_ours']:.1f}x; vs one-round log_poll task "
            f"{ms(row['log_poll_one_round_task_median_s'])}: {row['ratio_wait_for_over_one_round_task']:.1f}x)"
        )
        if not args.keep:
            ssh(host, f"rm -f {shlex.quote(path)}")

    first, last = results[0], results[-1]
    summary = {
        "flatness_ours_largest_over_smallest": last["log_poll"]["round_median_s"] / first["log_poll"]["round_median_s"],
        "largest": last["size_h"],
        "ratio_upstream_over_ours_at_largest": last["ratio_upstream_over_ours"],
        "ratio_wait_for_over_ours_at_largest": last["ratio_wait_for_over_ours"],
        "ratio_wait_for_over_one_round_task_at_largest": last["ratio_wait_for_over_one_round_task"],
        "target": ">= 50x faster than upstream and wait_for at 1 GiB; round time flat",
    }
    summary["meets_target"] = (
        summary["ratio_upstream_over_ours_at_largest"] >= 50 and summary["ratio_wait_for_over_ours_at_largest"] >= 50
    )
    path = write_results("round_vs_log_size", {"method": __doc__, "summary": summary, "sizes": results})
    say(
        f"round_vs_log_size: flatness {summary['flatness_ours_largest_over_smallest']:.2f}x "
        f"({first['size_h']} -> {last['size_h']}); at {last['size_h']}: upstream/ours "
        f"{summary['ratio_upstream_over_ours_at_largest']:.1f}x, wait_for/ours "
        f"{summary['ratio_wait_for_over_ours_at_largest']:.1f}x (target >= 50x) -> {path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
