"""The transport to the nodes' readers (plugin_utils/_log_poll/transport.py), with real readers on this machine.

Kept readers run the shipped bootstrap and serve() as local processes: the "ssh" connection here builds a local
command line instead of an ssh one. One-shot reads run the shipped one-shot reader through ``/bin/sh -c`` (like a
local connection). Faults (an unreachable host, garbage on stdout, a reader that never answers) are injected per
host.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.cvs.cluster.plugins.module_utils._log_poll_spec import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.protocol import read_request
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.settings import (
    PollSettings,
    RunFacts,
    poll_settings,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.transport import NodeReaders

PYTHON = sys.executable


class LocalConnection:
    """A connection that cannot hold a kept reader (not ssh): every read is one-shot."""

    transport = "local"
    become = None

    def __init__(self, host: str) -> None:
        self.host = host


class LocalSsh(LocalConnection):
    """An ssh connection whose command line runs the remote command on this machine; it writes its pid to
    ``pids`` so a test can see which reader process answered."""

    transport = "ssh"

    def __init__(self, host: str, pids: Path, command: str | None = None) -> None:
        super().__init__(host)
        self.pids = pids
        self.command = command  # what runs instead of the kept reader (a fault)

    def get_option(self, name: str) -> Any:
        return {"host": self.host, "ssh_executable": "ssh"}.get(name)

    def _build_command(self, _binary: str, _subsystem: str, _host: str, remote: str) -> list[bytes]:
        command = self.command or f"exec {remote}"
        return [b"/bin/sh", b"-c", f"echo $$ >> {self.pids}; {command}".encode()]

    def started(self) -> list[int]:
        return [int(p) for p in self.pids.read_text().split()] if self.pids.exists() else []


class Exec:
    """Runs one-shot readers through ``/bin/sh -c``; ``fault[host]`` replaces a host's run."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fault: dict[str, Callable[[], Mapping[str, Any]]] = {}

    def __call__(self, connection: LocalConnection, cmd: str, in_data: bytes) -> Mapping[str, Any]:
        self.calls.append(connection.host)
        if connection.host in self.fault:
            return self.fault[connection.host]()
        proc = subprocess.run(["/bin/sh", "-c", cmd], input=in_data, capture_output=True, timeout=60)
        return {"rc": proc.returncode, "stdout": proc.stdout.decode(), "stderr": proc.stderr.decode()}


def settings_of(hosts: list[str], **args: Any) -> dict[str, PollSettings]:
    validated = ArgumentSpecValidator(ARGUMENT_SPEC).validate({"logs": ["/x.log"], **args})
    assert not validated.error_messages, validated.error_messages
    params = validated.validated_parameters
    return {h: poll_settings(params, RunFacts(host=h, batch=hosts, play_hosts=hosts)) for h in hosts}


def request_for(path: Path) -> dict:
    return read_request([str(path)], {}, start="beginning", max_bytes=65536)


def readers_for(connections: Mapping[str, LocalConnection], execute: Exec, task: Path, **args: Any) -> NodeReaders:
    """The readers of one task (named by the test's own directory: kept readers outlive a NodeReaders)."""
    settings = settings_of(list(connections), **args)
    return NodeReaders(str(task), settings, lambda host: (connections[host], PYTHON), execute)


def lines_of(reply: dict | None) -> bytes:
    assert reply is not None
    return b"".join(base64.b64decode(c) for c in reply["logs"][0]["chunks"])


def test_one_kept_reader_serves_every_round_of_the_task(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"one\n")
    ssh = {"n1": LocalSsh("n1", tmp_path / "pids")}
    execute = Exec()
    first, error = readers_for(ssh, execute, tmp_path).read("n1", request_for(log))  # round 1 of the per-host form
    assert error is None and lines_of(first) == b"one\n"
    cursor = {k: v for k, v in first["logs"][0].items() if k in ("offset", "dev", "ino", "head_len", "head_hash")}
    with log.open("ab") as fh:
        fh.write(b"two\n")
    readers = readers_for(ssh, execute, tmp_path)  # round 2: a new action, the same task
    second, error = readers.read("n1", read_request([str(log)], {str(log): cursor}, start="beginning",
                                                    max_bytes=65536))  # fmt: skip
    assert error is None and lines_of(second) == b"two\n"
    assert len(ssh["n1"].started()) == 1 and execute.calls == []
    readers.close()
    (pid,) = ssh["n1"].started()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # close() ended the reader (and reaped it)


def test_without_ssh_every_read_is_one_shot_and_worded_per_host(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"line\n")
    hosts = {h: LocalConnection(h) for h in ("n1", "n2", "n3", "n4")}
    execute = Exec()

    def unreachable() -> Mapping[str, Any]:
        raise AnsibleConnectionFailure("ssh: connect to host 10.77.0.12 port 22: Connection refused")

    execute.fault["n2"] = unreachable
    execute.fault["n3"] = lambda: {"rc": 1, "stdout": "Welcome banner", "stderr": "python3: not found"}
    execute.fault["n4"] = lambda: {"rc": 137, "stdout": "", "stderr": ""}
    readers = readers_for(hosts, execute, tmp_path, cmd_timeout=7)
    replies = readers.read_all({h: request_for(log) for h in hosts})
    assert replies["n1"][1] is None and lines_of(replies["n1"][0]) == b"line\n"
    assert replies["n2"] == (None, "n2: connection failed: ssh: connect to host 10.77.0.12 port 22: Connection refused")
    assert replies["n3"] == (None, "n3: reader returned rc=1 and no reply: python3: not found")
    assert replies["n4"] == (None, "n4: remote read killed after cmd_timeout (7s)")
    assert sorted(execute.calls) == ["n1", "n2", "n3", "n4"]


def test_a_host_whose_connection_cannot_be_set_up_fails_its_read_by_name(tmp_path: Path) -> None:
    def link(host: str) -> tuple[Any, str]:
        raise AnsibleActionFail("the connection plugin 'nope' was not found")

    execute = Exec()
    readers = NodeReaders(str(tmp_path), settings_of(["n1"]), link, execute)
    assert readers.read("n1", request_for(tmp_path / "x.log")) == (
        None,
        "n1: connection failed: the connection plugin 'nope' was not found",
    )
    assert execute.calls == []


def test_a_kept_reader_that_breaks_is_replaced_by_a_one_shot_read_in_the_same_round(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"line\n")
    ssh = {"n1": LocalSsh("n1", tmp_path / "pids", command="exit 255")}  # ssh could not connect
    execute = Exec()
    reply, error = readers_for(ssh, execute, tmp_path).read("n1", request_for(log))
    assert error is None and lines_of(reply) == b"line\n"
    assert execute.calls == ["n1"]


def test_a_kept_reader_silent_past_cmd_timeout_is_not_read_again_one_shot(tmp_path: Path) -> None:
    # n1's "reader" takes every request and never answers
    ssh = {"n1": LocalSsh("n1", tmp_path / "pids", command="cat >/dev/null"), "n2": LocalSsh("n2", tmp_path / "pids2")}
    log = tmp_path / "job.log"
    log.write_bytes(b"line\n")
    execute = Exec()
    started = time.monotonic()
    readers = readers_for(ssh, execute, tmp_path, cmd_timeout=1)
    replies = readers.read_all({h: request_for(log) for h in ssh})
    readers.close()
    assert time.monotonic() - started < 1 + 5 + 3  # cmd_timeout and the reply's grace
    assert replies["n1"] == (None, "n1: remote read killed after cmd_timeout (1s)")
    assert lines_of(replies["n2"][0]) == b"line\n"  # the other host's reply came in the same wait
    assert execute.calls == []


def test_a_fleet_sends_every_request_before_it_waits(tmp_path: Path) -> None:
    """Three readers each held up by cmd_timeout on a FIFO answer together, in about one cmd_timeout."""
    hosts = ["n1", "n2", "n3"]
    fifos = {h: tmp_path / f"{h}.fifo" for h in hosts}
    for fifo in fifos.values():
        os.mkfifo(fifo)
    ssh = {h: LocalSsh(h, tmp_path / f"{h}.pids") for h in hosts}
    readers = readers_for(ssh, Exec(), tmp_path, cmd_timeout=2)
    readers.read_all({h: request_for(tmp_path / "warm-up.log") for h in hosts})  # the readers' start-up
    started = time.monotonic()
    replies = readers.read_all({h: request_for(fifos[h]) for h in hosts})
    assert time.monotonic() - started < 5  # one after the other: 6 s and more
    for host in hosts:
        assert replies[host] == (None, f"{host}: cmd_timeout (2s) expired while reading {fifos[host]}")
    readers.close()


def test_keep_reader_false_reads_one_shot_over_ssh_too(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"line\n")
    ssh = {"n1": LocalSsh("n1", tmp_path / "pids")}
    execute = Exec()
    reply, error = readers_for(ssh, execute, tmp_path, keep_reader=False).read("n1", request_for(log))
    assert error is None and lines_of(reply) == b"line\n"
    assert ssh["n1"].started() == [] and execute.calls == ["n1"]
