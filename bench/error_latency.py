# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Error detection latency: an error line written on a node -> the log_poll task failed on the controller.

Each trial runs one playbook: every node polls its own log (``delay: D``, error
patterns as a MaxText job would use). Once all hosts are polling, the bench sleeps a
random time in [0, D + 0.5) (so the write lands anywhere in the poll cycle), then
appends ``loss: nan`` to the middle node's log over ssh and takes the node's clock
right after the write (``date +%s.%N``; the simulated nodes share the controller's
clock). The task failing = the cvs_bench callback receiving the failed result in the
controller's main process. Reported per delay: latency of the erroring host, and of
the last host to stop (the others stop at their next round: "any error on any host
stops every host"). Target: erroring host <= D + 1 s.

Each delay runs in three forms, in the same process: the baseline, one round per task call (``call_seconds: 0``,
ansible-core sleeps the delay between calls), ``call_seconds: 120`` (the default under AWX), whose wait between
rounds wakes when the group decides, and a fleet (``fleet: true``, one task polls every host, one round per call),
whose last result stops every host at once. The ratios printed are each form's all-stopped latency over the
baseline's.

Defaults: 6 trials at D=2 and 4 at D=5 (CVS_BENCH_DELAYS=2,5, CVS_BENCH_TRIALS=6,4;
CVS_BENCH_CALL_SECONDS=0,120,fleet).
"""

from __future__ import annotations

import argparse
import random
import shlex
import time
from pathlib import Path

from _cluster import Host, aliases, ssh, wait_for_cluster, write_inventory
from _env import REMOTE_DIR, env_int, env_list
from _playbook import Runner, log_poll_task, read_events, warm_masters
from _results import med, say, write_results

TASK = "poll for errors"
ERROR_LINE = "completed step: 77, seconds: 1.2, TFLOP/s/device: 0.0, loss: nan"


def wait_polling(state_dir: Path, since: float, hosts: list[str], timeout: float = 120) -> None:
    """Until every host ran its first round: it registered in the task's group state (a call of several rounds
    sends no event before it ends)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        members = [p for p in state_dir.glob("*/*/g*/members/*.json") if p.stat().st_mtime >= since]
        if len(members) >= len(hosts):
            return
        time.sleep(0.05)
    raise RuntimeError("hosts did not start polling")


def wait_first_event(events_path: Path, timeout: float = 120) -> None:
    """Until a fleet ran its first round (one call = one round with call_seconds 0: it sends a retry event)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(e["ev"] == "retry" and e.get("task") == TASK for e in read_events(events_path)):
            return
        time.sleep(0.05)
    raise RuntimeError("the fleet did not start polling")


def trial(runner: Runner, inv, hosts: list[Host], delay: float, culprit: Host, rng: random.Random, form: str) -> dict:
    fleet = form == "fleet"
    call_seconds = 0.0 if fleet else float(form)
    paths = {h.name: f"{REMOTE_DIR}/latency/{h.name}.log" for h in hosts}
    for h in hosts:
        ssh(h, f"mkdir -p {REMOTE_DIR}/latency && printf 'starting\\n' > {shlex.quote(paths[h.name])}")
    task = log_poll_task(
        TASK,
        f"{REMOTE_DIR}/latency/{{{{ inventory_hostname }}}}.log",
        retries=100000,
        delay=delay,
        state_dir=runner.state_dir,
        start="beginning",
        ignore_errors=False,
        timeout=300,
        call_seconds=call_seconds,
        **({"fleet": True} if fleet else {}),
    )
    tasks = [task]
    if fleet:  # the fleet's verdicts reach every host at once, in its last result
        task["run_once"] = True
        task["register"] = "poll"
        tasks.append({"name": "fail the failed hosts", "ansible.builtin.fail": {"msg": "failed"},
                      "when": "inventory_hostname in poll.failed_hosts"})  # fmt: skip
    play = {"hosts": "bench", "gather_facts": False, "tasks": tasks}
    started = time.time() - 1  # file times are coarser than time.time()
    proc, events_path, _ = runner.start([play], inv, forks=len(hosts))
    try:
        if fleet:
            wait_first_event(events_path)
        else:
            wait_polling(runner.state_dir, started, [h.name for h in hosts])
        time.sleep(rng.uniform(0, delay + 0.5))
        quoted = shlex.quote(paths[culprit.name])
        written = float(ssh(culprit, f"printf '%s\\n' {shlex.quote(ERROR_LINE)} >> {quoted}; date +%s.%N"))
        proc.wait(timeout=delay * 4 + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    events = read_events(events_path)
    failed = {e["host"]: e for e in events if e["ev"] == "failed" and e.get("task") == TASK}
    if fleet:
        done = next((e for e in events if e["ev"] == "ok" and e.get("task") == TASK), None)
        if done is None or done["r"].get("failed_hosts") != len(hosts):
            raise RuntimeError(f"the fleet did not stop every host: {done}")
        failed = {h.name: done for h in hosts}
    if culprit.name not in failed:
        raise RuntimeError(f"{culprit.name} did not fail: {[e for e in events if e['ev'] != 'retry'][-5:]}")
    err = failed[culprit.name]["r"].get("error") or {}
    return {
        "delay": delay,
        "form": form,
        "call_seconds": call_seconds,
        "written_at": written,
        "latency_erroring_host_s": failed[culprit.name]["t"] - written,
        "latency_all_stopped_s": max(e["t"] for e in failed.values()) - written,
        "hosts_failed": len(failed),
        "error_name": err.get("name"),
    }


def form_name(form: str) -> str:
    return "fleet" if form == "fleet" else f"call_seconds {form}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delays", default=",".join(env_list("CVS_BENCH_DELAYS", ["2", "5"])))
    ap.add_argument("--trials", default=",".join(env_list("CVS_BENCH_TRIALS", ["6", "4"])))
    ap.add_argument("--seed", type=int, default=env_int("CVS_BENCH_SEED", 7))
    ap.add_argument("--call-seconds", default=",".join(env_list("CVS_BENCH_CALL_SECONDS", ["0", "120", "fleet"])))
    args = ap.parse_args()
    forms = [c.strip() if c.strip() == "fleet" else f"{float(c):g}" for c in args.call_seconds.split(",")]
    delays = [float(d) for d in args.delays.split(",")]
    trials = [int(t) for t in args.trials.split(",")]
    trials += [trials[-1]] * (len(delays) - len(trials))

    nodes = wait_for_cluster()
    hosts = aliases(nodes, len(nodes), prefix="el")
    culprit = hosts[len(hosts) // 2]
    runner = Runner("error_latency")
    inv = write_inventory(runner.dir / "inventory.yml", hosts)
    warm_masters(runner, inv, hosts)
    rng = random.Random(args.seed)
    say(f"error_latency: {len(hosts)} hosts, error written on {culprit.name} ({culprit.node.name})")
    per_delay = []
    for delay, count in zip(delays, trials):
        for form in forms:
            rows = [trial(runner, inv, hosts, delay, culprit, rng, form) for _ in range(count)]
            lat = [r["latency_erroring_host_s"] for r in rows]
            stop = [r["latency_all_stopped_s"] for r in rows]
            entry = {
                "delay": delay,
                "form": form,
                "trials": rows,
                "erroring_host_median_s": med(lat),
                "erroring_host_max_s": max(lat),
                "all_stopped_median_s": med(stop),
                "all_stopped_max_s": max(stop),
                "target_s": delay + 1,
                "meets_target": max(lat) <= delay + 1,
                "all_stopped_meets_target": max(stop) <= delay + 1,
            }
            per_delay.append(entry)
            say(
                f"  delay {delay:g}s, {form_name(form)}: erroring host failed after median "
                f"{entry['erroring_host_median_s']:.2f}s, max {entry['erroring_host_max_s']:.2f}s "
                f"(target <= {delay + 1:g}s: {'ok' if entry['meets_target'] else 'MISSED'}); every host stopped "
                f"after median {entry['all_stopped_median_s']:.2f}s, max {entry['all_stopped_max_s']:.2f}s "
                f"({'ok' if entry['all_stopped_meets_target'] else 'MISSED'})"
            )
        base, *others = per_delay[-len(forms) :]
        for other in others:
            ratio = other["all_stopped_median_s"] / base["all_stopped_median_s"]
            say(
                f"  delay {delay:g}s: every host stopped after {ratio:.2f}x the baseline's median latency "
                f"({form_name(other['form'])} over {form_name(base['form'])})"
            )
    for h in hosts:
        ssh(h, f"rm -f {REMOTE_DIR}/latency/{h.name}.log")
    summary = {
        "meets_target": all(e["meets_target"] for e in per_delay),
        "all_stopped_meets_target": {
            form_name(c): all(e["all_stopped_meets_target"] for e in per_delay if e["form"] == c) for c in forms
        },
        "worst_margin_s": min(e["target_s"] - e["erroring_host_max_s"] for e in per_delay),
        "target": "line written -> task failed <= delay + 1 s",
    }
    out = write_results("error_latency", {"method": __doc__, "summary": summary, "delays": per_delay})
    say(f"error_latency: worst margin to target {summary['worst_margin_s']:.2f}s -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
