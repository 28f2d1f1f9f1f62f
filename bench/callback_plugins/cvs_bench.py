# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark-only stdout callback: records a timestamp for every runner event, prints almost nothing.

Loaded by the benches through ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins and
ANSIBLE_STDOUT_CALLBACK=cvs_bench; it is not part of the collection. Events go to the
JSON-lines file named by CVS_BENCH_EVENTS, one flushed line per event, with
``time.time()`` taken in the controller's main process when the event arrives (so a
retry event marks the end of one poll round as the controller sees it).

With CVS_BENCH_APPEND set to JSON ``{"task": NAME, "path": "/dir/{host}.log", "bytes": 1024}``,
each retry of task NAME appends that many bytes of log lines to the host's log (to each host's of a
fleet result), so
every poll round finds about 1 KiB of new output (the file must be visible on the
controller at the same path, as on the simulated cluster's shared /var/tmp).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: cvs_bench
    type: stdout
    short_description: timestamps of runner events for bench/ (not shipped)
    description:
      - Writes one JSON line per event to the file named by the CVS_BENCH_EVENTS environment variable.
"""

_LINE = (
    "completed step: {step}, seconds: 1.234, TFLOP/s/device: 187.654, Tokens/s/device: 4821.330, "
    "total_weights: 65536, loss: 5.4321"
)


def log_block(size: int, start_step: int = 0) -> bytes:
    """``size`` bytes of MaxText-like lines, 128 bytes per line (size rounded down to whole lines)."""
    out = []
    for i in range(max(1, size // 128)):
        line = _LINE.format(step=start_step + i)
        out.append(line[:127].ljust(127) + "\n")
    return "".join(out).encode()


def _summary(result: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("round", "elapsed", "finished", "failed", "completed", "attempts", "msg", "transport_error"):
        if key in result:
            value = result[key]
            out[key] = value if not isinstance(value, str) else value[:300]
    if isinstance(result.get("new_lines"), list):
        out["n_lines"] = len(result["new_lines"])
    cursors = result.get("cursors")
    if isinstance(cursors, dict):
        out["offsets"] = {p: c.get("offset") for p, c in cursors.items() if isinstance(c, dict)}
    if result.get("error"):
        out["error"] = {k: result["error"].get(k) for k in ("name", "host", "line")}
    if result.get("unreachable"):
        out["unreachable"] = True
    if result.get("fleet") and isinstance(result.get("hosts"), dict):
        # a fleet's result holds a round of each host it names (rounds_in_call of them per host)
        out["fleet_hosts"] = len(result["hosts"])
        out["rounds_in_call"] = result.get("rounds_in_call", 1)
        out["failed_hosts"] = len(result.get("failed_hosts") or [])
    return out


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "cvs_bench"

    def __init__(self) -> None:
        super().__init__()
        path = os.environ.get("CVS_BENCH_EVENTS")
        self._fh = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115 - kept open for the run
        append = json.loads(os.environ.get("CVS_BENCH_APPEND") or "null")
        self._append_task = append["task"] if append else None
        self._append_path = append["path"] if append else ""
        self._append_block = log_block(int(append.get("bytes", 1024))) if append else b""
        self._task_name = ""

    def _emit(self, event: str, **fields: Any) -> None:
        if self._fh is None:
            return
        fields.update(ev=event, t=time.time())
        self._fh.write(json.dumps(fields, default=str) + "\n")
        self._fh.flush()

    def _runner(self, event: str, result: Any) -> None:
        self._emit(event, host=result.host.get_name(), task=result.task.get_name(), r=_summary(result.result))

    def v2_playbook_on_start(self, playbook: Any) -> None:
        self._emit("playbook_start")

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._emit("play_start", play=play.get_name())

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._task_name = task.get_name()
        self._emit("task_start", task=self._task_name)

    def v2_runner_retry(self, result: Any) -> None:
        self._runner("retry", result)
        if self._append_task and result.task.get_name() == self._append_task:
            fleet = result.result.get("hosts") if result.result.get("fleet") else None
            for host in fleet if isinstance(fleet, dict) else [result.host.get_name()]:
                with open(self._append_path.format(host=host), "ab") as fh:
                    fh.write(self._append_block)

    def v2_runner_on_ok(self, result: Any) -> None:
        self._runner("ok", result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._runner("failed", result)
        if not ignore_errors:
            self._display.display(f"FAILED {result.host.get_name()}: {str(result.result.get('msg', ''))[:400]}")

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._runner("unreachable", result)
        self._display.display(f"UNREACHABLE {result.host.get_name()}: {str(result.result.get('msg', ''))[:400]}")

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._runner("skipped", result)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._emit("stats")
        if self._fh is not None:
            self._fh.close()
            self._fh = None
