# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job events and bytes per host-hour of a log_poll watch under ansible-runner, one round per call vs call_seconds.

AWX's UI handles about 4,000 events per job. Each mode runs a real ``ansible-runner run`` of one log_poll task
on 64 alias hosts of the controller (``ansible_connection=local``), console ``cvs.cluster.cvs`` as in the EE,
and counts the job events runner writes (``artifacts/<ident>/job_events``) and their bytes. Time is scaled down
(CVS_BENCH_EVENT_SCALE, default 0.01: delay 5 s -> 0.05 s); the one-round-per-call poll runs for
CVS_BENCH_EVENT_SECONDS (default 12). On 2 busy cores a scaled round takes longer than its scaled delay, so the
call_seconds run uses the round period measured in the first run: call_seconds = 24 rounds (120 s / 5 s, the
default under runner) of that period, for 3 calls per host. Meanwhile a writer appends CVS_BENCH_EVENT_LINES
(default 5) lines per host and delay. Per host-hour is extrapolated by counting rounds: (events of the poll task
per host / rounds per host) x 720, the rounds one host makes in an hour at delay 5, where a call counts as at
most the 24 rounds it holds at delay 5; a 64-host hour adds the events that do not scale with the hour (play,
task start, runner_on_start per host, stats) and one heartbeat per 30 s.
Printed against the 4,000-event limit as a ratio. CVS_BENCH_EVENT_HOSTS changes the host count.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

from _cluster import wait_quiet
from _env import REPO, VENV_BIN, WORK, ansible_env, env_float, env_int
from _playbook import ERROR_PATTERNS
from _results import human_size, say, write_results

TASK = "watch the job"
AWX_EVENT_LIMIT = 4000
REAL_DELAY = 5.0
REAL_CALL_SECONDS = 120.0
HEARTBEAT = 30
ROUNDS_PER_HOST_HOUR = 3600 / REAL_DELAY
# calls per host the per-task run lasts
CALLS = 3
# one per round (per call with call_seconds); runner_on_start comes once per host and task
POLL_EVENTS = ("runner_retry", "runner_on_ok", "runner_on_failed")


class Writer(threading.Thread):
    """Appends numbered lines to every host's log each scaled delay, then the completion marker."""

    def __init__(self, logs: list[Path], delay: float, lines: int, seconds: float) -> None:
        super().__init__(daemon=True)
        self.logs, self.delay, self.lines, self.seconds = logs, delay, lines, seconds

    def run(self) -> None:
        end = time.monotonic() + self.seconds
        number = 0
        while time.monotonic() < end:
            block = "".join(
                f"step {number + i} loss: 1.{i} TFLOP/s/device: 123.4 tokens/s: 5678\n" for i in range(self.lines)
            )
            number += self.lines
            for log in self.logs:
                with open(log, "a") as fh:
                    fh.write(block)
            time.sleep(self.delay)
        for log in self.logs:
            with open(log, "a") as fh:
                fh.write("JOB DONE\n")


def run_mode(work: Path, mode: str, hosts: int, delay: float, call_seconds: float, seconds: float, lines: int) -> dict:
    pdd = work / mode
    shutil.rmtree(pdd, ignore_errors=True)
    (pdd / "project").mkdir(parents=True)
    (pdd / "inventory").mkdir()
    (pdd / "env").mkdir()
    logs_dir = pdd / "logs"
    logs_dir.mkdir()
    names = [f"h{i:03d}" for i in range(hosts)]
    logs = [logs_dir / f"{n}.log" for n in names]
    for log in logs:
        log.write_text("")
    inventory = {
        "all": {
            "hosts": {
                n: {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"} for n in names
            }
        }
    }
    (pdd / "inventory" / "hosts.json").write_text(json.dumps(inventory))
    args = {
        "logs": [f"{logs_dir}/{{{{ inventory_hostname }}}}.log"],
        "error_patterns": ERROR_PATTERNS,
        "complete": {"pattern": "^JOB DONE$", "policy": "all"},
        "start": "beginning",
        "timeout": 3600,
        "state_dir": str(pdd / "state"),
        "save_dir": str(pdd / "saved"),
        "call_seconds": call_seconds,
    }
    task = {
        "name": TASK,
        "cvs.cluster.log_poll": args,
        "register": "poll",
        "until": "poll.finished",
        "retries": 1000000,
        "delay": delay,
    }
    (pdd / "project" / "play.yml").write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": [task]}]))
    envvars = {
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"),
        "ANSIBLE_STDOUT_CALLBACK": "cvs.cluster.cvs",  # as execution-environment.yml sets it
        "CVS_HEARTBEAT": str(HEARTBEAT),
    }
    (pdd / "env" / "envvars").write_text(json.dumps(envvars))
    env = {k: v for k, v in ansible_env().items() if not k.startswith(("ANSIBLE_", "CVS_", "AWX_", "RUNNER_"))}
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    writer = Writer(logs, delay, lines, seconds)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "ansible-runner"),
            "run",
            str(pdd),
            "-p",
            "play.yml",
            "--ident",
            "job",
            "--forks",
            str(hosts),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    writer.start()
    _out, err = proc.communicate(timeout=seconds + 900)
    took = time.perf_counter() - t0
    files = sorted((pdd / "artifacts" / "job" / "job_events").glob("*.json"))
    events = [json.loads(p.read_text()) for p in files]
    sizes = {e["uuid"]: p.stat().st_size for e, p in zip(events, files)}
    rc = (pdd / "artifacts" / "job" / "rc").read_text().strip()
    if proc.returncode != 0 or rc != "0":
        raise RuntimeError(f"ansible-runner rc={proc.returncode} job rc={rc}: {err[-2000:]}")
    poll = [e for e in events if e["event"] in POLL_EVENTS and e["event_data"].get("task") == TASK]
    finals = [e for e in poll if e["event"] == "runner_on_ok"]
    rounds = sum(int(e["event_data"]["res"]["round"]) for e in finals)
    if len(finals) != hosts:
        raise RuntimeError(f"{len(finals)} of {hosts} hosts finished the poll")
    poll_bytes = sum(sizes[e["uuid"]] for e in poll)
    # play, task start, runner_on_start per host, stats: a 64-host job has them once, whatever its length
    other = [e for e in events if e not in poll and e["event"] != "verbose"]
    per_host = sum(1 for e in other if e["event"] == "runner_on_start") / hosts
    # inside a call the scaled rounds come faster than between calls (no Ansible retry between them), so a call may
    # hold more rounds than the 24 it holds at delay 5: never count more than those
    full_scale = REAL_CALL_SECONDS / REAL_DELAY if call_seconds else 1.0
    rounds_per_event = min(rounds / len(poll), full_scale)
    per_host_hour = ROUNDS_PER_HOST_HOUR / rounds_per_event
    bytes_per_host_hour = poll_bytes / rounds * ROUNDS_PER_HOST_HOUR
    fixed = len(other) - per_host * hosts
    job_events = 64 * (per_host_hour + per_host) + fixed + 3600 / HEARTBEAT
    largest = max(
        max(len(json.dumps(e["event_data"].get("res", {}))), len(str(e["event_data"].get("res", {})))) for e in poll
    )
    return {
        "mode": mode,
        "hosts": hosts,
        "delay_s": delay,
        "call_seconds": args["call_seconds"],
        "took_s": round(took, 1),
        "round_period_s": round(took / (rounds / hosts), 3),
        "events": len(events),
        "poll_events": len(poll),
        "rounds": rounds,
        "rounds_per_poll_event_measured": round(rounds / len(poll), 2),
        "rounds_per_poll_event_counted": round(rounds_per_event, 2),
        "events_per_host_hour": round(per_host_hour, 1),
        "bytes_per_host_hour": round(bytes_per_host_hour),
        "job_events_64_hosts_1_hour": round(job_events),
        "job_mb_64_hosts_1_hour": round(64 * bytes_per_host_hour / 1e6, 1),
        "ratio_to_awx_limit": round(job_events / AWX_EVENT_LIMIT, 3),
        "largest_poll_result": largest,
    }


def main() -> None:
    hosts = env_int("CVS_BENCH_EVENT_HOSTS", 64)
    scale = env_float("CVS_BENCH_EVENT_SCALE", 0.01)
    seconds = env_float("CVS_BENCH_EVENT_SECONDS", 12)
    lines = env_int("CVS_BENCH_EVENT_LINES", 5)
    work = WORK / "events_budget"
    work.mkdir(parents=True, exist_ok=True)
    delay = REAL_DELAY * scale
    modes = {}
    for mode in ("per_round", "per_task"):
        wait_quiet()
        if mode == "per_round":
            call_seconds, poll_seconds = 0.0, seconds
        else:
            # as many rounds per call as at full scale (120 s / 5 s = 24), with the round period measured above
            period = max(delay, modes["per_round"]["round_period_s"])
            call_seconds = max(REAL_CALL_SECONDS * scale, (REAL_CALL_SECONDS / REAL_DELAY - 0.5) * period)
            poll_seconds = CALLS * call_seconds
        modes[mode] = m = run_mode(work, mode, hosts, delay, call_seconds, poll_seconds, lines)
        say(
            f"  {mode:<9}: {m['rounds']} rounds in {m['poll_events']} poll events ({m['took_s']}s); per host-hour "
            f"{m['events_per_host_hour']:.0f} events, {human_size(m['bytes_per_host_hour'])}; 64 hosts x 1 h: "
            f"{m['job_events_64_hosts_1_hour']} events = {m['ratio_to_awx_limit']:.2f}x the {AWX_EVENT_LIMIT}-event "
            f"limit, {m['job_mb_64_hosts_1_hour']} MB; largest result {m['largest_poll_result']} bytes"
        )
    per_round, per_task = modes["per_round"], modes["per_task"]
    summary = {
        "per_round_ratio_to_limit": per_round["ratio_to_awx_limit"],
        "per_task_ratio_to_limit": per_task["ratio_to_awx_limit"],
        "per_round_job_events": per_round["job_events_64_hosts_1_hour"],
        "per_task_job_events": per_task["job_events_64_hosts_1_hour"],
        "events_ratio_per_round_over_per_task": round(
            per_round["events_per_host_hour"] / per_task["events_per_host_hour"], 1
        ),
        "target": f"call_seconds: a 64-host hour under AWX's ~{AWX_EVENT_LIMIT:,} events per job",
        "meets_target": per_task["ratio_to_awx_limit"] < 1,
    }
    write_results("events_budget", {"modes": modes, "summary": summary})


if __name__ == "__main__":
    main()
