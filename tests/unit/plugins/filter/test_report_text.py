"""cvs.cluster.unreachable_reason: the text the report gives for a node Ansible could not reach."""

from __future__ import annotations

from ansible_collections.cvs.cluster.plugins.filter.report_text import FilterModule

REFUSED = "ssh: connect to host 10.77.0.12 port 22: Connection refused"


def test_drops_ansible_wrappers_and_keeps_ssh_text() -> None:
    reason = FilterModule().filters()["unreachable_reason"]
    wrapped = (
        'Task failed: Data could not be sent to remote host "10.77.0.12".'
        f" Make sure this host can be reached over ssh: {REFUSED}"
    )
    assert reason(wrapped, "node2") == f"node2: unreachable: {REFUSED}"
    assert reason(f"Failed to connect to the host via ssh: {REFUSED}\r\n", "node2") == f"node2: unreachable: {REFUSED}"
    assert reason("", "node2") == "node2: unreachable: Ansible could not connect to the node"
