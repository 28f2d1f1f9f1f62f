# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stdout callback for cluster validation runs: quiet, normal or verbose console."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cvs
type: stdout
short_description: Quiet, normal or verbose console for cluster validation runs
version_added: 1.0.0
description:
  - The default callback's output, plus a console mode that decides how much of a long cluster run reaches the screen.
  - V(quiet) prints nothing but failures and the recap. On an interactive terminal one line is redrawn in place (task,
    hosts complete/total, error count, elapsed time); anywhere else (pipe, file, CI, ansible-runner/AWX) a heartbeat
    line is printed every O(heartbeat) seconds while a task runs.
  - V(normal) is the default callback's output. Rounds of M(cvs.cluster.log_poll) are rendered as one compact
    progress line whenever the round state changes, never as C(FAILED - RETRYING).
  - V(verbose) is V(normal) plus every new line that M(cvs.cluster.log_poll) reads, printed once as
    C([host:label] line).
  - Failures print in full in every mode. For M(cvs.cluster.log_poll) that is host, task, error pattern name, the
    offending line and the lines before it; for other tasks the usual result with C(msg)/C(stderr).
  - A task var C(cvs_console) (in the task's or its block's C(vars)) overrides the mode for that task.
  - Tasks tagged C(cvs_plumbing), or with the var C(cvs_plumbing=true), stay quiet in a quiet run whatever their
    C(cvs_console) says, and their ignored failures are not printed there.
  - Spinner frames, carriage returns and cursor escapes are only ever written to an interactive terminal, never to a
    file, a pipe, the C(log_path) file or ansible-runner/AWX events. There the heartbeat lines stand in, and they
    also go to the C(log_path) file when the screen shows the in-place line.
extends_documentation_fragment:
  - default_callback
  - result_format_callback
requirements:
  - Set as the stdout callback, for example C(stdout_callback = cvs.cluster.cvs) in the C([defaults]) section of
    C(ansible.cfg), or C(ANSIBLE_STDOUT_CALLBACK=cvs.cluster.cvs).
options:
  console:
    description:
      - Console mode, one of V(quiet), V(normal) or V(verbose).
      - Any other value prints one warning naming the allowed values and uses V(normal).
    type: str
    default: normal
    env:
      - name: CVS_CONSOLE
    ini:
      - section: cvs
        key: console
  heartbeat:
    description:
      - "Seconds between heartbeat lines while a task runs and no in-place line is shown, for example
        C([cvs] still running: wait for training) followed by hosts complete/total and the elapsed time."
      - V(0) turns heartbeats off.
    type: int
    default: 30
    env:
      - name: CVS_HEARTBEAT
    ini:
      - section: cvs
        key: heartbeat
  spinner:
    description:
      - When to draw the in-place status line with a spinner instead of heartbeat lines.
      - V(auto) draws it in quiet mode; V(always) also in normal and verbose mode, below the printed lines;
        V(never) never draws it and prints heartbeat lines on a terminal too.
      - In every case the line is only drawn when stdout is an interactive terminal (not C(TERM=dumb)) and not
        captured by ansible-runner/AWX. If the terminal goes away mid-run, heartbeat lines take over.
      - Any other value prints a warning and uses V(auto).
    type: str
    default: auto
    env:
      - name: CVS_SPINNER
    ini:
      - section: cvs
        key: spinner
notes:
  - Under ansible-runner/AWX the runner wraps the callback named by E(ANSIBLE_STDOUT_CALLBACK); it is detected by the
    wrapper class and by E(AWX_ISOLATED_DATA_DIR), E(ORIGINAL_STDOUT_CALLBACK), E(RUNNER_OMIT_EVENTS),
    E(RUNNER_ONLY_FAILED_EVENTS) or E(JOB_ID). The console then prints heartbeat lines, and every event carries plain
    rendered text. In V(verbose) mode each host's polled lines are printed in that host's own events (its next
    M(cvs.cluster.log_poll) result), so AWX shows them under their node.
  - A run on an ansible-core release outside the tested range starts with a warning naming the release found and the
    tested ones.
seealso:
  - module: cvs.cluster.log_poll
"""

EXAMPLES = r"""
# ansible.cfg
# [defaults]
# stdout_callback = cvs.cluster.cvs
# [cvs]
# console = quiet
# heartbeat = 60

# One-off from the shell:
#   CVS_CONSOLE=verbose ansible-playbook -i inventory playbooks/validate.yml

# Per task: stream this task's polled log lines even when the run is quiet.
- name: Wait for training
  cvs.cluster.log_poll:
    logs: ["{{ run_dir }}/training.log"]
    complete: {pattern: 'completed step:\s*99,'}
  register: training
  until: training.finished
  retries: 100000
  delay: 5
  vars:
    cvs_console: verbose

# Role plumbing that a quiet console never shows (failures excepted).
- name: Look up the container id
  ansible.builtin.command: docker ps -q -f name=cvs
  changed_when: false
  tags: [cvs_plumbing]
"""

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from ansible import constants as C
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.callback.default import CallbackModule as DefaultCallbackModule

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.core_version import warn_if_untested_core
from ansible_collections.cvs.cluster.plugins.plugin_utils._console.model import (
    DEFAULT_SPINNER,
    LOG_POLL_ACTIONS,
    SPINNER_CHOICES,
    Heartbeat,
    HostLines,
    TaskProgress,
    capture_reason,
    failure_lines,
    format_log_line,
    host_results,
    log_event_notes,
    normalize_choice,
    ok_line,
    resolve_mode,
    round_lines,
    sanitize,
    spinner_frame,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._console.ticker import (
    TICK_SECONDS,
    DisplayGuard,
    HangUp,
    Ticker,
    display_heartbeat,
    display_is_wrapped,
    display_lock,
    has_log_file,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._console.tty import LiveLine, is_interactive
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.spool import (
    SPOOL_ENV,
    SPOOL_LINES_ENV,
    SpoolReader,
)


@dataclass
class _Task:
    uuid: str
    name: str
    mode: str
    plumbing: bool
    log_poll: bool
    progress: TaskProgress


class CallbackModule(DefaultCallbackModule):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "cvs.cluster.cvs"

    def __init__(self) -> None:
        super().__init__()
        self._lock: Any = display_lock(self._display)
        self._mode = "normal"
        self._spinner = DEFAULT_SPINNER
        self._heartbeat = Heartbeat(30)
        self._capture = ""
        self._live: Optional[LiveLine] = None
        self._tasks: dict[str, _Task] = {}
        self._current: Optional[_Task] = None
        self._warned: set[str] = set()
        self._force_banner = False
        self._pid = os.getpid()
        self._ticker = Ticker(self._tick)
        self._guard = DisplayGuard(self._display, self._lock, self._clear_live, pid=self._pid)
        self._hang_up = HangUp()
        self._spool: Optional[SpoolReader] = None
        # under ansible-runner: each host's spooled lines, until an event of that host shows them
        self._held = HostLines()

    # ------------------------------------------------------------------ options and environment

    def set_options(self, task_keys: Any = None, var_options: Any = None, direct: Any = None) -> None:
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        self._mode, problem = resolve_mode(self.get_option("console"))
        if problem:
            self._warn_once(problem)
        self._spinner, problem = normalize_choice(self.get_option("spinner"), SPINNER_CHOICES, DEFAULT_SPINNER)
        if problem:
            self._warn_once(f"cvs spinner: {problem}; using {self._spinner!r}")
        self._heartbeat = Heartbeat(self.get_option("heartbeat") or 0)
        self._capture = capture_reason(
            os.environ,
            (f"{cls.__module__}.{cls.__qualname__}" for cls in type(self).__mro__),
            display_is_wrapped(),
        )
        self._live = None
        self._open_spool()
        if self._spinner != "never" and not self._capture and is_interactive(sys.stdout):
            self._live = LiveLine(sys.stdout)
            self._hang_up.watch_terminals()

    def _open_spool(self) -> None:
        """Where log_poll's workers (forked after this) write each round's lines and progress for the console."""
        if self._spool is not None:
            return
        directory = tempfile.mkdtemp(prefix="cvs-console-spool-")
        os.environ[SPOOL_ENV] = f"{os.getpid()}:{directory}"
        self._spool = SpoolReader(directory)
        owner = os.getpid()
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(directory, ignore_errors=True))

    def _drain_spool(self) -> None:
        """Print the log lines (verbose) and take the progress that log_poll rounds spooled since the last drain.

        Under ansible-runner every display outside a result is an event of its own: there progress lines are left
        to the results and heartbeats, and this is called only from results and heartbeats. Each host's lines are
        held there until the next event of that host (its next result), so that every line is in an event of its
        own host, never in another host's result or in a heartbeat's host-less event.
        """
        if self._spool is None or os.getpid() != self._pid:
            return
        with self._lock:
            lines: list[str] = []
            now = time.monotonic()
            for record in self._spool.read():
                info = self._tasks.get(str(record.get("task")))
                host = str(record.get("host"))
                if info is None:
                    continue
                if info.mode == "verbose":
                    polled = (format_log_line(host, label, line) for label, line in record.get("lines") or [])
                    if self._capture:
                        self._held.hold(host, polled)
                    else:
                        lines.extend(polled)
                progress = record.get("progress") or {}
                if record.get("last") or not isinstance(progress, dict):
                    continue  # the call's result follows, and counts
                info.progress.poll_round(host, progress)
                if info.mode != "quiet" and not self._capture and info.progress.changed():
                    lines.append(info.progress.progress_line(now))
            self._emit(lines)

    def _warn_once(self, msg: str) -> None:
        if msg not in self._warned:
            self._warned.add(msg)
            self._display.warning(msg)

    # ------------------------------------------------------------------ per-task settings

    def _task_for(self, task: Any) -> _Task:
        uuid = str(task._uuid)
        known = self._tasks.get(uuid)
        if known is not None:
            return known
        task_vars = _task_vars(task)
        tags = getattr(task, "tags", None) or []
        plumbing = "cvs_plumbing" in tags or boolean(task_vars.get("cvs_plumbing", False), strict=False)
        mode = self._mode
        wanted = task_vars.get("cvs_console")
        if wanted is not None and not (plumbing and self._mode == "quiet"):
            if isinstance(wanted, str) and "{{" in wanted:
                self._warn_once(f"cvs console: cvs_console must be a literal value, not the template {wanted!r}")
            else:
                mode, problem = resolve_mode(wanted, default=self._mode)
                if problem:
                    self._warn_once(f"{problem} (task var cvs_console of {task.get_name()!r})")
        actions = {str(getattr(task, "action", "") or ""), str(getattr(task, "resolved_action", "") or "")}
        log_poll = bool(actions & LOG_POLL_ACTIONS)
        name = task.get_name().strip()
        progress = TaskProgress(name=name, started=time.monotonic(), log_poll=log_poll)
        known = _Task(uuid=uuid, name=name, mode=mode, plumbing=plumbing, log_poll=log_poll, progress=progress)
        self._tasks[uuid] = known
        return known

    def _quiet(self, task: Any) -> bool:
        return self._task_for(task).mode == "quiet"

    # ------------------------------------------------------------------ output helpers

    def _emit(self, lines: list[str], color: Optional[str] = None, stderr: bool = False) -> None:
        if lines:
            self._display.display("\n".join(lines), color=color, stderr=stderr)

    def _live_for(self, task: _Task) -> Optional[LiveLine]:
        """The in-place line, if this task shows one."""
        if self._live is None or self._live.broken:
            return None
        return self._live if self._spinner == "always" or task.mode == "quiet" else None

    def _clear_live(self) -> None:
        if self._live is not None and self._live.drawn and os.getpid() == self._pid:
            self._live.clear()
            self._hang_up.check(self._live)

    def _tick(self, now: Optional[float] = None) -> None:
        """Redraw the in-place line, or print a heartbeat when one is due. Called from events and the ticker."""
        now = time.monotonic() if now is None else now
        with self._lock:
            task = self._current
            if not self._capture:
                self._drain_spool()
            if task is None or not task.progress.running:
                self._clear_live()
                return
            due = self._heartbeat.due(now)
            if due and self._capture:
                self._drain_spool()
            live = self._live_for(task)
            if live is not None:
                if self._guard.install():  # the line is cleared before anything else is displayed, and at exit
                    atexit.register(self._shutdown)
                live.draw(task.progress.status_line(now, spinner_frame(int(now / TICK_SECONDS))))
                self._hang_up.check(live)
                if not live.broken:  # else the terminal went away while drawing: heartbeats from now on
                    if due and has_log_file():
                        self._display.display(task.progress.heartbeat_line(now), log_only=True)
                    return
            self._clear_live()
            if due:
                display_heartbeat(self._display, task.progress.heartbeat_line(now))

    def _start_ticker(self) -> None:
        if self._heartbeat.enabled or self._live is not None or self._spool is not None:
            self._ticker.start()

    def _shutdown(self) -> None:
        self._ticker.stop()
        with self._lock:
            self._current = None
            self._clear_live()
            self._guard.remove()

    # ------------------------------------------------------------------ banners

    def v2_playbook_on_start(self, playbook: Any) -> None:
        warn_if_untested_core(self._display)
        super().v2_playbook_on_start(playbook)

    def v2_playbook_on_play_start(self, play: Any) -> None:
        if self._mode == "quiet":
            self._play = play
            return
        super().v2_playbook_on_play_start(play)

    def v2_playbook_on_task_start(self, task: Any, is_conditional: Any) -> None:
        self._begin_task(task, "TASK")

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self._begin_task(task, "RUNNING HANDLER")

    def _begin_task(self, task: Any, prefix: str) -> None:
        now = time.monotonic()
        with self._lock:
            info = self._task_for(task)
            info.progress.started = now
            self._current = info
            # read by the workers this task forks: spool the log lines only when this console prints them
            os.environ[SPOOL_LINES_ENV] = "1" if info.log_poll and info.mode == "verbose" else "0"
            self._heartbeat.start(now)
            self._start_ticker()
            self._clear_live()
        self._task_start(task, prefix=prefix)

    def _print_task_banner(self, task: Any) -> None:
        if self._quiet(task) and not self._force_banner:
            return
        super()._print_task_banner(task)

    # ------------------------------------------------------------------ results

    def v2_runner_on_start(self, host: Any, task: Any) -> None:
        with self._lock:
            self._task_for(task).progress.host_started(host.get_name())
        if not self._quiet(task):
            super().v2_runner_on_start(host, task)

    def v2_runner_retry(self, result: Any) -> None:
        info = self._task_for(result.task)
        if _is_round(info, result):
            self._round(result, info)
        elif info.mode != "quiet":
            super().v2_runner_retry(result)
        self._tick()

    def v2_runner_on_ok(self, result: Any) -> None:
        info = self._task_for(result.task)
        is_round = _is_round(info, result)
        if is_round:
            self._round(result, info, final=True)
        else:
            with self._lock:
                info.progress.host_done(result.host.get_name())
        if info.mode == "quiet":
            self._handle_warnings_and_exception(result)
        elif is_round:
            self._log_poll_ok(result)
        else:
            super().v2_runner_on_ok(result)
        self._tick()

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        info = self._task_for(result.task)
        is_round = _is_round(info, result)
        if is_round:
            self._round(result, info, final=True, failed=True)
        else:
            with self._lock:
                info.progress.host_done(result.host.get_name(), failed=True)
                self._emit(self._held.release(result.host.get_name()))
        if ignore_errors and info.plumbing and self._mode == "quiet":
            pass
        elif is_round:
            self._log_poll_failed(result, info.name)
            if ignore_errors:
                self._display.display("...ignoring", color=C.COLOR_SKIP)
        else:
            with self._banner_forced():
                super().v2_runner_on_failed(result, ignore_errors)
        self._tick()

    def v2_runner_on_unreachable(self, result: Any) -> None:
        with self._lock:
            self._task_for(result.task).progress.host_done(result.host.get_name(), failed=True)
            self._emit(self._held.release(result.host.get_name()))
        with self._banner_forced():
            super().v2_runner_on_unreachable(result)
        self._tick()

    def v2_runner_on_skipped(self, result: Any) -> None:
        info = self._task_for(result.task)
        with self._lock:
            info.progress.host_done(result.host.get_name())
        if info.mode != "quiet":
            super().v2_runner_on_skipped(result)
        self._tick()

    def v2_runner_item_on_ok(self, result: Any) -> None:
        info = self._task_for(result.task)
        if info.mode == "quiet":
            return
        if _is_round(info, result):
            self._round(result, info, final=True, progress=False)
        super().v2_runner_item_on_ok(result)

    def v2_runner_item_on_skipped(self, result: Any) -> None:
        if not self._quiet(result.task):
            super().v2_runner_item_on_skipped(result)

    def v2_runner_item_on_failed(self, result: Any) -> None:
        info = self._task_for(result.task)
        if _is_round(info, result):
            self._round(result, info, final=True, failed=True, progress=False)
            self._log_poll_failed(result, f"{info.name} (item={self._get_item_label(result.result)})")
            return
        with self._banner_forced():
            super().v2_runner_item_on_failed(result)

    def v2_runner_on_async_poll(self, result: Any) -> None:
        if not self._quiet(result.task):
            super().v2_runner_on_async_poll(result)
        self._tick()

    def v2_playbook_on_include(self, included_file: Any) -> None:
        if self._mode != "quiet":
            super().v2_playbook_on_include(included_file)

    def v2_on_file_diff(self, result: Any) -> None:
        if not self._quiet(result.task):
            super().v2_on_file_diff(result)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._shutdown()
        with self._lock:
            self._emit(self._held.release_all())  # a host whose call wrote lines but never returned: late, not lost
        super().v2_playbook_on_stats(stats)

    # ------------------------------------------------------------------ log_poll

    def _round(
        self, result: Any, info: _Task, final: bool = False, failed: bool = False, progress: bool = True
    ) -> None:
        """One log_poll round of one host: verbose lines, file events, progress on a state change.

        ``progress=False`` (a loop item's last round) prints the lines but leaves the task's counts alone.
        """
        now = time.monotonic()
        fleet = bool(result.result.get("fleet"))
        with self._lock:
            self._drain_spool()  # this host's lines up to this result, and (not under runner) the other hosts' so far
            lines: list[str] = []
            for host, res in host_results(result.host.get_name(), result.result):
                lines.extend(self._held.release(host))
                # a fleet's result is every host's: each host's own state says whether it is done
                host_final = bool(res.get("finished")) if fleet else final
                host_failed = bool(res.get("failed")) if fleet else failed
                if progress:
                    info.progress.poll_round(host, res, final=host_final, failed=host_failed)
                if info.mode == "verbose" and not result.result.get("lines_spooled"):
                    lines.extend(round_lines(host, res))
                if info.mode != "quiet":
                    lines.extend(log_event_notes(host, res))
            if info.mode != "quiet" and progress and not final and info.progress.changed():
                lines.append(info.progress.progress_line(now))
            self._emit(lines)

    def _log_poll_failed(self, result: Any, task_name: str) -> None:
        # The block says it all: core's error summary ("Task failed: Action failed: ...") would only repeat it.
        self._handle_warnings(result.result)
        if self._last_task_banner != result.task._uuid:
            with self._banner_forced():
                self._print_task_banner(result.task)
        lines = failure_lines(self.host_label(result), task_name, result.result)
        self._emit(lines, color=C.COLOR_ERROR, stderr=self.get_option("display_failed_stderr"))

    def _log_poll_ok(self, result: Any) -> None:
        res = result.result
        if res.get("fleet"):
            self._fleet_done(result)
            return
        msg = ok_line(self.host_label(result), res)
        self._handle_warnings_and_exception(result)
        if self._run_is_verbose(result):
            self._clean_results(res, result.task.action)
            msg += f" => {self._dump_results(res)}"
        self._display.display(msg, color=C.COLOR_OK)

    def _fleet_done(self, result: Any) -> None:
        """A fleet's last result: each host's line, as the per-host form prints them, failures in full."""
        self._handle_warnings_and_exception(result)
        for host, res in host_results(result.host.get_name(), result.result):
            if res.get("failed"):
                lines = failure_lines(host, result.task.get_name().strip(), res)
                self._emit(lines, color=C.COLOR_ERROR, stderr=self.get_option("display_failed_stderr"))
            else:
                self._display.display(ok_line(host, res), color=C.COLOR_OK)
        self._display.display(f"[cvs] {sanitize(result.result.get('msg', ''))}", color=C.COLOR_OK)

    @contextlib.contextmanager
    def _banner_forced(self) -> Iterator[None]:
        """Let a quiet task print its banner above a failure."""
        self._force_banner = True
        try:
            yield
        finally:
            self._force_banner = False


def _is_round(info: _Task, result: Any) -> bool:
    """A log_poll round result (not a loop summary, not a censored or crashed result)."""
    return info.log_poll and "finished" in result.result and "results" not in result.result


def _task_vars(task: Any) -> dict[str, Any]:
    """The task's own vars and those of its blocks (not inventory or role defaults)."""
    try:
        found = task.get_vars()
    except Exception:  # templating/inheritance trouble: fall back to the task's own vars
        found = getattr(task, "vars", None)
    return dict(found) if isinstance(found, dict) else {}
