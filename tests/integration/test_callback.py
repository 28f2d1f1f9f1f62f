"""The cvs.cluster.cvs stdout callback, end to end: real ansible-playbook runs with the real log_poll.

Three alias hosts with ``ansible_connection: local`` stand in for nodes, so no simulated cluster is needed.
A stand-in training job (fixtures/callback/fake_train.py) writes per-host logs on a fixed schedule: n1, n2 and n3
complete 2 s apart, which makes the sequence of progress lines deterministic.

* golden captures for quiet, normal and verbose (``CVS_UPDATE_GOLDEN=1`` rewrites them);
* quiet mode on a pseudo-terminal draws and clears its line, and the same run into a file has no ``\\r``, no
  escape sequence and the expected heartbeat lines; a terminal that hangs up mid-run falls back to heartbeats;
* ansible-runner: events carry the progress, stdout no spinner;
* option handling: an unknown ``console`` value warns once and falls back to normal.
"""

from __future__ import annotations

import configparser
import contextlib
import difflib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import ansible_runner
import pexpect
import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._console.model import has_control, strip_ansi

pytestmark = pytest.mark.local

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "callback"
GOLDEN = FIXTURES / "golden"
VENV_BIN = ROOT / ".venv" / "bin"
PLAYBOOK = VENV_BIN / "ansible-playbook"
HOSTS = ("n1", "n2", "n3")

# Whatever the calling environment says, these runs decide for themselves (a CI that sets JOB_ID must not
# make the callback think it runs under AWX).
SCRUBBED = ("AWX_ISOLATED_DATA_DIR", "ORIGINAL_STDOUT_CALLBACK", "RUNNER_OMIT_EVENTS", "RUNNER_ONLY_FAILED_EVENTS")
SCRUBBED_PREFIXES = ("ANSIBLE_", "CVS_")

ESC = "\x1b"
STATUS_RE = re.compile(r"\r[|/\\-] Wait for training \| [0-3]/3 hosts complete \| 0 errors \| \d+s\x1b\[K")
ANY_STATUS_RE = re.compile(r"\r[|/\\-] [^|\r\n]+ \| \d/\d hosts complete \| \d+ errors? \| \d+s\x1b\[K")
HEARTBEAT_RE = re.compile(r"^\[cvs\] still running: Wait for training \(([0-3])/3 hosts complete, elapsed (\d+)s\)$")
ANY_HEARTBEAT_RE = re.compile(r"^\[cvs\] still running: [^(]+ \(\d/[23] hosts complete, elapsed \d+s\)$")


# ---------------------------------------------------------------- helpers


def console_env(mode: str, heartbeat: int = 0, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(SCRUBBED_PREFIXES) and k not in SCRUBBED and k != "JOB_ID"
    }
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_STDOUT_CALLBACK="cvs.cluster.cvs",
        ANSIBLE_NOCOLOR="1",
        CVS_CONSOLE=mode,
        CVS_HEARTBEAT=str(heartbeat),
        TERM="xterm",
    )
    env.update(extra)
    return env


def playbook_argv(playbook: str, tmp: Path) -> list[str]:
    return [str(PLAYBOOK), "-i", str(FIXTURES / "inventory.yml"), str(FIXTURES / playbook), "-e", f"cvs_test_tmp={tmp}"]


def stop_writers(tmp: Path) -> None:
    """End the stand-in jobs this run started (by the PIDs they wrote)."""
    for pid_file in tmp.glob("*/*.log.pid"):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)


@pytest.fixture
def run_tmp(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    stop_writers(tmp_path)


def run_playbook(playbook: str, tmp: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        playbook_argv(playbook, tmp), env=env, capture_output=True, text=True, timeout=300, check=False
    )


def mask(text: str, tmp: Path) -> str:
    text = text.replace(str(tmp), "<TMP>").replace(str(FIXTURES), "<FIXTURES>")
    # Whether a last "N/N hosts complete" progress line shows depends on whether some host polled once more
    # between the last completion and the group decision: a scheduling race, so it is not part of the capture.
    text = re.sub(r"^\[cvs\] [^\n]*: (\d+)/\1 hosts complete [^\n]*\n", "", text, flags=re.M)
    return re.sub(r"elapsed [0-9hms]+", "elapsed <T>", text)


CHANNEL_RE = re.compile(r"^(?:[a-z]+: )?\[(" + "|".join(HOSTS) + r")[\]:]")


def records(text: str) -> list[tuple[str, str]]:
    """Split console output into records and give each the host it is about ("*" for none).

    A record is a line plus its continuation: indented lines, ``...ignoring``, and for a core error summary
    (``[ERROR]: ...`` with its source excerpt) everything up to the ``fatal: [host]`` line it belongs to.
    """
    out: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        block = [lines[i]]
        i += 1
        if block[0].startswith("[ERROR]:"):
            while i < len(lines) and not block[-1].startswith("fatal: ["):
                block.append(lines[i])
                i += 1
        while i < len(lines) and (lines[i].startswith((" ", "\t")) or lines[i] == "...ignoring"):
            block.append(lines[i])
            i += 1
        match = CHANNEL_RE.match(block[-1] if block[0].startswith("[ERROR]:") else block[0])
        out.append((match.group(1) if match else "*", "\n".join(block)))
    return out


def channels(text: str) -> dict[str, list[str]]:
    """Per host, and for host-less lines, the records in order: parallel hosts interleave, each stream does not."""
    found: dict[str, list[str]] = {}
    for channel, record in records(text):
        found.setdefault(channel, []).append(record)
    return found


def assert_matches_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("CVS_UPDATE_GOLDEN"):
        path.write_text(actual)
    expected = path.read_text()
    want, got = channels(expected), channels(actual)
    if want != got:
        diff = []
        for channel in sorted(set(want) | set(got)):
            a = "\n".join(want.get(channel, [])).splitlines()
            b = "\n".join(got.get(channel, [])).splitlines()
            diff += difflib.unified_diff(a, b, f"golden/{name} [{channel}]", f"actual [{channel}]", lineterm="")
        pytest.fail("console output differs from the golden capture:\n" + "\n".join(diff) + "\n--- actual:\n" + actual)


def render_terminal(raw: str) -> list[str]:
    """What a terminal shows after ``raw``: CR, LF, erase-to-end-of-line; other escapes are dropped."""
    screen: list[list[str]] = [[]]
    col = 0
    i = 0
    while i < len(raw):
        char = raw[i]
        if char == ESC:
            match = re.match(r"\x1b\[([0-9;?]*)([@-~])", raw[i:])
            if match:
                if match.group(2) == "K":
                    del screen[-1][col:]
                i += match.end()
                continue
            i += 1
            continue
        if char == "\r":
            col = 0
        elif char == "\n":
            screen.append([])
            col = 0
        else:
            row = screen[-1]
            row.extend(" " * (col - len(row)))
            if col < len(row):
                row[col] = char
            else:
                row.append(char)
            col += 1
        i += 1
    return ["".join(row) for row in screen]


# ---------------------------------------------------------------- golden captures


@pytest.mark.parametrize("mode", ["normal", "quiet", "verbose"])
def test_golden_console(mode: str, run_tmp: Path) -> None:
    proc = run_playbook("console.yml", run_tmp, console_env(mode))
    assert proc.returncode == 2, proc.stdout + proc.stderr  # a host failed: that is part of the capture
    assert proc.stderr == ""
    assert "FAILED - RETRYING" not in proc.stdout
    assert "\r" not in proc.stdout and ESC not in proc.stdout
    assert_matches_golden(f"{mode}.txt", mask(proc.stdout, run_tmp))


def test_golden_records_split_by_host() -> None:
    """The comparison itself: interleaving across hosts is free, the order within a host and globally is not."""
    one = "TASK [x] ***\nok: [n1]\nok: [n2]\n[n1:t] a\n[n1:t] b\nfatal: [n2]: FAILED!\n  pattern: p\n[cvs] 1/3"
    other = "TASK [x] ***\nok: [n2]\nok: [n1]\nfatal: [n2]: FAILED!\n  pattern: p\n[n1:t] a\n[n1:t] b\n[cvs] 1/3"
    assert channels(one) == channels(other)
    assert channels(one) != channels(one.replace("[n1:t] a\n[n1:t] b", "[n1:t] b\n[n1:t] a"))
    assert channels(one) != channels(one.replace("  pattern: p", "  pattern: q"))
    assert channels(one)["n2"] == ["ok: [n2]", "fatal: [n2]: FAILED!\n  pattern: p"]


# ---------------------------------------------------------------- terminal and file


def spawn_on_pty(argv: list[str], env: dict[str, str], ignore_hangup: bool = False) -> pexpect.spawn:
    if ignore_hangup:  # like nohup: the process survives its terminal going away
        argv = [sys.executable, "-c", "import os,signal,sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
                "os.execv(sys.argv[1], sys.argv[1:])", *argv]  # fmt: skip
    return pexpect.spawn(argv[0], argv[1:], env=env, dimensions=(40, 160), encoding="utf-8", timeout=120)


def test_quiet_on_a_terminal_draws_and_clears_its_line(run_tmp: Path) -> None:
    log = run_tmp / "ansible.log"
    child = spawn_on_pty(playbook_argv("progress.yml", run_tmp), console_env("quiet", 1, ANSIBLE_LOG_PATH=str(log)))
    child.expect(pexpect.EOF)
    raw = child.before
    child.close()
    assert child.exitstatus == 2, raw

    draws = STATUS_RE.findall(raw)
    assert len(draws) >= 10, raw  # redrawn several times a second over ~5 s
    assert {d[1] for d in draws} >= {"|", "/", "-", "\\"}  # the spinner turns
    assert re.search(r"\r[|/\\-] Wait for training \| 2/3 hosts complete \| 0 errors", raw)
    assert "still running" not in raw  # the line replaces heartbeats on the screen
    # the line is erased before anything else is printed (here: the failure's banner) ...
    banner = raw.index("TASK [Check the GPU count]")
    last_draw = [m for m in ANY_STATUS_RE.finditer(raw) if m.end() <= banner][-1]
    assert raw[last_draw.end() : banner] == "\r\x1b[K\r\n", repr(raw[last_draw.start() : banner + 30])
    # ... and nothing of it stays on the screen
    screen = render_terminal(raw)
    assert not [row for row in screen if "hosts complete" in row], screen
    assert any(row.startswith('fatal: [n3]: FAILED! => {"changed": false') for row in screen), screen
    assert any(row.startswith("n1 ") and "failed=0" in row for row in screen), screen
    assert all((run_tmp / h / "done").exists() for h in ("n1", "n2"))

    # the log_path file gets heartbeat lines instead of the line, without any terminal control
    logged = log.read_text()
    assert "\r" not in logged and ESC not in logged
    beats = [line.split("| ", 1)[1] for line in logged.splitlines() if "still running: Wait for training" in line]
    assert len(beats) >= 3 and all(HEARTBEAT_RE.match(b) for b in beats), logged


def test_quiet_into_a_file_has_no_control_and_heartbeats(run_tmp: Path) -> None:
    out = run_tmp / "console.out"
    with out.open("w") as fh:
        proc = subprocess.run(
            playbook_argv("progress.yml", run_tmp),
            env=console_env("quiet", 1),
            stdout=fh,
            stderr=subprocess.STDOUT,
            timeout=300,
            check=False,
        )
    assert proc.returncode == 2
    text = out.read_text()
    assert text.count("\r") == 0 and text.count(ESC) == 0, repr(text)
    lines = text.splitlines()
    assert all(ANY_HEARTBEAT_RE.match(line) for line in lines if "still running" in line), text
    beats = [HEARTBEAT_RE.match(line) for line in lines if line.startswith("[cvs] still running: Wait for training")]
    assert len(beats) >= 3 and all(beats), text
    counts = [int(b.group(1)) for b in beats if b]
    seconds = [int(b.group(2)) for b in beats if b]
    assert counts == sorted(counts) and counts[0] == 0  # progress only moves forward
    assert seconds == sorted(set(seconds)) and seconds[0] == 1  # one per second, the first after one second
    # quiet: nothing but heartbeats, the failure and the recap
    assert "TASK [Wait for training]" not in text and "ok: [" not in text and "changed: [" not in text
    assert 'fatal: [n3]: FAILED! => {"changed": false, "msg": "expected 8 GPUs on n3, found 7"}' in lines
    assert any(line.startswith("n3 ") and "failed=1" in line for line in lines)


def test_terminal_hangup_falls_back_to_heartbeats(run_tmp: Path) -> None:
    """The terminal goes away while the line is drawn (like a dropped SSH session under nohup).

    Writes to it fail with EIO from then on: the callback must stop drawing, keep the run alive and keep
    heartbeats (and everything else) flowing into the log_path file.
    """
    log = run_tmp / "ansible.log"
    env = console_env("quiet", 1, ANSIBLE_LOG_PATH=str(log))
    child = spawn_on_pty(playbook_argv("progress.yml", run_tmp), env, ignore_hangup=True)
    child.expect(STATUS_RE.pattern, timeout=120)
    hung_up = time.time()
    os.close(child.child_fd)  # the master side closes: the terminal is gone
    status = None
    deadline = time.time() + 120
    while status is None and time.time() < deadline:
        pid, raw_status = os.waitpid(child.pid, os.WNOHANG)
        status = os.waitstatus_to_exitcode(raw_status) if pid else None
        time.sleep(0.2)
    assert status == 2, f"the run did not finish normally after the hang-up: {status}"  # 2: n3 failed
    assert (run_tmp / "n1" / "done").exists()

    logged = log.read_text()
    assert "\r" not in logged and ESC not in logged
    stamped = [(datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp(), line) for line in logged.splitlines()
               if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", line)]  # fmt: skip
    after = [line.split("| ", 1)[1] for stamp, line in stamped if stamp > hung_up]
    beats = [line for line in after if line.startswith("[cvs] still running: Wait for training")]
    assert len(beats) >= 3 and all(HEARTBEAT_RE.match(b) for b in beats), logged
    assert any(line.startswith("fatal: [n3]: FAILED!") for line in after), logged
    assert "PLAY RECAP" in logged


# ---------------------------------------------------------------- ansible-runner


def project_cfg_only(project: Path, mode: str, heartbeat: int) -> None:
    """An AWX-style project whose ansible.cfg alone chooses the console (nothing in the environment)."""
    project.mkdir(parents=True)
    cfg = (ROOT / "ansible.cfg").read_text()
    cfg = cfg.replace("./.cache/collections", str(ROOT / ".cache" / "collections"))
    cfg = re.sub(r"(?m)^console = .*$", f"console = {mode}", cfg)
    cfg = re.sub(r"(?m)^heartbeat = .*$", f"heartbeat = {heartbeat}", cfg)
    assert "stdout_callback = cvs.cluster.cvs" in cfg and "cvs.cluster.runner_console" in cfg
    (project / "ansible.cfg").write_text(cfg)


@pytest.mark.parametrize("chosen_in", ["environment", "ansible.cfg"])
@pytest.mark.parametrize(
    ("mode", "rounds_per_event"),
    [("quiet", "default"), ("normal", "default"), ("normal", "one")],
)
def test_ansible_runner_events_show_progress_without_spinner(
    mode: str, rounds_per_event: str, chosen_in: str, run_tmp: Path, monkeypatch: Any
) -> None:
    """Under runner a log_poll call polls for call_seconds (default 120): one result per host for this short wait.

    ``rounds_per_event == "one"`` sets CVS_LOG_POLL_CALL_SECONDS=0, as a job template's environment would: every
    round is then a retry event of its own and carries the progress line.
    """
    env = console_env(mode, 1)
    for name in list(os.environ):
        if name.startswith(SCRUBBED_PREFIXES) or name in SCRUBBED or name == "JOB_ID":
            monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", env["PATH"])
    (run_tmp / "runner").mkdir()
    if chosen_in == "environment":
        envvars = {k: env[k] for k in ("ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_CONFIG", "CVS_CONSOLE", "CVS_HEARTBEAT")}
    else:
        # runner runs ansible-playbook in <private_data_dir>/project, where Ansible finds this ansible.cfg
        project_cfg_only(run_tmp / "runner" / "project", mode, 1)
        envvars = {}
    if rounds_per_event == "one":
        envvars["CVS_LOG_POLL_CALL_SECONDS"] = "0"
    runner = ansible_runner.run(
        private_data_dir=str(run_tmp / "runner"),
        playbook=str(FIXTURES / "progress.yml"),
        inventory=str(FIXTURES / "inventory.yml"),
        extravars={"cvs_test_tmp": str(run_tmp)},
        envvars=envvars,
        quiet=True,
    )
    assert runner.rc == 2, runner.stdout.read()
    stdout = runner.stdout.read()
    events = list(runner.events)

    # runner runs the playbook on a pseudo-terminal: the callback must still see that it is captured
    assert "\x1b[K" not in stdout and not re.search(r"\r(?!\n)", stdout), repr(stdout)
    assert not re.search(r"[|/\\-] Wait for training \| ", stdout)
    assert "FAILED - RETRYING" not in stdout

    # our own lines ([cvs] progress and heartbeats) are plain text: no colors, no cursor control
    ours = [line for e in events for line in e.get("stdout", "").splitlines() if "[cvs]" in line]
    assert ours and not [line for line in ours if has_control(line)], ours
    beats = [m for line in ours if (m := HEARTBEAT_RE.match(line))]
    assert len(beats) >= 3 and {m.group(1) for m in beats} >= {"0", "2"}, ours
    waits = [e for e in events if e.get("event_data", {}).get("task") == "Wait for training"]
    if rounds_per_event == "default":
        results = [e["event"] for e in waits if e["event"] == "runner_retry" or e["event"].startswith("runner_on_")]
        assert [r for r in results if r != "runner_on_start"] == ["runner_on_ok"] * 3, results
        assert {e["event_data"]["res"]["rounds_in_call"] > 1 for e in waits if e["event"] == "runner_on_ok"} == {True}
    if mode == "normal":
        oks = [strip_ansi(e["stdout"]) for e in events if e["event"] == "runner_on_ok"]
        assert any(re.search(r"(?m)^ok: \[n1\]: complete \(elapsed \d+s\)", ok) for ok in oks), oks
    if mode == "normal" and rounds_per_event == "one":
        retries = [e for e in events if e["event"] == "runner_retry"]
        progress = [line for e in retries for line in e["stdout"].splitlines() if "still running" not in line]
        assert [re.sub(r"elapsed \d+s", "elapsed <T>", p) for p in progress] == [
            f"[cvs] Wait for training: {n}/3 hosts complete (policy all), 0 failed, elapsed <T>" for n in (0, 1, 2)
        ], progress
    elif mode == "quiet":
        quiet_events = [e for e in events if e["event"] in ("runner_retry", "runner_on_ok")]
        assert quiet_events and all(
            ANY_HEARTBEAT_RE.match(line) for e in quiet_events for line in e["stdout"].splitlines()
        )  # nothing but the heartbeats that fell due while the event was handled
    failed = [e for e in events if e["event"] == "runner_on_failed"]
    assert [e["event_data"]["host"] for e in failed] == ["n3"]
    assert "expected 8 GPUs on n3, found 7" in failed[0]["stdout"]


# ---------------------------------------------------------------- options


def test_unknown_console_value_warns_and_uses_normal(run_tmp: Path) -> None:
    proc = run_playbook("options.yml", run_tmp, console_env("loud", 0, CVS_SPINNER="sometimes"))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("[WARNING]")]
    assert warnings == [
        "[WARNING]: cvs console: 'loud' is not one of quiet, normal, verbose; using 'normal'",
        "[WARNING]: cvs spinner: 'sometimes' is not one of auto, always, never; using 'auto'",
        "[WARNING]: cvs console: 'shouty' is not one of quiet, normal, verbose; using 'normal' "
        "(task var cvs_console of 'Say hello again with a bad per-task console value')",
    ], proc.stderr
    # normal mode: banners and ok lines
    assert "TASK [Say hello] ***" in proc.stdout
    assert 'ok: [n1] => {\n    "msg": "hello"\n}' in proc.stdout
    assert 'ok: [n1] => {\n    "msg": "hello again"\n}' in proc.stdout


def test_quiet_console_from_ini(run_tmp: Path) -> None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "ansible.cfg")
    parser["defaults"]["collections_path"] = str(ROOT / ".cache" / "collections")
    if not parser.has_section("cvs"):
        parser.add_section("cvs")
    parser["cvs"]["console"] = "quiet"
    cfg = run_tmp / "ansible.cfg"
    with cfg.open("w") as fh:
        parser.write(fh)
    env = console_env("unused", 0, ANSIBLE_CONFIG=str(cfg))
    del env["CVS_CONSOLE"]
    proc = run_playbook("options.yml", run_tmp, env)
    assert proc.returncode == 0, proc.stderr
    assert "TASK [" not in proc.stdout and "hello" not in proc.stdout
    assert "PLAY RECAP" in proc.stdout
