# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet poll (log_poll's ``fleet: true``): one task in one process drives the rounds of every host of the group.

The per-host form runs one Ansible worker per host, and each round of each host pays for Ansible's task machinery
(a result through the queue, the callbacks, the next retry). A fleet pays for it once per call: one round sends
every host's request to the reader kept on that host, waits for the replies together, then lets each host's
:class:`~.engine.RoundEngine` decide as it would alone. The group's state is in memory
(:class:`~.state.MemoryStore`), so a host that fails is seen by every other host in the same round.

What reaches the nodes is injected (:class:`FleetReader`, in a run :class:`~.transport.NodeReaders`); unit tests
drive a fleet with fake readers and clocks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol

from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.budget import (
    CallLines,
    fit_fleet,
    merge_round,
    progress_of,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.engine import RoundEngine, Spool

# the fields of a host's result that a fleet result keeps for it (the rest is per host and per round: cursors,
# the task's events, the group, which the fleet result holds once)
HOST_FIELDS = (
    "finished",
    "failed",
    "completed",
    "msg",
    "new_lines",
    "log_states",
    "error",
    "aborted_by",
    "timed_out",
    "stalled",
    "transport_error",
    "transport_failures",
    "round",
    "elapsed",
    "lines_total",
    "last_line",
    "warnings",
)


ALWAYS_KEPT = frozenset({"finished", "failed", "completed", "new_lines", "log_states"})


class FleetReader(Protocol):
    """The nodes' readers, one per host of the fleet."""

    def read_all(self, requests: Mapping[str, dict]) -> dict[str, tuple[dict | None, str | None]]:
        """Every host's request sent before any reply is awaited; each host's (reply, None) or (None, error)."""

    def read(self, host: str, request: dict) -> tuple[dict | None, str | None]:
        """One host's request, answered before it returns (a drain after the group decided)."""


def host_entry(result: Mapping) -> dict:
    """What a fleet result keeps of one host's call result (empty and false fields left out but the main ones)."""
    return {
        k: result[k]
        for k in HOST_FIELDS
        if k in result and (k in ALWAYS_KEPT or result[k] not in (None, False, [], ""))
    }


class FleetPoll:
    """The rounds of one fleet task (kept between the task's `until` retries by the action)."""

    def __init__(
        self,
        engines: Mapping[str, RoundEngine],
        reader: FleetReader,
        spools: Mapping[str, Spool],
        *,
        budget: int,
        delay: float,
        call_seconds: float,
    ) -> None:
        self.engines = dict(engines)
        self.reader = reader
        self.spools = dict(spools)
        self.budget = budget
        self.delay = delay
        self.call_seconds = call_seconds
        self.final: dict[str, dict] = {}  # host -> its last result, once finished

    @property
    def finished(self) -> bool:
        return len(self.final) == len(self.engines)

    def round(self, base: Mapping) -> dict[str, dict]:
        """One round of every host still polling: {host: that host's round result}."""
        results: dict[str, dict] = {}
        opened: dict[str, dict] = {}
        requests: dict[str, dict] = {}
        for host, engine in self.engines.items():
            if host in self.final:
                continue
            result = dict(base)
            ended = engine.open_round(result)
            if ended is not None:
                results[host] = ended
                continue
            opened[host] = result
            if engine.s.watches:
                requests[host] = engine.request()
        replies = self.reader.read_all(requests) if requests else {}
        for host, result in opened.items():
            reply, error = replies.get(host, (None, None))
            results[host] = self.engines[host].close_round(result, reply, error)
        for host, result in results.items():
            if result.get("finished") or result.get("failed"):
                self.final[host] = result
        return results

    def call(
        self,
        base: Mapping,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> dict:
        """Rounds until every host finished or the call's time is used; one result under the event budget."""
        start = monotonic()
        deadline = start + self.call_seconds
        lines: dict[str, CallLines] = {}
        totals: dict[str, dict] = {}
        rounds = 0
        while True:
            round_start = monotonic()
            results = self.round(base)
            rounds += 1
            decided = any(engine.store.decision() for engine in self.engines.values())
            # after the group's verdict one more round finishes every host: it runs now, in this call
            done = self.finished or (monotonic() + self.delay >= deadline and not decided)
            for host, result in results.items():
                engine = self.engines[host]
                host_lines = lines.setdefault(host, CallLines(0))
                labeled = []
                for index, spec in enumerate(engine.s.logs):
                    delivered = engine.delivered.get(spec.path, [])
                    host_lines.add(index, delivered)
                    labeled.extend((spec.label, line) for line in delivered)
                totals[host] = merge_round(totals.get(host), result)
                spool = self.spools.get(host)
                if spool is not None:
                    spool.write(labeled, progress_of(result), last=done or host in self.final)
            if done:
                break
            if not decided:  # a verdict is acted on by every host at once, not a delay later
                sleep(max(0.0, self.delay - (monotonic() - round_start)))
        return self._result(totals, lines, rounds, monotonic() - start)

    def _result(self, totals: dict[str, dict], lines: dict[str, CallLines], rounds: int, seconds: float) -> dict:
        entries = {host: host_entry(total) for host, total in totals.items()}
        if self.finished:  # the last result holds every host's verdict, also of hosts that finished earlier
            for host, final in self.final.items():
                if host not in entries:
                    entries[host] = dict(host_entry(final), new_lines=[], log_states=[])
        any_engine = next(iter(self.engines.values()))
        group = any_engine.group_summary()
        verdict = any_engine.store.decision() or {}
        failed_hosts = [h for h, r in self.final.items() if r.get("failed")]
        error_hosts = [h for h in failed_hosts if not self.final[h].get("aborted_by")]
        config = bool(verdict.get("config"))
        complete = sum(1 for r in self.final.values() if r.get("completed"))
        if config:
            msg = f"log_poll: {verdict['reason']}"
        elif failed_hosts:
            first = verdict.get("host") if verdict.get("state") == "failed" else error_hosts[0] if error_hosts else None
            stopped = len(failed_hosts) - len(error_hosts)
            msg = f"{len(error_hosts)} of {len(self.engines)} host(s) failed"
            if first:
                msg += f", first {first}: {verdict.get('reason') or self.final[first].get('msg')}"
            if stopped:
                msg += f"; {stopped} stopped because of it"
        elif self.finished:
            msg = f"fleet of {len(self.engines)} host(s) finished: {complete} complete"
        else:
            msg = f"fleet of {len(self.engines)} host(s): {len(self.final)} finished, round {group_round(totals)}"
        result = {
            "changed": False,
            "fleet": True,
            "finished": self.finished or config,
            "failed": config,
            "msg": msg,
            "group": group,
            "hosts": entries,
            "failed_hosts": failed_hosts,
            "error_hosts": error_hosts,
            "complete_hosts": complete,
            "rounds_in_call": rounds,
            "call_elapsed": round(seconds, 3),
        }
        if verdict.get("state") == "failed":
            result["aborted_by"] = verdict.get("host")
        warnings = [w for entry in entries.values() for w in entry.pop("warnings", [])]
        if warnings:
            result["warnings"] = warnings
        return fit_fleet(result, lines, self.budget)


def group_round(totals: Mapping[str, Mapping]) -> int:
    return max((int(t.get("round", 0)) for t in totals.values()), default=0)
