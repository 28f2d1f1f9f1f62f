"""cvs.cluster.log_poll's event budgets on the simulated cluster (issue 14): a round that reads more than
ansible-runner's MAX_EVENT_RES keeps its status fields under event_budget, and a call of several rounds
(call_seconds) makes fewer task results; in both, every line reaches save_dir and the verbose console once.

Same driver as test_log_poll.py (tests/support/log_poll.py), both backends.
"""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.cvs.cluster.tests.support.log_poll import Scenario, Target, lp_target, numbers
from ansible_collections.cvs.cluster.tests.support.lp_writer import expected_bytes

__all__ = ["lp_target"]

RUNNER_MAX_EVENT_RES = 700_000
BUDGET = 600_000
STATUS = ("finished", "completed", "round", "cursors", "log_states", "group", "msg", "elapsed", "events")


def console_numbers(stdout: str, host: str, label: str) -> list[int]:
    """Line numbers of ``[host:label] <host> line N ...`` lines the verbose console printed, in order."""
    found = re.findall(rf"^\[{re.escape(host)}:{re.escape(label)}\] {re.escape(host)} line (\d+)", stdout, re.M)
    return [int(n) for n in found]


def test_a_round_over_max_event_res_keeps_its_status_under_the_budget(lp_target: Target, tmp_path: Path) -> None:
    sc = Scenario(lp_target, tmp_path, "budget-round")
    last = 24000  # about 1.1 MB of numbered lines, read by the first round (max_bytes 2 MiB)
    specs = {
        h: {
            "path": f"{sc.dir(h)}/job.log",
            "host": h,
            "steps": [
                {"lines": [1, last], "chunk": [65536, 65536], "seconds": 0},
                {"write": "JOB DONE\n"},
                {"file": f"{sc.dir(h)}/written", "write": "1"},
            ],
        }
        for h in lp_target.hosts
    }
    sc.writer("job", specs)
    sc.shell("wait until the log is written", "while [ ! -e {{ lp_dir }}/written ]; do sleep 0.1; done")
    sc.poll(
        "watch",
        {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^JOB DONE$"}, "call_seconds": 0},
        delay=0.2,
        save=True,
    )
    out = sc.run(extra_env={"CVS_CONSOLE": "verbose", "ANSIBLE_STDOUT_CALLBACK": "cvs.cluster.cvs"})
    assert out.proc.returncode == 0, out.tail()
    for host in lp_target.hosts:
        expected = expected_bytes(specs[host])
        assert len(expected) > RUNNER_MAX_EVENT_RES
        rounds = out.task_rounds("watch", host)
        assert rounds and all(r["res_size"] <= BUDGET for r in rounds), [r["res_size"] for r in rounds]
        first = rounds[0]
        assert [key for key in STATUS if key not in first] == []
        assert first["new_lines_truncated"] > 0 and first["log_states"][0]["new_lines_truncated"] > 0
        assert first["completed"] and first["round"] == 1  # the first round read it all
        in_events = len(out.lines("watch", host))
        truncated = sum(r.get("new_lines_truncated", 0) for r in rounds)
        assert in_events + truncated == last + 1  # every line counted: in the event, or as truncated
        # the event holds the oldest lines, in order
        assert numbers(out.lines("watch", host)) == list(range(1, in_events + 1))
        assert out.saved("watch", host, "job") == expected  # every line once in save_dir
        assert console_numbers(out.proc.stdout, host, "job") == list(range(1, last + 1))
        assert out.proc.stdout.count(f"[{host}:job] JOB DONE\n") == 1


def test_call_seconds_polls_several_rounds_per_task_result(lp_target: Target, tmp_path: Path) -> None:
    sc = Scenario(lp_target, tmp_path, "budget-call")
    last = 400
    specs = {
        h: {
            "path": f"{sc.dir(h)}/job.log",
            "host": h,
            "steps": [{"lines": [1, last], "chunk": [50, 400], "seconds": 4}, {"write": "JOB DONE\n"}],
        }
        for h in lp_target.hosts
    }
    sc.writer("job", specs)
    sc.poll(
        "watch",
        {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^JOB DONE$"}, "call_seconds": 1.5},
        delay=0.1,
        save=True,
    )
    out = sc.run(extra_env={"CVS_CONSOLE": "verbose", "ANSIBLE_STDOUT_CALLBACK": "cvs.cluster.cvs"})
    assert out.proc.returncode == 0, out.tail()
    for host in lp_target.hosts:
        rounds = out.task_rounds("watch", host)
        final = out.result("watch", host)
        assert final["completed"], final["msg"]
        # far fewer task results than rounds: each result stands for the rounds of its call
        assert len(rounds) * 3 <= final["round"], (len(rounds), final["round"])
        assert sum(r["rounds_in_call"] for r in rounds) == final["round"]
        assert numbers(out.lines("watch", host)) == list(range(1, last + 1))
        assert not any(r.get("new_lines_truncated") for r in rounds)
        assert out.saved("watch", host, "job") == expected_bytes(specs[host])
        assert console_numbers(out.proc.stdout, host, "job") == list(range(1, last + 1))
        assert out.proc.stdout.count(f"[{host}:job] JOB DONE\n") == 1


def test_a_budget_too_small_for_the_status_fields_fails_before_polling(lp_target: Target, tmp_path: Path) -> None:
    sc = Scenario(lp_target, tmp_path, "budget-small")
    sc.poll("watch", {"logs": ["{{ lp_dir }}/never.log"], "event_budget": 5000}, delay=0.2)
    out = sc.run()
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["failed"] and result["finished"]
        assert re.search(r"event_budget 5000 is too small .* at least \d+ bytes", result["msg"]), result["msg"]
        assert "round" not in result  # no round ran
