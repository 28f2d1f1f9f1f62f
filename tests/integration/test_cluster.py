"""The simulated cluster itself: distinct nodes over SSH, one engine per node."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

FACTS_PLAYBOOK = """
- name: Report each node's identity
  hosts: cvs_nodes
  gather_facts: true
  tasks:
    - name: Write hostname and addresses on the controller
      ansible.builtin.copy:
        content: "{{ {'hostname': ansible_hostname, 'default_ipv4': ansible_default_ipv4.address | default(''),
                      'ipv4': ansible_all_ipv4_addresses} | to_json }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.json"
        mode: "0644"
      delegate_to: localhost
"""


def test_playbook_reaches_every_node(cluster, run_playbook, tmp_path: Path) -> None:
    run_playbook(FACTS_PLAYBOOK, cluster.inventory("baremetal"), extravars={"out_dir": str(tmp_path)})
    facts = {n.name: json.loads((tmp_path / f"{n.name}.json").read_text()) for n in cluster.nodes}
    assert len(cluster.nodes) == 3
    hostnames = {f["hostname"] for f in facts.values()}
    assert hostnames == {n.hostname for n in cluster.nodes}, facts
    assert len(hostnames) == 3
    ips = {f["default_ipv4"] for f in facts.values()}
    assert ips == {n.ip for n in cluster.nodes}, facts
    for node in cluster.nodes:
        assert facts[node.name]["hostname"] == node.hostname
        assert node.ip in facts[node.name]["ipv4"]


def test_each_node_has_its_own_engine(cluster, ssh_node) -> None:
    ids = {}
    for node in cluster.nodes:
        out = ssh_node(node, "docker info --format '{{.ID}}'").stdout.strip()
        assert out, f"no engine ID from {node.name}"
        ids[node.name] = out
    assert len(set(ids.values())) == len(cluster.nodes), ids


def test_tmp_is_private_per_node(cluster, ssh_node) -> None:
    path = f"/tmp/cvs-sim-test-{uuid.uuid4().hex}"
    node1, node2 = cluster.nodes[0], cluster.nodes[1]
    ssh_node(node1, f"echo hello > {path}")
    try:
        assert ssh_node(node1, f"cat {path}").stdout.strip() == "hello"
        assert ssh_node(node2, f"test -e {path}", check=False).returncode == 1
        assert not Path(path).exists(), "a node's /tmp leaked to the controller"
    finally:
        ssh_node(node1, f"rm -f {path}", check=False)


def _ssh_answers(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=2):
            return True
    except OSError:
        return False


def test_ctl_sshd_stop_and_start(cluster, sshd_stop, sshd_start, ssh_node) -> None:
    node = cluster.nodes[-1]
    sshd_stop(node)
    assert not _ssh_answers(node.ip, cluster.ssh_port)
    sshd_start(node)
    assert ssh_node(node, "hostname").stdout.strip() == node.hostname


def test_ctl_engine_stop_and_start(cluster, engine_stop, engine_start, node_exec) -> None:
    node = cluster.nodes[-1]
    engine_stop(node)
    assert node_exec(node, "docker info --format '{{.ID}}'", check=False).returncode != 0
    engine_start(node)
    images = node_exec(node, ["docker", "image", "inspect", "-f", "{{.Id}}", cluster.image]).stdout.strip()
    assert images == cluster.image_id
