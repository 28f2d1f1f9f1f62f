# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The index of the runs of a results directory (controller only).

``<results_dir>/index.json`` holds one entry per run: its id, when its report was last written, its status, the
status of every node and check, and each node's key metrics (throughput and time metrics: those the fleet
comparison compares). ``cvs.cluster.report`` updates the run's entry every time it writes the run's report, so the
entry of a run that is still going is replaced by later writes.

Concurrent runs writing to one results directory: every update holds an exclusive ``flock`` on the results
directory itself while it reads, changes and atomically replaces the file, so no update is lost and a reader never
sees a partial file (no lock file is left behind). An unreadable index (deleted, truncated by hand, another schema)
is rebuilt from the ``results.json`` files of the run directories, never raised.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
from typing import Any, Iterator, Mapping, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import atomic_write
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet
from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt

SCHEMA = "cvs.cluster/history/v1"
INDEX = "index.json"
MAX_RUNS = 200  # the oldest entries beyond this are dropped from the index (their run directories stay)


class HistoryError(ValueError):
    """A run or the index cannot be read (the message names the file and the field)."""


def key_metrics(
    values: Mapping[str, Mapping[str, Mapping[str, Any]]],
    overrides: Optional[Mapping[str, Any]] = None,
    units: Optional[Mapping[str, Mapping[str, str]]] = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """{node: {check: {metric: value}}} of the finite values of the metrics that have a better side.

    ``values``: :func:`_metrics.fleet.collect_values` output ({check: {metric: {node: value}}}); ``overrides``:
    per metric ``higher | lower | ignore | {direction}`` (as the fleet comparison's ``metrics`` option); ``units``:
    {check: {metric: unit}} the checks declare (a rate such as GB/s is higher-is-better)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for check, metrics in values.items():
        for metric, per_node in metrics.items():
            if _fleet.direction_of(metric, overrides, unit_of(units, check, metric)) is None:
                continue
            for node, v in per_node.items():
                if fmt.is_number(v) and math.isfinite(v):
                    out.setdefault(node, {}).setdefault(check, {})[metric] = float(v)
    return out


def unit_of(units: Optional[Mapping[str, Any]], check: str, metric: str) -> Optional[str]:
    """The unit of a check's metric in {check: {metric: unit}}, None when not declared."""
    per = (units or {}).get(check)
    unit = per.get(metric) if isinstance(per, Mapping) else None
    return unit if isinstance(unit, str) else None


def recorded_units(record: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """{check: {metric: unit}} of a results.json: its ``history.units``, else the units of its fleet rows."""
    hist = record.get("history")
    if isinstance(hist, Mapping) and isinstance(hist.get("units"), Mapping):
        return {str(c): dict(u) for c, u in hist["units"].items() if isinstance(u, Mapping)}
    out: dict[str, dict[str, str]] = {}
    for row in (record.get("fleet") or {}).get("metrics") or []:
        if isinstance(row, Mapping) and isinstance(row.get("unit"), str):
            out.setdefault(str(row.get("check")), {})[str(row.get("metric"))] = row["unit"]
    return out


def entry(record: Mapping[str, Any], values: Mapping[str, Any], label: Optional[str] = None) -> dict[str, Any]:
    """The index entry of a run record (results.json) with its nodes' key metrics ``values``
    ({node: {check: {metric: value}}})."""
    nodes: dict[str, Any] = {}
    for node, row in (record.get("nodes") or {}).items():
        nodes[node] = {
            "checks": {c: r.get("status") for c, r in (row.get("checks") or {}).items()},
            "metrics": values.get(node) or {},
        }
    out = {
        "run_id": record["run_id"],
        "generated": record.get("generated"),
        "complete": bool(record.get("complete")),
        "status": (record.get("summary") or {}).get("status"),
        "checks": list(record.get("checks") or []),
        "nodes": nodes,
    }
    if label:
        out["burn_in_id"] = label
    return out


def _order(run: Mapping[str, Any]) -> tuple[str, str]:
    return (str(run.get("generated") or ""), str(run.get("run_id") or ""))


def _valid(data: Any) -> bool:
    return (
        isinstance(data, Mapping)
        and data.get("schema") == SCHEMA
        and isinstance(data.get("runs"), list)
        and all(isinstance(r, Mapping) and isinstance(r.get("run_id"), str) for r in data["runs"])
    )


def rebuild(results_dir: str) -> list[dict[str, Any]]:
    """Index entries from the results.json of every run directory (for a missing or unreadable index)."""
    runs: list[dict[str, Any]] = []
    try:
        names = sorted(os.listdir(results_dir))
    except OSError:
        return runs
    for name in names:
        path = os.path.join(results_dir, name, "results.json")
        try:
            with open(path, encoding="utf-8") as fh:
                record = json.load(fh)
        except (OSError, ValueError):
            continue
        if not isinstance(record, Mapping) or not isinstance(record.get("run_id"), str):
            continue
        runs.append(entry(record, recorded_values(record), (record.get("history") or {}).get("burn_in_id")))
    return sorted(runs, key=_order)


def recorded_values(record: Mapping[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """{node: {check: {metric: value}}} of a results.json: its ``history.values`` when it has them (reports of this
    version), else the values of its fleet comparison (``fleet.metrics``)."""
    hist = record.get("history")
    if isinstance(hist, Mapping) and isinstance(hist.get("values"), Mapping):
        return {str(n): dict(v) for n, v in hist["values"].items() if isinstance(v, Mapping)}
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in (record.get("fleet") or {}).get("metrics") or []:
        if not isinstance(row, Mapping):
            continue
        for node, cell in (row.get("nodes") or {}).items():
            v = cell.get("value") if isinstance(cell, Mapping) else None
            if fmt.is_number(v) and math.isfinite(v):
                out.setdefault(node, {}).setdefault(str(row.get("check")), {})[str(row.get("metric"))] = float(v)
    return out


def read(results_dir: str) -> list[dict[str, Any]]:
    """The runs of the index, oldest first (rebuilt from the run directories when the index cannot be read)."""
    try:
        with open(os.path.join(results_dir, INDEX), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        data = None
    if not _valid(data):
        return rebuild(results_dir)
    return sorted((dict(r) for r in data["runs"]), key=_order)


@contextlib.contextmanager
def _locked(results_dir: str) -> Iterator[None]:
    fd = os.open(results_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def update(results_dir: str, run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Put ``run`` (an :func:`entry`) into the index, replacing the entry of the same run id. Returns the runs, oldest
    first. OSError when the index cannot be written (the caller reports it)."""
    os.makedirs(results_dir, exist_ok=True)
    with _locked(results_dir):
        runs = [r for r in read(results_dir) if r.get("run_id") != run["run_id"]]
        runs.append(dict(run))
        runs = sorted(runs, key=_order)[-MAX_RUNS:]
        text = json.dumps({"schema": SCHEMA, "runs": runs}, separators=(",", ":"), sort_keys=True, default=str) + "\n"
        atomic_write(os.path.join(results_dir, INDEX), text)
    return runs


def load_run(results_dir: str, run_id: str) -> dict[str, Any]:
    """The results.json of one run of ``results_dir``; HistoryError naming the file when it cannot be read."""
    if not run_id or "/" in run_id or run_id in (".", ".."):
        raise HistoryError(f"invalid run id {run_id!r}: a run id is the name of a directory under {results_dir}")
    path = os.path.join(results_dir, run_id, "results.json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise HistoryError(
            f"no run {run_id} in {results_dir}: {path} does not exist (the run ids are the directories there)"
        ) from None
    except (OSError, ValueError) as exc:
        raise HistoryError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("nodes"), Mapping):
        raise HistoryError(f"{path} is not a run record: no 'nodes' mapping")
    return dict(data)
