"""Pure logic of log_poll (plugin_utils/_log_poll/scan.py): patterns, logs, lines, scanning, policies, probes."""

from __future__ import annotations

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import (
    CONTEXT_LINES,
    MAX_EVENTS,
    HostRound,
    LogPollError,
    LogSpec,
    can_complete,
    compile_patterns,
    config_problem,
    context_before,
    decode_line,
    default_label,
    effective_group,
    format_elapsed,
    labelled_lines,
    lag_warning,
    normalize_logs,
    normalize_policy,
    policy_decided,
    probe_outcome,
    round_lag,
    scan_lines,
    split_lines,
)

# ---- patterns -------------------------------------------------------------------------------


def test_compile_patterns_keeps_mapping_order_and_ignores_case() -> None:
    pats = compile_patterns({"nan": r"loss:\s*nan", "oom": "RESOURCE_EXHAUSTED"}, "error_patterns")
    assert [p.name for p in pats] == ["nan", "oom"]
    assert pats[0].search("step 5 LOSS: NaN")
    assert pats[1].search("resource_exhausted: out of memory")


def test_compile_patterns_accepts_lists() -> None:
    pats = compile_patterns(["Traceback", {"name": "seg", "pattern": "Segmentation fault"}], "error_patterns")
    assert [(p.name, p.source) for p in pats] == [("Traceback", "Traceback"), ("seg", "Segmentation fault")]
    assert compile_patterns(None, "x") == [] and compile_patterns({}, "x") == []


def test_invalid_regex_names_the_pattern_and_the_regex_error() -> None:
    with pytest.raises(LogPollError) as err:
        compile_patterns({"ok": "fine", "broken": "loss: ([0-9"}, "error_patterns")
    text = str(err.value)
    assert "error_patterns pattern 'broken'" in text
    assert "'loss: ([0-9'" in text
    assert "missing ), unterminated subpattern" in text or "unterminated" in text


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        ({"empty": ""}, "non-empty string"),
        ({"num": 5}, "non-empty string"),
        ([{"name": "x"}], "has no 'pattern'"),
        ("just a string", "must be a mapping"),
    ],
)
def test_bad_pattern_shapes(patterns: object, message: str) -> None:
    with pytest.raises(LogPollError, match=message):
        compile_patterns(patterns, "error_patterns")


# ---- logs ---------------------------------------------------------------------------------------


def test_normalize_logs_shapes_and_default_labels() -> None:
    assert normalize_logs("/run/a/training.log") == [LogSpec("/run/a/training.log", "training")]
    assert normalize_logs({"path": "/x/server.out"}) == [LogSpec("/x/server.out", "server.out")]
    specs = normalize_logs(["/x/a.log", {"path": "/y/a.log", "label": "second"}])
    assert [s.label for s in specs] == ["a", "second"]
    assert normalize_logs([]) == [] and normalize_logs(None) == [] and normalize_logs("") == []
    assert default_label("/x/.log") == ".log"
    assert default_label("/x/dir/") == "dir"


@pytest.mark.parametrize(
    ("logs", "message"),
    [
        (["/x/a.log", "/y/a.log"], "labels must be unique per host, repeated: a"),
        (["/x/a.log", {"path": "/x/a.log", "label": "b"}], "paths must be unique per host, repeated: /x/a.log"),
        ([{"path": "/x/a.log", "label": "../evil"}], "cannot name a file"),
        ([{"path": "/x/a.log", "label": ".."}], "cannot name a file"),
        ([""], "empty path"),
        ([42], "each item must be a path"),
        (42, "must be a list"),
    ],
)
def test_normalize_logs_rejects(logs: object, message: str) -> None:
    with pytest.raises(LogPollError, match=message.replace("(", r"\(").replace(".", r"\.")):
        normalize_logs(logs)


def test_policies() -> None:
    assert normalize_policy("ALL") == "all"
    assert normalize_policy("node0") == "first"
    assert normalize_policy(None) == "all"
    with pytest.raises(LogPollError, match=r"complete\.policy 'most' is not one of all, any, first, node0, last"):
        normalize_policy("most")


@pytest.mark.parametrize(
    ("policy", "done", "expected"),
    [
        ("all", {"n1", "n2"}, False),
        ("all", {"n1", "n2", "n3"}, True),
        ("any", set(), False),
        ("any", {"n3"}, True),
        ("first", {"n2", "n3"}, False),
        ("first", {"n1"}, True),
        ("last", {"n1", "n2"}, False),
        ("last", {"n3"}, True),
    ],
)
def test_policy_decided(policy: str, done: set, expected: bool) -> None:
    assert policy_decided(policy, ["n1", "n2", "n3"], done) is expected


def test_policy_with_empty_group_never_decides() -> None:
    assert policy_decided("any", [], {"n1"}) is False
    with pytest.raises(LogPollError):
        policy_decided("most", ["n1"], set())


# ---- lines ----------------------------------------------------------------------------------------


def test_split_and_decode() -> None:
    assert split_lines(b"") == []
    assert split_lines(b"a\nb\n") == [b"a", b"b"]
    assert split_lines(b"a\n\nb\n") == [b"a", b"", b"b"]
    assert split_lines(b"long fragment") == [b"long fragment"]
    assert decode_line(b"crlf\r") == "crlf"
    assert decode_line(b"mid\rdle") == "mid\rdle"
    assert decode_line(b"nul\x00byte") == "nul\x00byte"
    assert decode_line(b"bad \xff utf8") == "bad \ufffd utf8"
    assert decode_line("μ".encode()) == "μ"


# ---- scanning ---------------------------------------------------------------------------------------

ERRORS = compile_patterns({"oom": "out of memory", "nan": r"loss:\s*nan", "crash": "Traceback"}, "error_patterns")
IGNORES = compile_patterns({"retry": "will retry"}, "ignore_error_patterns")
MARKER = compile_patterns({"complete": r"completed step:\s*9,"}, "complete")[0]


def lines(*texts: str) -> list[tuple[str, str]]:
    return [("train", t) for t in texts]


def test_earlier_pattern_in_order_wins_within_a_round() -> None:
    scan = scan_lines(lines("step 1 loss: nan", "Traceback (most recent call last)", "out of memory"), ERRORS, [], None)
    assert scan.error["name"] == "oom"
    assert scan.error["index"] == 2
    scan = scan_lines(lines("Traceback", "step 1 loss: nan"), ERRORS, [], None)
    assert scan.error["name"] == "nan" and scan.error["line"] == "step 1 loss: nan"


def test_benign_line_does_not_hide_a_real_error_in_the_same_round() -> None:
    scan = scan_lines(lines("out of memory, will retry", "ok", "out of memory"), ERRORS, IGNORES, None)
    assert scan.error == {
        "name": "oom",
        "pattern": "out of memory",
        "line": "out of memory",
        "label": "train",
        "index": 2,
    }
    assert scan_lines(lines("out of memory, will retry"), ERRORS, IGNORES, None).error is None


def test_marker_and_error_in_one_round() -> None:
    scan = scan_lines(lines("completed step: 9, loss: 1.0", "Traceback"), ERRORS, IGNORES, MARKER)
    assert scan.marker_line == "completed step: 9, loss: 1.0"
    assert scan.error["name"] == "crash"
    scan = scan_lines(lines("completed step: 99, loss 1.0"), [], [], MARKER)
    assert scan.marker_line is None and scan.error is None


def test_scan_without_patterns() -> None:
    scan = scan_lines(lines("anything"), [], [], None)
    assert scan.error is None and scan.marker_line is None


def test_context_before() -> None:
    previous = [f"p{i}" for i in range(8)]
    assert context_before(previous, ["a", "b", "ERR"], 2) == [*previous, "a", "b"][-CONTEXT_LINES:]
    assert context_before([], ["ERR"], 0) == []


# ---- round state --------------------------------------------------------------------------------------


def test_host_round_remember_and_roundtrip() -> None:
    state = HostRound(started=1.0, last_progress=1.0)
    state.remember([f"l{i}" for i in range(25)])
    assert state.context == [f"l{i}" for i in range(15, 25)] and state.last_line == "l24"
    state.remember([])
    assert state.last_line == "l24"
    for i in range(MAX_EVENTS + 5):
        state.note_event("train", f"e{i}")
    assert len(state.events) == MAX_EVENTS and state.events[-1]["event"] == f"e{MAX_EVENTS + 4}"
    assert state.note_sizes({"/a": 10}) is True
    assert state.note_sizes({"/a": 10}) is False
    assert state.note_sizes({"/a": 11}) is True
    data = state.to_dict()
    data["from_a_newer_version"] = 1
    again = HostRound.from_dict(data)
    assert again.to_dict() == state.to_dict()


# ---- probes ---------------------------------------------------------------------------------------------


def test_marker_only() -> None:
    assert probe_outcome({}, {"pattern": "done"}, marker_seen=False) == (False, None)
    assert probe_outcome({}, {"pattern": "done"}, marker_seen=True) == (True, None)
    assert probe_outcome({}, {}, marker_seen=True) == (False, None)  # no probe: never complete


def test_exit_code_probe_outcomes() -> None:
    complete = {"pattern": "done", "exit_code_file": "/r/rc"}
    assert probe_outcome({"exit_code": {"present": False}}, complete, True) == (False, None)
    assert probe_outcome({"exit_code": {"present": True, "code": 0}}, complete, True) == (True, None)
    done, failure = probe_outcome({"exit_code": {"present": True, "code": 3}}, complete, True)
    assert not done and failure == "job exited with code 3 (exit code file /r/rc)"
    done, failure = probe_outcome({"exit_code": {"present": True, "code": 0}}, complete, False)
    assert not done and "exited with code 0 before the completion marker 'done' appeared" in failure
    # logs not caught up yet (max_bytes cut the read): the marker may still be in the unread bytes
    assert probe_outcome({"exit_code": {"present": True, "code": 0}}, complete, False, caught_up=False) == (
        False,
        None,
    )
    done, failure = probe_outcome({"exit_code": {"present": True, "code": None, "error": "bad"}}, complete, True)
    assert failure == "exit code file /r/rc: bad"
    assert probe_outcome({"exit_code": {"present": True, "code": 0}}, {"exit_code_file": "/r/rc"}, False) == (
        True,
        None,
    )


def test_http_and_artifact_probes() -> None:
    http = {"http": {"url": "http://127.0.0.1:8000/", "status": 200}}
    assert probe_outcome({"http": {"status": 200}}, http, False) == (True, None)
    assert probe_outcome({"http": {"status": 503}}, http, False) == (False, None)
    assert probe_outcome({"http": {"status": None, "error": "refused"}}, http, False) == (False, None)
    art = {"artifact": {"path": "/r/result.json", "min_bytes": 10}}
    assert probe_outcome({"artifact": {"exists": True, "size": 9}}, art, False) == (False, None)
    assert probe_outcome({"artifact": {"exists": True, "size": 10}}, art, False) == (True, None)
    both = {**http, **art, "pattern": "x"}
    assert probe_outcome({"http": {"status": 200}, "artifact": {"exists": True, "size": 10}}, both, False)[0] is False
    assert probe_outcome({"http": {"status": 200}, "artifact": {"exists": True, "size": 10}}, both, True)[0] is True


# ---- group ---------------------------------------------------------------------------------------------------


def test_can_complete() -> None:
    assert can_complete(True, {"pattern": "x"})
    assert not can_complete(False, {"pattern": "x"})  # a marker needs a log
    assert can_complete(False, {"http": {"url": "u"}})
    assert not can_complete(True, {})


def test_effective_group() -> None:
    members = {"n1": {"can_complete": True}, "n2": {"can_complete": False}}
    assert effective_group(["n1", "n2", "n3"], members, absent_dropped=False) == ["n1", "n3"]
    assert effective_group(["n1", "n2", "n3"], members, absent_dropped=True) == ["n1"]


def test_config_problem_empty_logs_everywhere() -> None:
    idle = {"can_complete": False, "watches": False}
    hosts = ["n1", "n2", "n3"]
    assert config_problem(hosts, hosts, {"n1": idle, "n2": idle}, absent_dropped=False) is None  # n3 not yet
    problem = config_problem(hosts, hosts, {"n1": idle, "n2": idle, "n3": idle}, absent_dropped=False)
    assert problem.startswith("logs is empty on every host (n1, n2, n3)")
    # a host skipped by `when` never registers: after the join grace the others decide without it
    assert config_problem(hosts, hosts, {"n1": idle, "n2": idle}, absent_dropped=True).startswith("logs is empty")


def test_config_problem_nobody_can_complete() -> None:
    watcher = {"can_complete": False, "watches": True}
    hosts = ["n1", "n2"]
    problem = config_problem(hosts, hosts, {"n1": watcher, "n2": watcher}, absent_dropped=False)
    assert problem.startswith("no host of the completion group (n1, n2) can complete")
    ok = {"can_complete": True, "watches": True}
    assert config_problem(hosts, ["n1"], {"n1": ok, "n2": watcher}, absent_dropped=False) is None
    assert config_problem(hosts, hosts, {"n1": watcher, "n2": ok}, absent_dropped=False) is None


def test_format_elapsed() -> None:
    assert format_elapsed(5.9) == "5s"
    assert format_elapsed(65) == "1m05s"
    assert format_elapsed(3725) == "1h02m05s"


# ---- never appeared (issue 15) ---------------------------------------------------------------------------


def test_never_appeared_names_each_missing_path_in_order() -> None:
    from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll import scan as lp

    assert lp.never_appeared(["/a", "/b", "/c"], ["/b"]) == "; /a never appeared; /c never appeared"
    assert lp.never_appeared(["/a"], ["/a"]) == ""


# ---- no space left (issue 15 item 7) ------------------------------------------------------------------------


def test_no_space_left_names_host_path_and_df_only_for_a_log_that_did_not_grow() -> None:
    from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll import scan as lp

    full = {"free": 0, "size": 65536, "free_inodes": 12}
    stuck = {"logs": [{"path": "/run/a.log", "chunks": [], "full": full}]}
    assert lp.no_space_left("node2", stuck) == (
        "no space left on device on node2: the file system (0 bytes free of 65536, 12 inodes free) holds "
        "/run/a.log; the log cannot grow"
    )
    growing = {"logs": [{"path": "/run/a.log", "chunks": ["eA=="], "full": full}]}
    assert lp.no_space_left("node2", growing) is None
    assert lp.no_space_left("node2", {"logs": [{"path": "/run/a.log", "chunks": []}]}) is None
    empty_exit = {"logs": [], "exit_code": {"present": False, "empty": True, "full": full}}
    assert lp.no_space_left("n1", empty_exit, "/run/exit_code") == (
        "no space left on device on n1: the file system (0 bytes free of 65536, 12 inodes free) holds the exit "
        "code file /run/exit_code (empty); the job cannot record its exit status"
    )
    assert lp.no_space_left("n1", {"logs": [], "exit_code": {"present": True, "code": 0, "full": full}}, "/x") is None


# ---------------------------------------------------------------- the lines of a result


def test_labelled_lines_slices_new_lines_by_log_state_counts() -> None:
    result = {
        "new_lines": ["s1", "s2", "c1"],
        "log_states": [
            {"path": "/r/server.log", "label": "server", "new_lines": 2, "events": []},
            {"path": "/r/client.log", "label": "client", "new_lines": 1, "events": []},
            {"path": "/r/empty.log", "label": "empty", "new_lines": 0, "events": []},
        ],
    }
    assert labelled_lines(result) == [
        {"label": "server", "path": "/r/server.log", "line": "s1"},
        {"label": "server", "path": "/r/server.log", "line": "s2"},
        {"label": "client", "path": "/r/client.log", "line": "c1"},
    ]


def test_labelled_lines_default_label_and_inconsistent_counts() -> None:
    one = {"new_lines": ["a", "b"], "log_states": [{"path": "/r/training.log", "new_lines": 5}]}
    assert labelled_lines(one) == [
        {"label": "training", "path": "/r/training.log", "line": "a"},
        {"label": "training", "path": "/r/training.log", "line": "b"},
    ]
    two = {"new_lines": ["a"], "log_states": [{"label": "x", "new_lines": 2}, {"label": "y", "new_lines": 2}]}
    assert labelled_lines(two) == [{"label": "", "path": "", "line": "a"}]
    assert labelled_lines({"new_lines": ["a"], "log_states": [{"label": "x", "new_lines": "many"}]}) == [
        {"label": "x", "path": "", "line": "a"}
    ]
    assert labelled_lines({"censored": "hidden"}) == []
    assert labelled_lines({"new_lines": "not a list"}) == []


# ---------------------------------------------------------------- rounds that do not keep up with the delay


@pytest.mark.parametrize(
    ("intervals", "delay", "lag"),
    [
        ([5.2, 5.1, 5.3], 5.0, None),  # on time
        ([12.0, 11.5, 13.0], 5.0, 12.0),  # every round more than a delay late: the median
        ([12.0, 5.1, 13.0], 5.0, None),  # one round on time: a hiccup, not a fleet too large
        ([12.0, 13.0], 5.0, None),  # too few rounds to say
        ([2.1, 2.0, 2.2], 0.2, None),  # small delays: late by less than 2 s is load, not lag
        ([2.5, 2.6, 2.7], 0.2, 2.6),
        ([9.0, 9.0, 9.0], 0.0, None),  # no delay, nothing to keep up with
        ([1.0, 20.0, 21.0, 22.0], 5.0, 21.0),  # only the last rounds count
    ],
)
def test_round_lag(intervals: list, delay: float, lag: object) -> None:
    assert round_lag(intervals, delay) == lag


def test_lag_warning_names_host_interval_delay_and_what_to_change() -> None:
    text = lag_warning("node7", 12.4, 5.0, 1024)
    assert "rounds on node7 came every 12.4s instead of every 5s" in text and "1024 host(s)" in text
    assert "Set delay to 13s or more" in text and "AWX job slicing" in text
