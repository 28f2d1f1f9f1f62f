# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of cvs.cluster.burn_in: runs validate.yml once per iteration as a child ansible-playbook, then ranks
the nodes. Documentation: plugins/modules/burn_in.py. Logic: plugin_utils/_history/burn_in.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ansible import context
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.cvs.cluster.plugins.modules.burn_in import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import atomic_write
from ansible_collections.cvs.cluster.plugins.plugin_utils._history import burn_in as _burn_in
from ansible_collections.cvs.cluster.plugins.plugin_utils._history import index as _index
from ansible_collections.cvs.cluster.plugins.plugin_utils._run.plan import new_run_id

VALIDATE_PLAYBOOK = Path(__file__).resolve().parents[2] / "playbooks" / "validate.yml"
display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            settings = _burn_in.plan(args["repeat"], args["duration"])
        except _burn_in.BurnInError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        burn_in_id = args["burn_in_id"] or new_run_id()
        if "/" in burn_in_id or burn_in_id in (".", "..") or not burn_in_id.strip():
            result.update(failed=True, msg=f"burn_in_id: {burn_in_id!r} must be usable as a directory name (no '/')")
            return result
        results_dir = args["results_dir"]
        playbook = args["playbook"] or str(VALIDATE_PLAYBOOK)
        result.update(changed=False, burn_in_id=burn_in_id)
        if self._task.check_mode:
            count = settings["repeat"] if settings["duration"] is None else None
            result.update(
                iterations=[],
                msg=f"burn-in {burn_in_id}: would run {playbook} "
                + (f"{count} time(s)" if count else f"for {settings['duration']:g} s"),
            )
            return result
        out_dir = os.path.join(results_dir, f"burn-in-{burn_in_id}")
        try:
            os.makedirs(out_dir, exist_ok=True)
        except OSError as exc:
            result.update(failed=True, msg=f"cannot create {out_dir}: {exc.strerror or exc}")
            return result
        program = sys.argv[0] if os.path.isfile(sys.argv[0]) else shutil.which("ansible-playbook")
        playbooks = list(context.CLIARGS.get("args") or ())
        extra = dict(args["extra_vars"] or {})

        def run_iteration(number: int, run_id: str) -> int:
            argv = _burn_in.child_argv(
                sys.argv[1:],
                playbooks,
                playbook,
                {**extra, "cvs_run_id": run_id, "cvs_burn_in_id": burn_in_id, "cvs_results_dir": results_dir},
            )
            display.display(f"[cvs] burn-in {burn_in_id}: iteration {number} (run {run_id}) starting")
            log = os.path.join(out_dir, f"i{number:02d}.log")
            with open(log, "w", encoding="utf-8") as fh:
                proc = subprocess.Popen(
                    [sys.executable, str(program), *argv],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    errors="replace",
                )
                for line in proc.stdout or ():
                    fh.write(line)
                    fh.flush()
                    display.display(f"[{run_id}] {line.rstrip()}")
                rc = proc.wait()
            display.display(f"[cvs] burn-in {burn_in_id}: iteration {number} (run {run_id}) ended with rc {rc}")
            return rc

        records: dict[str, Any] = {}

        def ran_to_the_end(run_id: str, rc: int) -> bool:
            try:
                records[run_id] = _index.load_run(results_dir, run_id)
            except _index.HistoryError:
                return False
            return _burn_in.finished(rc, records[run_id])

        iterations = _burn_in.drive(burn_in_id, settings, run_iteration, ran_to_the_end)
        missing = [it["run_id"] for it in iterations if it["run_id"] not in records]
        ranking = _burn_in.rank(list(records.values()), missing)
        failing = sorted(n["node"] for n in ranking["nodes"] if n["failures"])
        doc = {
            "schema": _burn_in.SCHEMA,
            "burn_in_id": burn_in_id,
            "finished": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "settings": settings,
            "iterations": iterations,
            **ranking,
            "failing_nodes": failing,
        }
        path = os.path.join(out_dir, "burn_in.json")
        try:
            atomic_write(path, json.dumps(doc, indent=2, default=str) + "\n")
        except OSError as exc:
            ranking["notes"].append(f"cannot write {path}: {exc.strerror or exc}")
        result.update(
            changed=True,
            iterations=iterations,
            ranking=ranking["nodes"],
            lines=ranking["lines"],
            notes=ranking["notes"],
            failing_nodes=failing,
            file=path,
            msg=f"burn-in {burn_in_id}: {len(iterations)} iteration(s); "
            + (f"failing: {', '.join(failing)}" if failing else "no node failed"),
        )
        broken = [it for it in iterations if not it["finished"]]
        if broken:
            it = broken[0]
            result.update(
                failed=True,
                msg=f"burn-in {burn_in_id} stopped: iteration {it['iteration']} (run {it['run_id']}) did not reach its "
                f"final report (rc {it['rc']}; see {out_dir}/i{it['iteration']:02d}.log); " + result["msg"],
            )
        return result
