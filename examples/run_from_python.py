#!/usr/bin/env python3
"""Run the cvs.cluster main job (playbooks/validate.yml) from Python with ansible-runner.

Prints live progress of the log_poll watches (one line per poll round and host, from the runner events) and the
run summary (the ``cvs_report`` artifact published with set_stats), then exits 0 when every check passed, 1 when
the run failed, 2 on bad arguments, 130 when interrupted: Ctrl-C (SIGINT) or SIGTERM cancels the run, then
validate.yml runs again with ``cvs_finish_run`` to dispose of what the run started and write its report
(incomplete where checks had not finished).

    .venv/bin/python examples/run_from_python.py -i tests/cluster/generated/inventory-baremetal.yml \
        --tags rvs -e cvs_results_dir=/var/tmp/cvs-results -e '{"rvs_test_level": 4}'
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ansible_runner

REPO = Path(__file__).resolve().parent.parent
PLAYBOOK = REPO / "playbooks" / "validate.yml"
LOG_POLL = ("cvs.cluster.log_poll", "log_poll")


def parse_extra(values: list[str]) -> dict[str, Any]:
    """-e key=value, -e '{json}' or -e @file.json/yml, like ansible-playbook."""
    out: dict[str, Any] = {}
    for v in values:
        if v.startswith("@"):
            import yaml

            out.update(yaml.safe_load(Path(v[1:]).read_text()) or {})
        elif v.lstrip().startswith("{"):
            out.update(json.loads(v))
        elif "=" in v:
            k, _, val = v.partition("=")
            out[k] = val
        else:
            raise argparse.ArgumentTypeError(f"extra var {v!r}: use key=value, JSON or @file")
    return out


class Progress:
    """Event handler: prints log_poll rounds as they happen; keeps the set_stats artifacts."""

    def __init__(self, out: Any = sys.stdout) -> None:
        self.out = out
        self.rounds = 0
        self.artifacts: dict[str, Any] = {}

    def __call__(self, event: dict[str, Any]) -> bool:
        data = event.get("event_data") or {}
        kind = event.get("event")
        if kind == "playbook_on_stats":
            self.artifacts = data.get("artifact_data") or {}
        elif kind == "playbook_on_play_start":
            print(f"== {data.get('play', '')}", file=self.out, flush=True)
        elif kind in ("runner_retry", "runner_on_ok", "runner_on_failed") and data.get("task_action") in LOG_POLL:
            self.rounds += 1
            res = data.get("res") or {}
            group = res.get("group") or {}
            state = "done" if res.get("finished") else "polling"
            if res.get("failed") or kind == "runner_on_failed":
                state = "FAILED: " + str(res.get("msg", ""))[:200]
            print(
                f"[{data.get('host')}] {data.get('task', 'log_poll')}: round {res.get('round', '?')}, "
                f"+{len(res.get('new_lines') or [])} line(s), group {group.get('complete', '?')}/"
                f"{group.get('total', '?')} complete, {float(res.get('elapsed') or 0):.1f}s, {state}",
                file=self.out,
                flush=True,
            )
        return True  # keep every event in the artifacts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-i", "--inventory", required=True, action="append", help="inventory path (repeatable)")
    ap.add_argument("-t", "--tags", default="", help="comma-separated tags (rvs, maxtext, facts, report)")
    ap.add_argument("--skip-tags", default="")
    ap.add_argument("-e", "--extra-vars", action="append", default=[], help="key=value, JSON or @file")
    ap.add_argument("--playbook", default=str(PLAYBOOK), help="playbook path (default: playbooks/validate.yml)")
    ap.add_argument("--private-data-dir", help="keep runner artifacts here (default: a temporary directory)")
    ap.add_argument("--show-output", action="store_true", help="also print ansible-playbook's own output")
    args = ap.parse_args(argv)
    try:
        extravars = parse_extra(args.extra_vars)
    except (argparse.ArgumentTypeError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    inventories = [str(Path(i).resolve()) for i in args.inventory]
    for inv in inventories:
        if not os.path.exists(inv):
            print(f"error: inventory {inv} does not exist", file=sys.stderr)
            return 2

    if shutil.which("ansible-playbook") is None:  # run from a virtualenv without activating it
        os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    # a run id of our own, so an interrupted run can be finished (disposed of, reported) under the same id
    extravars.setdefault("cvs_run_id", time.strftime("%Y%m%d-%H%M%S-py") + secrets.token_hex(3))
    interrupted: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        if not interrupted:
            print(f"interrupted ({signal.Signals(signum).name}): cancelling run {extravars['cvs_run_id']}", flush=True)
        interrupted.append(signum)

    old_handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    common = {
        "inventory": inventories,
        # this script finishes interrupted runs itself (below); the callback that does it for ansible-playbook stays off
        "envvars": {
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_NOCOLOR": "1",
            "CVS_FINISH_ON_INTERRUPT": "false",
            # one log_poll result (so one progress line) per round; AWX's default polls two minutes per event
            "CVS_LOG_POLL_CALL_SECONDS": "0",
        },
        "quiet": not args.show_output,
    }
    tmp = args.private_data_dir or tempfile.mkdtemp(prefix="cvs-runner-")
    progress = Progress()
    try:
        run = ansible_runner.run(
            private_data_dir=tmp,
            playbook=str(Path(args.playbook).resolve()),
            extravars=extravars,
            tags=args.tags or None,
            skip_tags=args.skip_tags or None,
            event_handler=progress,
            cancel_callback=lambda: bool(interrupted),
            **common,
        )
        if interrupted:
            print(f"finishing run {extravars['cvs_run_id']}: dispose and report", flush=True)
            fin = Progress()
            ansible_runner.run(
                private_data_dir=tmp,
                playbook=str(Path(args.playbook).resolve()),
                extravars={**extravars, "cvs_finish_run": extravars["cvs_run_id"]},
                event_handler=fin,
                **common,
            )
            progress.artifacts = fin.artifacts or progress.artifacts
    finally:
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        if not args.private_data_dir:
            shutil.rmtree(tmp, ignore_errors=True)
    report = progress.artifacts.get("cvs_report")
    print(f"status: {'interrupted' if interrupted else run.status}, rc: {run.rc}, log_poll rounds: {progress.rounds}")
    if report:
        print("cvs_report: " + json.dumps(report, sort_keys=True))
    if interrupted:
        return 130
    return 0 if run.status == "successful" and run.rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
