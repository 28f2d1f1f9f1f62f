# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reason a Slurm node is drained with, and who owns a drain (pure Python >= 3.9, stdlib only).

The convention is NHC's (``helpers/node-mark-offline``: a reason that starts with ``NHC:`` is NHC's own): a node
this collection drains gets a reason that starts with ``cvs:``, and it resumes only a node whose reason starts so;
a node an admin drained (any other reason, or none) is never resumed nor re-labelled. The node-local health
program (``module_utils/_health_check.py``) drains with ``cvs: health: ...`` and resumes only those.

Slurm shows a reason followed by `` [user@time]`` (``Reason=cvs: rvs: ... [root@2026-12-07T02:40:00]``) and
refuses strings of 1024 bytes or more (``Pathname of a file, directory or other parameter too long``); ``sinfo -R``
prints reasons in a narrow column, so reasons are kept short (:data:`REASON_MAX` characters by default), the run
id kept whole at the end.
"""

from __future__ import annotations

import re
from typing import Any, Optional

PREFIX = "cvs:"
HEALTH_CHECK = "health"
#: default longest reason, in characters (``cvs_quarantine_reason_max``)
REASON_MAX = 128
#: Slurm refuses a string of 1024 bytes or more in an update
SLURM_REASON_LIMIT = 1023
_STAMP = re.compile(r"\s*\[[^\[\]@]*@[^\[\]]*\]\s*$")
_SPACE = re.compile(r"\s+")


def plain(reason: Any) -> str:
    """A reason as Slurm shows it without the `` [user@time]`` it adds, ``(null)`` and ``none`` as empty."""
    text = str(reason or "").strip()
    if text in ("(null)", "none"):
        return ""
    return _STAMP.sub("", text).strip()


def owned(reason: Any, prefix: str = PREFIX) -> bool:
    """True when ``reason`` (as Slurm shows it) was written by this collection (``prefix``: ``cvs:`` for any of its
    drains, ``cvs: health:`` for the health program's)."""
    return plain(reason).startswith(prefix)


def _clean(text: Any) -> str:
    """One line of printable text (Slurm keeps a reason on one line; ``sinfo`` splits on nothing else)."""
    return _SPACE.sub(" ", "".join(ch if ch.isprintable() else " " for ch in str(text or ""))).strip()


def make_reason(check: str, short: Any, run_id: Optional[str] = None, limit: int = REASON_MAX) -> str:
    """``cvs: <check>: <short reason> (run <id>)`` at most ``limit`` characters (the short reason is cut with
    ``...``; the prefix, the check and the run id are kept whole).

    :raises ValueError: when ``limit`` cannot hold the prefix, the check and the run id, or exceeds Slurm's.
    """
    if limit > SLURM_REASON_LIMIT:
        raise ValueError(f"the reason limit {limit} is longer than Slurm accepts ({SLURM_REASON_LIMIT})")
    head = f"{PREFIX} {_clean(check)}: "
    tail = f" (run {_clean(run_id)})" if run_id else ""
    room = limit - len(head) - len(tail)
    if room < 8:
        raise ValueError(
            f"the reason limit {limit} cannot hold {head!r} and {tail.strip()!r}: raise it to {limit - room + 8}"
        )
    body = _clean(short) or "failed"
    if len(body) > room:
        body = body[: room - 3].rstrip() + "..."
    return head + body + tail
