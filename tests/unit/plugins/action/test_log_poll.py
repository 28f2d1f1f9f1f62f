"""The log_poll action plugin driven in-process, several hosts round-robin, no Ansible run.

What a round decides (policies, deadlines, stall, the join grace, generations) is tested against the round engine
with an injected clock (tests/unit/plugins/plugin_utils/_log_poll/test_engine.py); here the action is driven end to
end: arguments, the real reader and its cursors, transport faults, save_dir, task loops.

Each host's remote read is the real shipped program run through ``/bin/sh -c`` on
this machine (like a local connection), so cursors, probes and the reader are real;
faults (unreachable host, garbage output) are injected per host.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from ansible import context
from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.collections import ImmutableDict
from ansible.playbook.play_context import PlayContext

from ansible_collections.cvs.cluster.plugins.action import log_poll as action_mod
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import decode_line, split_lines

HOSTS = ["n1", "n2", "n3"]
# what interpreter discovery finds on a node (a pyenv shim in PATH would cost 100 ms a round)
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"


class FakeTask:
    def __init__(self, args: dict, uuid: str, loop: Any = None, loop_with: str | None = None, throttle: int = 0):
        self.args = args
        self._uuid = uuid
        self.loop = loop
        self.loop_with = loop_with
        self.throttle = throttle
        self.async_val = 0
        self.check_mode = False
        self.action = "cvs.cluster.log_poll"


class FakeShell:
    tmpdir = "/nonexistent"  # not None: ActionBase.run must not create a remote tmp dir


class FakeConnection:
    _shell = FakeShell()
    become = None


class Cluster:
    """Hosts polling one task together; run_round() gives every unfinished host one round."""

    def __init__(self, tmp_path: Path, args: dict, hosts: list[str] | None = None, uuid: str = "task-1") -> None:
        self.tmp = tmp_path
        self.hosts = list(hosts or HOSTS)
        self.args = dict(args)
        self.args.setdefault("state_dir", str(tmp_path / "state"))
        self.uuid = uuid
        self.per_host_args: dict[str, dict] = {}
        self.results: dict[str, list[dict]] = {h: [] for h in self.hosts}
        self.calls: dict[str, int] = dict.fromkeys(self.hosts, 0)
        self.fault: dict[str, Callable[[], dict] | None] = dict.fromkeys(self.hosts)
        self.task_extra: dict[str, Any] = {}
        self.task_vars_extra: dict[str, Any] = {}

    def _exec(self, host: str, cmd: str, in_data: bytes) -> dict:
        self.calls[host] += 1
        fault = self.fault.get(host)
        if fault is not None:
            return fault()
        proc = subprocess.run(["/bin/sh", "-c", cmd], input=in_data, capture_output=True, timeout=120)
        return {"rc": proc.returncode, "stdout": proc.stdout.decode(), "stderr": proc.stderr.decode()}

    def run(self, host: str) -> dict:
        args = dict(self.args, **self.per_host_args.get(host, {}))
        task = FakeTask(args, self.uuid, **self.task_extra)
        action = action_mod.ActionModule(task, FakeConnection(), PlayContext(), None, None)
        action._load_name = "cvs.cluster.log_poll"
        action._low_level_execute_command = lambda cmd, in_data=None, sudoable=True, executable=None: self._exec(
            host, cmd if executable is None else f"{executable} -c {shlex.quote(cmd)}", in_data
        )
        task_vars = {
            "inventory_hostname": host,
            "ansible_play_batch": self.hosts,
            "ansible_play_hosts_all": self.hosts,
            "ansible_facts": {"discovered_interpreter_python": PYTHON},
        }
        task_vars.update(self.task_vars_extra)
        result = action.run(task_vars=task_vars)
        json.dumps(result)  # results must serialise
        self.results[host].append(result)
        return result

    def finished(self, host: str) -> bool:
        return bool(self.results[host]) and self.results[host][-1]["finished"]

    def run_round(self, hosts: list[str] | None = None) -> None:
        for host in hosts or self.hosts:
            if not self.finished(host):
                self.run(host)

    def poll(self, rounds: int = 50, between: Callable[[int], None] | None = None, delay: float = 0.0) -> None:
        for n in range(rounds):
            if all(self.finished(h) for h in self.hosts):
                return
            if between:
                between(n)
            self.run_round()
            if delay:
                time.sleep(delay)
        raise AssertionError(f"not finished after {rounds} rounds: {self.last()}")

    def last(self, host: str | None = None) -> Any:
        if host:
            return self.results[host][-1]
        return {h: (r[-1]["msg"] if r else None) for h, r in self.results.items()}

    def lines(self, host: str) -> list[str]:
        return [line for r in self.results[host] for line in r.get("new_lines", [])]


def log_of(tmp_path: Path, host: str, name: str = "job.log") -> Path:
    d = tmp_path / host
    d.mkdir(exist_ok=True)
    return d / name


def logs_arg(tmp_path: Path, name: str = "job.log") -> dict:
    """Per-host args with the host's own log path (hosts share this machine's file system here)."""
    return {h: {"logs": [str(log_of(tmp_path, h, name))]} for h in HOSTS}


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


# ---- exactly once -----------------------------------------------------------------------------------


def test_exactly_once_with_random_chunks_and_save_dir(tmp_path: Path) -> None:
    rng = random.Random(7)
    content = {}
    for i, h in enumerate(HOSTS):
        lines = [b"%s line %05d" % (h.encode(), n) for n in range(3000)]
        lines[10] += b"\r"  # CRLF
        lines[20] += b" bad \xff\xfe"
        lines[30] += b" nul \x00"
        lines[40] = b"{{ 7 * 6 }} stays literal"
        content[h] = b"\n".join(lines) + b"\nALL DONE\n"
        log_of(tmp_path, h).write_bytes(b"")
        del i
    offsets = dict.fromkeys(HOSTS, 0)

    def writer(_round: int) -> None:
        for h in HOSTS:
            step = rng.randint(1, 9000)
            chunk = content[h][offsets[h] : offsets[h] + step]
            append(log_of(tmp_path, h), chunk)
            offsets[h] += len(chunk)

    cluster = Cluster(
        tmp_path, {"complete": {"pattern": "^ALL DONE$"}, "save_dir": str(tmp_path / "saved"), "max_bytes": 4096}
    )
    cluster.per_host_args = logs_arg(tmp_path)
    cluster.poll(rounds=400, between=writer)
    for h in HOSTS:
        assert cluster.last(h)["failed"] is False, cluster.last(h)
        assert (tmp_path / "saved" / h / "job.log").read_bytes() == content[h]
        assert cluster.lines(h) == [decode_line(b) for b in split_lines(content[h])]
        assert "{{ 7 * 6 }} stays literal" in cluster.lines(h)


# ---- start / arm ------------------------------------------------------------------------------------------


def test_start_end_reads_a_log_that_appears_later_from_its_first_byte(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, {"start": "end", "complete": {"pattern": "DONE"}}, hosts=["n1"])
    existing = log_of(tmp_path, "n1", "existing.log")
    existing.write_bytes(b"old DONE from an earlier run\n")
    later = log_of(tmp_path, "n1", "later.log")
    cluster.args["logs"] = [str(existing), str(later)]
    cluster.run_round()
    assert cluster.last("n1")["new_lines"] == []
    assert [s["state"] for s in cluster.last("n1")["log_states"]] == ["ok", "missing"]
    later.write_bytes(b"first line\nDONE\n")
    cluster.poll(rounds=3)
    assert cluster.lines("n1") == ["first line", "DONE"]
    assert {"round": 2, "label": "later", "event": "appeared"} in cluster.last("n1")["events"]


def test_arm_then_cursors_ignores_a_stale_marker(tmp_path: Path) -> None:
    log = log_of(tmp_path, "n1")
    log.write_bytes(b"run 1\nJOB DONE\n")
    arm = Cluster(tmp_path, {"logs": [str(log)], "start": "arm"}, hosts=["n1"], uuid="arm")
    armed = arm.run("n1")
    assert armed["armed"] and armed["finished"] and not armed["failed"]
    cluster = Cluster(
        tmp_path, {"logs": [str(log)], "cursors": armed["cursors"], "complete": {"pattern": "JOB DONE"}}, hosts=["n1"]
    )
    for _ in range(3):
        cluster.run_round()
    assert not cluster.finished("n1")
    append(log, b"run 2\nJOB DONE\n")
    cluster.poll(rounds=2)
    assert cluster.last("n1")["completed"] and cluster.lines("n1") == ["run 2", "JOB DONE"]


# ---- bad input ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"error_patterns": {"nan": "loss: (nan"}}, "error_patterns pattern 'nan': invalid regex 'loss: (nan'"),
        ({"complete": {"pattern": "x", "policy": "most"}}, "policy must be one of: all, any, first, node0, last"),
        ({"complete": {"pattern": "x", "hosts": ["n1", "ghost"]}}, "not in the play: ghost"),
        ({"logs": ["/a/x.log", "/b/x.log"]}, "labels must be unique"),
        ({"max_bytes": 10}, "max_bytes must be at least 1024"),
        ({"timeout": -1}, "timeout must not be negative"),
        ({"complete": {"pattern": "x", "bogus": 1}}, "bogus"),
        ({"cursors": {"/a": 3}}, "cursors must map each log path"),
        (
            {"complete": {"pattern": "x", "http": {"url": "http://127.0.0.1:9/", "timeout": "inf"}}},
            "complete.http.timeout must be a finite number of seconds, got inf",
        ),
    ],
)
def test_bad_input_fails_before_any_remote_read(tmp_path: Path, args: dict, message: str) -> None:
    base = {"logs": [str(tmp_path / "x.log")], "complete": {"pattern": "x"}}
    cluster = Cluster(tmp_path, {**base, **args})
    cluster.run_round()
    for h in HOSTS:
        result = cluster.last(h)
        assert result["failed"] and result["finished"]
        assert message in result["msg"], result["msg"]
        assert result["msg"].startswith("log_poll: ")
    assert sum(cluster.calls.values()) == 0


def test_complete_hosts_not_polling_in_this_batch(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, {"logs": ["/x.log"], "complete": {"pattern": "x", "hosts": ["n3"]}}, hosts=["n1", "n2"])
    cluster.task_vars_extra = {"ansible_play_hosts_all": HOSTS}
    cluster.run_round()
    assert "do not poll in this batch (failed earlier or in another serial batch): n3" in cluster.last("n1")["msg"]
    assert sum(cluster.calls.values()) == 0


def test_forks_and_throttle_smaller_than_the_hosts_polling_together(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(context, "CLIARGS", ImmutableDict(forks=2))
    cluster = Cluster(tmp_path, {"logs": ["/x.log"], "complete": {"pattern": "x"}})
    cluster.run_round()
    assert "forks (2) is smaller than the 3 hosts that must poll together" in cluster.last("n1")["msg"]
    monkeypatch.setattr(context, "CLIARGS", ImmutableDict(forks=5))
    cluster = Cluster(tmp_path, {"logs": ["/x.log"], "complete": {"pattern": "x"}}, uuid="t2")
    cluster.task_extra = {"throttle": 1}
    cluster.run_round()
    assert "throttle (1) is smaller than the 3 hosts" in cluster.last("n1")["msg"]
    assert sum(cluster.calls.values()) == 0


def test_empty_logs_on_every_host_is_a_clear_error_without_remote_reads(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, {"logs": [], "error_patterns": {"e": "x"}, "complete": {"pattern": "DONE"}})
    cluster.poll(rounds=3)
    for h in HOSTS:
        result = cluster.last(h)
        assert result["failed"] and result["finished"]
        assert result["msg"] == (
            "log_poll: logs is empty on every host (n1, n2, n3) and no exit_code_file, http or artifact probe is "
            "set: nothing to poll"
        )
        assert "aborted_by" not in result
    assert sum(cluster.calls.values()) == 0


def test_no_host_of_the_group_can_complete(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, {"complete": {}})
    cluster.per_host_args = logs_arg(tmp_path)
    cluster.poll(rounds=3)
    assert "no host of the completion group (n1, n2, n3) can complete" in cluster.last("n2")["msg"]


def test_a_host_without_logs_waits_for_the_group(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, {"complete": {"pattern": "DONE"}})
    cluster.per_host_args = logs_arg(tmp_path)
    cluster.per_host_args["n3"] = {"logs": []}
    for h in ("n1", "n2"):
        log_of(tmp_path, h).write_bytes(b"DONE\n")
    cluster.poll(rounds=4)
    assert all(not cluster.last(h)["failed"] for h in HOSTS)
    assert cluster.last("n3")["msg"] == "done: completion group finished under policy all"
    assert cluster.last("n1")["group"]["hosts"] == ["n1", "n2"]
    assert cluster.calls["n3"] == 0


def test_invalid_argument_types_end_the_until_loop(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, {"logs": ["/x"], "timeout": "soon"}, hosts=["n1"])
    result = cluster.run("n1")
    assert result["failed"] and result["finished"] and "timeout" in result["msg"]


def test_hosts_outside_the_group_stop_when_it_decides(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, {"complete": {"pattern": "MARK", "hosts": ["n1"]}})
    cluster.per_host_args = logs_arg(tmp_path)
    for h in HOSTS:
        log_of(tmp_path, h).write_bytes(b"busy\n")
    cluster.run_round()
    append(log_of(tmp_path, "n1"), b"MARK\n")
    cluster.poll(rounds=3)
    assert cluster.last("n1")["msg"] == "complete"
    for h in ("n2", "n3"):
        assert cluster.last(h)["msg"] == "done: completion group finished under policy all"
        assert not cluster.last(h)["failed"] and not cluster.last(h)["completed"]


def test_error_on_a_host_outside_the_group_fails_every_host(tmp_path: Path) -> None:
    args = {"complete": {"pattern": "MARK", "hosts": ["n1"]}, "error_patterns": {"crash": "Trace"}}
    cluster = Cluster(tmp_path, args)
    cluster.per_host_args = logs_arg(tmp_path)
    for h in HOSTS:
        log_of(tmp_path, h).write_bytes(b"busy\n")
    cluster.run_round()
    append(log_of(tmp_path, "n3"), b"Traceback (most recent call last):\n")
    cluster.poll(rounds=3)
    n3 = cluster.last("n3")
    assert n3["failed"] and n3["error"]["name"] == "crash" and n3["error"]["host"] == "n3"
    assert n3["error"]["context"] == ["busy"]
    for h in ("n1", "n2"):
        assert cluster.last(h)["failed"] and cluster.last(h)["aborted_by"] == "n3"
        assert cluster.last(h)["msg"].startswith("stopped because n3 failed: error pattern 'crash' matched on n3")


# ---- transport ------------------------------------------------------------------------------------------------


def unreachable() -> dict:
    raise AnsibleConnectionFailure("ssh: connect to host 10.77.0.12 port 22: Connection refused")


def test_transport_failures_freeze_cursors_and_lose_nothing(tmp_path: Path) -> None:
    cluster = Cluster(
        tmp_path, {"complete": {"pattern": "^DONE$"}, "transport_retries": 5, "save_dir": str(tmp_path / "saved")}
    )
    cluster.per_host_args = logs_arg(tmp_path)
    expected = b"".join(b"line %d\n" % i for i in range(40)) + b"DONE\n"
    for h in HOSTS:
        log_of(tmp_path, h).write_bytes(b"")

    def between(n: int) -> None:
        for h in HOSTS:
            append(log_of(tmp_path, h), expected[n * 40 : (n + 1) * 40])
        cluster.fault["n2"] = unreachable if 3 <= n < 7 else None

    cluster.poll(rounds=40, between=between)
    down = [r for r in cluster.results["n2"] if r["transport_error"]]
    assert len(down) == 4
    assert all(r["new_lines"] == [] and not r["finished"] for r in down)
    frozen = {json.dumps(r["cursors"], sort_keys=True) for r in down}
    assert len(frozen) == 1
    assert "n2: connection failed: ssh: connect to host" in down[0]["transport_error"]
    for h in HOSTS:
        assert (tmp_path / "saved" / h / "job.log").read_bytes() == expected
        assert cluster.lines(h) == expected.decode().splitlines()


def test_too_many_transport_failures_fail_the_host_by_name(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, {"complete": {"pattern": "^DONE$"}, "transport_retries": 2})
    cluster.per_host_args = logs_arg(tmp_path)
    for h in HOSTS:
        log_of(tmp_path, h).write_bytes(b"working\n")
    cluster.fault["n3"] = lambda: {"rc": 1, "stdout": "Welcome banner", "stderr": "python3: not found"}
    cluster.poll(rounds=6)
    n3 = cluster.last("n3")
    assert n3["failed"] and len(cluster.results["n3"]) == 3
    assert n3["msg"].startswith("3 consecutive transport failures on n3; last: n3: reader returned rc=1 and no reply")
    assert "python3: not found" in n3["msg"]
    assert cluster.last("n1")["aborted_by"] == "n3"


def test_fifo_log_is_cut_off_by_cmd_timeout(tmp_path: Path) -> None:
    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)
    cluster = Cluster(
        tmp_path,
        {"logs": [str(fifo)], "complete": {"pattern": "x"}, "cmd_timeout": 1, "transport_retries": 1},
        hosts=["n1"],
    )
    started = time.monotonic()
    cluster.poll(rounds=3)
    assert time.monotonic() - started < 8
    result = cluster.last("n1")
    assert result["failed"]
    assert f"n1: cmd_timeout (1s) expired while reading {fifo}" in result["msg"]


# ---- completion -----------------------------------------------------------------------------------------------


def test_exit_code_zero_with_the_marker_beyond_max_bytes_is_not_a_failure(tmp_path: Path) -> None:
    log = log_of(tmp_path, "n1")
    log.write_bytes(b"x" * 100 + b"\n" + b"".join(b"%05d %s\n" % (i, b"y" * 60) for i in range(300)) + b"DONE\n")
    (tmp_path / "rc").write_text("0\n")
    cluster = Cluster(
        tmp_path,
        {
            "logs": [str(log)],
            "max_bytes": 4096,
            "complete": {"pattern": "^DONE$", "exit_code_file": str(tmp_path / "rc")},
        },
        hosts=["n1"],
    )
    cluster.poll(rounds=20)
    result = cluster.last("n1")
    assert not result["failed"] and result["completed"], result["msg"]
    assert len(cluster.results["n1"]) > 3


def test_exit_code_nonzero_after_the_marker_fails_with_the_code(tmp_path: Path) -> None:
    log = log_of(tmp_path, "n1")
    log.write_bytes(b"step 9\nDONE\n")
    (tmp_path / "rc").write_text("3\n")
    cluster = Cluster(
        tmp_path,
        {"logs": [str(log)], "complete": {"pattern": "DONE", "exit_code_file": str(tmp_path / "rc")}},
        hosts=["n1"],
    )
    cluster.poll(rounds=2)
    assert cluster.last("n1")["msg"] == f"job exited with code 3 (exit code file {tmp_path / 'rc'})"


def test_final_drain_reads_to_the_end_and_finds_a_late_error(tmp_path: Path) -> None:
    log = log_of(tmp_path, "n1")
    filler = b"".join(b"%05d %s\n" % (i, b"z" * 60) for i in range(200))
    log.write_bytes(b"MARK\n" + filler + b"Traceback: late crash\n")
    cluster = Cluster(
        tmp_path,
        {
            "logs": [str(log)],
            "max_bytes": 2048,
            "error_patterns": {"crash": "Traceback"},
            "complete": {"pattern": "MARK"},
        },
        hosts=["n1"],
    )
    cluster.poll(rounds=2)
    result = cluster.last("n1")
    assert result["failed"] and result["error"]["line"] == "Traceback: late crash"
    assert len(cluster.results["n1"]) == 1


def test_rotation_events_are_kept_in_the_final_result(tmp_path: Path) -> None:
    log = log_of(tmp_path, "n1")
    log.write_bytes(b"a\n")
    cluster = Cluster(tmp_path, {"logs": [str(log)], "complete": {"pattern": "DONE"}}, hosts=["n1"])
    cluster.run_round()
    log.rename(tmp_path / "n1" / "job.log.1")
    log.write_bytes(b"b\n")
    cluster.run_round()
    log.write_bytes(b"")
    cluster.run_round()
    append(log, b"c\nDONE\n")
    cluster.poll(rounds=2)
    events = [e["event"] for e in cluster.last("n1")["events"]]
    assert events == ["rotated", "truncated"]
    assert cluster.lines("n1") == ["a", "b", "c", "DONE"]


# ---- state keys -----------------------------------------------------------------------------------------------


def test_with_items_loops_key_state_per_item(tmp_path: Path) -> None:
    log = log_of(tmp_path, "n1")
    log.write_bytes(b"DONE\n")
    runs = []
    for item in ("a", "b"):
        cluster = Cluster(tmp_path, {"logs": [str(log)], "complete": {"pattern": "DONE"}}, hosts=["n1"])
        cluster.task_extra = {"loop_with": "items"}
        cluster.task_vars_extra = {"item": item}
        cluster.poll(rounds=2)
        runs.append(cluster.lines("n1"))
    assert runs == [["DONE"], ["DONE"]]  # the second item starts from byte 0 too


def test_interpreter_with_arguments(tmp_path: Path) -> None:
    log = log_of(tmp_path, "n1")
    log.write_bytes(b"DONE\n")
    cluster = Cluster(tmp_path, {"logs": [str(log)], "complete": {"pattern": "DONE"}}, hosts=["n1"])
    cluster.task_vars_extra = {"ansible_facts": {"discovered_interpreter_python": "/usr/bin/env python3"}}
    cluster.poll(rounds=2)
    assert cluster.last("n1")["completed"]


def test_new_lines_stay_grouped_by_log_across_the_final_drain(tmp_path: Path) -> None:
    a, b = log_of(tmp_path, "n1", "a.log"), log_of(tmp_path, "n1", "b.log")
    a.write_bytes(b"MARK\n" + b"".join(b"a%04d %s\n" % (i, b"x" * 40) for i in range(100)))
    b.write_bytes(b"".join(b"b%04d %s\n" % (i, b"y" * 40) for i in range(100)))
    args = {"logs": [str(a), str(b)], "max_bytes": 1024, "complete": {"pattern": "MARK"}}
    cluster = Cluster(tmp_path, args, hosts=["n1"])
    cluster.poll(rounds=2)
    result = cluster.last("n1")
    assert result["completed"] and len(cluster.results["n1"]) == 1  # one round, then the drain to the end
    counts = [s["new_lines"] for s in result["log_states"]]
    assert counts == [101, 100] and len(result["new_lines"]) == 201
    assert result["new_lines"][: counts[0]] == a.read_text().splitlines()
    assert result["new_lines"][counts[0] :] == b.read_text().splitlines()


# ---- late failures, never appeared (issue 15) ------------------ --------------------------------------


def test_a_host_stopped_by_another_reads_to_the_end_and_fails_on_its_own_error(tmp_path: Path) -> None:
    trace = b"Traceback (most recent call last):\n"
    body = b"JOB DONE\n" + b"".join(b"filler %05d\n" % n for n in range(3000)) + trace
    for host in HOSTS:
        log_of(tmp_path, host).write_bytes(body if host != "n3" else b"JOB DONE\nall good\n")
    cluster = Cluster(
        tmp_path,
        {"complete": {"pattern": "^JOB DONE$"}, "error_patterns": {"crash": "^Traceback"},
         "save_dir": str(tmp_path / "saved")},
    )  # fmt: skip
    cluster.per_host_args = logs_arg(tmp_path)
    cluster.per_host_args["n2"]["max_bytes"] = 4 * 1024 * 1024  # n2 reads it all at once and fails first
    cluster.per_host_args["n1"]["max_bytes"] = 4096
    cluster.run("n2")
    cluster.poll(rounds=5)
    for host in ("n1", "n2"):
        result = cluster.last(host)
        assert result["failed"] and not result.get("aborted_by"), result["msg"]
        assert result["error"]["name"] == "crash" and result["error"]["host"] == host
        assert (tmp_path / "saved" / host / "job.log").read_bytes() == body
    assert cluster.last("n3")["aborted_by"] == "n2"
    assert (tmp_path / "saved" / "n3" / "job.log").read_bytes() == b"JOB DONE\nall good\n"


def test_a_timeout_names_the_log_that_never_appeared(tmp_path: Path) -> None:
    here, never = log_of(tmp_path, "n1", "here.log"), log_of(tmp_path, "n1", "never.log")
    here.write_bytes(b"started\n")
    cluster = Cluster(tmp_path, {"logs": [str(here), str(never)], "complete": {"pattern": "x"}, "timeout": 0.2},
                      hosts=["n1"])  # fmt: skip
    cluster.poll(rounds=50, delay=0.05)
    msg = cluster.last("n1")["msg"]
    assert msg.startswith("timed out after ") and msg.endswith(f"on n1; {never} never appeared"), msg
