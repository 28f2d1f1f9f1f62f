# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Playbook runs from a bench work directory: the log_poll task a bench polls with, the runner that
starts and measures ansible-playbook, its event stream (cvs_bench callback), and what the events tell
(round intervals, the steady-state window, bytes delivered per round).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from _cluster import Host
from _cpu import CpuDelta, CpuSnap, Sampler, cpu_between
from _env import VENV_BIN, WORK, ansible_env

# the patterns a MaxText job would use; the completion marker never matches the bench's lines
ERROR_PATTERNS = {"nan": r"loss:\s*nan", "oom": "RESOURCE_EXHAUSTED", "segv": "Segmentation fault"}
IGNORE_PATTERNS = {"retry": "will retry"}
NEVER_MARKER = r"completed step:\s*99999999,"


# ---------------------------------------------------------------- running a playbook


@dataclass
class PlayRun:
    rc: int
    cpu: CpuDelta
    events: list[dict]
    stdout: str
    stderr: str
    argv: list[str] = field(default_factory=list)
    sampler: Sampler | None = None

    def by_host(self, event: str | None = None, task: str | None = None) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for e in self.events:
            if "host" in e and (event is None or e["ev"] == event) and (task is None or e.get("task") == task):
                out.setdefault(e["host"], []).append(e)
        return out

    def task_start(self, task: str) -> float | None:
        return next((e["t"] for e in self.events if e["ev"] == "task_start" and e["task"] == task), None)


def yaml_dump(obj: Any) -> str:
    # JSON is valid YAML; ansible-playbook reads it as a playbook
    return json.dumps(obj, indent=1) + "\n"


class Runner:
    """Runs playbooks from a bench work directory and measures them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dir = WORK / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = self.dir / "state"
        self.count = 0

    def start(
        self,
        plays: list[dict],
        inventory: Path,
        forks: int,
        env: dict | None = None,
        args: Sequence[str] = (),
        program: Sequence[str] | None = None,
    ) -> tuple[subprocess.Popen, Path, Path]:
        self.count += 1
        playbook = self.dir / f"play{self.count}.yml"
        playbook.write_text(yaml_dump(plays))
        events = self.dir / f"events{self.count}.jsonl"
        events.unlink(missing_ok=True)
        argv = [*(program or [str(VENV_BIN / "ansible-playbook")])]
        argv += ["-i", str(inventory), "-f", str(forks), *args, str(playbook)]
        with open(self.dir / f"out{self.count}.txt", "wb") as out, open(self.dir / f"err{self.count}.txt", "wb") as err:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=err,
                env=ansible_env(dict(env or {}, CVS_BENCH_EVENTS=str(events))),
                cwd=str(self.dir),
            )
        proc.out_path, proc.err_path = out.name, err.name  # type: ignore[attr-defined]
        return proc, events, playbook

    def run(
        self,
        plays: list[dict],
        inventory: Path,
        forks: int,
        env: dict | None = None,
        timeout: float = 1800,
        args: Sequence[str] = (),
        check: bool = True,
        program: Sequence[str] | None = None,
        sample: float | None = None,
        monitor: Callable[[subprocess.Popen, Path], None] | None = None,
    ) -> PlayRun:
        """Run to the end. With sample=SECONDS, a Sampler follows the CPU of the run (see steady_window);
        monitor(proc, events_path) runs while the playbook does (e.g. to end a poll from outside)."""
        before = CpuSnap.take()
        proc, events, _playbook = self.start(plays, inventory, forks, env, args, program)
        sampler = Sampler(proc.pid, sample) if sample else None
        if sampler:
            sampler.start()
        try:
            if monitor:
                monitor(proc, events)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if sampler:
                sampler.stop()
        after = CpuSnap.take()
        stdout = Path(proc.out_path).read_text(errors="replace")  # type: ignore[attr-defined]
        stderr = Path(proc.err_path).read_text(errors="replace")  # type: ignore[attr-defined]
        run = PlayRun(proc.returncode, cpu_between(before, after), read_events(events), stdout, stderr, proc.args)
        run.sampler = sampler
        if check and (proc.returncode not in (0, 2) or not any(e["ev"] == "stats" for e in run.events)):
            raise RuntimeError(f"ansible-playbook rc={proc.returncode}\n{stdout[-2000:]}\n{stderr[-2000:]}")
        bad = [e for e in run.events if e["ev"] == "unreachable"]
        if check and bad:
            raise RuntimeError(f"{len(bad)} host(s) unreachable, e.g. {bad[0]}")
        return run


class EventTail:
    """Reads a growing events file incrementally."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.events = path, 0, []

    def poll(self) -> list[dict]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        cut = data.rfind(b"\n") + 1
        self.offset += cut
        new = []
        for line in data[:cut].splitlines():
            try:
                new.append(json.loads(line))
            except ValueError:
                continue
        self.events.extend(new)
        return new


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def warm_masters(runner: Runner, inventory: Path, hosts: Sequence[Host]) -> None:
    """Open every host's ControlMaster before measuring (a real poll starts after earlier tasks did this)."""
    play = {"hosts": "bench", "gather_facts": False, "tasks": [{"name": "warm", "ansible.builtin.raw": "true"}]}
    runner.run([play], inventory, forks=min(32, max(1, len(hosts))))


# ---------------------------------------------------------------- the log_poll task and what its events tell


def log_poll_task(
    name: str,
    log: str,
    retries: int,
    delay: float,
    state_dir: Path,
    start: str = "end",
    ignore_errors: bool = True,
    **extra: Any,
) -> dict:
    task = {
        "name": name,
        "cvs.cluster.log_poll": {
            "logs": [log],
            "error_patterns": ERROR_PATTERNS,
            "ignore_error_patterns": IGNORE_PATTERNS,
            "complete": {"pattern": NEVER_MARKER, "policy": "all"},
            "start": start,
            "timeout": 7200,
            "state_dir": str(state_dir),
            **extra,
        },
        "register": "poll",
        "until": "poll.finished",
        "retries": retries,
        "delay": delay,
    }
    if ignore_errors:
        task["ignore_errors"] = True
    return task


def round_intervals(run: PlayRun, task: str, skip: int = 1) -> dict[str, list[float]]:
    """Per host: seconds between consecutive retry events of task = duration of one poll round as run by Ansible.

    The first ``skip`` intervals are dropped (the first round pays the worker fork and
    state setup, which a long poll pays once).
    """
    out = {}
    for host, evs in run.by_host("retry", task).items():
        times = [e["t"] for e in evs]
        gaps = [b - a for a, b in zip(times, times[1:])]
        out[host] = gaps[skip:]
    return out


def steady_window(run: PlayRun, task: str) -> dict:
    """Wall and CPU over the steady state of a polling run: from the moment every host has finished its
    first round to the moment the first host finished its last one (start-up, worker forks and
    the final result are outside). Needs run(..., sample=...)."""
    retries = run.by_host("retry", task)
    t_a = max(evs[0]["t"] for evs in retries.values())
    t_b = min(evs[-1]["t"] for evs in retries.values())
    host_rounds = sum(1 for evs in retries.values() for e in evs if t_a < e["t"] <= t_b)
    if run.sampler is None or host_rounds == 0 or t_b <= t_a:
        raise RuntimeError("no steady-state window (too few rounds, or run without sample=)")
    a, b = run.sampler.at(t_a), run.sampler.at(t_b)
    tree, masters, nodes, main = (y - x for x, y in zip(a, b))
    hosts = len(retries)
    mem = run.sampler.mem_available
    return {
        "window_s": t_b - t_a,
        "host_rounds": host_rounds,
        "cluster_round_s": (t_b - t_a) * hosts / host_rounds,
        "controller_cpu_per_host_round_s": (tree + masters) / host_rounds,
        "controller_tree_cpu_per_host_round_s": tree / host_rounds,
        "controller_master_cpu_per_host_round_s": masters / host_rounds,
        "node_cpu_per_host_round_s": nodes / host_rounds,
        "main_process_cpu_per_host_round_s": main / host_rounds,
        "main_process_busy_fraction": main / (t_b - t_a),
        "memory_used_peak_mib": (mem[0] - min(mem)) / 1024 if mem else None,
        "samples": len(run.sampler.samples),
    }


def delivered_bytes(run: PlayRun, task: str) -> dict[str, float]:
    """Mean bytes delivered per round, per host, from the cursor offsets reported by each retry."""
    out = {}
    for host, evs in run.by_host("retry", task).items():
        offs = [sum((e["r"].get("offsets") or {}).values()) for e in evs if e["r"].get("offsets")]
        if len(offs) > 1:
            out[host] = (offs[-1] - offs[0]) / (len(offs) - 1)
    return out
