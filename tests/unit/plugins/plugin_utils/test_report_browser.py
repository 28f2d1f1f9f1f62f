"""report.html of synthetic runs in headless Chromium at 1400x900 and 390x844 (needs Debian's ``chromium``;
scripts/system-deps.sh installs it). No cluster, no network: local files and a fresh profile per run.

Asserts what a person sees: no horizontal scroll, the failing and the outlying node named in the first screen,
plots drawn at the width of the page. Screenshots are kept under tests/output/report/ (git-ignored).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._report.record import write_report
from ansible_collections.cvs.cluster.tests.support.report_browser import measure, screenshot
from ansible_collections.cvs.cluster.tests.support.report_synth import synth_found, write_run

OUTPUT = Path(__file__).resolve().parents[3] / "output" / "report"
SIZES = [(1400, 900), (390, 844)]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two synthetic runs written like real ones: 3 nodes (node002 fails RVS on GPU index 2, node003 15% slower,
    node001 2% slower) and 64 nodes (one failing, one 20% slower, non-ASCII names among them)."""
    base = tmp_path_factory.mktemp("browser")
    out = {}
    small = synth_found(3, slow={0: 1.02, 2: 1.15}, fail_rvs={1: 2})
    write_run(base / "small", small, slow={"node001": 1.02, "node003": 1.15})
    write_report(str(base), "small", ["rvs", "maxtext"], {})
    out["small"] = base / "small" / "report.html"
    names = [f"node{i + 1:03d}" for i in range(62)] + ["nœud-063", "узел-064"]
    big = synth_found(64, slow={40: 1.2}, fail_rvs={63: 5}, names=names)
    write_run(base / "big", big, slow={"node041": 1.2})
    write_report(str(base), "big", ["rvs", "maxtext"], {})
    out["big"] = base / "big" / "report.html"
    return out


@pytest.mark.parametrize(("width", "height"), SIZES)
@pytest.mark.parametrize("name", ["small", "big"])
def test_no_overflow_failing_node_first_screen_plots(
    pages: dict[str, Path], name: str, width: int, height: int, tmp_path: Path
) -> None:
    page = pages[name]
    m: dict[str, Any] = measure(page, width, height, tmp_path)
    assert m["innerWidth"] == width, m
    assert m["scrollWidth"] <= m["innerWidth"], f"horizontal scroll at {width}px: {m['wide']}"
    first = "\n".join(m["first"])
    failing, outlier = ("node002", "node003") if name == "small" else ("узел-064", "node041")
    assert failing in first and "met: FALSE" in first, first[:2000]
    assert outlier in first and "OUTLIER" in first, first[:2000]
    plots = {p["id"]: p for p in m["plots"]}
    expected = {"plot-loss-maxtext", "plot-steptime-maxtext", "plot-maxtext-tflops_per_device", "plot-rvs-gpus"}
    if name == "big":
        expected.add("plot-heatmap")
    assert expected <= set(plots), sorted(plots)
    for p in plots.values():
        assert p["marks"] > 3 and 0 < p["width"] <= width, p
    if width >= 1000:  # compact rows on a desktop
        assert max(m["rowHeights"]) <= 90, m["rowHeights"]
    shot = screenshot(page, width, height, OUTPUT / f"synthetic-{name}-{width}x{height}.png", tmp_path)
    assert shot.stat().st_size > 10_000
