# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which node a failed multi-node MaxText run is blamed on (pure Python, >= 3.9).

When one rank dies, every other rank reports it in its own words at once: Gloo's ``Connection reset by peer``,
then JAX's heartbeat timeout and ``Terminating process because the JAX distributed service detected fatal
errors``. A rank that never joins makes the others fail at ``RegisterTask`` with ``DEADLINE_EXCEEDED``. Those
lines (``ECHO_ERRORS``) say that *another* task failed, so whichever node the log watch heard first is not
necessarily the culprit. The rules, in order:

1. a node that failed for a reason of its own: an error line that is not an echo, a stall, a timeout, a lost
   connection, or a process that had already ended with a non-zero status when the run was stopped (a rank
   killed with ``kill -9`` prints nothing: its exit status is its only trace);
2. else, when every failure is an echo: the nodes whose log never shows the joining line
   (``JOINING_RE``): they never joined the run;
3. else the node the watch heard first (also when that node left no record: unreachable, say).

Among several nodes of one rule, the one the watch heard first wins, then the lowest node index.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import ECHO_ERRORS

__all__ = ["first_error", "first_failure", "status_text"]


def status_text(code: int) -> str:
    """``137 (killed by SIGKILL)`` for a shell's 128+N status; the plain number otherwise."""
    if 128 < code < 128 + 65:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            return str(code)
        return f"{code} (killed by {name})"
    return str(code)


def first_error(text: str, patterns: Mapping[str, str], ignore_patterns: Mapping[str, str]) -> Optional[str]:
    """The name of the first error pattern (in order) matching the first line that matches any, skipping lines that
    an ignore pattern matches, as the log watch scans; None when no line matches. For a node whose watch was stopped
    before it read its own error line."""
    errors = [(name, re.compile(rx)) for name, rx in patterns.items()]
    ignores = [re.compile(rx) for rx in ignore_patterns.values()]
    for line in text.splitlines():
        found = next((name for name, rx in errors if rx.search(line)), None)
        if found is not None and not any(rx.search(line) for rx in ignores):
            return found
    return None


def _echo(node: Mapping[str, Any]) -> bool:
    return node.get("error") in ECHO_ERRORS


def _died(node: Mapping[str, Any]) -> bool:
    ended = node.get("ended")
    return isinstance(ended, int) and not isinstance(ended, bool) and ended != 0 and not _echo(node)


def _own(node: Mapping[str, Any]) -> bool:
    """Failed for a reason of its own (rule 1)."""
    if not node.get("failure"):
        return False
    return _died(node) or (not node.get("aborted_by") and not _echo(node))


def _pick(candidates: list[Mapping[str, Any]], heard_first: Optional[str]) -> Mapping[str, Any]:
    for node in candidates:
        if node["node"] == heard_first:
            return node
    return min(candidates, key=lambda n: (int(n.get("index") or 0), str(n["node"])))


def first_failure(nodes: Sequence[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
    """The culprit of a failed run: ``{"node", "reason", "rule", "also"}`` or None when no node failed.

    Each entry of ``nodes`` describes one node after the run was stopped:

    * ``node`` (name) and ``index`` (rank);
    * ``failure``: why this node's watch failed, as the role words it ("" when it did not fail);
    * ``error``: the name of the error pattern that matched on this node itself, or None;
    * ``aborted_by``: the node whose failure stopped this node's watch ("" when it failed by itself);
    * ``ended``: the exit status of the node's process when it had ended before the stop, else None;
    * ``joined``: whether the node's log shows the joining line.

    ``reason`` is the culprit's own failure, or what rule 1 or 2 found; ``also`` lists the other nodes of
    rule 2 (several ranks may never join).
    """
    failed = [n for n in nodes if n.get("failure")]
    if not failed:
        return None
    heard = [n.get("aborted_by") for n in nodes if n.get("aborted_by")]
    heard_first = heard[0] if heard else None
    if heard_first is not None and heard_first not in {n["node"] for n in nodes}:
        # the node heard first left no record (unreachable, say): nothing here can tell better than the watch did
        return {"node": heard_first, "reason": "", "rule": "heard_first", "also": []}

    own = [n for n in failed if _own(n)]
    if own:
        node = _pick(own, heard_first)
        if _died(node) and (node.get("aborted_by") or not node.get("error")):
            reason = (
                f"{node['node']}: the MaxText process ended with status {status_text(node['ended'])} "
                "before the run finished, with no error line of its own"
            )
        else:
            reason = str(node["failure"])
        return {"node": node["node"], "reason": reason, "rule": "own", "also": []}

    echoes = sorted({str(n.get("error")) for n in failed if _echo(n)})
    silent = [n for n in nodes if not n.get("joined")]
    if echoes and silent and len(silent) < len(nodes):
        node = _pick(silent, heard_first)
        names = [str(n["node"]) for n in sorted(silent, key=lambda n: int(n.get("index") or 0))]
        loud = [str(n["node"]) for n in failed if _echo(n)]
        reason = (
            f"{', '.join(names)} never joined the run: no line of {'them' if len(names) > 1 else 'it'} says "
            f"'Attempting to initialize the jax distributed system', while {', '.join(loud)} failed with "
            f"{', '.join(echoes)}"
        )
        return {
            "node": node["node"],
            "reason": reason,
            "rule": "never_joined",
            "also": [n for n in names if n != node["node"]],
        }

    node = _pick(failed, heard_first)
    return {"node": node["node"], "reason": str(node["failure"]), "rule": "heard_first", "also": []}
