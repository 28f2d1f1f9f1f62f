# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cost of one log_poll host-round against a raw ``ssh host true`` on the same ControlMaster.

* raw ssh: ``ssh -o ControlPath=<the host's master> host true``, sequentially, each timed;
  controller CPU = RUSAGE_CHILDREN of the ssh clients + the ControlMaster process's CPU.
* log_poll: one playbook on one host, ``delay: 0``, ``start: end``, 1 KiB appended per
  round, 40 rounds; three blocks of (30 ``ssh true``, one playbook), a ratio per block,
  the median block reported (load on a shared machine drifts; this keeps both sides of
  a ratio in the same minute). Wall per round = median time between two retry events of the host
  (first interval dropped). CPU per round over the steady-state window (first retry ->
  last retry), sampled from /proc every 0.1 s: controller = the ansible-playbook process
  tree (main process, worker, ssh clients) + the ControlMaster process; node = the
  node-side sshd serving that master and everything it ran (shell, reader), reported
  apart (on the simulated cluster it runs on the same 2 cores).
* floors over the same master, to see where a round goes: ``python3 -c pass``, the
  log_poll reader program piped into ``python3 -S`` as the action does (its command
  alone, then inside ``/bin/sh -c`` as the action runs it, then with Ansible's default
  ``; sleep 0`` too), and variants: without ``-S``, with ``-I -S``, read by
  ``python3 -S -``, and without the ``timeout`` wrapper.
* --profile (default on; --no-profile to skip): one more log_poll run under cProfile
  (main process + every worker) for the breakdown in docs/scale.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pstats
import shlex
import time
from pathlib import Path

from _cluster import Host, aliases, remote_python, ssh, wait_for_cluster, write_inventory
from _cpu import CpuSnap, cpu_between
from _env import BENCH, REMOTE_DIR, VENV_BIN, env_int
from _log_writers import Appender, make_remote_log
from _playbook import Runner, delivered_bytes, log_poll_task, round_intervals, steady_window, warm_masters
from _raw_reader import RawReader, reader_command, reader_program
from _results import med, ms, pct, say, write_results

TASK = "poll rounds"


def timed_ssh(host: Host, command: str, n: int, stdin: bytes | None = None) -> dict:
    times = []
    before = CpuSnap.take()
    for _ in range(n):
        t0 = time.perf_counter()
        ssh(host, command, stdin=stdin)
        times.append(time.perf_counter() - t0)
    cpu = cpu_between(before, CpuSnap.take()).per(n)
    return {
        "command": command,
        "n": n,
        "wall_median_s": med(times),
        "wall_p90_s": pct(times, 0.9),
        "controller_cpu_s": cpu["controller"],
        "node_cpu_s": cpu["nodes"],
    }


def poll_play(runner: Runner, path: str, rounds: int) -> list[dict]:
    task = log_poll_task(TASK, path, retries=rounds, delay=0, state_dir=runner.state_dir)
    return [{"hosts": "bench", "gather_facts": False, "tasks": [task]}]


def measure_rounds(runner: Runner, inv: Path, host: Host, path: str, rounds: int, app) -> dict:
    run = runner.run(poll_play(runner, path, rounds), inv, forks=1, env=app.callback_env(TASK), sample=0.1)
    gaps = round_intervals(run, TASK, skip=1)[host.name]
    win = steady_window(run, TASK)
    return {
        "rounds": rounds + 1,
        "round_interval_median_s": med(gaps),
        "round_interval_p90_s": pct(gaps, 0.9),
        "round_interval_mean_s": sum(gaps) / len(gaps),
        "window": win,
        "controller_cpu_per_round_s": win["controller_cpu_per_host_round_s"],
        "node_cpu_per_round_s": win["node_cpu_per_host_round_s"],
        "bytes_per_round": delivered_bytes(run, TASK).get(host.name),
        "playbook_wall_s": run.cpu.wall,
    }


BUCKETS = {
    # (file suffix, function): label -- cumulative times, so buckets nest (transport is inside the action)
    ("plugins/action/log_poll.py", "run"): "log_poll action run (all of it)",
    ("plugins/action/log_poll.py", "_read"): "  remote read (build program + ssh exec + parse reply)",
    ("ansible/plugins/connection/ssh.py", "exec_command"): "    ssh exec (spawn ssh, wait for node)",
    ("plugin_utils/_log_poll/settings.py", "poll_settings"): "  settings (regex compile, checks)",
    ("plugin_utils/_log_poll/engine.py", "consume"): "  consume reply (decode, scan, save)",
    ("plugin_utils/_log_poll/engine.py", "_progress"): "  progress (group summary + state write)",
    ("ansible/plugins/action/__init__.py", "validate_argument_spec"): "  validate_argument_spec",
    ("ansible/playbook/task.py", "_resolve_conditional"): "until: templating",
    ("ansible/executor/task_executor.py", "_get_action_handler"): "new action handler per retry",
    ("ansible/executor/process/worker.py", "send_callback"): "retry result to main process (send_callback)",
}


def profile(runner: Runner, inv: Path, path: str, rounds: int, app) -> dict:
    out_dir = runner.dir / "profile"
    out_dir.mkdir(exist_ok=True)
    for old in glob.glob(str(out_dir / "*")):
        Path(old).unlink()
    program = [str(VENV_BIN / "python"), str(BENCH / "_profiled_playbook.py")]
    env = dict(app.callback_env(TASK), CVS_BENCH_PROFILE_DIR=str(out_dir))
    run = runner.run(poll_play(runner, path, rounds), inv, forks=1, env=env, program=program)
    n = sum(1 for e in run.events if e["ev"] in ("retry", "ok", "failed") and e.get("task") == TASK)
    worker_profs = sorted(glob.glob(str(out_dir / "worker-*.prof")))
    # the poll task's worker is the one that ran longest
    workers = [json.loads(Path(p[:-5] + ".json").read_text()) | {"prof": p} for p in worker_profs]
    poll = max(workers, key=lambda w: w["wall"])
    stats = pstats.Stats(poll["prof"])
    buckets = {}
    for (fname, func), label in BUCKETS.items():
        total = 0.0
        for (file, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            if name == func and file.endswith(fname):
                total = max(total, ct)
        buckets[label] = total / n
    top = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:15]  # type: ignore[attr-defined]
    main_stats = pstats.Stats(str(out_dir / "main.prof"))
    main_top = sorted(main_stats.stats.items(), key=lambda kv: kv[1][3], reverse=True)  # type: ignore[attr-defined]
    return {
        "rounds": n,
        "note": "cProfile slows Python code; compare proportions, not absolute values",
        "worker_wall_per_round_s": poll["wall"] / n,
        "worker_self_cpu_per_round_s": poll["self_cpu"] / n,
        "worker_children_cpu_per_round_s": poll["children_cpu"] / n,
        "main_process_cpu_total_s": json.loads((out_dir / "main.json").read_text())["self_cpu"],
        "buckets_per_round_s": buckets,
        "worker_top_self_time": [
            {"func": f"{Path(k[0]).name}:{k[1]}:{k[2]}", "self_s_per_round": v[2] / n, "calls_per_round": v[1] / n}
            for k, v in top
        ],
        "main_top_cumulative": [
            {"func": f"{Path(k[0]).name}:{k[1]}:{k[2]}", "cum_s": v[3]}
            for k, v in main_top[:25]
            if "cvs_bench" in k[0] or "strategy" in k[0] or "callback" in k[0] or "results" in k[2]
        ][:12],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ssh-calls", type=int, default=env_int("CVS_BENCH_SSH_CALLS", 60))
    ap.add_argument("--rounds", type=int, default=env_int("CVS_BENCH_ROUNDS", 40), help="log_poll rounds per block")
    ap.add_argument("--blocks", type=int, default=env_int("CVS_BENCH_BLOCKS", 3), help="ssh true / log_poll pairs")
    ap.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args()

    nodes = wait_for_cluster()
    host = aliases(nodes, 1, prefix="rs")[0]
    runner = Runner("round_vs_ssh")
    inv = write_inventory(runner.dir / "inventory.yml", [host])
    warm_masters(runner, inv, [host])
    path = f"{REMOTE_DIR}/ssh/{host.name}.log"
    make_remote_log(host, path, 1 << 20)
    app = Appender(host, path)
    say(f"round_vs_ssh: host {host.name} -> {host.node.name} ({host.node.address})")

    py = remote_python(host)
    n = args.ssh_calls
    floors = {"ssh_true": timed_ssh(host, "true", n)}
    floors["python_c_pass"] = timed_ssh(host, f"{py} -c pass", n // 2)
    reader = RawReader(host, path)
    request = {"logs": [dict(reader.cursor, path=path)], "max_bytes": 2 << 20, "start": "end", "cmd_timeout": 30}
    program = reader_program(request)
    shipped = reader_command(py)
    floors["reader_command"] = timed_ssh(host, shipped, n // 2, stdin=program)
    # as the action runs it: in the play's shell (/bin/sh -c); then with the `; sleep 0` that Ansible appends when
    # the action does not name the shell (log_poll names it to avoid that)
    floors["reader_as_run"] = timed_ssh(host, f"/bin/sh -c {shlex.quote(shipped)}", n // 2, stdin=program)
    floors["reader_with_sleep_0"] = timed_ssh(host, f"/bin/sh -c {shlex.quote(shipped + '; sleep 0')}", n // 2, program)
    floors["reader_without_S"] = timed_ssh(host, reader_command(py, flags=""), n // 2, stdin=program)
    floors["reader_I_S"] = timed_ssh(host, reader_command(py, flags="-I -S"), n // 2, stdin=program)
    floors["reader_python3_S_dash"] = timed_ssh(host, f"timeout -s KILL 35 {py} -S -", n // 2, stdin=program)
    floors["reader_no_timeout_wrapper"] = timed_ssh(host, shipped.split(" ", 4)[-1], n // 2, stdin=program)
    for name, f in floors.items():
        say(
            f"  {name:>30}: wall {ms(f['wall_median_s'])}, controller CPU {ms(f['controller_cpu_s'])}, "
            f"node CPU {ms(f['node_cpu_s'])}"
        )

    # ssh true and log_poll alternate in blocks, a ratio per block: load that drifts hits both alike
    blocks = []
    for _ in range(args.blocks):
        base = timed_ssh(host, "true", n // 2)
        ours = measure_rounds(runner, inv, host, path, args.rounds, app)
        blocks.append(
            {
                "ssh_true": base,
                "log_poll": ours,
                "ratio_wall": ours["round_interval_median_s"] / base["wall_median_s"],
                "ratio_controller_cpu": ours["controller_cpu_per_round_s"] / base["controller_cpu_s"],
                "loadavg": os.getloadavg()[0],
            }
        )
        say(
            f"  block: ssh true {ms(base['wall_median_s'])} / {ms(base['controller_cpu_s'])} CPU; log_poll round "
            f"{ms(ours['round_interval_median_s'])} / {ms(ours['controller_cpu_per_round_s'])} CPU -> "
            f"{blocks[-1]['ratio_wall']:.2f}x wall, {blocks[-1]['ratio_controller_cpu']:.2f}x CPU "
            f"(load {blocks[-1]['loadavg']:.1f})"
        )
    pick = sorted(blocks, key=lambda b: b["ratio_wall"])[len(blocks) // 2]  # the median block
    base, ours = pick["ssh_true"], pick["log_poll"]
    summary = {
        "ssh_true_wall_s": base["wall_median_s"],
        "ssh_true_controller_cpu_s": base["controller_cpu_s"],
        "round_wall_s": ours["round_interval_median_s"],
        "round_controller_cpu_s": ours["controller_cpu_per_round_s"],
        "round_node_cpu_s": ours["node_cpu_per_round_s"],
        "ssh_true_node_cpu_s": base["node_cpu_s"],
        "ratio_wall": med(b["ratio_wall"] for b in blocks),
        "ratio_controller_cpu": med(b["ratio_controller_cpu"] for b in blocks),
        "ratio_wall_blocks": [b["ratio_wall"] for b in blocks],
        "ratio_controller_cpu_blocks": [b["ratio_controller_cpu"] for b in blocks],
        "target": "<= 5x raw ssh true (wall and controller CPU)",
    }
    summary["meets_target"] = summary["ratio_wall"] <= 5 and summary["ratio_controller_cpu"] <= 5
    win = ours["window"]
    say(
        f"  log_poll round: wall {ms(ours['round_interval_median_s'])} (median; p90 "
        f"{ms(ours['round_interval_p90_s'])}), controller CPU {ms(ours['controller_cpu_per_round_s'])} "
        f"(of which ControlMaster {ms(win['controller_master_cpu_per_host_round_s'])}), "
        f"node CPU {ms(ours['node_cpu_per_round_s'])}"
    )
    data = {"method": __doc__, "summary": summary, "floors": floors, "log_poll": ours, "blocks": blocks}
    if args.profile:
        data["profile"] = prof = profile(runner, inv, path, 40, app)
        for label, value in prof["buckets_per_round_s"].items():
            say(f"    profile {label:<52} {ms(value)}/round")
    ssh(host, f"rm -f {path}")
    out = write_results("round_vs_ssh", data)
    say(
        f"round_vs_ssh: round/ssh-true wall {summary['ratio_wall']:.2f}x, controller CPU "
        f"{summary['ratio_controller_cpu']:.2f}x (target <= 5x) -> {out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
