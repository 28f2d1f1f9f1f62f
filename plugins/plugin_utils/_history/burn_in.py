# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in: the chosen suites run again and again, past failing nodes, then the nodes are ranked (controller only).

Ansible cannot loop over plays, so ``cvs.cluster.burn_in`` (playbooks/burn_in.yml) runs ``validate.yml`` once per
iteration as a child ``ansible-playbook`` with the same inventory, limit and extra vars, each iteration a run of its
own (run id ``<burn-in id>-iNN``) in the same results directory. An iteration that wrote its final report goes on to
the next whatever its nodes did (failed, unreachable); an interrupted iteration, or one that left no complete report
(a broken inventory, a killed controller), stops the burn-in. At the end every node is ranked by failures, then by
the spread of its key metrics over the iterations.
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._history import index as _index
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet
from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt

SCHEMA = "cvs.cluster/burn-in/v1"
MAX_ITERATIONS = 10000
# exit statuses of ansible-playbook after an interrupt (SIGINT, SIGTERM): the burn-in stops there
INTERRUPTED_RC = (99, 130, 143)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|m|min|mins|h|hr|hrs|d|days?)?\s*$", re.I)
_UNIT = {"s": 1, "sec": 1, "secs": 1, "m": 60, "min": 60, "mins": 60, "h": 3600, "hr": 3600, "hrs": 3600}


class BurnInError(ValueError):
    """Bad burn-in settings (the message names the variable, the value and the fix)."""


def parse_duration(value: Any) -> Optional[float]:
    """Seconds of ``cvs_duration``: a number of seconds or ``90s``, ``30m``, ``8h``, ``2d``; None when not set."""
    if value is None or value == "":
        return None
    if fmt.is_number(value) and math.isfinite(value) and value > 0:
        return float(value)
    m = _DURATION.match(str(value)) if isinstance(value, str) else None
    if not m or float(m.group(1)) <= 0:
        raise BurnInError(
            f"cvs_duration: {value!r} is not a duration; use seconds or a number with s, m, h or d (e.g. 8h, 90m)"
        )
    unit = (m.group(2) or "s").lower()
    return float(m.group(1)) * (86400 if unit.startswith("d") else _UNIT[unit])


def plan(repeat: Any, duration: Any) -> dict[str, Any]:
    """{repeat, duration (seconds or None)}: at least one of ``cvs_repeat`` / ``cvs_duration``. With both, the burn-in
    stops at whichever comes first; with only a duration it repeats until no time is left to start another."""
    seconds = parse_duration(duration)
    if repeat is None or repeat == "":
        if seconds is None:
            raise BurnInError("a burn-in needs cvs_repeat (iterations, e.g. 3) or cvs_duration (e.g. 8h), or both")
        return {"repeat": MAX_ITERATIONS, "duration": seconds}
    try:
        count = int(repeat) if not isinstance(repeat, bool) else 0
    except (TypeError, ValueError):
        count = 0
    if count < 1 or count > MAX_ITERATIONS or (isinstance(repeat, float) and repeat != count):
        raise BurnInError(f"cvs_repeat: {repeat!r} must be a whole number of iterations from 1 to {MAX_ITERATIONS}")
    return {"repeat": count, "duration": seconds}


def iteration_run_id(burn_in_id: str, number: int) -> str:
    return f"{burn_in_id}-i{number:02d}"


def child_argv(
    argv: Sequence[str], playbooks: Sequence[str], validate_playbook: str, extra: Mapping[str, Any]
) -> list[str]:
    """ansible-playbook arguments of one iteration: those of the burn-in command (inventory, limit, extra vars,
    connection and vault options) with its playbooks replaced by ``validate_playbook``, plus ``extra`` as extra
    vars (given last, so they win)."""
    args = list(argv)
    for playbook in playbooks:  # the last occurrence: an option value may equal a playbook's name
        if playbook in args:
            del args[len(args) - 1 - args[::-1].index(playbook)]
    return [*args, validate_playbook, "-e", json.dumps(dict(extra))]


def finished(rc: int, record: Optional[Mapping[str, Any]]) -> bool:
    """Whether an iteration ran to its final report: not interrupted, and its results.json (``record``, None when
    there is none) says it is complete. Its exit status is otherwise no guide: 2 is a failed node, 4 an unreachable
    one."""
    return rc >= 0 and rc not in INTERRUPTED_RC and bool(record) and record.get("complete") is True


def drive(
    burn_in_id: str,
    settings: Mapping[str, Any],
    run_iteration: Callable[[int, str], int],
    ran_to_the_end: Callable[[str, int], bool],
    clock: Callable[[], float] = time.monotonic,
) -> list[dict[str, Any]]:
    """Run the iterations: ``run_iteration(number, run_id) -> exit status`` until ``settings.repeat`` iterations ran
    or ``settings.duration`` seconds have passed (an iteration that started in time finishes). Stops early when
    ``ran_to_the_end(run_id, rc)`` says an iteration did not reach its final report (see :func:`finished`).
    Returns [{iteration, run_id, rc, seconds, finished}]."""
    start = clock()
    done: list[dict[str, Any]] = []
    for number in range(1, settings["repeat"] + 1):
        if settings.get("duration") is not None and clock() - start >= settings["duration"]:
            break
        run_id = iteration_run_id(burn_in_id, number)
        began = clock()
        rc = run_iteration(number, run_id)
        ok = ran_to_the_end(run_id, rc)
        done.append({"iteration": number, "run_id": run_id, "rc": rc, "seconds": clock() - began, "finished": ok})
        if not ok:
            break
    return done


def _spread(values: Sequence[float]) -> Optional[float]:
    """(max - min) / |median| of a metric over the iterations; None with fewer than 2 values or a median of 0."""
    if len(values) < 2:
        return None
    med = _fleet.median(values)
    return None if med == 0 else (max(values) - min(values)) / abs(med)


def rank(records: Sequence[Mapping[str, Any]], missing: Sequence[str] = ()) -> dict[str, Any]:
    """Rank the nodes of the iterations' run records (results.json, in order).

    Per node: iterations it was in, failures (iterations where a check did not pass), the failed checks with counts,
    per key metric {values, median, spread}, and its largest spread. Order: most failures first, then the largest
    spread. ``missing``: run ids whose results.json could not be read (named in the notes)."""
    nodes: dict[str, dict[str, Any]] = {}
    for rec in records:
        values = _index.recorded_values(rec)
        for node, row in (rec.get("nodes") or {}).items():
            n = nodes.setdefault(
                node,
                {"node": node, "iterations": 0, "failures": 0, "failed_checks": {}, "failed_runs": [], "metrics": {}},
            )
            n["iterations"] += 1
            bad = [c for c, r in (row.get("checks") or {}).items() if r.get("status") not in ("PASS",)]
            if bad:
                n["failures"] += 1
                n["failed_runs"].append(rec.get("run_id"))
                for c in bad:
                    status = row["checks"][c].get("status")
                    key = f"{c} {status}"
                    n["failed_checks"][key] = n["failed_checks"].get(key, 0) + 1
            for check, metrics in (values.get(node) or {}).items():
                for metric, v in metrics.items():
                    n["metrics"].setdefault(f"{check} {metric}", {"values": []})["values"].append(v)
    for n in nodes.values():
        spreads = []
        for name, m in n["metrics"].items():
            m["median"] = _fleet.median(m["values"]) if m["values"] else None
            m["spread"] = _spread(m["values"])
            if m["spread"] is not None:
                spreads.append((m["spread"], name))
        top = max(spreads) if spreads else None
        n["max_spread"] = top[0] if top else None
        n["max_spread_metric"] = top[1] if top else None
    ranking = sorted(nodes.values(), key=lambda n: (-n["failures"], -(n["max_spread"] or 0.0), n["node"]))
    for i, n in enumerate(ranking, 1):
        n["rank"] = i
    lines = []
    for n in ranking:
        spread = (
            f"largest spread {n['max_spread'] * 100:.1f}% ({n['max_spread_metric']})"
            if n["max_spread"] is not None
            else "no metric spread (fewer than 2 values)"
        )
        failed = ", ".join(f"{k} x{v}" for k, v in sorted(n["failed_checks"].items()))
        lines.append(
            f"{n['rank']}. {n['node']}: failed {n['failures']} of {n['iterations']} iteration(s)"
            + (f" ({failed})" if failed else "")
            + f"; {spread}"
        )
    notes = [f"{r}: no results.json (the iteration did not write its report)" for r in missing]
    return {"nodes": ranking, "lines": lines, "notes": notes}
