"""Unit tests for plugin_utils/_slurm.py on output of a real Slurm 22.05 (tests/unit/fixtures/slurm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._slurm import (
    STEP_MARKER,
    SlurmSettingsError,
    config_path,
    granted_job,
    inventory_hosts,
    multi_node_step_argv,
    node_step_argv,
    parse_oneliner,
    salloc_argv,
    settings,
    slurm_message,
    split_step_marker,
    step_state,
    time_limit_seconds,
    time_problem,
    unavailable,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "slurm"


def test_parse_oneliner_reads_every_node_with_values_that_hold_spaces_and_equals_signs() -> None:
    nodes = parse_oneliner((FIXTURES / "show-node-3-idle.txt").read_text())
    assert [n["NodeName"] for n in nodes] == ["n1", "n2", "n3"]
    first = nodes[0]
    assert first["NodeAddr"] == "127.0.0.1" and first["State"] == "IDLE" and first["Partitions"] == "debug"
    assert first["CfgTRES"] == "cpu=2,mem=2000M,billing=2"
    assert first["OS"].startswith("Linux ") and " #1 SMP" in first["OS"]
    assert first["AllocTRES"] == ""


def test_a_drained_node_keeps_its_reason_with_spaces() -> None:
    (node,) = parse_oneliner((FIXTURES / "show-node-drained.txt").read_text())
    assert node["State"] == "IDLE+DRAIN"
    assert node["Reason"].startswith("bad fan test [root@")
    assert unavailable(node["State"])


@pytest.mark.parametrize(
    ("state", "down"),
    [
        ("IDLE", False),
        ("ALLOCATED", False),
        ("MIXED", False),
        ("IDLE+DRAIN", True),
        ("ALLOCATED+DRAIN", True),
        ("DOWN*", True),
        ("IDLE*", True),
        ("DOWN+NOT_RESPONDING", True),
        ("IDLE+MAINTENANCE", True),
        ("IDLE+COMPLETING", False),
    ],
)
def test_unavailable_states(state: str, down: bool) -> None:
    assert unavailable(state) is down


def test_inventory_hosts_keep_slurms_order_and_only_the_partitions_nodes() -> None:
    nodes = parse_oneliner((FIXTURES / "show-node-3-idle.txt").read_text())
    nodes[1] = {**nodes[1], "State": "IDLE+DRAIN", "Reason": "bad fan [root@2026-12-07T02:03:30]"}
    nodes.append({"NodeName": "other", "NodeAddr": "10.0.0.9", "State": "IDLE", "Partitions": "gpu"})
    hosts = inventory_hosts(nodes, "debug")
    assert [h["name"] for h in hosts] == ["n1", "n2", "n3"]
    assert hosts[0]["vars"] == {
        "ansible_host": "127.0.0.1",
        "slurm_node": "n1",
        "slurm_state": "IDLE",
        "slurm_available": True,
        "slurm_partitions": ["debug"],
        "slurm_cpus": 2,
    }
    assert hosts[1]["vars"]["slurm_available"] is False
    assert hosts[1]["vars"]["slurm_reason"] == "bad fan [root@2026-12-07T02:03:30]"
    assert inventory_hosts(nodes, "gpu")[0]["vars"]["ansible_host"] == "10.0.0.9"
    assert inventory_hosts(nodes, "none") == []


# --------------------------------------------------------------------------- the Slurm backend's settings


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),
        ("5:30", 330),
        ("1:00:00", 3600),
        ("2-0", 172800),
        ("1-2:03", 93780),
        ("1-00:00:05", 86405),
        ("UNLIMITED", None),
        ("infinite", None),
        (45, 2700),
    ],
)
def test_time_limits_in_every_form_slurm_accepts(text: object, seconds: object) -> None:
    assert time_limit_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "1h", "1:2:3:4", "-5", "1.5", True])
def test_a_time_limit_slurm_would_not_take_is_refused_naming_the_forms(text: object) -> None:
    with pytest.raises(SlurmSettingsError, match=r"^cvs_slurm\.time_limit: .* is not a Slurm time limit \(minutes, "):
        time_limit_seconds(text)


def test_settings_fill_in_the_defaults_and_the_head_as_submit_host() -> None:
    got = settings({"partition": "gpu", "srun_options": ["--exclusive"]}, "node1")
    assert got["partition"] == "gpu" and got["submit_host"] == "node1" and got["time_limit_seconds"] == 3600
    assert got["srun_options"] == ["--exclusive"] and got["salloc_options"] == [] and got["environment"] == "host"
    assert settings(None, "n")["partition"] is None
    assert settings({"submit_host": "login1"}, "node1")["submit_host"] == "login1"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"partiton": "gpu"}, "cvs_slurm.partiton: is not a known key; did you mean 'partition'?"),
        ({"environment": "container"}, "cvs_slurm.environment: 'container' is not supported"),
        ({"srun_options": "--exclusive"}, "cvs_slurm.srun_options: must be a list of options"),
        ({"salloc_options": [1]}, "cvs_slurm.salloc_options: must be a list of options"),
        ({"partition": "gpu; rm -rf /"}, "cvs_slurm.partition: 'gpu; rm -rf /' is not a Slurm name"),
        ({"account": "$(id)"}, "cvs_slurm.account: '$(id)' is not a Slurm name"),
        ({"allocation_wait": 0}, "cvs_slurm.allocation_wait: must be a whole number of seconds >= 1"),
        (["gpu"], "cvs_slurm: must be a mapping of settings, got list"),
    ],
)
def test_bad_settings_name_the_key_at_fault(raw: object, message: str) -> None:
    with pytest.raises(SlurmSettingsError) as caught:
        settings(raw, "node1")
    assert str(caught.value).startswith(message), caught.value


def test_the_time_problem_names_each_check_and_the_sum() -> None:
    config = settings({"time_limit": "10"}, "n")
    assert time_problem(config, {"rvs": 300, "maxtext": 300}) == ""
    problem = time_problem(config, {"rvs": 400, "maxtext": 605, "preflight": 0})
    assert problem.startswith("cvs_slurm.time_limit 10 (600 s) is shorter than the run can take (rvs 400 s + maxtext")
    assert "= 1005 s)" in problem
    assert time_problem(settings({"time_limit": "UNLIMITED"}, "n"), {"maxtext": 10**9}) == ""


def test_salloc_holds_exactly_the_nodes_and_passes_every_setting_as_its_own_argument() -> None:
    config = settings(
        {"partition": "gpu", "account": "ops", "reservation": "maint", "salloc_options": ["--comment=a b"]}, "n1"
    )
    assert salloc_argv(config, ["n1", "n2"], "cvs-run") == [
        "salloc", "--no-shell", "--nodes=2", "--nodelist=n1,n2", "--job-name=cvs-run", "--time=1:00:00",
        "--immediate=60", "--partition=gpu", "--account=ops", "--reservation=maint", "--comment=a b",
    ]  # fmt: skip


def test_granted_job_and_slurms_message_come_from_salloc_output() -> None:
    assert granted_job("salloc: Granted job allocation 42\n") == "42"
    assert granted_job("salloc: error: invalid partition specified: nope") is None
    text = "salloc: error: invalid partition specified: nope\nsalloc: error: Job submit/allocate failed: x\n"
    assert (
        slurm_message(text)
        == "salloc: error: invalid partition specified: nope; salloc: error: Job submit/allocate failed: x"
    )


def test_a_node_step_prints_its_id_first_and_the_marker_is_taken_out_of_stderr() -> None:
    argv = node_step_argv(settings({"srun_options": ["--distribution=block"]}, "n"), "7", "n2", "cvs-run-step")
    assert argv[:7] == ["srun", "--jobid=7", "--nodes=1", "--ntasks=1", "--nodelist=n2", "--job-name=cvs-run-step",
                        "--distribution=block"]  # fmt: skip
    assert argv[7:9] == ["/bin/sh", "-c"] and STEP_MARKER in argv[9] and argv[-1] == "cvs-step"
    split = split_step_marker(f"{STEP_MARKER}7.3\nreal error\n{STEP_MARKER}not first\n")
    assert split == {"step": "7.3", "stderr": f"real error\n{STEP_MARKER}not first\n"}
    assert split_step_marker("plain\n") == {"step": None, "stderr": "plain\n"}


def test_the_multi_node_step_ends_on_the_first_bad_exit_and_writes_a_file_per_task() -> None:
    argv = multi_node_step_argv(settings({}, "n"), "7", ["n1", "n2"], "cvs-mt", "/d/%j.%t.log")
    assert "--kill-on-bad-exit=1" in argv and "--ntasks-per-node=1" in argv and "--ntasks=2" in argv
    assert "--output=/d/%j.%t.log" in argv and "--open-mode=append" in argv and "--nodelist=n1,n2" in argv


@pytest.mark.parametrize(
    ("exit_code", "output", "stopped", "state"),
    [
        ("0", "", False, "COMPLETED"),
        ("", "", True, "UNKNOWN"),
        ("137", "srun: error: node2: task 1: Exited with exit code 137\nsrun: Terminating StepId=3.0", True, "FAILED"),
        ("143", "srun: error: node1: task 0: Terminated\nsrun: error: node2: task 1: Killed", True, "CANCELLED"),
        ("143", "srun: error: node1: task 0: Terminated", False, "FAILED"),
        ("1", "*** STEP 3.0 ON node1 CANCELLED AT 2026-12-07T05:00:34 DUE TO TIME LIMIT ***", False, "TIMEOUT"),
    ],
)  # fmt: skip
def test_a_finished_steps_state_is_read_from_srun(exit_code: str, output: str, stopped: bool, state: str) -> None:
    assert step_state(exit_code, output, stopped) == state


def test_the_configuration_the_clients_read_goes_in_front_of_every_step() -> None:
    text = "Configuration data as of 2026-12-07T06:14:30\nSLURM_CONF     = /run/x/slurm.conf\nSLURMD_PORT = 6818\n"
    assert config_path(text) == "/run/x/slurm.conf" and config_path("nothing") is None
    config = settings({"conf": "/run/x/slurm.conf"}, "n")
    assert node_step_argv(config, "7", "n2", "s")[:3] == ["env", "SLURM_CONF=/run/x/slurm.conf", "srun"]
    assert multi_node_step_argv(config, "7", ["n1"], "s", "/d/%j.%t")[:3] == [
        "env",
        "SLURM_CONF=/run/x/slurm.conf",
        "srun",
    ]
    with pytest.raises(SlurmSettingsError, match=r"^cvs_slurm\.conf: must be the absolute path"):
        settings({"conf": "slurm.conf"}, "n")
