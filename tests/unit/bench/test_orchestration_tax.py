"""bench/orchestration_tax.py: plays grouped into phases, the workload's own time, the tax against the ping and
parallel-ssh baselines, and its targets (issue 32)."""

from __future__ import annotations

import pytest
from _peer_baseline import Suite
from _results import judge, verdict
from orchestration_tax import TAX_PHASES, phase_of, play_phases, tax_row, tax_targets, workload_own_time


def test_every_play_of_validate_has_its_phase():
    assert phase_of("Check the inventory before anything starts") == "checks"
    assert phase_of("Update the run report after RCCL") == "report"
    assert phase_of("Run the ROCm Validation Suite") == "workload"
    # a check the run did not ask for is not the RVS play's time
    assert phase_of("Train MaxText on every node") == "other_suites"
    assert phase_of("Check every node before the heavy suites (clock, GPUs)") == "other_suites"
    assert phase_of("Something new") == "other"


def test_play_phases_run_from_each_play_start_to_the_next():
    events = [
        {"ev": "play_start", "t": 0.0, "play": "Check the inventory before anything starts"},
        {"ev": "play_start", "t": 1.0, "play": "Run the ROCm Validation Suite"},
        {"ev": "runner_on_ok", "t": 2.0},
        {"ev": "play_start", "t": 5.0, "play": "Train MaxText on every node"},
        {"ev": "play_start", "t": 6.5, "play": "Write the run report"},
        {"ev": "stats", "t": 7.0},
    ]
    phases = play_phases(events)
    assert phases["checks"] == 1.0 and phases["workload"] == 4.0
    assert phases["other_suites"] == 1.5 and phases["report"] == 0.5
    assert phases["prepare"] == 0.0


def test_workload_own_time_is_the_longest_host_sum():
    records = [
        {"tests": [{"duration": "0:00:01.500000"}, {"duration": "0:01:00"}]},
        {"tests": [{"duration": "0:00:30"}, {"duration": None}]},
        {"tests": []},
    ]
    assert workload_own_time(records) == 61.5
    assert workload_own_time([]) == 0.0


def row(hosts: int, tax: float, ping: float, pssh_tax: float) -> dict:
    phases = dict.fromkeys(("checks", "prepare", "facts", "workload", "other_suites", "report", "dispose"), 0.0)
    phases.update(checks=tax / 2, workload=tax / 2 + 1.0, other=0.0)
    suite = Suite(0.2, {"rvs --version": pssh_tax, "run level4": 1.0}, {"probe": pssh_tax, "run": 1.0}, 1.0)
    return tax_row(hosts, 64, ping, tax + 1.0, 1.0, phases, suite)


def test_tax_row_gives_the_total_and_each_phase_against_both_baselines():
    r = row(64, tax=80.0, ping=10.0, pssh_tax=4.0)
    assert r["tax_s"] == 80.0 and r["tax_over_ping"] == 8.0 and r["tax_over_pssh"] == 20.0
    assert r["pssh"]["tax_s"] == 4.0 and r["pssh"]["wall_s"] == 5.0 and r["pssh"]["connect_s"] == 0.2
    assert r["phases_s"]["workload_rest"] == 40.0
    assert r["ratios"]["total"] == {"s": 80.0, "over_ping": 8.0, "over_pssh": 20.0}
    assert r["ratios"]["checks"] == {"s": 40.0, "over_ping": 4.0, "over_pssh": 10.0}
    # the phases add up to the tax
    assert sum(r["ratios"][p]["s"] for p in TAX_PHASES) == pytest.approx(r["tax_s"])


def test_tax_targets_at_64_and_256_hosts():
    judged = judge(tax_targets([row(3, 30.0, 1.0, 1.0)]))
    assert [t["met"] for t in judged["targets"]] == [None, None, None]
    assert verdict(judged) == "target not measured"

    judged = judge(tax_targets([row(3, 30.0, 1.0, 1.0), row(64, 90.0, 10.0, 50.0)]))
    assert [(t["target"], t["met"]) for t in judged["targets"]] == [
        ("tax <= 10x ansible -m ping at 64 hosts", True),
        ("tax <= 10x ansible -m ping at 256 hosts", None),
        ("tax <= 1.5x the parallel-ssh baseline at 256 hosts", None),
    ]

    judged = judge(tax_targets([row(64, 90.0, 10.0, 50.0), row(256, 300.0, 30.0, 100.0)]))
    assert [t["met"] for t in judged["targets"]] == [True, True, False]
    assert [t["measured"] for t in judged["targets"]] == [9.0, 10.0, 3.0]
    assert verdict(judged) == "MISSES target"
