"""Fleet comparison on the simulated cluster: a node whose training is 15% slower is flagged OUTLIER, one that is
2% slower is not.

The stand-in trainer's ``slow_factor`` fault (tests/cluster/image/stand-ins/.../MaxText/train.py: multiplies the
step time and divides TFLOP/s and tokens/s) is written per node by tests/integration/playbooks/maxtext_faults.yml
into a fault directory of this test's own; the real role trains, copies the logs, writes the check files, and the
real cvs.cluster.report action (with ``cvs_fleet: {fail_on_outlier: true}``) writes results.json, junit.xml and
report.html from them.
"""

from __future__ import annotations

import json
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable

import xmlschema

REPO = Path(__file__).resolve().parents[2]
FAULTS = REPO / "tests" / "integration" / "playbooks" / "maxtext_faults.yml"
XSD = REPO / "tests" / "unit" / "fixtures" / "junit-10.xsd"
NODES = ["node1", "node2", "node3"]


def test_15_percent_slower_node_is_outlier_2_percent_is_not(
    run_playbook: Callable[..., Any], cluster: Any, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    fault_dir = f"/tmp/cvs-fleet-test-{uuid.uuid4().hex[:8]}"
    playbook = f"""
- import_playbook: {FAULTS}

- name: Write the run report with the fleet comparison
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Report
      cvs.cluster.report:
        results_dir: "{{{{ cvs_results_dir }}}}"
        run_id: "{{{{ hostvars[groups['cvs_exec'][0]].cvs_run_id }}}}"
        checks: [maxtext]
      register: cvs_report

    - name: Save the action's summary
      ansible.builtin.copy:
        content: "{{{{ cvs_report.summary | to_json }}}}"
        dest: "{tmp_path}/summary.json"
        mode: "0644"
"""
    extravars = {
        "cvs_results_dir": str(results),
        "maxtext_steps": 12,
        "maxtext_poll_interval": 0.5,
        "maxtext_stall_timeout": 30,
        "maxtext_stop_grace": 5,
        "maxtext_timeout": 300,
        "maxtext_coordinator_port": 12397,
        "maxtext_env": {"CVS_STAND_IN_DIR": fault_dir, "TZ": "UTC"},
        "maxtext_test_fault_dir": fault_dir,
        "maxtext_test_defaults": {"step_seconds": 0.05, "compile_seconds": 0.1},
        "maxtext_test_faults": {"node2": {"slow_factor": 1.15}, "node3": {"slow_factor": 1.02}},
        "cvs_fleet": {"fail_on_outlier": True, "tolerance": "5%"},
    }
    proc = run_playbook(playbook, "baremetal", extravars, check=False)
    out = proc.stdout + proc.stderr
    (tmp_path / "output.txt").write_text(out)
    assert proc.returncode == 0, out[-5000:]
    (run_dir,) = [p for p in results.iterdir() if (p / "results.json").is_file()]
    data = json.loads((run_dir / "results.json").read_text())
    fleet = data["fleet"]
    assert fleet["outlier_nodes"] == ["node2"], json.dumps(fleet["outliers"], indent=1)
    tflops = next(r for r in fleet["metrics"] if r["metric"] == "tflops_per_device")
    dev = {n: c["deviation"] for n, c in tflops["nodes"].items()}
    # the median of three is the middle node (node3, 2% slower): node2 is 1.02/1.15 - 1 = -11% from it, node1 +2%
    assert -0.14 < dev["node2"] < -0.09 and abs(dev["node3"]) < 0.01 and 0 < dev["node1"] < 0.04, dev
    assert tflops["nodes"]["node2"]["status"] == "OUTLIER" and tflops["nodes"]["node3"]["status"] == "OK"
    statuses = {n: data["nodes"][n]["checks"]["maxtext"]["status"] for n in NODES}
    assert statuses == {"node1": "PASS", "node2": "OUTLIER", "node3": "PASS"}
    assert data["summary"]["status"] == "FAIL" and data["summary"]["failing_nodes"] == ["node2"]
    assert data["plots"]["series"]["node2"]["maxtext"]["step"][-1] == 11  # loss curve read from the log copy
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["outlier_nodes"] == ["node2"] and summary["fleet_status"] == "OUTLIER"
    junit = (run_dir / "junit.xml").read_text()
    xmlschema.XMLSchema(str(XSD)).validate(junit)
    failure = ET.fromstring(junit).find("./testsuite[@name='maxtext']/testcase[@name='node2']/failure")
    assert failure is not None and failure.get("type") == "OUTLIER"
    page = (run_dir / "report.html").read_text()
    assert '<li data-node="node2" data-status="OUTLIER">' in page and "below the fleet median" in page
