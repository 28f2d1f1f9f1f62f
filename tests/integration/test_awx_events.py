"""Under ansible-runner (and so AWX) every polled log line is in an event of its own host (issue 34).

AWX's per-host event view shows the events whose ``event_data.host`` is that host. The verbose console used to print
every host's spooled lines while any host's result was handled (``[n1:train] ...`` inside a ``runner_on_ok`` of
``n3``) and from its heartbeat thread (``verbose`` events of no host). Three alias hosts with ``ansible_connection:
local`` run a verbose log_poll through ansible-runner's Python API, as tests/integration/test_callback.py does.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import ansible_runner
import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._console.model import strip_ansi

pytestmark = pytest.mark.local

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
INVENTORY = Path(__file__).resolve().parent / "fixtures" / "callback" / "inventory.yml"
HOSTS = ("n1", "n2", "n3")
LINES = 30
SCRUBBED = ("AWX_ISOLATED_DATA_DIR", "ORIGINAL_STDOUT_CALLBACK", "RUNNER_OMIT_EVENTS", "RUNNER_ONLY_FAILED_EVENTS")
POLLED_RE = re.compile(r"^\[(n\d):train\] (\S+) seq (\d{5})$")

# Each host writes LINES lines naming itself, 0.1 s apart, n2 and n3 starting later, then the completion line.
PLAYBOOK = f"""
- name: Verbose log_poll under ansible-runner
  hosts: cvs_nodes
  gather_facts: false
  vars:
    run_dir: "{{{{ cvs_test_tmp }}}}/{{{{ inventory_hostname }}}}"
    start_after: {{n1: 0, n2: 0.5, n3: 1}}
  tasks:
    - name: Start writing
      ansible.builtin.shell: >-
        mkdir -p {{{{ run_dir }}}} && : > {{{{ run_dir }}}}/train.log &&
        (sleep {{{{ start_after[inventory_hostname] }}}};
        for i in $(seq 1 {LINES}); do printf '%s seq %05d\\n' {{{{ inventory_hostname }}}} "$i"
        >> {{{{ run_dir }}}}/train.log; sleep 0.1; done;
        echo TRAINING DONE >> {{{{ run_dir }}}}/train.log) >/dev/null 2>&1 &
      changed_when: true

    - name: Wait for training
      cvs.cluster.log_poll:
        logs: [{{path: "{{{{ run_dir }}}}/train.log", label: train}}]
        complete: {{pattern: 'TRAINING DONE', policy: all}}
        timeout: 60
        state_dir: "{{{{ cvs_test_tmp }}}}/state"
      register: training
      until: training.finished
      retries: 200
      delay: 0.5
"""


def run_job(tmp: Path, monkeypatch: Any, envvars: dict[str, str]) -> list[dict[str, Any]]:
    for name in list(os.environ):
        if name.startswith(("ANSIBLE_", "CVS_")) or name in SCRUBBED or name == "JOB_ID":
            monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    (tmp / "runner").mkdir()
    playbook = tmp / "verbose_poll.yml"
    playbook.write_text(PLAYBOOK)
    runner = ansible_runner.run(
        private_data_dir=str(tmp / "runner"),
        playbook=str(playbook),
        inventory=str(INVENTORY),
        extravars={"cvs_test_tmp": str(tmp)},
        envvars={
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_STDOUT_CALLBACK": "cvs.cluster.cvs",
            "ANSIBLE_NOCOLOR": "1",
            "CVS_CONSOLE": "verbose",
            "CVS_HEARTBEAT": "1",  # heartbeats fall due while the hosts poll
            **envvars,
        },
        quiet=True,
    )
    assert runner.rc == 0, runner.stdout.read()
    return list(runner.events)


@pytest.mark.parametrize("call_seconds", ["default", "0"])
def test_every_polled_line_is_in_an_event_of_its_own_host(call_seconds: str, tmp_path: Path, monkeypatch: Any) -> None:
    """``default``: one call per host polls every round (call_seconds 120 under runner); ``0``: a result per round."""
    envvars = {} if call_seconds == "default" else {"CVS_LOG_POLL_CALL_SECONDS": call_seconds}
    events = run_job(tmp_path, monkeypatch, envvars)

    seen: dict[str, list[int]] = {host: [] for host in HOSTS}
    for event in events:
        for line in strip_ansi(event.get("stdout", "")).splitlines():
            match = POLLED_RE.match(line)
            if match is None:
                continue
            host, writer, seq = match.group(1), match.group(2), int(match.group(3))
            assert writer == host, line
            where = (event["event"], event.get("event_data", {}).get("host"))
            assert where[1] == host, f"{line!r} is in the {where[0]} event of host {where[1]!r}"
            seen[host].append(seq)
    # every line once, in file order, none lost by keeping it for its host's event
    assert seen == {host: list(range(1, LINES + 1)) for host in HOSTS}, seen

    done = [
        (line, e["event_data"].get("host"))
        for e in events
        for line in strip_ansi(e.get("stdout", "")).splitlines()
        if line.endswith(":train] TRAINING DONE")
    ]
    assert sorted(done) == [(f"[{host}:train] TRAINING DONE", host) for host in HOSTS], done
    # the heartbeats did fall due during the wait (the ticker thread had the chance to print lines)
    assert any("[cvs] still running: Wait for training" in e.get("stdout", "") for e in events)
