"""A node_probe result read on the controller (plugin_utils/_node_probe.py): whether it says anything of the node."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._node_probe import probe_failure


@pytest.mark.parametrize(
    ("result", "failure"),
    [
        ({"unreachable": True, "msg": "ssh: connect to host 10.0.0.4 port 22: No route to host"},
         "ssh: connect to host 10.0.0.4 port 22: No route to host"),
        ({"failed": True, "msg": "node_probe: invalid regular expression"}, "node_probe: invalid regular expression"),
        ({"skipped": True}, "the node could not be probed"),
        ({"failed": True}, "the node could not be probed"),
        (None, "the node could not be probed"),
        ("refused", "refused"),
    ],
)  # fmt: skip
def test_a_result_without_the_probes_answer_says_why(result: Any, failure: str) -> None:
    assert probe_failure(result) == failure


def test_a_probes_answer_is_no_failure() -> None:
    assert probe_failure({"commands": {}, "binaries": {}}) is None
    assert probe_failure({"binaries": {"mpirun": None}}, "binaries") is None
    assert probe_failure({"binaries": {}}, "commands") == "the node could not be probed"
