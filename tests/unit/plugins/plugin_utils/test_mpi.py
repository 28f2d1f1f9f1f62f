"""The MPI launch (plugin_utils/_mpi.py): settings, plan, the checks before the launch and the job's verdict, on real
ompi_info and mpirun output shapes."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._mpi import (
    BUILTIN_ERROR_PATTERNS,
    RANK_WRAPPER,
    SSH_OPTIONS,
    MpiSettingsError,
    check_mca,
    check_settings,
    exit_code,
    first_failure,
    job_hosts,
    job_verdict,
    launch_blocker,
    launch_plan,
    launch_problems,
    mca_problems,
    ompi_keep_pattern,
    parse_ompi_info,
    rank_nodes,
    reach_blocker,
)

# lines of `ompi_info --all --parsable` (Open MPI 4.1.4, Debian 12)
OMPI_INFO = """\
mca:pml:cm:version:"component:4.1.4"
mca:pml:ob1:version:"component:4.1.4"
mca:pml:ucx:version:"component:4.1.4"
mca:pml:base:version:"mca:2.1.0"
mca:btl:self:version:"component:4.1.4"
mca:btl:tcp:version:"component:4.1.4"
mca:btl:vader:version:"component:4.1.4"
mca:btl:tcp:param:btl_tcp_if_include:type:string
mca:mpi:base:param:mpi_yield_when_idle:type:bool
mca:btl:tcp:param:btl_tcp_links:type:unsigned_int
mca:pml:ob1:param:pml_ob1_priority:type:int
mca:plm:rsh:param:plm_rsh_agent:type:string
mca:hwloc:base:param:hwloc_base_binding_policy:type:string
mca:btl:vader:param:btl_vader_single_copy_mechanism:type:int
mca:btl:vader:param:btl_vader_single_copy_mechanism:enumerator:value:1:cma
mca:btl:vader:param:btl_vader_single_copy_mechanism:enumerator:value:4:none
"""


def probe(cpus: int = 2, mpirun: Any = "/usr/bin/mpirun", info: str = OMPI_INFO) -> dict[str, Any]:
    return {
        "cpus": cpus,
        "binaries": {"mpirun": mpirun},
        "commands": {"ompi_info": {"rc": 0, "stdout": info, "stderr": "", "problem": None}},
    }


def test_ompi_info_is_read_into_components_and_parameters() -> None:
    info = parse_ompi_info(OMPI_INFO)
    assert info["components"]["pml"] == ["cm", "ob1", "ucx"] and "base" not in info["components"]["pml"]
    assert info["params"]["btl_vader_single_copy_mechanism"] == {"type": "int", "values": ["1", "4", "cma", "none"]}


def test_the_keep_pattern_keeps_components_types_and_the_asked_enumerators_only() -> None:
    keep = re.compile(ompi_keep_pattern(["btl_vader_single_copy_mechanism"]))
    kept = [line for line in OMPI_INFO.splitlines() if keep.search(line)]
    assert kept == [line for line in OMPI_INFO.splitlines() if line != 'mca:pml:base:version:"mca:2.1.0"']
    other = re.compile(ompi_keep_pattern(["pml"]))
    assert not other.search("mca:btl:vader:param:btl_vader_single_copy_mechanism:enumerator:value:1:cma")
    assert not other.search("mca:btl:tcp:param:btl_tcp_if_include:value:eth0")


@pytest.mark.parametrize(
    ("mca", "problem"),
    [
        ({"pml": "no_such_pml"}, "--mca pml no_such_pml: no pml component named 'no_such_pml' (this Open MPI has cm, ob1, ucx)"),  # noqa: E501
        ({"btl": "^openib,tcp,self"}, "--mca btl ^openib,tcp,self: no btl component named 'openib' (this Open MPI has self, tcp, vader)"),  # noqa: E501
        ({"btl_tcp_if_inclde": "eth0"}, "--mca btl_tcp_if_inclde eth0: Open MPI knows no parameter 'btl_tcp_if_inclde' (did you mean btl_tcp_if_include?)"),  # noqa: E501
        ({"btl_tcp_links": "two"}, "--mca btl_tcp_links two: must be a whole number (unsigned_int)"),
        ({"mpi_yield_when_idle": "maybe"}, "--mca mpi_yield_when_idle maybe: must be true or false"),
        ({"btl_vader_single_copy_mechanism": "xpmem"}, "--mca btl_vader_single_copy_mechanism xpmem: not one of 1, 4, cma, none"),  # noqa: E501
    ],
)  # fmt: skip
def test_each_setting_open_mpi_would_reject_is_named(mca: dict, problem: str) -> None:
    assert mca_problems(check_mca(mca), parse_ompi_info(OMPI_INFO)) == [problem]


def test_settings_open_mpi_takes_pass() -> None:
    mca = {"pml": "ob1", "btl": "tcp,self", "btl_tcp_if_include": "eth0", "mpi_yield_when_idle": True,
           "btl_tcp_links": 2, "btl_vader_single_copy_mechanism": "cma"}  # fmt: skip
    assert mca_problems(check_mca(mca), parse_ompi_info(OMPI_INFO)) == []


@pytest.mark.parametrize(
    ("mca", "message"),
    [
        ({"pml; rm -rf /": "x"}, "is not an MCA parameter name"),
        ({"pml": ["ob1"]}, "mpi_mca.pml: the value must be text or a number"),
        ({"pml": "ob1\n--host evil"}, "mpi_mca.pml: the value must be one non-empty line"),
        ("pml=ob1", "mpi_mca must be a mapping"),
    ],
)
def test_settings_that_cannot_be_mca_parameters_are_refused(mca: Any, message: str) -> None:
    with pytest.raises(MpiSettingsError, match=re.escape(message)):
        check_mca(mca)


def test_launch_problems_name_each_node_and_setting() -> None:
    probes = {
        "node1": probe(cpus=2),
        "node2": probe(mpirun=None),
        "node3": probe(cpus=64),
        "node4": {"unreachable": True, "msg": "ssh: connect to host 10.0.0.4 port 22: No route to host"},
    }
    out = launch_problems(probes, 4, {"pml": "no_such"})
    assert out["node1"] == [
        "4 slots per node asked (mpi_slots_per_node) but the node has 2 CPU(s)",
        "--mca pml no_such: no pml component named 'no_such' (this Open MPI has cm, ob1, ucx) (setting mpi_mca)",
    ]
    assert out["node2"] == ["mpirun not found (mpirun, setting mpi_mpirun)"]
    assert out["node3"] == [out["node1"][1]]
    assert out["node4"] == ["could not be probed: ssh: connect to host 10.0.0.4 port 22: No route to host"]
    assert launch_problems({"node1": probe()}, 1, {}) == {"node1": []}
    with pytest.raises(MpiSettingsError, match="mpi_slots_per_node must be at least 1"):
        launch_problems({}, 0, {})


def test_rank_placement_by_node() -> None:
    assert rank_nodes(["a", "b", "c"], 2) == {0: "a", 1: "b", 2: "c", 3: "a", 4: "b", 5: "c"}


RANKS = rank_nodes(["node1", "node2", "node3"], 1)
MPIRUN_REPORT = [
    "--------------------------------------------------------------------------",
    "mpirun detected that one or more processes exited with non-zero status, thus causing",
    "the job to be terminated. The first process to do so was:",
    "",
    "  Process name: [[17101,1],2]",
    "  Exit code:    3",
]


def test_the_rank_wrapper_line_names_the_rank_its_node_and_status() -> None:
    lines = [
        "rank 0 iter 3",
        "cvs-mpi: rank 0 on node1 exited with status 0",
        "cvs-mpi: rank 2 on node3 exited with status 3",
    ]
    assert first_failure(lines, RANKS) == {
        "rank": 2, "node": "node3", "status": 3, "line": "cvs-mpi: rank 2 on node3 exited with status 3"
    }  # fmt: skip


def test_mpiruns_own_report_names_the_rank_when_the_rank_said_nothing() -> None:
    found = first_failure(["mpirun detected that one or more processes exited", *MPIRUN_REPORT], RANKS)
    assert found == {"rank": 2, "node": "node3", "status": 3, "line": "Process name: [[17101,1],2]"}
    cut = first_failure(MPIRUN_REPORT[:-1], RANKS)
    assert cut is not None and cut["status"] is None and cut["node"] == "node3"


def test_a_rank_killed_by_a_signal_is_named() -> None:
    line = "mpirun noticed that process rank 1 with PID 4242 on node node2 exited on signal 9 (Killed)."
    assert first_failure([line], RANKS) == {"rank": 1, "node": "node2", "status": 137, "line": line}


def test_the_wrapper_line_wins_over_an_earlier_mpirun_report_and_nothing_failed_is_none() -> None:
    lines = [*MPIRUN_REPORT, "cvs-mpi: rank 1 on node2 exited with status 5"]
    assert first_failure(lines, RANKS)["rank"] == 1  # type: ignore[index]
    assert first_failure(["cvs-mpi: rank 0 on node1 exited with status 0", "all fine"], RANKS) is None


# ---------------------------------------------------------------- settings, plan, blockers, verdict

SETTINGS = {
    "name": "rccl-all_reduce_perf",
    "program": ["/opt/rccl-tests/build/all_reduce_perf", "-b", "8"],
    "slots_per_node": 2,
    "timeout": 600,
    "stop_grace": 10,
    "mca": {"pml": "ob1", "mpi_yield_when_idle": True},
    "env": {"NCCL_DEBUG": "INFO"},
    "extra_args": ["--bind-to", "none"],
    "mpirun": "/usr/bin/mpirun",
    "ssh_port": None,
    "poll_interval": 1,
    "stall_timeout": 0,
    "error_patterns": {"oom": "out of memory"},
    "results_dir": "/results",
    "run_id": "run1",
}


def hostvars(name: str, index: int, **over: Any) -> dict[str, Any]:
    return {"inventory_hostname": name, "cvs_node": name, "cvs_node_index": index,
            "cvs_scratch": f"/var/tmp/cvs/run1/{name}", "ansible_host": f"10.0.0.{index + 1}", "ansible_user": "root",
            **over}  # fmt: skip


def plan(**over: Any) -> dict[str, Any]:
    settings = check_settings({**SETTINGS, **over})
    hosts = job_hosts([hostvars("n2", 1), hostvars("n1", 0), hostvars("n3", 2, ansible_port=2222)], None)
    return {**launch_plan(hosts, settings, "rccl-all_reduce_perf-20261207T000000-ab12", "2026-12-07T00:00:00Z"),
            "settings": settings}  # fmt: skip


def test_the_settings_are_normalised_with_the_built_in_error_patterns_first() -> None:
    checked = check_settings(SETTINGS)
    assert checked["mca"] == {"pml": "ob1", "mpi_yield_when_idle": "true"}
    assert list(checked["error_patterns"])[:5] == list(BUILTIN_ERROR_PATTERNS) and checked["error_patterns"]["oom"]
    assert checked["slots_per_node"] == 2 and checked["timeout"] == 600.0 and checked["ssh_port"] is None


@pytest.mark.parametrize(
    "over",
    [{"program": []}, {"name": "a b"}, {"slots_per_node": 0}, {"timeout": 0}, {"program": "all_reduce_perf"}],
)
def test_a_bad_program_name_slot_count_or_timeout_gives_the_message_users_know(over: dict) -> None:
    settings = {**SETTINGS, **over}
    with pytest.raises(MpiSettingsError) as err:
        check_settings(settings)
    assert str(err.value) == (
        "cvs.cluster.mpi: mpi_program must name the program of every rank, mpi_name must be letters, digits, '.', "
        "'_' or '-', mpi_slots_per_node at least 1 and mpi_timeout above 0 (got "
        f"mpi_program={settings['program']}, mpi_name={settings['name']}, "
        f"mpi_slots_per_node={settings['slots_per_node']}, mpi_timeout={settings['timeout']})"
    )


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"env": {"BAD;touch x": "1"}}, "cvs.cluster.mpi: mpi_env: 'BAD;touch x' is not an environment variable name"),
        ({"mca": {"pml": ["ob1"]}}, "cvs.cluster.mpi: mpi_mca.pml: the value must be text or a number"),
        ({"ssh_port": 70000}, "cvs.cluster.mpi: mpi_ssh_port must be a TCP port, got 70000"),
        ({"stop_grace": "soon"}, "cvs.cluster.mpi: mpi_stop_grace must be a number of seconds, got 'soon'"),
        ({"extra_args": "--oversubscribe"}, "cvs.cluster.mpi: mpi_extra_args must be a list of arguments"),
    ],
)
def test_each_other_bad_setting_is_named(over: dict, message: str) -> None:
    with pytest.raises(MpiSettingsError, match=re.escape(message)):
        check_settings({**SETTINGS, **over})


def test_the_hosts_are_in_rank_order_with_their_ssh_address_port_and_user() -> None:
    hosts = job_hosts([hostvars("n2", 1), hostvars("n1", 0, ansible_user=None, ansible_host=None)], None)
    assert [(h["host"], h["address"], h["port"], h["user"]) for h in hosts] == [
        ("n1", "n1", 22, "root"), ("n2", "10.0.0.2", 22, "root")
    ]  # fmt: skip
    assert [h["port"] for h in job_hosts([hostvars("n1", 0, ansible_port=2224)], 2299)] == [2299]
    with pytest.raises(MpiSettingsError, match=r"n1 has no cvs_node_index or cvs_scratch \(run cvs.cluster.prepare"):
        job_hosts([hostvars("n1", 0, cvs_scratch=None)], None)
    with pytest.raises(MpiSettingsError, match="n1: ansible_host must be one word"):
        job_hosts([hostvars("n1", 0, ansible_host="10.0.0.1 evil")], None)


def test_the_plan_names_head_hostfile_key_and_the_logs_of_every_rank() -> None:
    p = plan()
    job = "/var/tmp/cvs/run1/n1/mpi/rccl-all_reduce_perf-20261207T000000-ab12"
    assert p["head"] == "n1" and p["hosts"] == ["n1", "n2", "n3"] and p["ranks"] == 6 and p["dir"] == job
    assert p["prepare_cmd"] == (
        f"mpi_job.sh prepare {job} cvs-mpi-run1-rccl-all_reduce_perf-20261207T000000-ab12 "
        "'10.0.0.1 slots=2' '10.0.0.2 slots=2' '10.0.0.3 slots=2'"
    )
    assert re.search(p["key_regexp"], "ssh-ed25519 AAAA cvs-mpi-run1-rccl-all_reduce_perf-20261207T000000-ab12")
    assert not re.search(p["key_regexp"], "ssh-ed25519 AAAA cvs-mpi-run1-rccl-all_reduce_perf-20261207T000000-ab123")
    assert [log["label"] for log in p["logs"]] == ["mpirun", *(f"rank.{r}" for r in range(6))]
    assert p["logs"][1]["path"] == f"{job}/out/1/rank.0/stdout"
    assert p["logs_dir"] == "/results/run1/logs/rccl-all_reduce_perf-20261207T000000-ab12/n1"
    assert p["watch_timeout"] == 640
    assert p["probe_commands"]["ompi_info"]["argv"] == ["/usr/bin/ompi_info", "--all", "--parsable"]


def test_mpiruns_argv_and_the_reach_check_use_the_same_ssh_options() -> None:
    p = plan()
    job = p["dir"]
    argv = p["launch_argv"]
    assert argv[:6] == ["/bin/bash", f"{job}/mpi_job.sh", "launch", job, "600", "10"]
    mpirun = argv[6:]
    agent = mpirun[mpirun.index("plm_rsh_agent") + 1]
    assert agent == f"ssh -i {job}/id_ed25519 -p 22 -l root " + " ".join(SSH_OPTIONS)
    assert mpirun[:9] == ["/usr/bin/mpirun", "--allow-run-as-root", "--hostfile", f"{job}/hostfile", "-np", "6",
                          "--map-by", "node", "--output-filename"]  # fmt: skip
    assert mpirun[13:16] == ["--mca", "pml", "ob1"] and mpirun[19:23] == ["-x", "NCCL_DEBUG", "-x", "CVS_RUN_ID"]
    assert mpirun[23:] == ["--bind-to", "none", "/bin/sh", "-c", RANK_WRAPPER, "sh", *SETTINGS["program"]]
    assert p["reach_commands"]["n3"] == ["ssh", "-i", f"{job}/id_ed25519", "-p", "2222", "-l", "root", *SSH_OPTIONS,
                                         "10.0.0.3", "true"]  # fmt: skip
    assert "n1" not in p["reach_commands"]
    assert p["launch_env"] == {"NCCL_DEBUG": "INFO", "CVS_RUN_ID": "run1", "CVS_NODE": "n1"}


def test_the_rank_wrapper_prints_the_line_the_failure_reader_and_the_error_pattern_know() -> None:
    import subprocess

    out = subprocess.run(["/bin/sh", "-c", RANK_WRAPPER, "sh", "sh", "-c", "exit 3"], capture_output=True, text=True,
                         env={"OMPI_COMM_WORLD_RANK": "2", "PATH": "/usr/bin:/bin"}, check=False)  # fmt: skip
    line = out.stdout.strip()
    assert out.returncode == 3 and re.search(BUILTIN_ERROR_PATTERNS["rank_exit"], line)
    assert first_failure([line], RANKS) == {"rank": 2, "node": "node3", "status": 3, "line": line}


def test_the_launch_blocker_names_every_node_at_fault_in_rank_order() -> None:
    p = plan(slots_per_node=4, mca={"pml": "no_such"}, mpirun="mpirun")
    probes = {"n1": probe(cpus=2), "n2": probe(mpirun=None), "n3": probe(cpus=64)}
    assert launch_blocker(p, probes, p["settings"]) == (
        "cvs.cluster.mpi rccl-all_reduce_perf cannot start: "
        "n1: 4 slots per node asked (mpi_slots_per_node) but the node has 2 CPU(s); --mca pml no_such: no pml "
        "component named 'no_such' (this Open MPI has cm, ob1, ucx) (setting mpi_mca); "
        "n2: mpirun not found (mpirun, setting mpi_mpirun); "
        "n3: --mca pml no_such: no pml component named 'no_such' (this Open MPI has cm, ob1, ucx) (setting mpi_mca)"
    )
    fine = plan(mca={"pml": "ob1"}, mpirun="mpirun")
    assert launch_blocker(fine, {n: probe() for n in ("n1", "n2", "n3")}, fine["settings"]) == ""


def _run(rc: Any, stderr: str = "", problem: Any = None) -> dict[str, Any]:
    return {"rc": rc, "stdout": "", "stderr": stderr, "problem": problem}


def test_the_reach_blocker_names_the_head_the_node_its_address_and_port() -> None:
    p = plan()
    refused = "ssh: connect to host 10.0.0.3 port 2222: Connection refused\n"
    reach = {"commands": {"n2": _run(0), "n3": _run(255, refused)}}
    assert reach_blocker(p, {"rc": 0}, reach) == (
        "cvs.cluster.mpi rccl-all_reduce_perf cannot start: n1 cannot reach n3 at 10.0.0.3 port 2222 (mpi_ssh_port) "
        "over SSH: ssh: connect to host 10.0.0.3 port 2222: Connection refused"
    )
    assert reach_blocker(p, {"rc": 0}, {"commands": {"n2": _run(0), "n3": _run(0)}}) == ""
    assert reach_blocker(p, {"rc": 0}, {"commands": {"n2": _run(None, problem="ssh not found"), "n3": _run(0)}}) == (
        "cvs.cluster.mpi rccl-all_reduce_perf cannot start: n1 cannot reach n2 at 10.0.0.2 port 22 (mpi_ssh_port) "
        "over SSH: ssh not found"
    )
    assert reach_blocker(p, {"rc": 1, "stderr": "mkdir: Permission denied"}, {"skipped": True}) == (
        "cvs.cluster.mpi rccl-all_reduce_perf cannot start: the job could not be prepared on n1: "
        "mkdir: Permission denied"
    )


def _stopped(code: str) -> dict[str, Any]:
    return {"rc": 0, "stdout": f"mpi job: stopped 0 processes (already ended)\nexit_code: {code}\n"}


def test_a_job_that_exited_0_passes() -> None:
    job = job_verdict(plan(), {"rc": 0}, {"finished": True}, _stopped("0"), [], "2026-12-07T00:01:00Z")
    assert job["status"] == "PASS" and job["rc"] == 0
    assert job["reason"] == "mpirun rccl-all_reduce_perf: 6 ranks on n1, n2, n3 exited 0"
    assert job["logs"].endswith("/n1") and job["finished"] == "2026-12-07T00:01:00Z" and job["failed_node"] is None


def test_a_rank_that_failed_is_named_with_its_node_from_the_error_line_and_the_logs() -> None:
    watch = {
        "failed": True,
        "msg": "error pattern rank_exit",
        "error": {"line": "cvs-mpi: rank 4 on n2 exited with status 3"},
    }
    job = job_verdict(plan(), {"rc": 0}, watch, _stopped(""), ["rank 0 ok\n"], "t")
    assert job["status"] == "FAIL" and job["rc"] is None and job["failed_rank"] == 4 and job["failed_node"] == "n2"
    assert job["reason"] == "rank 4 on n2 exited with status 3 (first to fail); every rank was stopped"
    assert job["error_line"] == "cvs-mpi: rank 4 on n2 exited with status 3"


def test_without_a_failed_rank_the_watch_or_the_exit_status_says_why() -> None:
    timed_out = {"failed": True, "timed_out": True, "msg": "log_poll: timed out after 640 s"}
    job = job_verdict(plan(), {"rc": 0}, timed_out, _stopped(""), [], "t")
    assert job["reason"] == "log_poll: timed out after 640 s" and job["timed_out"] is True
    assert job_verdict(plan(), {"rc": 0}, {}, _stopped("7"), [], "t")["reason"] == "mpirun exited with status 7"
    assert job_verdict(plan(), {"rc": 0}, {}, {}, [], "t")["reason"] == "mpirun exited with status unknown"


def test_mpirun_that_could_not_be_launched_is_an_error_naming_the_head() -> None:
    job = job_verdict(plan(), {"rc": 1, "stderr": "cat: pgid: No such file or directory"}, {}, {}, [], "t")
    assert job["status"] == "ERROR"
    assert job["reason"] == (
        "cvs.cluster.mpi rccl-all_reduce_perf cannot start: mpirun could not be launched on n1: "
        "cat: pgid: No such file or directory"
    )


def test_the_exit_status_is_the_last_line_of_the_stop() -> None:
    assert exit_code(_stopped("0")) == 0 and exit_code(_stopped("137")) == 137
    assert exit_code(_stopped("")) is None and exit_code({"skipped": True}) is None
