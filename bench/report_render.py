#!/usr/bin/env python3
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bench: rendering the report of a large synthetic run (no cluster needed).

Builds an N-node run record (default 256: rvs + maxtext per node, a loss/step-time series of 120 points per node,
one failing node, one 20 % slower node) in memory, then times, in the same process:

* baseline: ``json.dumps`` of the same record (what writing results.json costs anyway);
* ``_fleet.annotate`` (the fleet comparison), ``to_junit`` and ``to_html``.

Prints the times, their ratio to the baseline and the sizes of junit.xml and report.html, and writes
bench/results/report_render.json (summary: the same figures, the targets and whether they were met). Targets:
report.html of 256 nodes rendered in at most 2 s and at most 1.5 MiB ("not measured" with another --nodes).

    .venv/bin/python bench/report_render.py [--nodes 256] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / ".cache" / "collections"))

from _results import Target, judge, target_line, write_results  # noqa: E402  (bench/, the script's own directory)

from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet  # noqa: E402
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.html import to_html  # noqa: E402
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.junit import to_junit  # noqa: E402
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.record import aggregate  # noqa: E402
from ansible_collections.cvs.cluster.tests.support.report_synth import synth_found  # noqa: E402

TARGET_NODES = 256
HTML_BUDGET_S = 2.0
HTML_BUDGET_BYTES = int(1.5 * 1024 * 1024)


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def build(nodes: int) -> tuple[dict[str, Any], dict[str, Any]]:
    found = synth_found(nodes, slow={nodes // 3: 1.2}, fail_rvs={nodes - 1: 3})
    record = aggregate("bench", ["rvs", "maxtext"], {}, found)
    series = {}
    for i, node in enumerate(record["nodes"]):
        slow = 1.2 if i == nodes // 3 else 1.0
        steps = [
            {"step": s, "loss": 10.5 * 0.97**s + 1 + (i % 7) * 0.01, "seconds": 0.05 * slow * (1 + (s % 5) * 0.002)}
            for s in range(120)
        ]
        series[node] = {"maxtext": _fleet.series_from_steps(steps)}
    record["plots"] = {"series": series, "rvs_gpus": _fleet.rvs_gpus(found)}
    return record, found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    record, found = build(args.nodes)
    t_fleet, _ = best(lambda: _fleet.annotate(record, found), args.repeat)
    t_json, js = best(lambda: json.dumps(record, indent=2, default=str), args.repeat)
    t_junit, junit = best(lambda: to_junit(record), args.repeat)
    t_html, page = best(lambda: to_html(record), args.repeat)
    result = {
        "nodes": args.nodes,
        "json_dumps_s": t_json,
        "fleet_s": t_fleet,
        "junit_s": t_junit,
        "html_s": t_html,
        "html_vs_json": t_html / t_json if t_json else None,
        "results_json_bytes": len(js.encode()),
        "junit_bytes": len(junit.encode()),
        "html_bytes": len(page.encode()),
        "html_budget_s": HTML_BUDGET_S,
        "html_budget_bytes": HTML_BUDGET_BYTES,
    }
    print(f"{args.nodes} nodes, best of {args.repeat}:")
    print(f"  baseline json.dumps(record)  {t_json * 1000:8.1f} ms  ({result['results_json_bytes'] / 1024:.0f} KiB)")
    print(f"  fleet comparison             {t_fleet * 1000:8.1f} ms  ({t_fleet / t_json:.2f}x baseline)")
    print(f"  to_junit                     {t_junit * 1000:8.1f} ms  ({t_junit / t_json:.2f}x baseline)")
    print(
        f"  to_html                      {t_html * 1000:8.1f} ms  ({t_html / t_json:.2f}x baseline)"
        f"  report.html {result['html_bytes'] / 1024:.0f} KiB, junit.xml {result['junit_bytes'] / 1024:.0f} KiB"
    )
    measured = args.nodes == TARGET_NODES
    targets = [
        Target(f"report.html of {TARGET_NODES} nodes in at most {HTML_BUDGET_S:g} s", t_html if measured else None,
               HTML_BUDGET_S),
        Target(f"report.html of {TARGET_NODES} nodes at most {HTML_BUDGET_BYTES / 1048576:.1f} MiB",
               result["html_bytes"] if measured else None, HTML_BUDGET_BYTES),
    ]  # fmt: skip
    summary = dict(result, **judge(targets))
    for target in summary["targets"]:
        print(f"  target: {target_line(target)}")
    print(f"  -> {write_results('report_render', {'method': __doc__, 'summary': summary})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
