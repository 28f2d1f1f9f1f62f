"""The cvs.cluster.cvs stdout callback in verbose mode over the simulated cluster (real SSH, real log_poll).

Jobs on every node write numbered lines to two logs in random chunks that split lines (CRLF, invalid UTF-8, a NUL
byte, Jinja-looking text) while log_poll polls with a short delay; the console must show every line the jobs
wrote exactly once, in file order, as ``[host:label] line`` (made printable the way the callback promises).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._console.model import has_control, sanitize
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import decode_line, split_lines
from ansible_collections.cvs.cluster.tests.support.log_poll import Scenario, Target, numbers
from ansible_collections.cvs.cluster.tests.support.lp_writer import expected_bytes

LINES = {"train": 6000, "monitor": 1500}
RECORD_RE = re.compile(r"^\[(node\d):(train|monitor)\] (.*)$")


@pytest.fixture
def baremetal(cluster, node_exec, sshd_stop, sshd_start) -> Target:  # type: ignore[no-untyped-def]
    return Target(
        "baremetal",
        str(cluster.inventory("baremetal")),
        "cvs_nodes",
        list(cluster.names),
        "/usr/bin/python3",
        node_exec,
        sshd_stop=sshd_stop,
        sshd_start=sshd_start,
    )


def test_verbose_console_shows_every_written_line_exactly_once(
    baremetal: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sc = Scenario(baremetal, tmp_path, "verbose-once")
    specs: dict[str, dict[str, dict]] = {label: {} for label in LINES}
    for i, host in enumerate(baremetal.hosts):
        for j, (label, count) in enumerate(LINES.items()):
            specs[label][host] = {
                "path": f"{sc.dir(host)}/{label}.log",
                "host": f"{host}-{label}",
                "seed": 300 + 10 * i + j,
                "steps": [{"lines": [1, count], "chunk": [1, 3000], "seconds": 4}],
            }
        # the monitor's marker completes the host; it is written only after the train log is finished, so the
        # final drain must show every line of both (completion on any marker would race the slower writer)
        train_done = f"{sc.dir(host)}/train.done"
        specs["train"][host]["steps"] += [{"write": "WRITER DONE\n"}, {"file": train_done, "write": "1"}]
        specs["monitor"][host]["steps"] += [{"wait_for": train_done, "timeout": 60}, {"write": "MONITOR DONE\n"}]
    for label in LINES:
        sc.writer(label, specs[label])
    sc.poll(
        "watch",
        {
            "logs": [{"path": "{{ lp_dir }}/train.log", "label": "train"}, "{{ lp_dir }}/monitor.log"],
            "complete": {"pattern": "^MONITOR DONE$", "policy": "all"},
            "max_bytes": 65536,
        },
        delay=0.3,
    )
    monkeypatch.setenv("CVS_CONSOLE", "verbose")
    out = sc.run()
    assert out.proc.returncode == 0, out.tail()

    shown: dict[tuple[str, str], list[str]] = defaultdict(list)
    for line in out.proc.stdout.splitlines():
        match = RECORD_RE.match(line)
        if match:
            shown[(match[1], match[2])].append(match[3])
    assert not has_control(out.proc.stdout), "escape or control characters in a console that is not a terminal"
    for host in baremetal.hosts:
        for label in LINES:
            written = [decode_line(b) for b in split_lines(expected_bytes(specs[label][host]))]
            assert numbers(written) == list(range(1, LINES[label] + 1))  # the jobs wrote what the test expects
            on_console = shown[(host, label)]
            assert numbers(on_console) == numbers(written), f"{host}:{label}: lines missing, repeated or reordered"
            assert on_console == [sanitize(w) for w in written], f"{host}:{label}: a line was shown altered"
        # the poll saw the lines over several rounds, not in one read at the end
        assert len(out.task_rounds("watch", host)) >= 3, out.tail()
    assert sum(map(len, shown.values())) == len(baremetal.hosts) * (sum(LINES.values()) + len(LINES))
