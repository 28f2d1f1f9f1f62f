"""Unit tests for plugin_utils/_maxtext/verdict.py (the finish phase of the maxtext role: each node's view, the
blame over every node, the check record) and its filters maxtext_node_view, maxtext_run_verdicts and
maxtext_check_record. The reasons are the ones the records and the console show."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.maxtext_role import FilterModule
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import (
    DEFAULT_ERROR_PATTERNS,
    DEFAULT_IGNORE_ERROR_PATTERNS,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.verdict import (
    check_record,
    node_view,
    run_verdicts,
    slurm_steps,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA, validate

FILTERS = FilterModule().filters()
JOIN = "I1207 10:00:00.000000 1 distributed.py:1] Attempting to initialize the jax distributed system"
NAN = (
    "completed step: 5, seconds: 0.050, TFLOP/s/device: 150.000, Tokens/s/device: 4000.000, total_weights: 1, loss: nan"
)
STOPPED = "stopped 3 processes of group 123 (SIGTERM)"


def log(steps: int = 8, tflops: float = 150.0, extra: tuple[str, ...] = ()) -> str:
    lines = [JOIN] + [
        f"completed step: {s}, seconds: 0.050, TFLOP/s/device: {tflops:.3f}, Tokens/s/device: 4000.000, "
        f"total_weights: 1, loss: {10 - s * 0.5:.3f}"
        for s in range(steps)
    ]
    return "\n".join([*lines, *extra])


def ok_poll() -> dict[str, Any]:
    return {"failed": False, "finished": True}


def error_poll(line: str, name: str = "nan_or_inf") -> dict[str, Any]:
    return {
        "failed": True,
        "finished": False,
        "msg": "error",
        "error": {"name": name, "pattern": DEFAULT_ERROR_PATTERNS.get(name, "x"), "line": line, "context": ["a"]},
    }


def aborted_poll(by: str) -> dict[str, Any]:
    return {"failed": True, "finished": False, "aborted_by": by, "msg": f"stopped: {by} failed"}


def facts(node: str, index: int, poll: Optional[dict[str, Any]], text: str = "", **more: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "node": node,
        "host": node,
        "index": index,
        "failure": "",
        "culprit": "",
        "launched": True,
        "files_ready": True,
        "poll": poll,
        "aborted_by_node": (poll or {}).get("aborted_by", ""),
        "stop": {"rc": 0, "stdout": STOPPED, "stdout_lines": ["stopping", STOPPED]},
        "text": text,
        "error_patterns": dict(DEFAULT_ERROR_PATTERNS),
        "ignore_patterns": dict(DEFAULT_IGNORE_ERROR_PATTERNS),
        "nodes": 3,
        "gpus_per_node": 8,
        "baseline": {},
        "warmup_steps": 1,
        "metrics_window": 10,
        "thresholds": {},
        "srun": {},
        "tag": "maxtext-1",
        "slurm_job": None,
        "coordinator": "10.0.0.1",
        "coordinator_port": 12346,
        "found": {"train_script": "/w/MaxText/train.py"},
        "record": {"check": "maxtext", "run": "maxtext-1", "log": "/r/logs/x.log", "steps": 8},
    }
    return {**base, **more}


def judge(*node_facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    views = [FILTERS["maxtext_node_view"](f) for f in node_facts]
    verdicts = FILTERS["maxtext_run_verdicts"](views)
    return {v["node"]: FILTERS["maxtext_check_record"](v, verdicts[v["host"]]) for v in views}


def test_a_healthy_run_passes_with_its_metrics_series_and_run_facts() -> None:
    records = judge(*(facts(f"node{i + 1}", i, ok_poll(), log()) for i in range(3)))
    rec = records["node2"]
    assert rec["status"] == "PASS" and rec["reason"] == "completed 8 steps; no thresholds"
    assert rec["failed_node"] is None and rec["error"] is None and rec["lines"] == []
    assert rec["series"]["step"] == list(range(8)) and rec["series"]["loss"][-1] == 6.5
    assert rec["summary"]["steps"] == 8 and rec["summary"]["tflops_per_sec_per_gpu"] == 150.0
    assert (rec["coordinator"], rec["train_script"], rec["stop"]) == ("10.0.0.1:12346", "/w/MaxText/train.py", STOPPED)
    assert (rec["run"], rec["log"], rec["steps"]) == ("maxtext-1", "/r/logs/x.log", 8)
    assert not {"host", "backend", "finished", "scheduler"} & set(rec)  # check_result fills those
    validate({**rec, "schema": SCHEMA, "node": "node2"})


def test_thresholds_met_and_failed() -> None:
    thresholds = {"tflops_per_device": {"min": 100.0}}
    good = judge(facts("node1", 0, ok_poll(), log(), thresholds=thresholds, nodes=1))["node1"]
    assert good["reason"] == "completed 8 steps; 1 threshold(s) met" and good["coordinator"] is None
    slow = judge(facts("node1", 0, ok_poll(), log(tflops=37.5), thresholds=thresholds, nodes=1))["node1"]
    assert slow["status"] == "FAIL" and slow["failed_node"] == "node1"
    assert slow["reason"] == "metric check failed: tflops_per_device 37.5 TFLOP/s < min 100.0 TFLOP/s"
    assert slow["lines"] == []  # the log's tail is kept for a failure of the run, not of a threshold


def test_an_error_line_fails_its_node_and_names_it_on_the_others() -> None:
    text = log(5, extra=(NAN,))
    records = judge(
        facts("node1", 0, aborted_poll("node2"), log(6)),
        facts("node2", 1, error_poll(NAN), text),
        facts("node3", 2, aborted_poll("node2"), log(6)),
    )
    own = f"error pattern 'nan_or_inf' matched on node2: {NAN}"
    bad = records["node2"]
    assert bad["status"] == "FAIL" and bad["reason"] == own and bad["failed_node"] == "node2"
    assert bad["error"] == {"name": "nan_or_inf", "pattern": DEFAULT_ERROR_PATTERNS["nan_or_inf"], "line": NAN}
    assert bad["lines"] == [NAN] and bad["context"] == ["a"]
    for node in ("node1", "node3"):
        assert records[node]["reason"] == f"run stopped because node2 failed: {own}"
        assert records[node]["failed_node"] == "node2" and records[node]["lines"] == []


def test_a_stalled_node_keeps_its_last_line() -> None:
    poll = {"failed": True, "stalled": True, "last_line": "completed step: 3", "msg": "stalled: no new log output"}
    records = judge(facts("node1", 0, aborted_poll("node3"), log(4)), facts("node3", 2, poll, log(4)))
    hung = records["node3"]
    assert hung["reason"] == "node3: stalled: no new log output" and hung["lines"] == ["completed step: 3"]
    assert hung["error"] is None
    assert records["node1"]["reason"] == "run stopped because node3 failed: node3: stalled: no new log output"


def test_a_rank_killed_without_a_word_is_blamed_over_the_echoes_of_the_others() -> None:
    echo = "Gloo connectFullMesh failed: Connection reset by peer"
    killed = {"rc": 0, "stdout": "the process had ended with status 137\nstopped", "stdout_lines": ["stopped"]}
    records = judge(
        facts("node1", 0, error_poll(echo, "collective_peer_lost"), log(4, extra=(echo,))),
        facts("node2", 1, aborted_poll("node1"), log(3), stop=killed),
        facts("node3", 2, aborted_poll("node1"), log(4)),
    )
    reason = (
        "node2: the MaxText process ended with status 137 (killed by SIGKILL) before the run finished, "
        "with no error line of its own"
    )
    assert records["node2"]["reason"] == reason and records["node2"]["failed_node"] == "node2"
    assert records["node2"]["lines"] == log(3).splitlines()[-10:]  # the culprit keeps its log's tail
    for node in ("node1", "node3"):
        assert records[node]["reason"] == f"run stopped because node2 failed: {reason}"
        assert records[node]["failed_node"] == "node2"


def test_a_rank_that_never_joined_is_named() -> None:
    echo = "DEADLINE_EXCEEDED: Barrier timed out. RegisterTask"
    records = judge(
        facts("node1", 0, error_poll(echo, "jax_coordination"), f"{JOIN}\n{echo}"),
        facts("node2", 1, aborted_poll("node1"), JOIN),
        facts("node3", 2, aborted_poll("node1"), "starting"),
    )
    assert {r["failed_node"] for r in records.values()} == {"node3"}
    assert records["node3"]["reason"].startswith("node3 never joined the run: no line of it says")


def test_a_run_that_could_not_be_stopped_says_so_after_the_failure() -> None:
    stuck = {"rc": 1, "stdout": "", "stderr": " kill: permission denied \n", "stdout_lines": []}
    records = judge(facts("node1", 0, ok_poll(), log(), stop=stuck, nodes=1))
    rec = records["node1"]
    assert rec["status"] == "FAIL" and rec["failed_node"] == "node1" and rec["stop"] is None
    assert rec["reason"] == "node1: could not stop the run: kill: permission denied"
    unreachable = {"unreachable": True, "msg": "ssh: connect refused"}
    rec = judge(facts("node1", 0, error_poll(NAN), log(), stop=unreachable, nodes=1))["node1"]
    assert rec["reason"] == (
        f"error pattern 'nan_or_inf' matched on node1: {NAN}; node1: could not stop the run: ssh: connect refused"
    )


def test_a_failure_before_the_launch_keeps_its_reason_and_has_no_metrics() -> None:
    failure = "MaxText run not launched on any node: node1: maxtext_train_scripts: no train script"
    rec = judge(
        facts("node1", 0, None, "", failure=failure, culprit="node1", launched=False, files_ready=False, stop={})
    )["node1"]
    assert rec["status"] == "FAIL" and rec["reason"] == failure and rec["failed_node"] == "node1"
    assert rec["series"] is None and rec["stop"] is None and rec["lines"] == [] and rec["summary"]["steps"] == 0


def test_the_slurm_step_from_what_the_head_read() -> None:
    job = {"id": "42", "name": "cvs", "nodes": ["n1", "n2"]}
    out = "exit=137\nstep=42.0\nstopped=\nsrun: error: n2: task 1: Exited with exit code 137\nother"
    assert slurm_steps({"stdout": out}, "maxtext-1", job) == [
        {
            "id": "42.0",
            "name": "cvs-maxtext-1",
            "state": "FAILED",
            "exit_code": 137,
            "nodes": ["n1", "n2"],
            "srun": ["srun: error: n2: task 1: Exited with exit code 137"],
        }
    ]
    stopped = slurm_steps({"stdout": "exit=143\nstep=42.0\nstopped=yes\n"}, "t", job)[0]
    assert stopped["state"] == "CANCELLED" and stopped["exit_code"] == 143
    assert slurm_steps({}, "t", job) == [] and slurm_steps({"stdout": out}, "t", None) == []
    view = node_view(facts("node1", 0, ok_poll(), log(), srun={"stdout": "exit=0\nstep=42.0\n"}, slurm_job=job))
    assert view["steps"][0]["state"] == "COMPLETED"


def test_without_a_verdict_the_view_speaks_for_itself() -> None:
    view = node_view(facts("node1", 0, error_poll(NAN), log()))
    assert check_record(view, None)["reason"] == f"error pattern 'nan_or_inf' matched on node1: {NAN}"
    assert run_verdicts([view])["node1"] == {"failure": view["failure"], "culprit": "node1"}


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("maxtext_node_view", ("x",), "maxtext_node_view expects a mapping of what the role gathered"),
        ("maxtext_node_view", ({"node": "n"},), "maxtext_node_view: 'nodes' is missing"),
        ("maxtext_run_verdicts", ({"host": "h"},), "maxtext_run_verdicts expects the list"),
        ("maxtext_check_record", ([],), "maxtext_check_record expects the node's maxtext_node_view"),
        ("maxtext_check_record", ({}, "x"), "maxtext_check_record expects the node's entry of maxtext_run_verdicts"),
    ],
)
def test_the_filters_name_a_wrong_input(name: str, args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS[name](*args)
