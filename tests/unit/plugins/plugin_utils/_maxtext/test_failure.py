"""Unit tests for plugin_utils/_maxtext/failure.py and the maxtext_first_failure filter."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.maxtext_metrics import FilterModule
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.failure import (
    first_error,
    first_failure,
    status_text,
)


def node(
    name: str,
    index: int,
    failure: str = "",
    error: Optional[str] = None,
    aborted_by: str = "",
    ended: Optional[int] = None,
    joined: bool = True,
) -> dict[str, Any]:
    return {
        "node": name,
        "index": index,
        "failure": failure,
        "error": error,
        "aborted_by": aborted_by,
        "ended": ended,
        "joined": joined,
    }


def test_no_failure_blames_nobody() -> None:
    assert first_failure([node("node1", 0), node("node2", 1)]) is None


def test_a_killed_rank_is_blamed_although_a_survivor_was_heard_first() -> None:
    """kill -9 on node2: node1's Gloo echo decided the watch; node2 was stopped by it, its process already gone."""
    blame = first_failure(
        [
            node("node1", 0, "error pattern 'collective_peer_lost' matched on node1", "collective_peer_lost"),
            node("node2", 1, "stopped because node1 failed", aborted_by="node1", ended=137),
            node("node3", 2, "error pattern 'collective_peer_lost' matched on node3", "collective_peer_lost"),
        ]
    )
    assert blame is not None
    assert (blame["node"], blame["rule"]) == ("node2", "own")
    assert "ended with status 137 (killed by SIGKILL)" in blame["reason"]


def test_a_killed_rank_heard_first_keeps_its_own_words() -> None:
    blame = first_failure(
        [
            node("node1", 0, "stopped because node2 failed", aborted_by="node2"),
            node("node2", 1, "job exited with code 137", ended=137),
        ]
    )
    assert blame is not None and blame["node"] == "node2"
    assert "status 137 (killed by SIGKILL)" in blame["reason"]


def test_an_own_error_line_beats_echoes_and_keeps_its_reason() -> None:
    blame = first_failure(
        [
            node("node1", 0, "node1 echo", "jax_heartbeat"),
            node("node2", 1, "error pattern 'out_of_memory' matched on node2: RESOURCE_EXHAUSTED", "out_of_memory"),
        ]
    )
    assert blame == {
        "node": "node2",
        "reason": "error pattern 'out_of_memory' matched on node2: RESOURCE_EXHAUSTED",
        "rule": "own",
        "also": [],
    }


def test_a_survivor_that_died_of_the_echo_is_not_blamed() -> None:
    """Ranks that exit 134 at JAX's initialization timeout die of the echo: the silent rank is blamed."""
    blame = first_failure(
        [
            node("node1", 0, "deadline", "jax_coordination", ended=134),
            node("node2", 1, "deadline", "jax_coordination", ended=134),
            node("node3", 2, "stopped because node1 failed", aborted_by="node1", joined=False),
        ]
    )
    assert blame is not None
    assert (blame["node"], blame["rule"]) == ("node3", "never_joined")
    assert blame["reason"].startswith("node3 never joined the run: no line of it says")
    assert "node1, node2 failed with jax_coordination" in blame["reason"]


def test_several_ranks_that_never_joined_are_all_named() -> None:
    blame = first_failure(
        [
            node("node1", 0, "deadline", "jax_coordination"),
            node("node2", 1, "stopped", aborted_by="node1", joined=False),
            node("node3", 2, "stopped", aborted_by="node1", joined=False),
        ]
    )
    assert blame is not None
    assert (blame["node"], blame["also"]) == ("node2", ["node3"])
    assert blame["reason"].startswith("node2, node3 never joined the run: no line of them says")


def test_echoes_only_with_everyone_joined_blame_the_node_heard_first() -> None:
    blame = first_failure(
        [
            node("node1", 0, "stopped", aborted_by="node2"),
            node("node2", 1, "node2 heartbeat", "jax_heartbeat"),
            node("node3", 2, "node3 heartbeat", "jax_heartbeat"),
        ]
    )
    assert blame is not None and (blame["node"], blame["rule"]) == ("node2", "heard_first")


def test_among_several_own_failures_the_one_heard_first_wins_then_the_lowest_rank() -> None:
    nan = "error pattern 'nan_or_inf' matched"
    heard = [
        node("node1", 0, nan, "nan_or_inf"),
        node("node2", 1, nan, "nan_or_inf"),
        node("node3", 2, "x", aborted_by="node2"),
    ]
    assert first_failure(heard)["node"] == "node2"  # type: ignore[index]
    unheard = [node("node3", 2, nan, "nan_or_inf"), node("node2", 1, nan, "nan_or_inf")]
    assert first_failure(unheard)["node"] == "node2"  # type: ignore[index]


@pytest.mark.parametrize(
    ("code", "text"), [(137, "137 (killed by SIGKILL)"), (143, "143 (killed by SIGTERM)"), (1, "1"), (255, "255")]
)
def test_status_text_names_the_signal_of_a_shell_status(code: int, text: str) -> None:
    assert status_text(code) == text


def test_filter_checks_its_input() -> None:
    blame = FilterModule().filters()["maxtext_first_failure"]
    assert blame([node("node1", 0)]) is None
    with pytest.raises(AnsibleFilterError, match="list of mappings with a 'node' key"):
        blame([{"index": 0}])
    with pytest.raises(AnsibleFilterError):
        blame("node1")


def test_first_error_scans_lines_in_order_and_skips_ignored_ones() -> None:
    patterns = {"nan": r"loss: nan", "coord": r"DEADLINE_EXCEEDED", "py": r"ModuleNotFoundError"}
    ignores = {"stub": r"\[NO-OP\] .*using stub"}
    text = "\n".join(
        [
            "[NO-OP] mldiagnostics: dependency missing; using stub. (ModuleNotFoundError)",
            "I1207 ok line",
            "F1207 client.h:86] Terminating process ... DEADLINE_EXCEEDED: Deadline Exceeded",
            "completed step: 3, loss: nan",
        ]
    )
    assert first_error(text, patterns, ignores) == "coord"
    assert first_error(text, patterns, {}) == "py"
    assert first_error("all good\n", patterns, ignores) is None


def test_a_rank_that_died_of_the_echo_before_its_watch_read_it_is_not_blamed() -> None:
    """The container run: node2 exited 134 at the timeout but was stopped by node1's verdict before its own
    DEADLINE line was read; the role names that line from the log copy, so node2 is an echo like node1."""
    blame = first_failure(
        [
            node("node1", 0, "deadline", "jax_coordination", ended=134),
            node("node2", 1, "stopped", "jax_coordination", aborted_by="node1", ended=134),
            node("node3", 2, "stopped", aborted_by="node1", joined=False),
        ]
    )
    assert blame is not None and (blame["node"], blame["rule"]) == ("node3", "never_joined")


def test_first_error_filter_names_a_bad_regex() -> None:
    name = FilterModule().filters()["maxtext_first_error"]
    assert name("x loss: nan", {"nan": "loss: nan"}) == "nan"
    with pytest.raises(AnsibleFilterError, match="invalid regex"):
        name("x", {"bad": "("})
    with pytest.raises(AnsibleFilterError, match="mappings"):
        name("x", ["loss"])


def test_a_node_heard_first_without_a_record_is_left_as_the_watch_named_it() -> None:
    """node2 became unreachable: it has no entry; the others were stopped by it and have nothing of their own."""
    blame = first_failure(
        [
            node("node1", 0, "run stopped because node2 failed", aborted_by="node2"),
            node("node3", 2, "run stopped because node2 failed", aborted_by="node2"),
        ]
    )
    assert blame == {"node": "node2", "reason": "", "rule": "heard_first", "also": []}
