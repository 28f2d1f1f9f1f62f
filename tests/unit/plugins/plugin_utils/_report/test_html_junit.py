"""Unit tests: junit.xml and report.html rendering (plugin_utils/_report/junit.py, html.py, view.py, plots.py,
format.py)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema

from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics import fleet as _fleet
from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt
from ansible_collections.cvs.cluster.plugins.plugin_utils._report import status as _status
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.html import to_html
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.junit import to_junit
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.record import aggregate
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.view import one_line, tone, wall_time
from ansible_collections.cvs.cluster.tests.support.report_synth import synth_found

XSD = Path(__file__).resolve().parents[3] / "fixtures" / "junit-10.xsd"
CHECKS = ["rvs", "maxtext"]
RAW_NUMBERS = re.compile(r"\d\.\d{6,}|\d:\d\d:\d\d\.\d+|\bTrue\b|\bFalse\b|\[\]")


def _record(n: int = 3, options: Any = None, **kw: Any) -> dict[str, Any]:
    found = synth_found(n, **kw)
    rec = aggregate("run1", CHECKS, {}, found)
    _fleet.annotate(rec, found, options)
    rec["plots"] = {"series": {}, "rvs_gpus": _fleet.rvs_gpus(found)}
    return rec


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


# --------------------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    ("value", "metric", "text"),
    [
        (150.28820000000002, "tflops_per_device", "150.3 TFLOP/s"),
        (8672.758, "tokens_per_device", "8673 tokens/s"),
        ("0:00:00.029455", None, "0.029 s"),
        ("0:03:04.5", None, "3 min 04 s"),
        (0.0505, "step_time_p95", "0.051 s"),
        (True, None, "yes"),
        ([], None, "\u2014"),
        (None, None, "\u2014"),
        (float("nan"), "loss", "NaN"),
        (float("inf"), "tflops", "+inf"),
        (1063560.0, "gst GFLOPS", "1,063,560 GFLOP/s"),
        (23, "memory_gib", "23 GiB"),
        (1.2882000000000002, "final_loss", "1.288"),
    ],
)
def test_values_are_formatted_with_units(value: Any, metric: Any, text: str) -> None:
    assert fmt.value(value, metric) == text


def test_durations_and_percent() -> None:
    assert fmt.duration(3725) == "1 h 02 min" and fmt.duration(12.44) == "12.4 s" and fmt.duration(None) == ""
    assert fmt.percent(-0.15) == "-15.0%" and fmt.percent(0.021) == "+2.1%"


# --------------------------------------------------------------------------- JUnit


def test_junit_validates_against_junit10(schema: xmlschema.XMLSchema) -> None:
    text = to_junit(_record(3, fail_rvs={1: 2}, slow={2: 1.15}))
    schema.validate(text)
    root = ET.fromstring(text)
    assert root.get("skipped") is None
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("6", "1", "0")


def test_the_schema_rejects_skipped_on_testsuites(schema: xmlschema.XMLSchema) -> None:
    bad = (
        '<testsuites tests="1" skipped="0"><testsuite name="x" tests="1"><testcase name="n"/></testsuite></testsuites>'
    )
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        schema.validate(bad)
    wrong_order = (
        '<testsuites><testsuite name="x" tests="1"><testcase name="n"><system-out/><failure/></testcase>'
        "</testsuite></testsuites>"
    )
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        schema.validate(wrong_order)


def test_junit_suite_time_is_wall_time_not_a_sum() -> None:
    rec = _record(4)  # every node: rvs 10:00:00-10:00:30, maxtext 10:01:00-10:01:30, in parallel
    root = ET.fromstring(to_junit(rec))
    assert root.find("./testsuite[@name='rvs']").get("time") == "30.000"
    assert root.find("./testsuite[@name='maxtext']").get("time") == "30.000"
    assert root.get("time") == "90.000"  # first start to last finish
    assert wall_time([]) is None


def test_junit_system_out_has_formatted_values() -> None:
    root = ET.fromstring(to_junit(_record(3)))
    out = root.find("./testsuite[@name='maxtext']/testcase[@name='node001']/system-out").text or ""
    assert "tflops_per_device = 150 TFLOP/s [PASS] (min 100 TFLOP/s)" in out
    # what was only recorded is one line; units as declared (the step time in s, not guessed from the name)
    recorded = next(line for line in out.splitlines() if line.startswith("recorded: "))
    assert "final_loss 1.288;" in recorded and "step_time_p95 0.051 s;" in recorded and "duration: 30 s" in out
    assert "[RECORD]" not in out
    assert not RAW_NUMBERS.search(out), out


def test_junit_outliers_and_unknown_statuses(schema: xmlschema.XMLSchema) -> None:
    rec = _record(3, slow={2: 1.15})
    root = ET.fromstring(to_junit(rec))
    case = root.find("./testsuite[@name='maxtext']/testcase[@name='node003']")
    assert case.find("failure") is None  # reported, not failing by default
    assert "fleet: OUTLIER - tflops_per_device" in case.find("system-out").text
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["fleet.status"] == "OUTLIER" and "node003" in "".join(props)
    failing = _record(3, {"fail_on_outlier": True}, slow={2: 1.15})
    root = ET.fromstring(to_junit(failing))
    assert root.find("./testsuite[@name='maxtext']/testcase[@name='node003']/failure").get("type") == "OUTLIER"
    # a status this renderer does not know (another part may add one) is an error, never a pass
    rec = _record(2)
    rec["nodes"]["node002"]["checks"]["rvs"].update(status="UNREACHABLE", reason="ssh: no route to host")
    text = to_junit(rec)
    schema.validate(text)
    err = ET.fromstring(text).find("./testsuite[@name='rvs']/testcase[@name='node002']/error")
    assert err is not None and err.get("type") == "UNREACHABLE"


# --------------------------------------------------------------------------- HTML


def test_summary_first_names_failing_node_with_the_offending_line() -> None:
    page = to_html(_record(3, fail_rvs={1: 2}, slow={2: 1.15}))
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    summary = page[page.index('<header id="summary"') : page.index("</header>")]
    assert page.index('<header id="summary"') < page.index('id="results"')
    assert "1 of 3 node(s) failing: node002" in summary and "1 outlier(s): node003" in summary
    li = re.search(r'<li data-node="node002" data-status="FAIL">(.*?)</li>', summary).group(1)
    assert "met: FALSE" in li and "xxxxxxxx" not in li  # the offending line, not the long reason
    assert '<li data-node="node003" data-status="OUTLIER">' in summary and "below the fleet median" in summary
    for label in ("backend", "RVS", "duration", "nodes", "checks"):
        assert f"<dt>{label}</dt>" in summary
    assert "<dd>1 min 30 s</dd>" in summary and "<dd>baremetal</dd>" in summary


def test_rows_failing_first_then_outliers_compact_and_filterable() -> None:
    page = to_html(_record(5, fail_rvs={3: 0}, slow={1: 1.2}))
    rows = re.findall(r'<tr class="node" data-node="([^"]+)" data-tone="(\w+)"', page)
    assert rows == [("node004", "bad"), ("node002", "warn"), ("node001", "ok"), ("node003", "ok"), ("node005", "ok")]
    assert '<input id="filter" type="search"' in page and 'id="only-problems"' in page
    assert re.search(r"<details class=\"lines\"><summary>1 log line\(s\)</summary><pre>", page)


def test_no_raw_numbers_in_the_page() -> None:
    page = to_html(_record(3, fail_rvs={1: 2}))
    text = re.sub(r"<(script|style)>.*?</\1>", "", page, flags=re.S)
    text = re.sub(r"<svg.*?</svg>", "", text, flags=re.S)
    visible = re.sub(r"<[^>]+>", " ", text)
    hits = [
        m.group(0)
        for m in RAW_NUMBERS.finditer(visible)
        if "[RESULT]" not in visible[max(0, m.start() - 80) : m.start()]
    ]
    assert hits == [], hits


def test_plots_present_inline_svg() -> None:
    found = synth_found(3, slow={2: 1.15}, fail_rvs={1: 2})
    rec = aggregate("run1", CHECKS, {}, found)
    _fleet.annotate(rec, found)
    steps = [{"step": s, "loss": 10 - s * 0.3, "seconds": 0.05} for s in range(20)]
    rec["plots"] = {
        "series": {n: {"maxtext": _fleet.series_from_steps(steps)} for n in rec["nodes"]},
        "rvs_gpus": _fleet.rvs_gpus(found),
    }
    page = to_html(rec)
    for fid in ("plot-loss-maxtext", "plot-steptime-maxtext", "plot-maxtext-tflops_per_device", "plot-rvs-gpus"):
        assert f'<figure class="plot" id="{fid}">' in page, fid
    assert page.count("<polyline") >= 3 and 'class="gpu bad"' in page
    assert "http" not in page.replace("http-equiv", "")  # no external assets, no xmlns needed inline
    assert 'id="plot-heatmap"' not in page  # small fleet: the table says it all


def test_large_fleet_gets_heatmap_and_aggregated_loss() -> None:
    found = synth_found(40, slow={7: 1.2})
    rec = aggregate("big", CHECKS, {}, found)
    _fleet.annotate(rec, found)
    steps = [{"step": s, "loss": 10 - s * 0.3, "seconds": 0.05} for s in range(20)]
    rec["plots"] = {"series": {n: {"maxtext": _fleet.series_from_steps(steps)} for n in rec["nodes"]}, "rvs_gpus": {}}
    page = to_html(rec)
    assert 'id="plot-heatmap"' in page and 'class="band"' in page
    loss = page[page.index('id="plot-loss-maxtext"') :]
    loss = loss[: loss.index("</figure>")]
    assert loss.count("<polyline") == 2  # median + the outlier, not 40 lines


def test_statuses_rendered_generically(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _record(3)
    rec["nodes"]["node002"]["checks"]["rvs"].update(status="UNREACHABLE", reason="ssh: no route to host")
    rec["nodes"]["node003"]["checks"]["rvs"].update(status="WEIRD", reason="?")
    assert tone("UNREACHABLE") == "bad"  # a node never reached is a failure, styled as one
    assert tone("WEIRD") == "other"
    page = to_html(rec)
    assert 'data-status="UNREACHABLE" data-tone="bad"' in page and ">UNREACHABLE</span>" in page
    assert 'data-status="WEIRD" data-tone="other"' in page and ">WEIRD</span>" in page
    monkeypatch.setattr(_status, "BAD", (*_status.BAD, "WEIRD"))
    assert tone("WEIRD") == "bad"
    page = to_html(rec)
    assert 'data-status="WEIRD" data-tone="bad"' in page
    rows = re.findall(r'<tr class="node" data-node="([^"]+)"', page)
    assert set(rows[:2]) == {"node002", "node003"}  # the failing nodes come first


def test_bad_input_renders_and_says_what_it_could_not_compare() -> None:
    single = _record(1)
    page = to_html(single)
    assert "single node" in page and "all 1 node(s) passed every check" in page
    names = ["nœud-1", "узел-2", "節点3"]
    found = synth_found(3, names=names)
    row = next(m for m in found["узел-2"]["maxtext"]["metrics"] if m["metric"] == "tflops_per_device")
    row["value"] = float("nan")  # JSON cannot hold it: the record's row says null, the fleet "no value"
    del found["節点3"]["maxtext"]
    rec = aggregate("ü", CHECKS, {}, found)
    _fleet.annotate(rec, found)
    page = to_html(rec)
    assert "узел-2" in page and "節点3" in page and "not compared" in page
    assert "maxtext tflops_per_device: no value on узел-2" in page
    assert 'data-status="MISSING"' in page
    empty = aggregate("e", CHECKS, {}, {})
    _fleet.annotate(empty, {})
    assert "all 0 node(s)" in to_html(empty) and to_junit(empty).startswith("<?xml")


def test_one_line_prefers_the_offending_line() -> None:
    assert one_line({"lines": ["", "  GPU 2: met: FALSE  "], "reason": "long"}) == "GPU 2: met: FALSE"
    assert one_line({"lines": [], "reason": "a - " + "b" * 300}) == "a"
    assert len(one_line({"lines": ["x" * 500]})) == 160
