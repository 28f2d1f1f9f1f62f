"""cvs.cluster.log_poll on the simulated cluster over real SSH: exactly once, rotation, stale markers,
ordering, policies, completion probes, stalls.

Each test writes a playbook (see tests/support/log_poll.py), runs ansible-playbook against
the target's inventory and asserts on the registered results (dumped to JSON on the controller)
and on every round's result (recorded by a test-only callback).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import decode_line, split_lines
from ansible_collections.cvs.cluster.tests.support.log_poll import Scenario, Target, both_forms, lp_target, numbers
from ansible_collections.cvs.cluster.tests.support.lp_writer import expected_bytes

__all__ = ["lp_target"]  # the fixture, parametrised over the backends


def as_lines(data: bytes) -> list[str]:
    return [decode_line(b) for b in split_lines(data)]


@both_forms
def test_exactly_once_under_random_chunked_writes(lp_target: Target, tmp_path: Path, fleet: bool) -> None:
    """20,000 numbered lines per node in random chunks that split lines (CRLF, invalid UTF-8, NUL)."""
    sc = Scenario(lp_target, tmp_path, "exactly-once", fleet=fleet)
    specs = {}
    for i, host in enumerate(lp_target.hosts):
        specs[host] = {
            "path": f"{sc.dir(host)}/job.log",
            "host": host,
            "seed": 100 + i,
            "steps": [{"lines": [1, 20000], "chunk": [1, 6000], "seconds": 5}, {"write": "WRITER DONE\n"}],
        }
    sc.writer("job", specs)
    sc.poll(
        "watch",
        {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^WRITER DONE$"}, "max_bytes": 262144},
        delay=0.2,
        save=True,
    )
    sc.fetch("job.log")
    out = sc.run()
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["finished"] and result["completed"] and not result["failed"], result["msg"]
        expected = expected_bytes(specs[host])
        remote = out.fetched(host, "job.log")
        assert remote == expected
        assert out.saved("watch", host, "job") == remote  # byte for byte
        lines = out.lines("watch", host)
        assert numbers(lines) == list(range(1, 20001))  # no gap, no duplicate
        assert lines == as_lines(expected)
        assert any("{{ 7 * 6 }}" in line for line in lines)  # never templated
        assert len(out.task_rounds("watch", host)) >= 3  # polled while the writer ran


def test_rotation_is_detected_and_nothing_is_lost(lp_target: Target, tmp_path: Path) -> None:
    """rename-and-recreate, then copytruncate, in the middle of the run, with unread lines at each."""
    sc = Scenario(lp_target, tmp_path, "rotation")
    specs = {}
    for i, host in enumerate(lp_target.hosts):
        log = f"{sc.dir(host)}/job.log"
        specs[host] = {
            "path": log,
            "host": host,
            "seed": 200 + i,
            "steps": [
                {"lines": [1, 2000], "chunk": [1, 3000], "seconds": 0.8},
                {"wait_for": f"{sc.dir(host)}/go-rename"},  # the poll is under way
                {"lines": [2001, 3000], "chunk": [3000, 3000], "seconds": 0},  # unread at the rename
                {"rotate": "rename", "to": log + ".1"},
                {"lines": [3001, 3500], "chunk": [1, 3000], "seconds": 0.3},
                {"wait_for": f"{sc.dir(host)}/go-copytruncate"},  # the poll saw the rename
                {"lines": [3501, 6000], "chunk": [1, 3000], "seconds": 0.8},
                {"rotate": "copytruncate", "to": log + ".2"},
                {"lines": [6001, 9000], "chunk": [1, 3000], "seconds": 1.0},
                {"write": "WRITER DONE\n"},
            ],
        }
    sc.writer("job", specs)
    sc.poll("watch", {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^WRITER DONE$"}}, delay=0.2, save=True)

    def rotated(host: str) -> bool:
        return any("rotated" in s["events"] for r in sc.load_rounds() if r["host"] == host for s in r["log_states"])

    def drive(scenario: Scenario) -> None:
        for host in lp_target.hosts:
            scenario.wait_rounds("watch", host, 1)
            scenario.go(host, "go-rename")
        for host in lp_target.hosts:
            scenario.wait_for(f"rotation seen on {host}", lambda h=host: rotated(h))
            scenario.go(host, "go-copytruncate")

    out = sc.run(during=drive)
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["completed"] and not result["failed"], result["msg"]
        events = [e["event"] for e in result["events"]]
        assert events == ["rotated", "truncated"], result["events"]
        lines = out.lines("watch", host)
        assert numbers(lines) == list(range(1, 9001))  # each line once, none lost
        assert lines[-1] == "WRITER DONE"
        assert out.saved("watch", host, "job") == expected_bytes(specs[host])
        reported = [e for r in out.task_rounds("watch", host) for s in r["log_states"] for e in s["events"]]
        assert reported == ["rotated", "truncated"]  # each reported once, in the round it was seen


def test_stale_marker_does_not_complete_an_armed_poll(lp_target: Target, tmp_path: Path) -> None:
    sc = Scenario(lp_target, tmp_path, "stale")
    old = "printf 'old run step 9\\nJOB DONE\\nold trailer\\n' > {{ lp_dir }}/job.log"
    sc.shell("an earlier run left its marker", old)
    sc.tasks.append(
        {
            "name": "arm",
            "cvs.cluster.log_poll": {"logs": ["{{ lp_dir }}/job.log"], "start": "arm"},
            "register": "armed",
        }
    )
    specs = {
        h: {
            "path": f"{sc.dir(h)}/job.log",
            "host": h,
            "steps": [
                {"wait_for": f"{sc.dir(h)}/go"},
                {"ticks": 6, "every": 0.1, "marker_at": 6, "marker": "JOB DONE"},
            ],
        }
        for h in lp_target.hosts
    }
    sc.writer("job", specs)
    sc.poll(
        "watch",
        {"logs": ["{{ lp_dir }}/job.log"], "cursors": "{{ armed.cursors }}", "complete": {"pattern": "^JOB DONE$"}},
        delay=0.2,
    )

    out = sc.run(during=sc.go_after_rounds("watch", 2, "go"))
    for host in lp_target.hosts:
        result = out.result("watch", host)
        assert result["completed"] and not result["failed"], result["msg"]
        assert out.lines("watch", host) == ["tick 1", "tick 2", "tick 3", "tick 4", "tick 5", "JOB DONE"]
        first, second = out.task_rounds("watch", host)[:2]  # armed: the old marker was never read
        assert first["new_lines"] == second["new_lines"] == [] and not second["finished"]


@both_forms
def test_error_order_and_benign_lines(lp_target: Target, tmp_path: Path, fleet: bool) -> None:
    sc = Scenario(lp_target, tmp_path, "ordering", fleet=fleet)
    bad = lp_target.hosts[1]
    rest = [h for h in lp_target.hosts if h != bad]

    def job(name: str, burst: str) -> dict:
        specs = {
            h: {"path": f"{sc.dir(h)}/{name}.log", "host": h, "steps": [{"ticks": 30, "every": 0.1}]} for h in rest
        }
        specs[bad] = {
            "path": f"{sc.dir(bad)}/{name}.log",
            "host": bad,
            "steps": [{"ticks": 5, "every": 0.1}, {"sleep": 0.5}, {"write": burst}],
        }  # one write
        return specs

    sc.writer("order", job("order", "step 6 ok\nSegmentation fault (core dumped)\nstep 7 loss: nan\n"))
    sc.poll(
        "order",
        {
            "logs": ["{{ lp_dir }}/order.log"],
            "complete": {"pattern": "never"},
            "error_patterns": {"nan": r"loss:\s*nan", "segv": "Segmentation fault"},
        },
    )
    sc.writer("benign", job("benign", "alloc: out of memory, will retry\nfatal: out of memory\n"))
    sc.poll(
        "benign",
        {
            "logs": ["{{ lp_dir }}/benign.log"],
            "complete": {"pattern": "never"},
            "error_patterns": {"oom": "out of memory"},
            "ignore_error_patterns": {"retry": "will retry"},
        },
    )
    out = sc.run()
    error = out.result("order", bad)["error"]
    assert (error["name"], error["line"], error["host"]) == ("nan", "step 7 loss: nan", bad)
    assert error["pattern"] == r"loss:\s*nan" and error["path"] == f"{sc.dir(bad)}/order.log"
    assert error["context"][-2:] == ["step 6 ok", "Segmentation fault (core dumped)"]
    error = out.result("benign", bad)["error"]
    assert (error["name"], error["line"]) == ("oom", "fatal: out of memory")
    for task in ("order", "benign"):
        assert out.result(task, bad)["failed"]
        for host in rest:
            result = out.result(task, host)
            assert result["failed"] and result["aborted_by"] == bad, result["msg"]
    # the console prints each host's verdict, a fleet's as the per-host form's
    console = out.proc.stdout
    assert f"fatal: [{bad}]: FAILED! order: error pattern 'nan' matched in {bad}:order" in console, out.tail()
    for host in rest:
        assert f"fatal: [{host}]: FAILED! order: stopped because {bad} failed: error pattern 'nan'" in console


POLICY_CASES = {
    # task: (policy, complete.hosts as host indexes (None = the play), hosts whose markers the driver
    #        writes in this order, hosts expected to have completed when the group decides)
    "any": ("any", None, [1, 2, 0], {1}),
    "first": ("first", None, [1, 0, 2], {0, 1}),
    "node0": ("node0", None, [0, 1, 2], {0}),
    "last": ("last", None, [1, 2, 0], {1, 2}),
    "all": ("all", None, [1, 2, 0], {0, 1, 2}),
    "outside": ("all", [0], [0], {0}),
}


@both_forms
def test_policies_and_the_completion_group(lp_target: Target, tmp_path: Path, fleet: bool) -> None:
    """Markers one host at a time: each policy stops every host right after the deciding marker, not before."""
    sc = Scenario(lp_target, tmp_path, "policies", fleet=fleet)
    hosts = lp_target.hosts
    # every job starts now (one task); each writes its marker when the driver creates its trigger file
    for task in [*POLICY_CASES, "crash"]:
        specs = {}
        for host in hosts:
            ticks = {"ticks": 900, "every": 0.1, "marker": "MARK", "marker_when": f"{sc.dir(host)}/go-{task}"}
            specs[host] = {"path": f"{sc.dir(host)}/{task}.log", "host": host, "steps": [ticks]}
        if task == "crash":
            specs[hosts[2]]["steps"][0]["marker"] = "Traceback (most recent call last):"
        sc.writer(task, specs)
    for task, (policy, group, _order, _expected) in POLICY_CASES.items():
        complete = {"pattern": "^MARK$", "policy": policy}
        if group is not None:
            complete["hosts"] = [hosts[i] for i in group]
        sc.poll(task, {"logs": [f"{{{{ lp_dir }}}}/{task}.log"], "complete": complete})
    # an error on a host outside the completion group fails every host
    sc.poll(
        "crash",
        {
            "logs": ["{{ lp_dir }}/crash.log"],
            "error_patterns": {"crash": "^Traceback"},
            "complete": {"pattern": "^MARK$", "hosts": [hosts[0]]},
        },
    )
    timing: dict[str, tuple[float, float]] = {}

    def completed(task: str, host: str) -> bool:
        return any(r["task"] == task and r["host"] == host and r.get("completed") for r in sc.load_rounds())

    def drive(scenario: Scenario) -> None:
        cases = [(task, order) for task, (_p, _g, order, _e) in POLICY_CASES.items()] + [("crash", [2])]
        for task, order in cases:
            for host in hosts:
                scenario.wait_rounds(task, host, 1)
            last_trigger = time.monotonic()
            for index in order:
                if scenario.finished(task, hosts):
                    break
                host = hosts[index]
                last_trigger = time.monotonic()
                scenario.go(host, f"go-{task}")
                if task != "crash":
                    scenario.wait_for(f"{host} completes {task}", lambda t=task, h=host: completed(t, h))
                    # every other host runs two more rounds (or stops) before the next marker
                    seen = {h: len(scenario.wait_rounds(task, h, 0)) for h in hosts}
                    for other in hosts:
                        scenario.wait_rounds(task, other, seen[other] + 2)
            scenario.wait_for(f"{task} over", lambda t=task: scenario.finished(t, hosts))
            timing[task] = (last_trigger, time.monotonic())

    out = sc.run(during=drive)
    for task, (policy, _group, _order, expected) in POLICY_CASES.items():
        done = {i for i, h in enumerate(hosts) if out.result(task, h)["completed"]}
        assert done == expected, f"{task}: {[out.result(task, h)['msg'] for h in hosts]}"
        triggered, finished = timing[task]
        assert finished - triggered < 20, f"{task} took {finished - triggered:.1f}s to stop after its deciding marker"
        for i, host in enumerate(hosts):
            result = out.result(task, host)
            assert result["finished"] and not result["failed"], f"{task}/{host}: {result['msg']}"
            assert result["group"]["decided"]
            if i not in expected:
                assert "MARK" not in out.lines(task, host)
                decided_by = policy.replace("node0", "first")
                assert result["msg"] == f"done: completion group finished under policy {decided_by}"
    crash = out.result("crash", hosts[2])
    assert crash["failed"] and crash["error"]["name"] == "crash" and crash["error"]["host"] == hosts[2]
    for host in hosts[:2]:
        result = out.result("crash", host)
        assert result["failed"] and result["aborted_by"] == hosts[2], result["msg"]
        assert "MARK" not in out.lines("crash", host)


def test_completion_is_not_a_clean_exit(lp_target: Target, tmp_path: Path) -> None:
    """The marker is seen in one round; what follows decides: exit code 3, or a traceback before a clean exit.

    HTTP health and artifact probes complete runs that print no marker at all.
    """
    sc = Scenario(lp_target, tmp_path, "exit")
    hosts = lp_target.hosts
    marker = {"ticks": 4, "every": 0.1, "marker_at": 4, "marker": "JOB DONE"}
    traceback = 'Traceback (most recent call last):\n  File "train.py", line 1\nRuntimeError: boom\n'

    def specs(name: str, steps_for) -> dict:
        return {h: {"path": f"{sc.dir(h)}/{name}.log", "host": h, "steps": steps_for(h)} for h in hosts}

    # all jobs start at once; each waits for the driver between its phases
    sc.writer(
        "code3",
        specs(
            "code3",
            lambda h: [
                marker,
                {"wait_for": f"{sc.dir(h)}/go-code3"},
                {"file": f"{sc.dir(h)}/code3.rc", "write": "3\n"},
            ],
        ),
    )
    sc.writer(
        "trace",
        specs(
            "trace",
            lambda h: [
                marker,
                {"wait_for": f"{sc.dir(h)}/go-trace"},
                {"write": traceback},
                {"sleep": 0.2},
                {"file": f"{sc.dir(h)}/trace.rc", "write": "0\n"},
            ],
        ),
    )
    sc.writer(
        "artifact",
        specs(
            "artifact",
            lambda h: [
                {"wait_for": f"{sc.dir(h)}/go-artifact"},
                {"ticks": 3, "every": 0.1},
                {"file": f"{sc.dir(h)}/result.json", "write": '{"tflops": 1.0}'},
            ],
        ),
    )
    sc.poll(
        "code3",
        {
            "logs": ["{{ lp_dir }}/code3.log"],
            "complete": {"pattern": "^JOB DONE$", "exit_code_file": "{{ lp_dir }}/code3.rc"},
        },
    )
    sc.poll(
        "trace",
        {
            "logs": ["{{ lp_dir }}/trace.log"],
            "error_patterns": {"crash": "^Traceback"},
            "complete": {"pattern": "^JOB DONE$", "exit_code_file": "{{ lp_dir }}/trace.rc"},
        },
    )
    # HTTP health on the node's loopback, no log at all
    port = "{{ 18300 + ansible_play_hosts_all.index(inventory_hostname) }}"
    sc.shell(
        "health server comes up when the driver says so",
        "setsid nohup sh -c 'while [ ! -e {{ lp_dir }}/go-http ]; do sleep 0.05; done; "
        f"exec {{{{ lp_python }}}} -m http.server {port} --bind 127.0.0.1 --directory {{{{ lp_dir }}}}' "
        "> /dev/null 2>&1 < /dev/null & echo $! > {{ lp_dir }}/http.pid",
    )
    sc.poll("http", {"logs": [], "complete": {"http": {"url": f"http://127.0.0.1:{port}/", "status": 200}}})
    sc.shell("stop the health server", "kill $(cat {{ lp_dir }}/http.pid)")
    # result artifact, no marker
    sc.poll(
        "artifact",
        {
            "logs": ["{{ lp_dir }}/artifact.log"],
            "complete": {"artifact": {"path": "{{ lp_dir }}/result.json", "min_bytes": 5}},
        },
    )

    def marker_read(task: str, host: str) -> bool:
        rows = [r for r in sc.load_rounds() if r["task"] == task and r["host"] == host]
        return any("JOB DONE" in r["new_lines"] or r.get("finished") for r in rows)

    def drive(scenario: Scenario) -> None:
        for task in ("code3", "trace"):
            for host in hosts:  # the marker is in, the job has not exited yet: then it exits (or crashes)
                scenario.wait_for(f"{task} marker on {host}", lambda t=task, h=host: marker_read(t, h))
                scenario.go(host, f"go-{task}")
        for task, rounds in (("http", 2), ("artifact", 1)):
            for host in hosts:
                scenario.wait_rounds(task, host, rounds)
            for host in hosts:
                scenario.go(host, f"go-{task}")

    out = sc.run(during=drive)
    for task, reason in (("code3", "job exited with code 3 (exit code file "), ("trace", "error pattern 'crash'")):
        results = [out.result(task, h) for h in hosts]
        assert all(r["failed"] and not r["completed"] and reason in r["msg"] for r in results), results
        own = [h for h in hosts if not out.result(task, h).get("aborted_by")]
        assert own
        for host in own:
            rounds = out.task_rounds(task, host)
            seen = next(i for i, r in enumerate(rounds) if "JOB DONE" in r["new_lines"])
            assert seen < len(rounds) - 1, f"{task}/{host}: the marker came in the last round"
            assert not rounds[seen]["finished"]  # the marker alone did not complete the host
    assert out.result("trace", own[0])["error"]["name"] == "crash"
    for host in hosts:
        http = out.result("http", host)
        assert http["completed"] and not http["failed"] and http["msg"] == "complete", http["msg"]
        assert len(out.task_rounds("http", host)) >= 3  # not healthy at first
        artifact = out.result("artifact", host)
        assert artifact["completed"] and not artifact["failed"], artifact["msg"]
        assert len(out.task_rounds("artifact", host)) >= 2


def test_stall_timeout_names_the_host_and_the_last_line(lp_target: Target, tmp_path: Path) -> None:
    sc = Scenario(lp_target, tmp_path, "stall")
    stuck = lp_target.hosts[1]
    specs = {
        h: {"path": f"{sc.dir(h)}/job.log", "host": h, "steps": [{"ticks": 60, "every": 0.1}]} for h in lp_target.hosts
    }
    specs[stuck]["steps"] = [{"ticks": 5, "every": 0.1}, {"write": "epoch 1 step 42 loss 0.1"}]  # then silence
    sc.writer("job", specs)
    sc.poll("watch", {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "never"}, "stall_timeout": 1.5})
    out = sc.run()
    result = out.result("watch", stuck)
    assert result["failed"] and result["stalled"], result["msg"]
    assert result["msg"].startswith(f"stalled: no new log output on {stuck} for ")
    assert result["msg"].endswith("(stall_timeout 1.5s); last line: 'tick 5'")
    for host in lp_target.hosts:
        if host != stuck:
            assert out.result("watch", host)["aborted_by"] == stuck


@pytest.mark.parametrize("policy", ["all"])
def test_parallel_loop_items_keep_separate_state(lp_target: Target, tmp_path: Path, policy: str) -> None:
    """Two loop items poll two logs of the same task; each has its own cursors and group decision."""
    sc = Scenario(lp_target, tmp_path, "loop")
    for name in ("a", "b"):
        sc.writer(
            name,
            {
                h: {
                    "path": f"{sc.dir(h)}/{name}.log",
                    "host": h,
                    "steps": [{"ticks": 5, "every": 0.1, "marker_at": 5, "marker": f"DONE {name}"}],
                }
                for h in lp_target.hosts
            },
        )
    sc.tasks.append(
        {
            "name": "loop",
            "cvs.cluster.log_poll": {
                "logs": ["{{ lp_dir }}/{{ item }}.log"],
                "complete": {"pattern": "^DONE {{ item }}$", "policy": policy},
            },
            "loop": ["a", "b"],
            "register": "watch",
            "until": "watch.finished",
            "retries": 400,
            "delay": 0.2,
        }
    )
    out = sc.run()
    assert out.proc.returncode == 0, out.tail()
    for host in lp_target.hosts:
        lines = out.lines("loop", host)
        assert lines == [f"tick {i}" for i in range(1, 5)] + ["DONE a"] + [f"tick {i}" for i in range(1, 5)] + [
            "DONE b"
        ]


@pytest.mark.parametrize("keep_reader", [True, False])
def test_kept_reader_lives_for_the_task_and_one_shot_reads_the_same(
    lp_target: Target, tmp_path: Path, keep_reader: bool
) -> None:
    """keep_reader: one reader process per host on its node while the poll runs, none after it; keep_reader false
    (the one-shot reader of become and non-ssh connections) delivers the same lines exactly once."""
    if lp_target.local:
        pytest.skip("the kept reader needs the ssh connection (LP_TARGET=local uses the local one)")
    sc = Scenario(lp_target, tmp_path, f"keep-{keep_reader}")
    specs = {
        host: {
            "path": f"{sc.dir(host)}/job.log",
            "host": host,
            "seed": 700 + i,
            "steps": [{"lines": [1, 3000], "chunk": [1, 2000], "seconds": 4}, {"write": "WRITER DONE\n"}],
        }
        for i, host in enumerate(lp_target.hosts)
    }
    sc.writer("job", specs)
    sc.poll("watch", {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^WRITER DONE$"},
                      "keep_reader": keep_reader}, delay=0.2)  # fmt: skip
    # kept readers (their bootstrap, see SERVE_BOOTSTRAP) in this node's network namespace: baremetal nodes share
    # the machine's process table; the bracket keeps pgrep from matching this command itself
    readers = (
        "me=$(readlink /proc/self/ns/net); for p in $(pgrep -f 'b[.]readline'); do "
        '[ "$(readlink /proc/$p/ns/net 2>/dev/null)" = "$me" ] && echo $p; done | wc -l'
    )
    seen: dict[str, int] = {}

    def count_readers(scenario: Scenario) -> None:
        host = lp_target.hosts[0]
        scenario.wait_rounds("watch", host, 3)
        seen["during"] = int(lp_target.node_exec(host, readers).stdout.strip() or 0)

    out = sc.run(during=count_readers)
    assert out.proc.returncode == 0, out.tail()
    for host in lp_target.hosts:
        lines = out.lines("watch", host)
        assert numbers(lines) == list(range(1, 3001)), host
        assert lines == as_lines(expected_bytes(specs[host]))
    after = int(lp_target.node_exec(lp_target.hosts[0], readers).stdout.strip() or 0)
    assert seen["during"] == (1 if keep_reader else 0), seen
    assert after == 0
