"""The preflight verdict (plugin_utils/_preflight.py): probes read into facts, uniformity, expectations."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.filter.preflight import preflight_verdicts
from ansible_collections.cvs.cluster.plugins.plugin_utils._amd_smi import gpu_items
from ansible_collections.cvs.cluster.plugins.plugin_utils._preflight import (
    PreflightError,
    clock_skew,
    judge,
    node_facts,
    uniformity_problems,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA, validate


def _gpu(index: int, model: str = "AMD Instinct MI300X", driver: str = "6.12.12") -> dict[str, Any]:
    return {
        "gpu": index,
        "asic": {"market_name": model},
        "driver": {"name": "amdgpu", "version": driver},
        "vbios": {"version": "022.040.003.043.000001"},
    }


def probe(gpus: int = 8, rvs: str = "1.3.0", rocm: str = "6.4.1", kernel: str = "6.1.0-28-amd64", **over: Any) -> dict:
    out: dict[str, Any] = {
        "time": 1000.5,
        "hostname": "n",
        "kernel": kernel,
        "commands": {
            "amd_smi_version": {
                "rc": 0,
                "stdout": f"AMDSMI Tool: 24.7.1+0012a68 | AMDSMI Library version: 24.7.1.0 | ROCm version: {rocm}\n",
                "stderr": "",
                "problem": None,
            },
            "amd_smi_static": {
                "rc": 0,
                "stdout": json.dumps([_gpu(i) for i in range(gpus)]),
                "stderr": "",
                "problem": None,
            },
            "rvs_version": {"rc": 0, "stdout": f"{rvs}\n", "stderr": "", "problem": None},
        },
        "binaries": {"python3": "/usr/bin/python3"},
        "disk": [{"path": "/scratch", "probed": "/scratch", "free_mb": 50_000, "total_mb": 90_000, "problem": None}],
        "kernel_log": {"readable": True, "problem": None, "matches": [], "matched": 0, "lines": 900},
        "rdma": [],
    }
    out.update(over)
    return out


def entry(p: dict, sent: float = 1000.0, returned: float = 1001.0) -> dict:
    return {"probe": p, "sent": sent, "returned": returned}


EXPECT = {"gpu_count": 8, "max_clock_skew": 5, "min_free_mb": 1024}


def test_three_healthy_nodes_pass_with_their_facts_and_metrics_fitting_the_check_record() -> None:
    verdicts = judge({n: entry(probe()) for n in ("n1", "n2", "n3")}, EXPECT)
    assert {v["status"] for v in verdicts.values()} == {"PASS"}
    facts = verdicts["n2"]["facts"]
    assert facts["gpus"] == 8 and facts["gpu_model"] == "AMD Instinct MI300X" and facts["rocm_version"] == "6.4.1"
    assert facts["rvs_version"] == "1.3.0" and facts["driver_version"] == "6.12.12"
    metrics = {m["metric"]: m for m in verdicts["n1"]["metrics"]}
    assert metrics["gpus"]["status"] == "PASS" and metrics["clock_skew"]["value"] == 0.0
    assert metrics["free_mb /scratch"]["value"] == 50_000
    rec = {"schema": SCHEMA, "check": "preflight", "node": "n1", **verdicts["n1"]}
    assert validate(rec)["metrics"][0]["threshold"] == {"equals": 8}


def test_the_odd_node_is_named_with_its_value_and_the_majority_value() -> None:
    probes = {"n1": entry(probe()), "n2": entry(probe(rvs="1.1.0")), "n3": entry(probe())}
    verdicts = judge(probes, {})
    assert verdicts["n1"]["status"] == "PASS" and verdicts["n3"]["status"] == "PASS"
    assert verdicts["n2"]["status"] == "FAIL"
    assert verdicts["n2"]["reason"] == "n2: rvs_version is 1.1.0, not 1.3.0 as on n1, n3"


def test_without_a_majority_every_node_is_named_with_its_value() -> None:
    problems = uniformity_problems({"a": {"kernel": "6.1"}, "b": {"kernel": "6.8"}}, ["kernel"])
    assert problems["a"] == problems["b"] == ["kernel differs across nodes with no majority (a: 6.1; b: 6.8)"]


def test_a_node_with_fewer_gpus_fails_against_the_inventory_and_against_the_others() -> None:
    verdicts = judge({"n1": entry(probe()), "n2": entry(probe(gpus=7)), "n3": entry(probe())}, EXPECT)
    problems = verdicts["n2"]["problems"]
    assert "7 GPU(s) found, the inventory expects 8" in problems
    assert "gpus is 7, not 8 as on n1, n3" in problems
    assert [m["status"] for m in verdicts["n2"]["metrics"] if m["metric"] == "gpus"] == ["FAIL"]
    # without an expected count the difference alone still fails the node
    assert judge({"n1": entry(probe()), "n2": entry(probe(gpus=7)), "n3": entry(probe())}, {})["n2"]["status"] == "FAIL"


def test_too_little_space_a_missing_binary_a_kernel_error_and_a_down_rdma_port_are_each_named() -> None:
    p = probe(
        disk=[{"path": "/scratch", "probed": "/", "free_mb": 3, "total_mb": 10, "problem": None}],
        binaries={"mpirun": None, "python3": "/usr/bin/python3"},
        kernel_log={
            "readable": True,
            "problem": None,
            "matches": [{"name": "ras", "line": f"amdgpu: RAS uncorrectable error {i}"} for i in range(4)],
            "matched": 5,
            "lines": 10,
        },
        rdma=[{"device": "mlx5_0", "port": "1", "state": "DOWN", "phys_state": "Disabled"}],
    )
    v = judge({"n1": entry(p)}, EXPECT)["n1"]
    assert v["status"] == "FAIL"
    assert v["problems"] == [
        "3 MiB free under /scratch (/), needs 1024 MiB",
        "required binaries not found: mpirun",
        "kernel log (ras): amdgpu: RAS uncorrectable error 0",
        "kernel log (ras): amdgpu: RAS uncorrectable error 1",
        "kernel log (ras): amdgpu: RAS uncorrectable error 2",
        "2 more kernel-log error line(s)",
        "RDMA port mlx5_0/1 is DOWN (Disabled)",
    ]


def test_an_unreadable_kernel_log_is_a_note_unless_required() -> None:
    log = {"readable": False, "problem": "/dev/kmsg: no kernel log in this namespace", "matches": [], "matched": 0}
    relaxed = judge({"n1": entry(probe(kernel_log=log))}, {})["n1"]
    assert relaxed["status"] == "PASS" and relaxed["notes"] == [
        "kernel log not checked: /dev/kmsg: no kernel log in this namespace"
    ]
    strict = judge({"n1": entry(probe(kernel_log=log))}, {"require_kernel_log": True})["n1"]
    assert strict["status"] == "FAIL"


@pytest.mark.parametrize(
    ("node_time", "skew"),
    [(1000.5, 0.0), (990.0, -10.0), (1011.0, 10.0), ("x", None)],
)
def test_clock_skew_is_the_distance_outside_the_controllers_window(node_time: Any, skew: Any) -> None:
    assert clock_skew(node_time, 1000.0, 1001.0) == skew


def test_a_clock_off_by_more_than_the_limit_fails() -> None:
    v = judge({"n1": entry(probe(time=1020.0))}, EXPECT)["n1"]
    assert v["problems"] == ["clock is +19.0 s off the controller's (limit 5 s)"]


def test_a_tool_that_did_not_answer_is_a_problem_and_its_facts_stay_unknown() -> None:
    p = probe()
    p["commands"]["amd_smi_static"] = {"rc": None, "stdout": "", "stderr": "", "problem": "amd-smi not found"}
    facts, problems = node_facts(p)
    assert "gpus" not in facts and problems == ["the GPU list (amd-smi static) could not be read (amd-smi not found)"]
    v = judge({"n1": entry(p)}, EXPECT)["n1"]
    assert "the GPU count could not be read (the inventory expects 8)" in v["problems"]


def test_a_node_whose_probe_failed_or_was_unreachable_is_an_error_never_a_pass() -> None:
    verdicts = judge(
        {
            "n1": entry(probe()),
            "n2": entry({"unreachable": True, "msg": "Failed to connect to the host via ssh: refused"}),
            "n3": {"probe": {"failed": True, "msg": "node_probe: invalid regular expression"}},
        },
        {},
    )
    assert verdicts["n2"]["status"] == "ERROR" and "ssh: refused" in verdicts["n2"]["reason"]
    assert verdicts["n3"]["status"] == "ERROR" and verdicts["n1"]["status"] == "PASS"


@pytest.mark.parametrize(
    ("expect", "message"),
    [
        ({"gpu_cout": 8}, "unknown expectation(s) gpu_cout; known: gpu_count,"),
        ({"gpu_count": "eight"}, "gpu_count must be a whole number, got 'eight'"),
        ({"max_clock_skew": "soon"}, "max_clock_skew must be a number of seconds"),
        ({"uniform": ["kernel", "bios"]}, "uniform: unknown fact(s) bios"),
        ({"uniform": "kernel"}, "uniform must be a list of facts"),
        ({"min_free_mb": -1}, "min_free_mb must not be negative"),
    ],
)
def test_bad_expectations_are_named(expect: dict, message: str) -> None:
    with pytest.raises(PreflightError, match=None) as err:
        judge({}, expect)
    assert message in str(err.value)


def test_uniform_narrows_what_must_match() -> None:
    probes = {"n1": entry(probe()), "n2": entry(probe(kernel="6.8.0")), "n3": entry(probe())}
    assert judge(copy.deepcopy(probes), {"uniform": ["rocm_version"]})["n2"]["status"] == "PASS"
    assert judge(probes, {})["n2"]["status"] == "FAIL"


@pytest.mark.parametrize(
    "text",
    [
        json.dumps([_gpu(0), _gpu(1)]),
        json.dumps({"gpu_data": [_gpu(0), _gpu(1)]}),
        "WARNING: something\n" + json.dumps([_gpu(0), _gpu(1)]),
    ],
)
def test_amd_smi_static_shapes(text: str) -> None:
    items = gpu_items(text)
    assert items is not None and len(items) == 2


def test_gpus_with_different_models_show_both() -> None:
    p = probe()
    p["commands"]["amd_smi_static"]["stdout"] = json.dumps([_gpu(0), _gpu(1, model="AMD Instinct MI325X")])
    facts, _ = node_facts(p)
    assert facts["gpu_model"] == "AMD Instinct MI300X / AMD Instinct MI325X"


def test_the_gpus_market_name_must_contain_the_expected_text() -> None:
    probes = {"n1": entry(probe()), "n2": entry(probe())}
    assert judge(probes, {"gpu_market_name": "mi300x"})["n1"]["status"] == "PASS"
    v = judge(probes, {"gpu_market_name": "MI355X"})["n1"]
    assert v["problems"] == ["GPU model is AMD Instinct MI300X, the inventory expects MI355X"]
    with pytest.raises(PreflightError, match=r"unknown expectation\(s\) gpu_model; known: gpu_count, gpu_market_name"):
        judge(probes, {"gpu_model": "MI300X"})


def test_the_record_lines_are_the_problems_then_the_notes() -> None:
    log = {"readable": False, "problem": "/dev/kmsg: no kernel log in this namespace", "matches": [], "matched": 0}
    v = judge({"n1": entry(probe(kernel_log=log, binaries={"mpirun": None}))}, {})["n1"]
    assert v["lines"] == [
        "required binaries not found: mpirun",
        "note: kernel log not checked: /dev/kmsg: no kernel log in this namespace",
    ]
    down = judge({"n1": entry({"unreachable": True, "msg": "ssh: refused"})}, {})["n1"]
    assert (
        down["lines"] == ["ssh: refused"] and down["reason"] == "n1: preflight could not probe the node: ssh: refused"
    )


def test_the_verdicts_filter_judges_the_hosts_that_were_probed_by_node() -> None:
    hosts = [
        {"inventory_hostname": "h1", "cvs_node": "n1", "_preflight_probe": probe()},
        {"inventory_hostname": "h2", "cvs_node": "n2", "_preflight_probe": probe(time=2000.0)},
        {"inventory_hostname": "h3", "cvs_node": "n3"},
    ]
    verdicts = preflight_verdicts(hosts, {"max_clock_skew": 5}, 1000.0, 1001.0, "2026-12-07T00:00:00Z")
    assert sorted(verdicts) == ["n1", "n2"] and verdicts["n1"]["status"] == "PASS"
    assert verdicts["n2"]["problems"] == ["clock is +999.0 s off the controller's (limit 5 s)"]
    assert verdicts["n1"]["started"] == "2026-12-07T00:00:00Z"


def test_an_amd_smi_version_or_rvs_version_that_cannot_be_read_is_named() -> None:
    p = probe()
    p["commands"]["rvs_version"] = {"rc": 127, "stdout": "", "stderr": "rvs: error while loading shared libraries\n"}
    p["commands"]["amd_smi_static"]["stdout"] = "amd-smi: no GPU found"
    facts, problems = node_facts(p)
    assert problems == [
        "the GPU list (amd-smi static) is not the JSON amd-smi prints",
        "the RVS version could not be read (exit 127: rvs: error while loading shared libraries)",
    ]
    assert "rvs_version" not in facts and "gpus" not in facts
