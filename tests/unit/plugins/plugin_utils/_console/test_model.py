"""Pure console logic of the cvs.cluster.cvs callback (plugins/plugin_utils/_console/model.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._console.model import (
    CLEAR_TO_EOL,
    Heartbeat,
    HostLines,
    TaskProgress,
    capture_reason,
    failure_lines,
    fit_width,
    format_elapsed,
    has_control,
    host_results,
    live_line,
    log_event_notes,
    normalize_choice,
    ok_line,
    resolve_mode,
    round_lines,
    sanitize,
    spinner_frame,
    strip_ansi,
    text_width,
)


def poll_result(**over: Any) -> dict[str, Any]:
    """A log_poll round result as the action plugin returns it (its RETURN block, plugins/modules/log_poll.py)."""
    result: dict[str, Any] = {
        "finished": False,
        "failed": False,
        "completed": False,
        "new_lines": [],
        "log_states": [],
        "error": None,
        "timed_out": False,
        "stalled": False,
        "elapsed": 1.0,
        "round": 1,
        "group": {"policy": "all", "complete": 0, "total": 3, "failed": 0, "decided": False},
        "cursors": {},
        "msg": "polling round 1",
        "transport_error": None,
    }
    result.update(over)
    return result


# ---------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("value", "expected"),
    [("quiet", "quiet"), ("VERBOSE", "verbose"), (" normal ", "normal"), (None, "normal"), ("", "normal")],
)
def test_resolve_mode_accepts_known_values(value: object, expected: str) -> None:
    assert resolve_mode(value) == (expected, None)


def test_resolve_mode_unknown_value_warns_with_allowed_values_and_falls_back() -> None:
    mode, warning = resolve_mode("loud")
    assert mode == "normal"
    assert warning == "cvs console: 'loud' is not one of quiet, normal, verbose; using 'normal'"


def test_resolve_mode_unknown_task_value_falls_back_to_run_mode() -> None:
    assert resolve_mode(3, default="quiet") == (
        "quiet",
        "cvs console: 3 is not one of quiet, normal, verbose; using 'quiet'",
    )


def test_normalize_choice_spinner() -> None:
    assert normalize_choice("Never", ("auto", "always", "never"), "auto") == ("never", None)
    assert normalize_choice("sometimes", ("auto", "always", "never"), "auto") == (
        "auto",
        "'sometimes' is not one of auto, always, never",
    )


def test_capture_reason_env_class_and_display() -> None:
    assert capture_reason({}) == ""
    assert capture_reason({"AWX_ISOLATED_DATA_DIR": "/runner/artifacts/1"}) == "env AWX_ISOLATED_DATA_DIR"
    assert capture_reason({"JOB_ID": "12"}) == "env JOB_ID"
    assert capture_reason({"JOB_ID": ""}) == ""  # set but empty: not AWX
    names = ["ansible_runner.display_callback.callback.awx_display.CallbackModule", "x.CallbackModule"]
    assert capture_reason({}, names) == "callback wrapped by " + names[0]
    assert capture_reason({}, [], display_wrapped=True) == "display is wrapped"


# ---------------------------------------------------------------- text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (7.9, "7s"), (59, "59s"), (60, "1m00s"), (90, "1m30s"), (3723, "1h02m03s"), (36000, "10h00m00s")],
)
def test_format_elapsed(seconds: float, text: str) -> None:
    assert format_elapsed(seconds) == text


def test_strip_ansi_removes_color_cursor_and_osc() -> None:
    assert strip_ansi("\x1b[0;31mred\x1b[0m \x1b[2K\x1b[1Aup \x1b]0;title\x07x") == "red up x"


def test_sanitize_resolves_carriage_return_and_drops_controls() -> None:
    assert sanitize("progress 10%\rprogress 20%\r\n") == "progress 20%"
    assert sanitize("a\x00b\x07c\x1b[32md\x1b[0m\te") == "abcd\te"
    assert sanitize("trailing cr\r") == "trailing cr"
    assert sanitize(42) == "42"


def test_has_control() -> None:
    assert not has_control("plain line\nnext\twith tab")
    assert has_control("\x1b[K")
    assert has_control("spin\r")
    assert has_control("bell\x07")


def test_fit_width_and_wide_characters() -> None:
    assert fit_width("abcdef", 10) == "abcdef"
    assert fit_width("abcdef", 4) == "abc~"
    assert text_width("日本") == 4
    assert fit_width("日本語テキスト", 5) == "日本~"
    assert fit_width("x", 0) == ""


def test_live_line_is_one_line_with_cursor_control() -> None:
    text = live_line("| task | 1/3 hosts complete\nsecond", 20)
    assert text.startswith("\r") and text.endswith(CLEAR_TO_EOL)
    body = text[1 : -len(CLEAR_TO_EOL)]
    assert "\n" not in body and len(body) == 19 and body.endswith("~")


def test_spinner_frames_cycle() -> None:
    assert [spinner_frame(i) for i in range(5)] == ["|", "/", "-", "\\", "|"]


# ---------------------------------------------------------------- log_poll rounds


def test_round_lines_are_host_and_label_prefixed_and_sanitized() -> None:
    result = poll_result(
        new_lines=["step 1 loss 2.1", "\x1b[31mstep 2\x1b[0m loss 2.0", "only"],
        log_states=[
            {"path": "/r/t.log", "label": "train", "new_lines": 2, "events": []},
            {"path": "/r/e.log", "label": "eval", "new_lines": 1, "events": []},
        ],
    )
    assert round_lines("n1", result) == [
        "[n1:train] step 1 loss 2.1",
        "[n1:train] step 2 loss 2.0",
        "[n1:eval] only",
    ]


def test_log_event_notes() -> None:
    result = poll_result(log_states=[{"label": "train", "new_lines": 0, "events": ["rotated"]}, {"label": "x"}])
    assert log_event_notes("n2", result) == ["[cvs] [n2:train] log rotated; reading it from the start"]


def test_failure_lines_for_an_error_match() -> None:
    error = {
        "name": "nan",
        "pattern": r"loss:\s*nan",
        "line": "completed step: 5, loss: nan",
        "path": "/run/n2/training.log",
        "label": "training",
        "host": "n2",
        "context": ["completed step: 3, loss: 2.1", "completed step: 4, loss: 2.0"],
    }
    lines = failure_lines("n2", "Wait for training", poll_result(finished=True, error=error))
    assert lines == [
        "fatal: [n2]: FAILED! Wait for training: error pattern 'nan' matched in n2:training (/run/n2/training.log)",
        r"  pattern: loss:\s*nan",
        "  last 2 lines before it:",
        "    [n2:training] completed step: 3, loss: 2.1",
        "    [n2:training] completed step: 4, loss: 2.0",
        "  offending line:",
        "  > [n2:training] completed step: 5, loss: nan",
    ]


def test_failure_lines_single_context_line_and_no_context() -> None:
    error = {"name": "oom", "line": "RESOURCE_EXHAUSTED", "path": "/x/a.log", "context": ["before"]}
    assert failure_lines("n1", "T", poll_result(error=error))[1:] == [
        "  last 1 line before it:",
        "    [n1:a] before",
        "  offending line:",
        "  > [n1:a] RESOURCE_EXHAUSTED",
    ]
    bare = failure_lines("n1", "T", poll_result(error={"name": "oom", "line": "boom"}))
    assert bare == ["fatal: [n1]: FAILED! T: error pattern 'oom' matched in n1", "  offending line:", "  > [n1] boom"]


def test_failure_lines_without_error_name_timeout_stall_transport_and_retries() -> None:
    result = poll_result(
        finished=False,
        msg="timed out after 1h00m01s (timeout 3600s) on n3",
        timed_out=True,
        stalled=True,
        elapsed=3601.2,
        transport_error="n3: connection failed: boom\x1b[0m",
        attempts=12,
    )
    assert failure_lines("n3", "Wait", result) == [
        "fatal: [n3]: FAILED! Wait: timed out after 1h00m01s (timeout 3600s) on n3",
        "  timed out after 1h00m01s",
        "  stalled: the logs stopped growing",
        "  transport error: n3: connection failed: boom",
        "  gave up after 12 rounds: the task's retries ran out before it finished",
    ]


def test_ok_line() -> None:
    assert (
        ok_line("n1", poll_result(finished=True, completed=True, elapsed=95.5)) == "ok: [n1]: complete (elapsed 1m35s)"
    )
    group = {"policy": "any", "complete": 1, "total": 3}
    assert ok_line("n2", poll_result(finished=True, group=group)) == (
        "ok: [n2]: finished, the group decided (1/3 complete, policy any)"
    )
    drained = {"finished": True, "drained": True, "msg": "drained 3 line(s) from 1 log(s)"}
    assert ok_line("n3", drained) == "ok: [n3]: drained 3 line(s) from 1 log(s)"
    assert (
        ok_line("n3", {"finished": True, "armed": True, "msg": "armed 1 of 2 log(s)"})
        == "ok: [n3]: armed 1 of 2 log(s)"
    )


def test_a_fleet_result_is_each_hosts_result_with_the_fleets_group() -> None:
    group = {"policy": "all", "complete": 1, "total": 2}
    fleet = {
        "fleet": True,
        "group": group,
        "hosts": {
            "n1": poll_result(
                finished=True,
                completed=True,
                elapsed=3.0,
                new_lines=["a"],
                log_states=[{"label": "job", "new_lines": 1}],
            ),
            "n2": poll_result(finished=True, failed=True, msg="stopped because n3 failed: boom"),
        },
    }
    pairs = host_results("n1", fleet)
    assert [host for host, _result in pairs] == ["n1", "n2"] and all(r["group"] == group for _h, r in pairs)
    assert round_lines("n1", pairs[0][1]) == ["[n1:job] a"]
    assert ok_line("n1", pairs[0][1]) == "ok: [n1]: complete (elapsed 3s)"
    assert failure_lines("n2", "watch", pairs[1][1]) == ["fatal: [n2]: FAILED! watch: stopped because n3 failed: boom"]
    # any other result is its own host's
    single = poll_result(finished=True)
    assert host_results("n3", single) == [("n3", single)]


# ---------------------------------------------------------------- progress across hosts


def test_progress_of_log_poll_rounds_changes_once_per_state() -> None:
    progress = TaskProgress(name="Wait for training", started=100.0, log_poll=True)
    for host in ("n1", "n2", "n3"):
        progress.host_started(host)
    progress.poll_round("n1", poll_result())
    assert progress.changed() is True
    assert progress.progress_line(104.0) == (
        "[cvs] Wait for training: 0/3 hosts complete (policy all), 0 failed, elapsed 4s"
    )
    progress.poll_round("n2", poll_result())
    assert progress.changed() is False  # same state: no second line
    group = {"policy": "all", "complete": 1, "total": 3, "failed": 0}
    progress.poll_round("n1", poll_result(completed=True, group=group))
    assert progress.changed() is True
    assert progress.counts() == "1/3 hosts complete"
    # a round of another host computed before n1 completed arrives late: counts never go back
    progress.poll_round("n3", poll_result())
    assert progress.complete == 1 and progress.changed() is False
    assert progress.running


def test_progress_stall_and_transport_errors_are_state_changes() -> None:
    progress = TaskProgress(name="W", started=0.0, log_poll=True)
    progress.poll_round("n1", poll_result())
    progress.changed()
    progress.poll_round("n2", poll_result(stalled=True, transport_error="n2: connection failed"))
    assert progress.changed() is True
    assert progress.progress_line(61) == (
        "[cvs] W: 0/3 hosts complete (policy all), 0 failed, stalled: n2, transport errors: n2, elapsed 1m01s"
    )


def test_progress_final_results_errors_and_heartbeat_text() -> None:
    progress = TaskProgress(name="Wait", started=0.0, log_poll=True)
    for host in ("n1", "n2"):
        progress.host_started(host)
    error = {"name": "nan", "line": "loss: nan"}
    group = {"policy": "all", "complete": 0, "total": 2, "failed": 1}
    progress.poll_round("n2", poll_result(finished=True, error=error, group=group), final=True, failed=True)
    assert (progress.failed, progress.errors, progress.running) == (1, 1, True)
    assert progress.heartbeat_line(90) == "[cvs] still running: Wait (0/2 hosts complete, 1 error, elapsed 1m30s)"
    assert progress.status_line(90, "/") == "/ Wait | 0/2 hosts complete | 1 error | 1m30s"
    progress.poll_round("n1", poll_result(finished=True, group=group, aborted_by="n2"), final=True, failed=True)
    assert (progress.failed, progress.errors) == (2, 1)  # both hosts failed, one error match
    assert not progress.running


def test_progress_of_a_plain_task_counts_finished_hosts() -> None:
    progress = TaskProgress(name="Install", started=10.0)
    assert progress.running  # no host started yet: the task is still starting
    progress.host_started("n1")
    progress.host_started("n2")
    progress.host_done("n1")
    assert progress.heartbeat_line(40.0) == "[cvs] still running: Install (1/2 hosts complete, elapsed 30s)"
    assert progress.status_line(40.0, "|") == "| Install | 1/2 hosts complete | 0 errors | 30s"
    progress.host_done("n2", failed=True)
    assert (progress.complete, progress.failed, progress.running) == (2, 1, False)


# ---------------------------------------------------------------- heartbeat timing


def test_heartbeat_every_interval_after_task_start() -> None:
    beat = Heartbeat(30)
    assert not beat.due(1000.0)  # not started
    beat.start(1000.0)
    assert [t for t in (1010.0, 1029.9, 1030.0, 1030.1, 1059.0, 1061.0) if beat.due(t)] == [1030.0, 1061.0]
    assert beat.next_due == 1090.0  # stays on the grid of the task start


def test_heartbeat_skips_missed_beats_and_stops() -> None:
    beat = Heartbeat(10)
    beat.start(0.0)
    assert beat.due(35.0) and not beat.due(39.0) and beat.due(40.0)  # one line after a long gap, not four
    beat.stop()
    assert not beat.due(100.0)


def test_heartbeat_zero_is_off() -> None:
    beat = Heartbeat(0)
    beat.start(0.0)
    assert not beat.enabled and not beat.due(1e9)


# --------------------------------------------------------------------------- lines held for their host's event


def test_held_lines_are_released_only_for_their_host_in_order() -> None:
    held = HostLines()
    held.hold("a", ["[a:a] seq 00001", "[a:a] seq 00002"])
    held.hold("c", ["[c:c] seq 00001"])
    held.hold("a", ["[a:a] seq 00003"])
    assert held.release("c") == ["[c:c] seq 00001"]
    assert held.release("c") == []  # released once
    assert held.release("b") == []
    assert held.release("a") == ["[a:a] seq 00001", "[a:a] seq 00002", "[a:a] seq 00003"]
    assert not held


def test_held_lines_release_all_keeps_each_host_together_and_nothing_empty_is_held() -> None:
    held = HostLines()
    held.hold("b", [])
    assert not held
    held.hold("b", iter(["[b] 1"]))  # a generator is taken whole
    held.hold("a", ["[a] 1"])
    held.hold("b", ["[b] 2"])
    assert held
    assert held.release_all() == ["[b] 1", "[b] 2", "[a] 1"]
    assert not held and held.release_all() == []
