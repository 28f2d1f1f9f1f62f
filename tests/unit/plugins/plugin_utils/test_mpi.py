"""The MPI launch checks and failure naming (plugin_utils/_mpi.py), on real ompi_info and mpirun output shapes."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._mpi import (
    MpiSettingsError,
    check_mca,
    first_failure,
    launch_problems,
    mca_problems,
    ompi_keep_pattern,
    parse_ompi_info,
    rank_nodes,
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
