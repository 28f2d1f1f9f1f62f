"""Soak: 12 alias hosts, each writing 2,000 lines/s for 2 minutes, every line delivered exactly once.

The hosts are aliases of the three baremetal nodes (four per node, each with its own log and its own ssh
connection), polled together as one completion group with the default kept reader, by a task per host and at
the same time by a fleet. Each log gets 240,000 numbered lines (CRLF, invalid UTF-8, NUL and Jinja among them)
in random chunks that split lines; each form's saved copy of every host must equal the remote file and the bytes
the writer was asked to write, byte for byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ansible_collections.cvs.cluster.tests.support.log_poll import Scenario, Target
from ansible_collections.cvs.cluster.tests.support.lp_writer import expected_bytes

HOSTS_PER_NODE = 4
LINES_PER_SECOND = 2000
SECONDS = 120
LINES = LINES_PER_SECOND * SECONDS


def alias_target(cluster: Any, node_exec: Any, tmp_path: Path) -> Target:
    source = yaml.safe_load(cluster.inventory("baremetal").read_text())["all"]
    hosts = {}
    for n in cluster.nodes:
        for k in range(HOSTS_PER_NODE):
            hosts[f"{n.name}-a{k}"] = {
                "ansible_host": n.ip,
                # one ssh master per alias, as separate machines would have
                "ansible_control_path": f"~/.ansible/cp/soak-{n.name}-{k}-%%C",
                "cvs_node": n.name,
            }
    inventory = tmp_path / "inventory-soak.yml"
    inventory.write_text(
        yaml.safe_dump({"all": {"vars": source.get("vars", {}), "children": {"soak": {"hosts": hosts}}}})
    )
    names = list(hosts)

    def exec_on(host: str, cmd: str) -> Any:
        return node_exec(hosts[host]["cvs_node"], cmd)

    return Target("baremetal", str(inventory), "soak", names, "/usr/bin/python3", exec_on)


def test_twelve_hosts_two_thousand_lines_per_second_for_two_minutes(
    cluster: Any, node_exec: Any, tmp_path: Path
) -> None:
    """The same logs watched at the same time by both forms of a poll: a task per host and a fleet (a second
    ansible-playbook, started once the writers run). Each must save every byte exactly once."""
    target = alias_target(cluster, node_exec, tmp_path)
    assert len(target.hosts) == 12
    sc = Scenario(target, tmp_path, "soak")
    sc.record_rounds = False
    fleet = Scenario(target, tmp_path / "fleet", "soak", fleet=True)
    fleet.record_rounds = False
    fleet.fresh_dirs = False
    specs = {
        host: {
            "path": f"{sc.dir(host)}/job.log",
            "host": host,
            "seed": 500 + i,
            "steps": [{"lines": [1, LINES], "chunk": [1, 6000], "seconds": SECONDS}, {"write": "WRITER DONE\n"}],
        }
        for i, host in enumerate(target.hosts)
    }
    sc.writer("job", specs)
    watch = {"logs": ["{{ lp_dir }}/job.log"], "complete": {"pattern": "^WRITER DONE$"}, "timeout": SECONDS + 240}
    sc.poll("watch", watch, delay=1, retries=100000, save=True)
    sc.fetch("job.log")
    fleet.poll("watch", {**watch, "start": "beginning"}, delay=1, retries=100000, save=True)
    fleet_runs = []

    def watch_as_a_fleet(_scenario: Scenario) -> None:
        def writing() -> bool:
            check = "test -e {}/job.log && echo yes || echo no"
            return all("yes" in target.node_exec(h, check.format(sc.dir(h))).stdout for h in target.hosts)

        sc.wait_for("the writers", writing)
        fleet_runs.append(fleet.run(timeout=SECONDS + 420))

    out = sc.run(args=("--forks", "12"), during=watch_as_a_fleet, timeout=SECONDS + 420)
    assert out.proc.returncode == 0, out.tail()
    fleet_out = fleet_runs[0]
    assert fleet_out.proc.returncode == 0, fleet_out.tail()
    for host in target.hosts:
        expected = expected_bytes(specs[host])
        remote = out.fetched(host, "job.log")
        assert remote == expected, f"{host}: the writer did not write what the test expects"
        for form, outcome in (("per-host", out), ("fleet", fleet_out)):
            result = outcome.result("watch", host)
            assert result["finished"] and result["completed"] and not result["failed"], (form, host, result["msg"])
            saved = outcome.saved("watch", host, "job")
            assert saved == remote, f"{form}, {host}: saved copy differs ({len(saved)} vs {len(remote)} bytes)"
            assert saved.count(b"\n") == LINES + 1
